/*
 * leaderhub.c - parsing the leader-hub-<pool> configmap (leaderhub.h).
 */
#include "cluster/leaderhub.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"

/* Calls fn for each comma-separated, blank-trimmed, non-empty element of
 * csv (config.h's splitting, as for the flags).  0, or fn's first
 * non-zero result (-1 also when out of memory). */
static int each_element(const char *csv, int (*fn)(void *, const char *, size_t), void *ctx)
{
	struct strlist l = {NULL, 0};
	int rc = strlist_split(&l, csv);
	for (size_t i = 0; rc == 0 && i < l.n; i++)
		rc = fn(ctx, l.v[i], strlen(l.v[i]));
	strlist_free(&l);
	return rc;
}

static int add_leader(void *ctx, const char *s, size_t n)
{
	struct leader_hub *lh = ctx;
	const char *slash = memchr(s, '/', n);
	/* exactly one '/', a name before it and an address after it */
	if (!slash || slash == s || slash == s + n - 1 ||
	    memchr(slash + 1, '/', n - (size_t)(slash + 1 - s)))
		return 0;
	struct leader_entry *v = realloc(lh->leaders, (lh->nleaders + 1) * sizeof *v);
	if (!v)
		return -1;
	lh->leaders = v;
	struct leader_entry *e = &v[lh->nleaders];
	e->node = strndup(s, (size_t)(slash - s));
	e->address = strndup(slash + 1, n - (size_t)(slash + 1 - s));
	lh->nleaders++; /* counted even half-made: freed with the rest */
	return e->node && e->address ? 0 : -1;
}

static int add_gvr(void *ctx, const char *s, size_t n)
{
	struct leader_hub *lh = ctx;
	char *gvr = strndup(s, n);
	if (!gvr)
		return -1;
	if (!config_gvr_ok(gvr)) {
		free(gvr);
		return 0;
	}
	char **v = realloc(lh->pool_scope, (lh->npool_scope + 1) * sizeof *v);
	if (!v) {
		free(gvr);
		return -1;
	}
	lh->pool_scope = v;
	v[lh->npool_scope++] = gvr;
	return 0;
}

int leader_hub_parse(struct leader_hub *lh, const char *leaders, const char *election,
		     const char *pool_scope)
{
	memset(lh, 0, sizeof *lh);
	lh->election = election && !strcmp(election, "true");
	if (each_element(leaders, add_leader, lh) < 0 ||
	    each_element(pool_scope, add_gvr, lh) < 0) {
		leader_hub_free(lh);
		return -1;
	}
	return 0;
}

void leader_hub_free(struct leader_hub *lh)
{
	for (size_t i = 0; i < lh->nleaders; i++) {
		free(lh->leaders[i].node);
		free(lh->leaders[i].address);
	}
	free(lh->leaders);
	for (size_t i = 0; i < lh->npool_scope; i++)
		free(lh->pool_scope[i]);
	free(lh->pool_scope);
	memset(lh, 0, sizeof *lh);
}

const struct leader_entry *leader_hub_find(const struct leader_hub *lh, const char *node)
{
	for (size_t i = 0; i < lh->nleaders; i++)
		if (!strcmp(lh->leaders[i].node, node))
			return &lh->leaders[i];
	return NULL;
}

bool leader_hub_is_follower(const struct leader_hub *lh, const char *node)
{
	return lh->election && lh->nleaders && !leader_hub_find(lh, node);
}
