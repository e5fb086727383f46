/* run_etcd.c - the store contract suite on the etcd store, against a real
 * etcd started for the run.  Each test gets its own --etcd-prefix, so that
 * tests share the server but never each other's keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_proc.h"
#include "storage/etcd.h"
#include "store_contract.h"

struct etcd_ctx {
	struct etcd_proc proc;
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

int main(void)
{
	struct etcd_ctx ctx = {0};
	if (etcd_proc_start(&ctx.proc) < 0)
		return 1;
	struct contract_backend b = {"store contract: etcd", open_fresh, reopen, destroy, &ctx};
	int failed = store_contract_run(&b);
	etcd_proc_stop(&ctx.proc);
	return failed;
}
