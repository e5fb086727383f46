/* run_etcd.c - the store contract suite on the etcd store, against a real
 * etcd started for the run.  Each test gets its own --etcd-prefix, so that
 * tests share the server but never each other's keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_check.h"
#include "etcd_proc.h"
#include "storage/etcd.h"
#include "store_contract.h"

struct etcd_ctx {
	struct etcd_proc proc;
	struct etcd_client *raw; /* writes behind the store's back */
	int seq;
	char prefix[64];
};

static struct store *open_store(struct etcd_ctx *c)
{
	const char *eps[] = {c->proc.endpoint};
	struct etcd_store_config cfg = {eps, 1, NULL, NULL, NULL, c->prefix, "node-a", 5000};
	char *err = NULL;
	struct store *s = etcd_store_open(&cfg, &err);
	if (!s) {
		fprintf(stderr, "etcd store: %s\n", err ? err : "out of memory");
		free(err);
	}
	return s;
}

static struct store *open_fresh(void *p)
{
	struct etcd_ctx *c = p;
	snprintf(c->prefix, sizeof c->prefix, "/contract-%d/registry", ++c->seq);
	return open_store(c);
}

static struct store *reopen(void *p, struct store *s)
{
	store_close(s);
	return open_store(p);
}

static void destroy(void *p, struct store *s)
{
	(void)p;
	store_close(s);
}

/* As `etcdctl put`: the object's key is its etcd key. */
static void poke(void *p, struct store *s, const struct store_key *key, const char *data,
		 size_t len)
{
	struct etcd_ctx *c = p;
	(void)s;
	struct etcd_op put = {ETCD_OP_PUT, key->path, strlen(key->path), data, len, NULL, 0};
	struct etcd_txn t = {NULL, 0, &put, NULL, 1, 0};
	struct etcd_txn_result r;
	if (etcd_txn(c->raw, &t, &r) != ETCD_OK) {
		fprintf(stderr, "put %s: %s\n", key->path, etcd_last_error());
		abort();
	}
	etcd_txn_result_free(&r);
}

struct named {
	const char *name;
	long n;
};

static void count_named(void *ctx, const char *problem, const char *key)
{
	struct named *n = ctx;
	const char *slash = strrchr(key, '/');
	if (slash && !strcmp(slash + 1, n->name)) {
		n->n++;
		fprintf(stderr, "verify: %s: %s\n", key, problem);
	}
}

static long verify_names(void *p, struct store *s, const char *name)
{
	(void)p;
	struct named n = {name, 0};
	if (etcd_store_verify(s, count_named, &n) < 0)
		return -1;
	return n.n;
}

int main(void)
{
	struct etcd_ctx ctx = {0};
	if (etcd_proc_start(&ctx.proc) < 0)
		return 1;
	ctx.raw = check_client(ctx.proc.endpoint);
	struct contract_backend b = {
	    "store contract: etcd", open_fresh, reopen, destroy, &ctx, poke, verify_names};
	int failed = store_contract_run(&b);
	etcd_client_free(ctx.raw);
	etcd_proc_stop(&ctx.proc);
	return failed;
}
