/* run_disk.c - the store contract suite on the disk store.  Whenever a test
 * closes the store, the in-memory index (storage/disk_index.h) must say what
 * the files say. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/disk.h"
#include "store_contract.h"
#include "testutil.h"

struct disk_ctx {
	char dir[4096];
};

static struct store *open_at(const char *dir)
{
	char *err = NULL;
	struct store *s = disk_store_open(dir, 0, NULL, &err);
	if (!s) {
		fprintf(stderr, "open %s: %s\n", dir, err);
		free(err);
	}
	return s;
}

static struct store *open_fresh(void *p)
{
	struct disk_ctx *c = p;
	if (test_mkdtemp(c->dir, sizeof c->dir, "contract") < 0)
		return NULL;
	return open_at(c->dir);
}

static void check_index(struct store *s)
{
	char *why = NULL;
	if (s && disk_store_index_check(s, &why) < 0)
		fail_msg("the disk store's index differs from its files: %s", why);
}

static struct store *reopen(void *p, struct store *s)
{
	struct disk_ctx *c = p;
	check_index(s);
	store_close(s);
	return open_at(c->dir);
}

static void destroy(void *p, struct store *s)
{
	struct disk_ctx *c = p;
	check_index(s);
	store_close(s);
	test_rm_rf(c->dir);
}

int main(void)
{
	struct disk_ctx ctx;
	struct contract_backend b = {"store contract: disk", open_fresh, reopen, destroy, &ctx};
	return store_contract_run(&b);
}
