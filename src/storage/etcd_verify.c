/*
 * etcd_verify.c - checking the etcd store's records against each other, for
 * `yurthub cache --etcd-servers=... verify` and the tests: every S/h record
 * is named by its object's S/m record and the object is there; every holder
 * an S/m record names has its S/h record; a tombstone has no object beside
 * it; every object under the prefix has a holder.  Reads the records of all
 * nodes (keys, and the values of the small S/m records only).
 */
#include <stdlib.h>
#include <string.h>

#include "storage/etcd_internal.h"
#include "util/strmap.h"

struct keyset {
	struct strmap map; /* key with `strip` bytes cut -> value copy (S/m only) */
	size_t strip;
	bool values;
};

static int keyset_add(void *ctx, const struct etcd_kv *kv)
{
	struct keyset *k = ctx;
	if (kv->key_len < k->strip)
		return 0;
	struct strmap_entry *e = strmap_put(&k->map, kv->key + k->strip, NULL);
	if (!e)
		return -1;
	if (k->values && !(e->value = strndup(kv->value ? kv->value : "", kv->value_len)))
		return -1;
	return 0;
}

static void keyset_free(struct keyset *k)
{
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&k->map, &i));)
		free(e->value);
	strmap_free(&k->map);
}

struct verify {
	etcd_verify_fn fn;
	void *ctx;
	long problems;
};

static void problem(struct verify *v, const char *what, const char *key)
{
	v->problems++;
	if (v->fn)
		v->fn(v->ctx, what, key);
}

/* Does S/m value name holder ("<node>/<component>", len bytes)? */
static bool names_holder(const char *value, const char *holder, size_t len)
{
	for (const char *t = strchr(value, ' '); t; t = strchr(t + 1, ' '))
		if (!strncmp(t + 1, holder, len) && (t[1 + len] == ' ' || !t[1 + len]))
			return true;
	return false;
}

static void check_holdings(struct verify *v, struct keyset *holds, struct keyset *metas,
			   struct keyset *objs)
{
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&holds->map, &i));) {
		/* <node>/<component><object key> */
		const char *slash = strchr(e->key, '/');
		const char *obj = slash ? strchr(slash + 1, '/') : NULL;
		if (!obj) {
			problem(v, "malformed holder record", e->key);
			continue;
		}
		struct strmap_entry *m = strmap_get(&metas->map, obj);
		if (!m)
			problem(v, "holder record without the object's S/m record", e->key);
		else if (!names_holder(m->value, e->key, (size_t)(obj - e->key)))
			problem(v, "holder record the S/m record does not name", e->key);
		if (!strmap_get(&objs->map, obj))
			problem(v, "holder record of a missing object", e->key);
	}
}

static void check_metas(struct verify *v, struct keyset *holds, struct keyset *metas,
			struct keyset *objs)
{
	struct buf hk = BUF_INIT;
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&metas->map, &i));) {
		bool any = false;
		for (const char *t = strchr(e->value, ' '); t; t = strchr(t + 1, ' ')) {
			size_t len = strcspn(t + 1, " ");
			if (!len || t[1] == '@')
				continue;
			any = true;
			buf_reset(&hk);
			if (buf_printf(&hk, "%.*s%s", (int)len, t + 1, e->key) < 0)
				continue;
			if (!strmap_get(&holds->map, hk.data))
				problem(v, "S/m record names a holder without its record", hk.data);
		}
		bool obj = strmap_get(&objs->map, e->key) != NULL;
		if (any && !obj)
			problem(v, "held object missing", e->key);
		if (!any && obj)
			problem(v, "tombstone beside a live object", e->key);
	}
	for (size_t i = 0; (e = strmap_next(&objs->map, &i));) {
		struct strmap_entry *m = strmap_get(&metas->map, e->key);
		bool held = false;
		for (const char *t = m ? strchr(m->value, ' ') : NULL; t && !held;
		     t = strchr(t + 1, ' '))
			held = t[1] && t[1] != '@' && t[1] != ' ';
		if (!held)
			problem(v, "object without holders", e->key);
	}
	buf_free(&hk);
}

long etcd_store_verify(struct store *s, etcd_verify_fn fn, void *ctx)
{
	struct etcd_store *es = es_of(s);
	struct buf mp = BUF_INIT, hp = BUF_INIT, op = BUF_INIT;
	if (buf_printf(&mp, "%s/m/", es->side) < 0 || buf_printf(&hp, "%s/h/", es->side) < 0 ||
	    buf_printf(&op, "%s/", es->prefix) < 0) {
		buf_free(&mp);
		buf_free(&hp);
		buf_free(&op);
		return -1;
	}
	struct keyset metas = {STRMAP_INIT, mp.len - 1, true};
	struct keyset holds = {STRMAP_INIT, hp.len, false};
	struct keyset objs = {STRMAP_INIT, 0, false};
	struct verify v = {fn, ctx, 0};
	enum etcd_err e = er_range_each(es->c, mp.data, mp.len, false, keyset_add, &metas);
	if (e == ETCD_OK)
		e = er_range_each(es->c, hp.data, hp.len, true, keyset_add, &holds);
	if (e == ETCD_OK)
		e = er_range_each(es->c, op.data, op.len, true, keyset_add, &objs);
	if (e == ETCD_OK) {
		check_holdings(&v, &holds, &metas, &objs);
		check_metas(&v, &holds, &metas, &objs);
	}
	keyset_free(&metas);
	keyset_free(&holds);
	keyset_free(&objs);
	buf_free(&mp);
	buf_free(&hp);
	buf_free(&op);
	return e == ETCD_OK ? v.problems : -1;
}
