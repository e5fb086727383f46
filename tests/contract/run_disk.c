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

#include <fcntl.h>
#include <unistd.h>

#include "cli/cache_cmd.h"
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

/* A file of the cache directory overwritten in place. */
static void poke(void *p, struct store *s, const struct store_key *key, const char *data,
		 size_t len)
{
	struct disk_ctx *c = p;
	(void)s;
	char path[8192];
	snprintf(path, sizeof path, "%s/%s", c->dir, key->path);
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

/* `yurthub cache verify DIR`: its lines naming the file name. */
static long verify_names(void *p, struct store *s, const char *name)
{
	struct disk_ctx *c = p;
	(void)s;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	char *argv[] = {"cache", "verify", c->dir, NULL};
	int status = cache_cmd_main(3, argv, out, out);
	assert_int_equal(fclose(out), 0);
	char want[300];
	snprintf(want, sizeof want, "/%s: ", name);
	long n = 0;
	for (const char *at = text; (at = strstr(at, want)); at++)
		n++;
	if (n)
		fprintf(stderr, "%s", text);
	/* other lines may be there: a replace's staging the store removes later */
	if (n)
		assert_int_equal(status, 1);
	free(text);
	return n;
}

int main(void)
{
	struct disk_ctx ctx;
	struct contract_backend b = {
	    "store contract: disk", open_fresh, reopen, destroy, &ctx, poke, verify_names};
	return store_contract_run(&b);
}
