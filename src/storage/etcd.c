/*
 * etcd.c - the etcd store: its operations table and everything but the
 * view replace (etcd_replace.c).  Records and guarded steps are in
 * etcd_records.c; the layout is described in etcd_internal.h and
 * docs/etcd-store.md.
 *
 * Reads go straight to etcd.  A component's objects are found through its
 * S/h records (one range), then read by key; an object itself is shared:
 * any component of any node that asks for its key gets it.
 */
#include "storage/etcd.h"

#include <errno.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/meta.h"
#include "kube/selectable.h"
#include "storage/etcd_internal.h"
#include "storage/key.h"
#include "util/log.h"

#define PAGE 500 /* objects per index range when iterating */

static enum store_err es_key_build(struct store *s, const struct store_key_info *info,
				   struct store_key *out)
{
	return key_build_etcd(es_of(s)->prefix, info, out);
}

/* One Txn of puts and deletes, no compares. */
static enum store_err put_plain(struct etcd_store *es, const char *key, const char *value,
				size_t len)
{
	struct er_plan p = {0};
	er_plan_put(&p, key, value, len);
	bool ok;
	enum etcd_err e = er_plan_run(es, &p, &ok);
	er_plan_free(&p);
	return er_fail(e);
}

/* ---- single objects ---- */

static enum store_err check_content(const struct store_key *key, const char *data, size_t len,
				    uint64_t *rv)
{
	if (!key || !key->path)
		return STORE_EMPTY_KEY;
	if (key->is_root)
		return STORE_EMPTY_KEY;
	if (!data || len == 0)
		return STORE_EMPTY_CONTENT;
	struct kube_meta m;
	if (kube_meta_parse(data, len, &m) < 0)
		return STORE_INVALID_CONTENT;
	enum store_err e = STORE_OK;
	if (m.nul_in_name || (m.name && strcmp(m.name, key->name)))
		e = STORE_INVALID_CONTENT; /* "a\u0000b" is not object "a" */
	else if (m.namespace && *m.namespace && *key->namespace &&
		 strcmp(m.namespace, key->namespace))
		e = STORE_INVALID_CONTENT;
	if (rv)
		*rv = m.rv;
	kube_meta_free(&m);
	return e;
}

enum write_mode {
	WRITE_CREATE, /* the object must be absent */
	WRITE_UPDATE, /* the object must be present */
	WRITE_PUT,    /* either: a watch event */
	WRITE_FORCE,  /* either, whatever the stored rv: STORE_EVENT_RESTORE */
};

/* Decide from what was read; STORE_OK: go on and write.  *write says
 * whether the object itself is written (a newer stored copy is only held). */
static enum store_err write_decide(const struct er_target *t, uint64_t rv, enum write_mode mode,
				   bool *write, struct buf *stored)
{
	const struct etcd_kv *obj = t->object.n ? &t->object.kvs[0] : NULL;
	*write = true;
	if (mode == WRITE_CREATE && obj)
		return STORE_EXISTS;
	if (mode == WRITE_UPDATE && !obj)
		return STORE_NOT_FOUND;
	if (mode == WRITE_FORCE)
		return STORE_OK;
	if (!obj && er_meta_is_tombstone(&t->meta) && t->meta.rv >= rv)
		return STORE_CONFLICT; /* deleted since this copy was taken */
	if (obj && t->meta.present && t->meta.rv > rv) {
		*write = false;
		if (stored && buf_append(stored, obj->value, obj->value_len) < 0)
			return STORE_NOMEM;
	}
	return STORE_OK;
}

/* Read, decide, then one guarded Txn; again while the records changed in
 * between.  The component holds the object for reason afterwards. */
static enum store_err write_object(struct etcd_store *es, const struct store_key *key,
				   const char *data, size_t len, uint64_t rv, enum write_mode mode,
				   struct buf *stored, const char *reason)
{
	for (int attempt = 0; attempt < ER_RETRIES; attempt++) {
		struct er_target t = {.objkey = key->path, .want_object = true};
		enum etcd_err e = er_read_targets(es, key->component, &t, 1, NULL, NULL);
		bool write = false;
		enum store_err se = e != ETCD_OK ? er_fail(e) : STORE_OK;
		if (se == STORE_OK) {
			if (stored)
				buf_reset(stored);
			se = write_decide(&t, rv, mode, &write, stored);
		}
		bool ok = true;
		if (se == STORE_OK) {
			struct er_plan p = {0};
			/* the object too: a copy written by someone without records */
			er_plan_same(&p, key->path, t.object.n ? t.object.kvs[0].mod_revision : 0);
			struct er_copy copy = {data, len, rv, key->group, key->resource};
			if (er_plan_hold(es, &p, key->component, key->path, &t,
					 write ? &copy : NULL, reason))
				er_plan_put(&p,
					    er_plan_keep(&p, er_registry_key(es, key->component)),
					    "", 0);
			if (p.nops > 0)
				e = er_plan_run(es, &p, &ok);
			er_plan_free(&p);
			se = er_fail(e);
			if (se == STORE_OK && !write)
				se = STORE_CONFLICT; /* held, but the stored copy is newer */
		}
		er_targets_free(&t, 1);
		if (se != STORE_OK || ok)
			return se;
		er_backoff(es, attempt);
	}
	return STORE_CONFLICT; /* contention that never let up: the caller retries later */
}

static enum store_err es_create(struct store *s, const struct store_key *key, const char *data,
				size_t len)
{
	uint64_t rv = 0;
	enum store_err e = check_content(key, data, len, &rv);
	return e != STORE_OK ? e
			     : write_object(es_of(s), key, data, len, rv, WRITE_CREATE, NULL,
					    ER_REASON_SINGLE);
}

static enum store_err es_update(struct store *s, const struct store_key *key, const char *data,
				size_t len, uint64_t rv, struct buf *stored)
{
	enum store_err e = check_content(key, data, len, NULL);
	return e != STORE_OK ? e
			     : write_object(es_of(s), key, data, len, rv, WRITE_UPDATE, stored,
					    ER_REASON_SINGLE);
}

/* DELETED at rv from the view named id: the component lets the object go,
 * unless the stored copy is at rv or newer (then it only leaves the view). */
static enum store_err drop_deleted(struct etcd_store *es, const struct store_key *key, uint64_t rv,
				   const char *id)
{
	for (int attempt = 0; attempt < ER_RETRIES; attempt++) {
		struct er_target t = {.objkey = key->path, .want_object = true};
		enum etcd_err e = er_read_targets(es, key->component, &t, 1, NULL, NULL);
		struct er_plan p = {0};
		if (e == ETCD_OK && (t.meta.ours || t.hold.present)) {
			if (t.object.n && t.meta.present && t.meta.rv >= rv)
				er_plan_drop_reason(es, &p, key->component, key->path, &t, id);
			else
				er_plan_release(es, &p, key->component, key->path, &t);
		}
		bool ok = true;
		if (e == ETCD_OK && p.nops > 0)
			e = er_plan_run(es, &p, &ok);
		er_plan_free(&p);
		er_targets_free(&t, 1);
		if (e != ETCD_OK || ok)
			return er_fail(e);
		er_backoff(es, attempt);
	}
	return STORE_CONFLICT;
}

static enum store_err es_view_event(struct store *s, const struct store_view *view,
				    const struct store_key *key, enum store_event type,
				    const char *data, size_t len, uint64_t rv)
{
	struct etcd_store *es = es_of(s);
	if (!key || !key->path || key->is_root || !key->component || !*key->component)
		return STORE_EMPTY_KEY;
	char id[VIEW_ID_LEN + 1];
	enum store_err e = STORE_OK;
	if (type == STORE_EVENT_RESTORE && !view) /* a single-object read's copy */
		strcpy(id, ER_REASON_SINGLE);
	else
		e = er_view_id(view, id);
	if (e != STORE_OK)
		return e;
	if (type == STORE_EVENT_DELETED)
		return drop_deleted(es, key, rv, id);
	if ((e = check_content(key, data, len, NULL)) != STORE_OK)
		return e;
	e = write_object(es, key, data, len, rv,
			 type == STORE_EVENT_RESTORE ? WRITE_FORCE : WRITE_PUT, NULL, id);
	return e == STORE_CONFLICT ? STORE_OK : e; /* older than stored: not news */
}

static enum store_err es_get(struct store *s, const struct store_key *key, struct buf *out)
{
	if (!key || !key->path)
		return STORE_EMPTY_KEY;
	if (key->is_root)
		return STORE_EMPTY_CONTENT;
	struct etcd_range_result r;
	enum etcd_err e = etcd_range(es_of(s)->c, key->path, strlen(key->path), NULL, &r);
	if (e != ETCD_OK)
		return er_fail(e);
	enum store_err se = r.n ? STORE_OK : STORE_NOT_FOUND;
	if (r.n && buf_append(out, r.kvs[0].value, r.kvs[0].value_len) < 0)
		se = STORE_NOMEM;
	etcd_range_result_free(&r);
	return se;
}

/* ---- object keys back into store keys ---- */

/* The resource root of key k (all namespaces): its length. */
static enum store_err resource_root(struct etcd_store *es, const char *component,
				    const struct store_gvr *g, struct store_key *out)
{
	struct store_key_info info = {component, g->group, g->version, g->resource, "", ""};
	return key_build_etcd(es->prefix, &info, out);
}

/* The store key of an object key under a resource root; STORE_BAD_KEY for
 * keys that are not one object of it. */
static enum store_err key_of_objkey(struct etcd_store *es, const struct store_key *resroot,
				    const char *objkey, struct store_key *out)
{
	size_t rl = strlen(resroot->path);
	if (strncmp(objkey, resroot->path, rl))
		return STORE_BAD_KEY;
	const char *rest = objkey + rl;
	const char *slash = strchr(rest, '/');
	char *ns = slash ? strndup(rest, (size_t)(slash - rest)) : strdup("");
	if (!ns)
		return STORE_NOMEM;
	const char *name = slash ? slash + 1 : rest;
	enum store_err e = STORE_BAD_KEY;
	if (!strchr(name, '/')) {
		struct store_key_info info = {resroot->component,
					      resroot->group,
					      resroot->version,
					      resroot->resource,
					      ns,
					      name};
		e = key_build_etcd(es->prefix, &info, out);
	}
	free(ns);
	return e;
}

/* Has the component listed any view of the resource? */
static enum store_err ever_listed(struct etcd_store *es, const char *component,
				  const struct store_gvr *g)
{
	char *resdir = key_resource_dir(KEY_LAYOUT_ENHANCED, g->resource, g->version, g->group);
	char *vk = resdir ? er_views_key(es, component, resdir) : NULL;
	free(resdir);
	if (!vk)
		return STORE_NOMEM;
	struct etcd_range_opts o = {NULL, 0, 0, 0, false, true};
	struct etcd_range_result r;
	enum etcd_err e = etcd_range(es->c, vk, strlen(vk), &o, &r);
	free(vk);
	if (e != ETCD_OK)
		return er_fail(e);
	bool listed = r.count > 0;
	etcd_range_result_free(&r);
	return listed ? STORE_OK : STORE_NOT_FOUND;
}

/* ---- iterating what a component holds ---- */

struct es_iter {
	struct store_iter base;
	struct etcd_store *es;
	struct store_key root, resroot;
	char *index_prefix;
	struct buf from, end; /* the next index range; from may end in a NUL */
	struct er_keys keys;  /* object keys of the page */
	struct etcd_range_result *objs;
	size_t next;
	bool last_page;
	struct store_key current;
	/* iter_begin_matching: objects whose S/m summary rules them out are
	 * not read (the caller's selectors, which outlive the iterator) */
	const struct selector *labels, *fields;
};

static void page_free(struct es_iter *it)
{
	for (size_t i = 0; it->objs && i < it->keys.n; i++)
		etcd_range_result_free(&it->objs[i]);
	free(it->objs);
	it->objs = NULL;
	er_keys_free(&it->keys);
	it->next = 0;
}

static void es_iter_free(struct store_iter *base)
{
	struct es_iter *it = (struct es_iter *)base;
	if (!it)
		return;
	page_free(it);
	store_key_free(&it->root);
	store_key_free(&it->resroot);
	store_key_free(&it->current);
	free(it->index_prefix);
	buf_free(&it->from);
	buf_free(&it->end);
	free(it);
}

/* Read objects by key, in read-only Txns of ER_READS_MAX ranges. */
static enum etcd_err read_objects(struct etcd_store *es, char **keys, size_t n,
				  struct etcd_range_result *out)
{
	for (size_t off = 0; off < n; off += ER_READS_MAX) {
		size_t cnt = n - off < ER_READS_MAX ? n - off : ER_READS_MAX;
		struct etcd_op ops[ER_READS_MAX];
		for (size_t i = 0; i < cnt; i++)
			ops[i] = (struct etcd_op){
			    ETCD_OP_RANGE, keys[off + i], strlen(keys[off + i]), NULL, 0, NULL, 0};
		struct etcd_txn t = {NULL, 0, ops, NULL, cnt, 0};
		struct etcd_txn_result r;
		enum etcd_err e = etcd_txn(es->c, &t, &r);
		atomic_fetch_add(&es->read_txns, 1);
		if (e != ETCD_OK)
			return e;
		if (r.nranges != cnt) {
			etcd_txn_result_free(&r);
			return ETCD_PROTOCOL;
		}
		for (size_t i = 0; i < cnt; i++) {
			out[off + i] = r.ranges[i];
			memset(&r.ranges[i], 0, sizeof r.ranges[i]);
		}
		etcd_txn_result_free(&r);
	}
	return ETCD_OK;
}

static bool filtering(const struct es_iter *it)
{
	return !selector_is_empty(it->labels) || !selector_is_empty(it->fields);
}

/* May the object, whose S/m record was read into m, match? */
static bool may_match(const struct es_iter *it, const struct er_meta *m)
{
	return !m->has_bloom || (selector_may_match_bloom(it->labels, m->bloom) &&
				 selector_may_match_bloom(it->fields, m->bloom));
}

/* Drops from the page the objects whose S/m summary rules out the
 * selectors: those small records are read (er_read_targets: one range over
 * the page's span when it holds little else) instead of the objects. */
static enum etcd_err drop_unmatched(struct es_iter *it)
{
	struct er_target *t = calloc(it->keys.n, sizeof *t);
	struct er_keys kept = {0};
	enum etcd_err e = t ? ETCD_OK : ETCD_NOMEM;

	for (size_t i = 0; t && i < it->keys.n; i++)
		t[i].objkey = it->keys.v[i];
	if (e == ETCD_OK)
		e = er_read_targets(it->es, it->root.component, t, it->keys.n, NULL, NULL);
	for (size_t i = 0; e == ETCD_OK && i < it->keys.n; i++) {
		const char *k = it->keys.v[i];
		if (may_match(it, &t[i].meta) && er_keys_add(&kept, k, strlen(k)) < 0)
			e = ETCD_NOMEM;
	}
	er_targets_free(t, it->keys.n);
	free(t);
	if (e == ETCD_OK) {
		er_keys_free(&it->keys);
		it->keys = kept;
	} else {
		er_keys_free(&kept);
	}
	return e;
}

static enum etcd_err next_index_page(struct es_iter *it)
{
	page_free(it);
	struct etcd_range_opts o = {it->end.data, it->end.len, PAGE, 0, true, false};
	struct etcd_range_result r;
	enum etcd_err e = etcd_range(it->es->c, it->from.data, it->from.len, &o, &r);
	if (e != ETCD_OK)
		return e;
	size_t iplen = strlen(it->index_prefix), len;
	for (size_t i = 0; i < r.n && e == ETCD_OK; i++) {
		const char *objkey = er_key_rest(&r.kvs[i], it->index_prefix, iplen, &len);
		if (objkey && er_keys_add(&it->keys, objkey, len) < 0)
			e = ETCD_NOMEM;
	}
	it->last_page = !r.more || !r.n;
	if (e == ETCD_OK && r.n) {
		buf_reset(&it->from);
		if (buf_append(&it->from, r.kvs[r.n - 1].key, r.kvs[r.n - 1].key_len) < 0 ||
		    buf_append_char(&it->from, '\0') < 0)
			e = ETCD_NOMEM;
	}
	etcd_range_result_free(&r);
	if (e == ETCD_OK && it->keys.n && filtering(it))
		e = drop_unmatched(it);
	return e;
}

/* The next page of the index with its objects: at least one object unless
 * it is the last. */
static enum etcd_err next_page(struct es_iter *it)
{
	enum etcd_err e;

	do
		e = next_index_page(it);
	while (e == ETCD_OK && !it->keys.n && !it->last_page);
	if (e == ETCD_OK && it->keys.n) {
		it->objs = calloc(it->keys.n, sizeof *it->objs);
		e = it->objs ? read_objects(it->es, it->keys.v, it->keys.n, it->objs) : ETCD_NOMEM;
	}
	return e;
}

/* Does the component hold anything in the iterator's collection (before
 * start_after too)?  On errors: yes, and the next read will tell. */
static bool holds_any(struct es_iter *it)
{
	struct buf from = BUF_INIT;
	struct etcd_range_result r = {0};
	struct etcd_range_opts o = {it->end.data, it->end.len, 1, 0, true, true};
	bool any = true;
	if (buf_printf(&from, "%s%s", it->index_prefix, it->root.path) == 0 &&
	    etcd_range(it->es->c, from.data, from.len, &o, &r) == ETCD_OK)
		any = r.count > 0;
	etcd_range_result_free(&r);
	buf_free(&from);
	return any;
}

static enum store_err iter_start(struct store *s, const struct store_key *root,
				 const char *start_after, const struct store_match *match,
				 struct store_iter **out)
{
	struct etcd_store *es = es_of(s);
	*out = NULL;
	if (!root || !root->path)
		return STORE_EMPTY_KEY;
	struct es_iter *it = calloc(1, sizeof *it);
	if (!it)
		return STORE_NOMEM;
	it->base.store = s;
	it->es = es;
	if (match) {
		/* a field the summary does not hold cannot rule anything out */
		it->labels = match->labels;
		if (selectable_answers(root->group, root->resource, match->fields))
			it->fields = match->fields;
	}
	struct store_key_info info = {root->component, root->group,	root->version,
				      root->resource,  root->namespace, ""};
	struct store_gvr g = {root->group, root->version, root->resource};
	enum store_err e = key_build_etcd(es->prefix, &info, &it->root);
	if (e == STORE_OK)
		e = resource_root(es, root->component, &g, &it->resroot);
	if (e == STORE_OK) {
		it->index_prefix = er_index_prefix(es, root->component);
		if (!it->index_prefix ||
		    buf_printf(&it->from, "%s%s", it->index_prefix, it->root.path) < 0 ||
		    etcd_prefix_end(it->from.data, it->from.len, &it->end) < 0)
			e = STORE_NOMEM;
		/* after the object start_after: its key and a NUL byte */
		if (e == STORE_OK && start_after && *start_after &&
		    (buf_append_str(&it->from, start_after) < 0 ||
		     buf_append_char(&it->from, '\0') < 0))
			e = STORE_NOMEM;
	}
	/* the first page now: a collection never listed and empty is not there */
	if (e == STORE_OK)
		e = er_fail(next_page(it));
	if (e == STORE_OK && !it->keys.n && !holds_any(it))
		e = ever_listed(es, root->component, &g);
	if (e != STORE_OK) {
		es_iter_free(&it->base);
		return e;
	}
	*out = &it->base;
	return STORE_OK;
}

static enum store_err es_iter_begin(struct store *s, const struct store_key *root,
				    const char *start_after, struct store_iter **out)
{
	return iter_start(s, root, start_after, NULL, out);
}

static enum store_err es_iter_begin_matching(struct store *s, const struct store_key *root,
					     const char *start_after,
					     const struct store_match *match,
					     struct store_iter **out)
{
	return iter_start(s, root, start_after, match, out);
}

static enum store_err es_iter_next(struct store_iter *base, const struct store_key **key,
				   struct buf *out)
{
	struct es_iter *it = (struct es_iter *)base;
	for (;;) {
		if (it->next >= it->keys.n) {
			if (it->last_page)
				return STORE_NOT_FOUND;
			enum etcd_err e = next_page(it);
			if (e != ETCD_OK)
				return er_fail(e);
			if (!it->keys.n)
				return STORE_NOT_FOUND;
		}
		size_t i = it->next++;
		if (!it->objs[i].n)
			continue; /* released meanwhile, or deleted behind our back */
		store_key_free(&it->current);
		enum store_err e = key_of_objkey(it->es, &it->resroot, it->keys.v[i], &it->current);
		if (e == STORE_BAD_KEY)
			continue; /* not an object of this collection */
		if (e != STORE_OK)
			return e;
		buf_reset(out);
		if (buf_append(out, it->objs[i].kvs[0].value, it->objs[i].kvs[0].value_len) < 0)
			return STORE_NOMEM;
		*key = &it->current;
		return STORE_OK;
	}
}

static enum store_err es_list(struct store *s, const struct store_key *root, store_object_fn fn,
			      void *ctx)
{
	if (!root || !root->path)
		return STORE_EMPTY_KEY;
	if (!root->is_root) {
		struct buf b = BUF_INIT;
		enum store_err e = es_get(s, root, &b);
		if (e == STORE_OK)
			fn(ctx, root, b.data, b.len);
		buf_free(&b);
		return e;
	}
	struct store_iter *it;
	enum store_err e = es_iter_begin(s, root, NULL, &it);
	if (e != STORE_OK)
		return e;
	struct buf data = BUF_INIT;
	const struct store_key *k = NULL;
	size_t n = 0;
	while ((e = es_iter_next(it, &k, &data)) == STORE_OK) {
		n++;
		if (fn(ctx, k, data.data, data.len)) {
			e = STORE_NOT_FOUND;
			break;
		}
	}
	es_iter_free(it);
	buf_free(&data);
	if (e != STORE_NOT_FOUND)
		return e;
	if (n)
		return STORE_OK;
	/* nothing held: "listed, empty" or "never listed" */
	struct store_gvr g = {root->group, root->version, root->resource};
	return ever_listed(es_of(s), root->component, &g);
}

static enum store_err es_list_keys(struct store *s, const char *component,
				   const struct store_gvr *gvr, store_key_fn fn, void *ctx)
{
	struct etcd_store *es = es_of(s);
	if (!component || !*component || !gvr || !gvr->resource || !*gvr->resource)
		return STORE_EMPTY_KEY;
	struct store_key resroot;
	enum store_err e = resource_root(es, component, gvr, &resroot);
	if (e != STORE_OK)
		return e;
	struct er_keys held = {0};
	e = er_fail(er_held_keys(es, component, resroot.path, &held));
	size_t n = 0;
	for (size_t i = 0; e == STORE_OK && i < held.n; i++) {
		struct store_key k;
		enum store_err ke = key_of_objkey(es, &resroot, held.v[i], &k);
		if (ke == STORE_BAD_KEY)
			continue;
		if (ke != STORE_OK) {
			e = ke;
			break;
		}
		n++;
		int stop = fn(ctx, &k);
		store_key_free(&k);
		if (stop)
			break;
	}
	er_keys_free(&held);
	store_key_free(&resroot);
	if (e == STORE_OK && !n)
		e = ever_listed(es, component, gvr);
	return e;
}

/* ---- views ---- */

/* Read-modify-write of a view set: edit returns 1 when it changed the set,
 * 0 when nothing is to be written, or a negative store_err. */
typedef int (*view_edit_fn)(struct view_set *set, void *ctx);

static enum store_err views_edit(struct etcd_store *es, const char *vkey, view_edit_fn edit,
				 void *ctx)
{
	for (int attempt = 0; attempt < ER_RETRIES; attempt++) {
		struct etcd_range_result r;
		enum etcd_err e = etcd_range(es->c, vkey, strlen(vkey), NULL, &r);
		if (e != ETCD_OK)
			return er_fail(e);
		struct view_set set = {0};
		if (r.n && view_set_decode(r.kvs[0].value, r.kvs[0].value_len, &set) < 0)
			log_warn("etcd store: view set %s unreadable", vkey);
		int64_t mod = r.n ? r.kvs[0].mod_revision : 0;
		etcd_range_result_free(&r);
		int rc = edit(&set, ctx);
		struct buf value = BUF_INIT;
		bool ok = true;
		if (rc > 0) {
			struct er_plan p = {0};
			er_plan_same(&p, vkey, mod);
			if (set.n) {
				if (view_set_encode(&set, &value) < 0)
					p.oom = true;
				er_plan_put(&p, vkey, value.data ? value.data : "", value.len);
			} else {
				er_plan_delete(&p, vkey);
			}
			e = er_plan_run(es, &p, &ok);
			er_plan_free(&p);
		}
		buf_free(&value);
		view_set_free(&set);
		if (rc < 0)
			return (enum store_err) - rc;
		if (e != ETCD_OK || ok)
			return er_fail(e);
		er_backoff(es, attempt);
	}
	return STORE_CONFLICT;
}

/* The views key and canonical record of a caller's view. */
static enum store_err view_locate(struct etcd_store *es, const struct store_view *view,
				  struct view_rec *rec, char **vkey)
{
	char *resdir;
	*vkey = NULL;
	enum store_err e = view_identity(view, KEY_LAYOUT_ENHANCED, rec, &resdir);
	if (e != STORE_OK)
		return e;
	*vkey = er_views_key(es, view->component, resdir);
	free(resdir);
	if (!*vkey) {
		view_rec_free(rec);
		return STORE_NOMEM;
	}
	return STORE_OK;
}

struct view_read {
	const struct view_rec *rec;
	struct store_view_state *out;
	uint64_t rv;
	enum store_err result;
};

static int view_read_edit(struct view_set *set, void *ctx)
{
	struct view_read *vr = ctx;
	struct view_rec *r = view_set_find(set, vr->rec);
	if (!r)
		return -(int)STORE_NOT_FOUND;
	if (vr->out) /* a read */
		return view_state_fill(vr->out, r) < 0 ? -(int)STORE_NOMEM : 0;
	if (vr->rv <= r->rv)
		return 0; /* a bookmark older than what is recorded */
	r->rv = vr->rv;
	return 1;
}

static enum store_err es_get_view(struct store *s, const struct store_view *view,
				  struct store_view_state *out)
{
	struct view_rec rec;
	char *vkey;
	enum store_err e = view_locate(es_of(s), view, &rec, &vkey);
	if (e != STORE_OK)
		return e;
	struct view_read vr = {&rec, out, 0, STORE_OK};
	e = views_edit(es_of(s), vkey, view_read_edit, &vr);
	view_rec_free(&rec);
	free(vkey);
	return e;
}

static enum store_err es_set_view_rv(struct store *s, const struct store_view *view, uint64_t rv)
{
	struct view_rec rec;
	char *vkey;
	enum store_err e = view_locate(es_of(s), view, &rec, &vkey);
	if (e != STORE_OK)
		return e;
	struct view_read vr = {&rec, NULL, rv, STORE_OK};
	e = views_edit(es_of(s), vkey, view_read_edit, &vr);
	view_rec_free(&rec);
	free(vkey);
	return e;
}

struct views_visit {
	store_view_fn fn;
	void *ctx;
};

static int views_visit_edit(struct view_set *set, void *ctx)
{
	struct views_visit *v = ctx;
	enum store_err e = view_set_visit(set, v->fn, v->ctx);
	return e == STORE_OK ? 0 : -(int)e;
}

static enum store_err es_list_views(struct store *s, const char *component,
				    const struct store_gvr *gvr, store_view_fn fn, void *ctx)
{
	if (!component || !*component || !gvr || !gvr->resource || !*gvr->resource)
		return STORE_EMPTY_KEY;
	if (!key_component_ok(component))
		return STORE_BAD_KEY;
	char *resdir =
	    key_resource_dir(KEY_LAYOUT_ENHANCED, gvr->resource, gvr->version, gvr->group);
	if (!resdir)
		return STORE_BAD_KEY;
	char *vkey = er_views_key(es_of(s), component, resdir);
	free(resdir);
	if (!vkey)
		return STORE_NOMEM;
	struct views_visit v = {fn, ctx};
	enum store_err e = views_edit(es_of(s), vkey, views_visit_edit, &v);
	free(vkey);
	return e;
}

/* ---- deleting ---- */

static int drop_ns_edit(struct view_set *set, void *ctx)
{
	const char *ns = ctx;
	size_t kept = 0;
	for (size_t i = 0; i < set->n; i++) {
		if (!*ns || !strcmp(set->v[i].namespace, ns))
			view_rec_free(&set->v[i]);
		else
			set->v[kept++] = set->v[i];
	}
	bool changed = kept != set->n;
	set->n = kept;
	return changed;
}

static enum store_err es_delete(struct store *s, const struct store_key *key)
{
	struct etcd_store *es = es_of(s);
	if (!key || !key->path || !key->component || !*key->component)
		return STORE_EMPTY_KEY;
	if (!key->is_root) {
		char *keys[1] = {key->path};
		return er_release(es, key->component, keys, 1, NULL);
	}
	/* a collection: its views first (so that it reads as never listed,
	 * not as listed and empty), then what the component holds in it */
	struct store_gvr g = {key->group, key->version, key->resource};
	char *resdir = key_resource_dir(KEY_LAYOUT_ENHANCED, g.resource, g.version, g.group);
	char *vkey = resdir ? er_views_key(es, key->component, resdir) : NULL;
	free(resdir);
	enum store_err e = vkey ? views_edit(es, vkey, drop_ns_edit, key->namespace) : STORE_NOMEM;
	free(vkey);
	struct er_keys held = {0};
	if (e == STORE_OK)
		e = er_fail(er_held_keys(es, key->component, key->path, &held));
	if (e == STORE_OK)
		e = er_release(es, key->component, held.v, held.n, NULL);
	er_keys_free(&held);
	return e;
}

static enum store_err delete_prefix(struct etcd_store *es, const char *prefix)
{
	struct buf end = BUF_INIT;
	if (etcd_prefix_end(prefix, strlen(prefix), &end) < 0)
		return STORE_NOMEM;
	enum etcd_err e = etcd_delete_range(es->c, prefix, strlen(prefix), end.data, end.len, NULL);
	buf_free(&end);
	return er_fail(e);
}

static enum store_err es_delete_component(struct store *s, const char *component)
{
	struct etcd_store *es = es_of(s);
	if (!component || !*component)
		return STORE_EMPTY_KEY;
	if (!key_component_ok(component))
		return STORE_BAD_KEY;
	/* views first: a crash part way leaves objects no view claims */
	struct buf vprefix = BUF_INIT;
	enum store_err e = STORE_NOMEM;
	if (buf_printf(&vprefix, "%s/v/%s/%s/", es->side, es->node, component) == 0)
		e = delete_prefix(es, vprefix.data);
	buf_free(&vprefix);
	struct er_keys held = {0};
	if (e == STORE_OK)
		e = er_fail(er_held_keys(es, component, "", &held));
	if (e == STORE_OK)
		e = er_release(es, component, held.v, held.n, NULL);
	er_keys_free(&held);
	char *reg = e == STORE_OK ? er_registry_key(es, component) : NULL;
	if (e == STORE_OK && !reg)
		e = STORE_NOMEM;
	if (e == STORE_OK)
		e = er_fail(etcd_delete_range(es->c, reg, strlen(reg), NULL, 0, NULL));
	free(reg);
	return e;
}

/* The rest of each key under a prefix, as a name: components (S/c) and a
 * component's resources (S/v). */
struct names_under {
	store_name_fn fn;
	void *ctx;
	const char *prefix;
	size_t plen;
	size_t seen;
};

static int name_under(void *ctx, const struct etcd_kv *kv)
{
	struct names_under *n = ctx;
	size_t len;
	const char *name = er_key_rest(kv, n->prefix, n->plen, &len);
	if (!name)
		return 0;
	n->seen++;
	return n->fn(n->ctx, name) ? 1 : 0;
}

static enum store_err each_name_under(struct etcd_store *es, struct names_under *n, const char *fmt,
				      ...) __attribute__((format(printf, 3, 4)));

static enum store_err each_name_under(struct etcd_store *es, struct names_under *n, const char *fmt,
				      ...)
{
	struct buf prefix = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	int rc = buf_vprintf(&prefix, fmt, ap);
	va_end(ap);
	n->prefix = prefix.data;
	n->plen = prefix.len;
	enum etcd_err e = rc < 0
			      ? ETCD_NOMEM
			      : er_range_each(es->c, prefix.data, prefix.len, true, name_under, n);
	buf_free(&prefix);
	return er_fail(e);
}

static enum store_err es_list_components(struct store *s, store_name_fn fn, void *ctx)
{
	struct etcd_store *es = es_of(s);
	struct names_under n = {fn, ctx, NULL, 0, 0};
	return each_name_under(es, &n, "%s/c/%s/", es->side, es->node);
}

/* One count_only range over the node's holdings index S/h/<node>/: one
 * record per (component, object), so an object two components hold counts
 * twice; the values are empty and none is sent back.  (Holdings of objects
 * deleted behind the hub's back count until etcd_store_gc drops them.) */
static enum store_err es_count_objects(struct store *s, uint64_t *out)
{
	struct etcd_store *es = es_of(s);
	struct buf prefix = BUF_INIT, end = BUF_INIT;
	if (buf_printf(&prefix, "%s/h/%s/", es->side, es->node) < 0 ||
	    etcd_prefix_end(prefix.data, prefix.len, &end) < 0) {
		buf_free(&prefix);
		buf_free(&end);
		return STORE_NOMEM;
	}
	struct etcd_range_opts o = {end.data, end.len, 0, 0, true, true};
	struct etcd_range_result r;
	enum etcd_err e = etcd_range(es->c, prefix.data, prefix.len, &o, &r);
	buf_free(&prefix);
	buf_free(&end);
	if (e != ETCD_OK)
		return er_fail(e);
	*out = r.count > 0 ? (uint64_t)r.count : 0;
	etcd_range_result_free(&r);
	return STORE_OK;
}

enum store_err etcd_store_resources(struct store *s, const char *component, store_name_fn fn,
				    void *ctx)
{
	struct etcd_store *es = es_of(s);
	if (!component || !key_component_ok(component))
		return STORE_BAD_KEY;
	struct names_under n = {fn, ctx, NULL, 0, 0};
	enum store_err se = each_name_under(es, &n, "%s/v/%s/%s/", es->side, es->node, component);
	return se == STORE_OK && !n.seen ? STORE_NOT_FOUND : se;
}

/* For store_scrub: the resources of the component's views (what a relist
 * rewrites). */
static enum store_err es_list_resources(struct store *s, const char *component, store_name_fn fn,
					void *ctx)
{
	enum store_err e = etcd_store_resources(s, component, fn, ctx);
	return e == STORE_NOT_FOUND ? STORE_OK : e;
}

/* ---- cluster info ---- */

static char *cluster_key(struct etcd_store *es, const char *url_path)
{
	char *name = key_cluster_info_name(url_path);
	if (!name)
		return NULL;
	free(name);
	struct buf b = BUF_INIT;
	if (buf_printf(&b, "%s/ci%s", es->side, url_path) < 0)
		return NULL;
	return buf_steal(&b);
}

static enum store_err es_save_cluster_info(struct store *s, const char *url_path, const char *data,
					   size_t len)
{
	char *k = cluster_key(es_of(s), url_path);
	if (!k)
		return STORE_BAD_KEY;
	enum store_err e = !data || !len ? STORE_EMPTY_CONTENT : put_plain(es_of(s), k, data, len);
	free(k);
	return e;
}

static enum store_err es_get_cluster_info(struct store *s, const char *url_path, struct buf *out)
{
	char *k = cluster_key(es_of(s), url_path);
	if (!k)
		return STORE_BAD_KEY;
	struct etcd_range_result r;
	enum etcd_err e = etcd_range(es_of(s)->c, k, strlen(k), NULL, &r);
	free(k);
	if (e != ETCD_OK)
		return er_fail(e);
	enum store_err se = r.n ? STORE_OK : STORE_NOT_FOUND;
	if (r.n && buf_append(out, r.kvs[0].value, r.kvs[0].value_len) < 0)
		se = STORE_NOMEM;
	etcd_range_result_free(&r);
	return se;
}

/* ---- the store ---- */

static void es_close(struct store *s)
{
	struct etcd_store *es = es_of(s);
	if (!es)
		return;
	er_inflight_fini(es);
	etcd_client_free(es->c);
	free(es->prefix);
	free(es->side);
	free(es->node);
	free(es);
}

static const struct store_ops etcd_ops = {
    .name = "etcd",
    .shares_objects = true,
    .key_build = es_key_build,
    .create = es_create,
    .delete = es_delete,
    .get = es_get,
    .list = es_list,
    .update = es_update,
    .replace_begin = er_replace_begin,
    .replace_add = er_replace_add,
    .replace_commit = er_replace_commit,
    .replace_abort = er_replace_abort,
    .view_event = es_view_event,
    .get_view = es_get_view,
    .set_view_rv = es_set_view_rv,
    .list_views = es_list_views,
    .list_keys = es_list_keys,
    .delete_component = es_delete_component,
    .list_components = es_list_components,
    .count_objects = es_count_objects,
    .list_resources = es_list_resources,
    .iter_begin = es_iter_begin,
    .iter_begin_matching = es_iter_begin_matching,
    .iter_next = es_iter_next,
    .iter_free = es_iter_free,
    .save_cluster_info = es_save_cluster_info,
    .get_cluster_info = es_get_cluster_info,
    .close = es_close,
};

static char *errorf(const char *msg, const char *detail)
{
	struct buf b = BUF_INIT;
	if (buf_printf(&b, "%s%s%s", msg, detail ? ": " : "", detail ? detail : "") < 0)
		return NULL;
	return buf_steal(&b);
}

/* kube-apiserver's --etcd-prefix: absolute, no trailing '/', safe bytes. */
static char *clean_prefix(const char *p)
{
	if (!p || !*p)
		p = "/registry";
	if (p[0] != '/')
		return NULL;
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		n--;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] <= 0x20 || p[i] == 0x7f)
			return NULL;
	return n == 1 ? NULL : strndup(p, n); /* "/": every key of etcd, refused */
}

struct store *etcd_store_open(const struct etcd_store_config *cfg, char **err)
{
	*err = NULL;
	if (!cfg->nendpoints) {
		*err = errorf("etcd store: no --etcd-servers given", NULL);
		return NULL;
	}
	if (!cfg->node || !key_component_ok(cfg->node)) {
		*err = errorf("etcd store: a valid node name is needed (--node-name)", cfg->node);
		return NULL;
	}
	struct etcd_store *es = calloc(1, sizeof *es);
	if (!es)
		return NULL;
	es->base.ops = &etcd_ops;
	es->prefix = clean_prefix(cfg->prefix);
	es->node = strdup(cfg->node);
	struct buf side = BUF_INIT;
	if (!es->prefix) {
		*err = errorf("etcd store: --etcd-prefix must be an absolute path", cfg->prefix);
	} else if (!es->node || buf_printf(&side, "/yurthub%s", es->prefix) < 0 ||
		   er_inflight_init(es) < 0) {
		*err = errorf("etcd store: out of memory", NULL);
	} else {
		es->side = buf_steal(&side);
		struct etcd_config ec = {cfg->endpoints,
					 cfg->nendpoints,
					 cfg->ca_file,
					 cfg->cert_file,
					 cfg->key_file,
					 cfg->timeout_ms,
					 0};
		char *cerr = NULL;
		es->c = etcd_client_new(&ec, &cerr);
		if (!es->c)
			*err = errorf("etcd store", cerr);
		free(cerr);
	}
	buf_free(&side);
	if (*err || !es->c) {
		es_close(&es->base);
		return NULL;
	}
	return &es->base;
}

void etcd_store_stats(struct store *s, struct etcd_store_stats *out)
{
	struct etcd_store *es = es_of(s);
	out->txns = atomic_load(&es->txns);
	out->read_txns = atomic_load(&es->read_txns);
	out->retries = atomic_load(&es->retries);
	out->splits = atomic_load(&es->splits);
}

void etcd_store_nospace(struct store *s, struct etcd_nospace *out)
{
	etcd_client_nospace(es_of(s)->c, out);
}

/* ---- garbage: records of objects deleted behind the hub's back ---- */

static long gc_batch(struct etcd_store *es, const char *component, char **objkeys, size_t n)
{
	struct er_target t[ER_BATCH];
	for (int attempt = 0; attempt < ER_RETRIES; attempt++) {
		memset(t, 0, sizeof t);
		for (size_t i = 0; i < n; i++)
			t[i] = (struct er_target){.objkey = objkeys[i], .want_object = true};
		enum etcd_err e = er_read_targets(es, component, t, n, NULL, NULL);
		struct er_plan p = {0};
		long gone = 0;
		for (size_t i = 0; e == ETCD_OK && i < n; i++)
			if (!t[i].object.n) {
				er_plan_release(es, &p, component, objkeys[i], &t[i]);
				gone++;
			}
		bool ok = true;
		if (e == ETCD_OK && p.nops)
			e = er_plan_run(es, &p, &ok);
		er_plan_free(&p);
		er_targets_free(t, n);
		if (e != ETCD_OK)
			return -1;
		if (ok)
			return gone;
		er_backoff(es, attempt);
	}
	return -1;
}

/* Tombstones stamped before cutoff, removed in guarded Txns (one that
 * changed meanwhile is left for the next round). */
static long gc_tombstones(struct etcd_store *es, long long cutoff)
{
	struct buf from = BUF_INIT, end = BUF_INIT;
	long removed = 0;
	if (buf_printf(&from, "%s/m/", es->side) < 0 ||
	    etcd_prefix_end(from.data, from.len, &end) < 0)
		removed = -1;
	while (removed >= 0) {
		struct etcd_range_opts o = {end.data, end.len, 100, 0, false, false};
		struct etcd_range_result r;
		if (etcd_range(es->c, from.data, from.len, &o, &r) != ETCD_OK) {
			removed = -1;
			break;
		}
		struct er_plan p = {0};
		for (size_t i = 0; i < r.n; i++) {
			struct er_meta m = {0};
			if (er_meta_parse(es, &r.kvs[i], &m) == 0 && er_meta_is_tombstone(&m) &&
			    m.deleted_at < cutoff) {
				er_plan_same(&p, r.kvs[i].key, r.kvs[i].mod_revision);
				er_plan_delete(&p, r.kvs[i].key);
			}
			er_meta_free(&m);
		}
		bool ok = true;
		if (p.nops && er_plan_run(es, &p, &ok) != ETCD_OK)
			removed = -1;
		else if (ok)
			removed += (long)p.nops;
		er_plan_free(&p);
		bool more = r.more && r.n;
		if (more) {
			buf_reset(&from);
			if (buf_append(&from, r.kvs[r.n - 1].key, r.kvs[r.n - 1].key_len) < 0 ||
			    buf_append_char(&from, '\0') < 0)
				removed = -1;
		}
		etcd_range_result_free(&r);
		if (!more)
			break;
	}
	buf_free(&from);
	buf_free(&end);
	return removed;
}

long etcd_store_gc(struct store *s, long tombstone_age_s)
{
	struct etcd_store *es = es_of(s);
	long removed = gc_tombstones(es, (long long)time(NULL) - tombstone_age_s);
	struct er_keys comps = {0};
	struct buf prefix = BUF_INIT, end = BUF_INIT;
	if (removed >= 0 && (buf_printf(&prefix, "%s/c/%s/", es->side, es->node) < 0 ||
			     etcd_prefix_end(prefix.data, prefix.len, &end) < 0))
		removed = -1;
	struct etcd_range_opts o = {end.data, end.len, 0, 0, true, false};
	struct etcd_range_result r = {0};
	if (removed >= 0 && etcd_range(es->c, prefix.data, prefix.len, &o, &r) != ETCD_OK)
		removed = -1;
	for (size_t i = 0; removed >= 0 && i < r.n; i++) {
		size_t len;
		const char *comp = er_key_rest(&r.kvs[i], prefix.data, prefix.len, &len);
		if (comp && er_keys_add(&comps, comp, len) < 0)
			removed = -1;
	}
	etcd_range_result_free(&r);
	for (size_t c = 0; removed >= 0 && c < comps.n; c++) {
		struct er_keys held = {0};
		if (er_held_keys(es, comps.v[c], "", &held) != ETCD_OK)
			removed = -1;
		for (size_t off = 0; removed >= 0 && off < held.n; off += ER_BATCH) {
			size_t cnt = held.n - off < ER_BATCH ? held.n - off : ER_BATCH;
			long g = gc_batch(es, comps.v[c], held.v + off, cnt);
			removed = g < 0 ? -1 : removed + g;
		}
		er_keys_free(&held);
	}
	er_keys_free(&comps);
	buf_free(&prefix);
	buf_free(&end);
	return removed;
}
