/*
 * store_contract.h - the store contract suite (docs/contracts.md §2), written once
 * and run unchanged against every backend.  A backend runner supplies how to
 * get a fresh, empty store and how to reopen it (to check that what was
 * stored survives a restart).
 */
#ifndef YURTHUB_TESTS_STORE_CONTRACT_H
#define YURTHUB_TESTS_STORE_CONTRACT_H

#include "storage/store.h"

struct contract_backend {
	const char *name;
	/* A fresh, empty store for one test. */
	struct store *(*open_fresh)(void *ctx);
	/* Close s and open the same store again. */
	struct store *(*reopen)(void *ctx, struct store *s);
	/* Close and throw away. */
	void (*destroy)(void *ctx, struct store *s);
	void *ctx;
	/* Write bytes at an object's key behind the store's back (an operator's
	 * etcdctl put, a file overwritten). */
	void (*poke)(void *ctx, struct store *s, const struct store_key *key, const char *data,
		     size_t len);
	/* How many problems the backend's verify reports naming the object name. */
	long (*verify_names)(void *ctx, struct store *s, const char *name);
};

/* Runs every contract test; returns the number of failures (cmocka). */
int store_contract_run(struct contract_backend *b);

#endif
