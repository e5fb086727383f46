/*
 * etcd_verify.c - checking the etcd store's records against each other, for
 * `yurthub cache --etcd-servers=... verify` and the tests: every S/h record
 * is named by its object's S/m record and the object is there; every holder
 * an S/m record names has its S/h record; a tombstone has no object beside
 * it; every object under the prefix has a holder; and every holding is
 * explained by a reason: one of the holder's views (its membership), or the
 * holder's own reads and writes.  Reads the records of all nodes (keys, the
 * values of the small S/m, S/h and S/v records, and objects only for the
 * holdings an older version wrote without reasons), then every object's
 * value, one page at a time, against its key (store_object_fault): what a
 * hub would refuse to serve.  All of it as etcd was at one revision, so that
 * hubs writing meanwhile cannot make it disagree with itself.  A holding that
 * a replace in flight (or abandoned, not yet rolled back: an S/r record,
 * etcd_inflight.c) explains is not a problem; each such replace is reported
 * apart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/etcd_internal.h"
#include "storage/key.h"
#include "util/buf.h"
#include "util/strmap.h"

struct keyset {
	struct strmap map; /* key with the prefix cut -> value copy (when values) */
	const char *prefix;
	size_t plen;
	bool values;
};

static int keyset_add(void *ctx, const struct etcd_kv *kv)
{
	struct keyset *k = ctx;
	size_t len;
	const char *rest = er_key_rest(kv, k->prefix, k->plen, &len);
	if (!rest)
		return 0;
	struct strmap_entry *e = strmap_put(&k->map, rest, NULL);
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

/* A replace in flight, as its S/r record says, and the holdings it
 * explains. */
struct inflight {
	char *key;
	struct er_inflight_record rec;
	size_t holder_len; /* "<node>/<component>" */
	long holdings;
};

struct inflights {
	struct inflight *v;
	size_t n, cap;
	size_t side_len, plen; /* S, and S/r/ */
};

struct verify {
	etcd_verify_fn fn;
	void *ctx;
	long problems;
	int64_t revision; /* everything is read as it was then */
	struct inflights inflight;
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

/* ---- memberships: does a reason explain each holding? ---- */

/* One view of a holder, as its S/v record says. */
struct known_view {
	char *holder;	  /* "<node>/<component>" */
	char *collection; /* the object keys of its resource: "<prefix>/<path>/" */
	struct view_rec rec;
	char id[VIEW_ID_LEN + 1];
};

struct known_views {
	struct known_view *v;
	size_t n, cap;
	struct etcd_store *es;
	const char *prefix; /* S/v/ */
	size_t plen;
	int64_t revision;
};

static void known_views_free(struct known_views *k)
{
	for (size_t i = 0; i < k->n; i++) {
		free(k->v[i].holder);
		free(k->v[i].collection);
		view_rec_free(&k->v[i].rec);
	}
	free(k->v);
}

static int known_view_add(struct known_views *k, const char *holder, size_t hlen,
			  const char *resdir, const struct view_rec *r)
{
	char *res, *ver, *grp;
	if (key_parse_resource_dir(resdir, &res, &ver, &grp) < 0)
		return 0; /* not a view record: nothing it could explain */
	char *path = key_etcd_resource_path(grp, res);
	free(res);
	free(ver);
	free(grp);
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		struct known_view *v = realloc(k->v, cap * sizeof *v);
		if (!v) {
			free(path);
			return -1;
		}
		k->v = v;
		k->cap = cap;
	}
	struct known_view *kv = &k->v[k->n];
	memset(kv, 0, sizeof *kv);
	kv->holder = strndup(holder, hlen);
	kv->collection = path ? str_printf("%s/%s/", k->es->prefix, path) : NULL;
	free(path);
	int rc = view_rec_copy(&kv->rec, r);
	view_rec_id(resdir, r, kv->id);
	if (!kv->holder || !kv->collection || rc < 0) {
		free(kv->holder);
		free(kv->collection);
		view_rec_free(&kv->rec);
		return -1;
	}
	k->n++;
	return 0;
}

/* S/v/<node>/<component>/<resdir> -> each view of the set */
static int known_views_scan(void *ctx, const struct etcd_kv *kv)
{
	struct known_views *k = ctx;
	size_t len;
	const char *rest = er_key_rest(kv, k->prefix, k->plen, &len);
	const char *slash = rest ? strchr(rest, '/') : NULL;
	const char *resdir = slash ? strchr(slash + 1, '/') : NULL;
	if (!resdir)
		return 0;
	struct view_set set;
	if (view_set_decode(kv->value, kv->value_len, &set) < 0)
		return 0; /* unreadable: explains nothing */
	int rc = 0;
	for (size_t i = 0; i < set.n && rc == 0; i++)
		rc = known_view_add(k, rest, (size_t)(resdir - rest), resdir + 1, &set.v[i]);
	view_set_free(&set);
	return rc;
}

static bool in_collection(const struct known_view *kv, const char *holder, size_t hlen,
			  const char *objkey)
{
	return strlen(kv->holder) == hlen && !memcmp(kv->holder, holder, hlen) &&
	       !strncmp(objkey, kv->collection, strlen(kv->collection));
}

/* A holding an older version wrote (no reasons): explained when a view of
 * the holder matches the stored object, the rule of that version. */
static bool legacy_explained(const struct known_views *k, const char *holder, size_t hlen,
			     const char *objkey)
{
	struct etcd_range_result r;
	struct etcd_range_opts o = {NULL, 0, 0, k->revision, false, false};
	if (etcd_range(k->es->c, objkey, strlen(objkey), &o, &r) != ETCD_OK)
		return true; /* cannot tell: not reported as a problem of the records */
	bool yes = false;
	for (size_t i = 0; i < k->n && !yes && r.n; i++) {
		const struct known_view *kv = &k->v[i];
		if (!in_collection(kv, holder, hlen, objkey))
			continue;
		const char *rest = objkey + strlen(kv->collection);
		const char *slash = strchr(rest, '/');
		char *ns = slash ? strndup(rest, (size_t)(slash - rest)) : strdup("");
		struct view_matcher m;
		if (ns && view_matcher_init(&m, &kv->rec) == 0) {
			yes = view_matcher_covers(&m, ns, r.kvs[0].value, r.kvs[0].value_len) != 0;
			view_matcher_free(&m);
		}
		free(ns);
	}
	etcd_range_result_free(&r);
	return yes;
}

static bool reason_explains(const struct known_views *k, const char *holder, size_t hlen,
			    const char *objkey, const char *token, size_t tlen)
{
	if (tlen == 1 && *token == *ER_REASON_SINGLE)
		return true;
	if (tlen == 1 && *token == *ER_REASON_LEGACY)
		return legacy_explained(k, holder, hlen, objkey);
	for (size_t i = 0; i < k->n; i++)
		if (tlen == VIEW_ID_LEN && !memcmp(k->v[i].id, token, tlen) &&
		    in_collection(&k->v[i], holder, hlen, objkey))
			return true;
	return false;
}

static int inflight_scan(void *ctx, const struct etcd_kv *kv)
{
	struct inflights *f = ctx;
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 8;
		struct inflight *v = realloc(f->v, cap * sizeof *v);
		if (!v)
			return -1;
		f->v = v;
		f->cap = cap;
	}
	struct inflight *in = &f->v[f->n];
	memset(in, 0, sizeof *in);
	if (er_inflight_parse(kv, f->side_len, &in->rec) < 0)
		return 0; /* unreadable: explains nothing */
	in->key = strndup(kv->key, kv->key_len);
	if (!in->key) {
		er_inflight_record_free(&in->rec);
		return -1;
	}
	in->holder_len = strlen(in->rec.node) + 1 + strlen(in->rec.v.component);
	f->n++;
	return 0;
}

static void inflights_free(struct inflights *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->v[i].key);
		er_inflight_record_free(&f->v[i].rec);
	}
	free(f->v);
}

/* A holding that carries the id of a view a replace in flight is writing,
 * in that view's collection. */
static bool inflight_explains(struct inflights *f, const char *holder, size_t hlen,
			      const char *objkey, const char *reasons)
{
	for (size_t i = 0; i < f->n; i++) {
		struct inflight *in = &f->v[i];
		size_t nl = strlen(in->rec.node);
		if (in->holder_len != hlen || memcmp(holder, in->rec.node, nl) ||
		    holder[nl] != '/' ||
		    memcmp(holder + nl + 1, in->rec.v.component, hlen - nl - 1) ||
		    strncmp(objkey, in->rec.v.root, strlen(in->rec.v.root)) ||
		    !er_reasons_has(reasons, in->rec.v.id))
			continue;
		in->holdings++;
		return true;
	}
	return false;
}

static void utc(long long t, char *out, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!gmtime_r(&tt, &tm) || !strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, size, "%lld", t);
}

static void report_inflight(struct verify *v)
{
	for (size_t i = 0; v->fn && i < v->inflight.n; i++) {
		const struct inflight *in = &v->inflight.v[i];
		char since[32], alive[32];
		utc(in->rec.since, since, sizeof since);
		utc(in->rec.alive, alive, sizeof alive);
		char *what = str_printf("replace in progress by node %s since %s (last seen %s): "
					"component %s, view %s of %s, %ld holdings it explains",
					in->rec.node, since, alive, in->rec.v.component,
					in->rec.v.id, in->rec.v.resdir, in->holdings);
		v->fn(v->ctx, what ? what : "replace in progress", in->key);
		free(what);
	}
}

static void check_reasons(struct verify *v, struct keyset *holds, const struct known_views *k)
{
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&holds->map, &i));) {
		const char *slash = strchr(e->key, '/');
		const char *obj = slash ? strchr(slash + 1, '/') : NULL;
		if (!obj)
			continue; /* reported as malformed already */
		size_t hlen = (size_t)(obj - e->key);
		const char *reasons = *(const char *)e->value ? e->value : ER_REASON_LEGACY;
		bool explained = false;
		for (const char *t = reasons; *t && !explained;) {
			while (*t == ' ')
				t++;
			size_t n = strcspn(t, " ");
			explained = n && reason_explains(k, e->key, hlen, obj, t, n);
			t += n;
		}
		if (!explained && !inflight_explains(&v->inflight, e->key, hlen, obj, reasons))
			problem(v, "holding that no view's membership (nor a read) explains",
				e->key);
	}
}

/* ---- values: is each object the object its key names? ---- */

static int check_value(void *ctx, const struct etcd_kv *kv)
{
	struct verify *v = ctx;
	/* <prefix>/<resource path>/[<namespace>/]<name>: a cluster-scoped
	 * object's "namespace" is its resource path's last part, and its
	 * metadata has none to compare */
	const char *name = strrchr(kv->key, '/');
	if (!name)
		return 0;
	const char *ns_end = name, *ns = name;
	while (ns > kv->key && ns[-1] != '/')
		ns--;
	char *nscopy = strndup(ns, (size_t)(ns_end - ns));
	if (!nscopy)
		return -1;
	const char *why = store_object_fault(nscopy, name + 1, kv->value, kv->value_len);
	free(nscopy);
	if (!why)
		return 0;
	struct buf what = BUF_INIT;
	int rc = buf_printf(&what, "damaged object, not served (%s)", why);
	if (rc == 0)
		problem(v, what.data, kv->key);
	buf_free(&what);
	return rc;
}

long etcd_store_verify(struct store *s, etcd_verify_fn fn, void *ctx)
{
	struct etcd_store *es = es_of(s);
	struct buf mp = BUF_INIT, hp = BUF_INIT, op = BUF_INIT, vp = BUF_INIT;
	if (buf_printf(&mp, "%s/m/", es->side) < 0 || buf_printf(&hp, "%s/h/", es->side) < 0 ||
	    buf_printf(&op, "%s/", es->prefix) < 0 || buf_printf(&vp, "%s/v/", es->side) < 0) {
		buf_free(&mp);
		buf_free(&hp);
		buf_free(&op);
		buf_free(&vp);
		return -1;
	}
	/* one revision for every read: etcd's now */
	struct etcd_range_result now;
	if (etcd_range(es->c, es->side, strlen(es->side), NULL, &now) != ETCD_OK) {
		buf_free(&mp);
		buf_free(&hp);
		buf_free(&op);
		buf_free(&vp);
		return -1;
	}
	int64_t rev = now.revision;
	etcd_range_result_free(&now);
	struct keyset metas = {STRMAP_INIT, mp.data, mp.len - 1, true};
	struct keyset holds = {STRMAP_INIT, hp.data, hp.len, true};
	struct keyset objs = {STRMAP_INIT, "", 0, false};
	struct known_views views = {NULL, 0, 0, es, vp.data, vp.len, rev};
	struct verify v = {fn, ctx, 0, rev, {NULL, 0, 0, strlen(es->side), 0}};
	char *rp = str_printf("%s/r/", es->side);
	enum etcd_err e =
	    rp ? er_range_each_at(es->c, rp, strlen(rp), false, rev, inflight_scan, &v.inflight)
	       : ETCD_NOMEM;
	if (e == ETCD_OK)
		e = er_range_each_at(es->c, mp.data, mp.len, false, rev, keyset_add, &metas);
	if (e == ETCD_OK)
		e = er_range_each_at(es->c, hp.data, hp.len, false, rev, keyset_add, &holds);
	if (e == ETCD_OK)
		e = er_range_each_at(es->c, op.data, op.len, true, rev, keyset_add, &objs);
	if (e == ETCD_OK)
		e = er_range_each_at(es->c, vp.data, vp.len, false, rev, known_views_scan, &views);
	if (e == ETCD_OK) {
		check_holdings(&v, &holds, &metas, &objs);
		check_metas(&v, &holds, &metas, &objs);
		check_reasons(&v, &holds, &views);
		report_inflight(&v);
	}
	if (e == ETCD_OK)
		e = er_range_each_at(es->c, op.data, op.len, false, rev, check_value, &v);
	free(rp);
	inflights_free(&v.inflight);
	known_views_free(&views);
	keyset_free(&metas);
	keyset_free(&holds);
	keyset_free(&objs);
	buf_free(&mp);
	buf_free(&hp);
	buf_free(&op);
	buf_free(&vp);
	return e == ETCD_OK ? v.problems : -1;
}
