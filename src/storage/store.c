/*
 * store.c - the calls the hub makes on a store, dispatched through the
 * backend's ops table, the contract's error texts, and the checks every
 * backend shares.
 */
#include "storage/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/stream.h"
#include "storage/key.h"
#include "util/json_scan.h"
#include "util/log.h"
#include "util/strmap.h"

static _Thread_local int last_errno;

const char *store_strerror(enum store_err e)
{
	switch (e) {
	case STORE_OK:
		return "ok";
	case STORE_NOT_FOUND:
		return "not found";
	case STORE_EXISTS:
		return "key exists";
	case STORE_EMPTY_KEY:
		return "key is empty";
	case STORE_EMPTY_CONTENT:
		return "key has no content";
	case STORE_CONFLICT:
		return "update conflict: stored object is newer";
	case STORE_INVALID_CONTENT:
		return "invalid content";
	case STORE_BAD_KEY:
		return "unrecognised or unsafe key";
	case STORE_IO:
		return "I/O error";
	case STORE_UNAVAILABLE:
		return "storage backend unavailable";
	case STORE_NOMEM:
		return "out of memory";
	case STORE_DAMAGED:
		return "the stored copy is damaged";
	}
	return "unknown store error";
}

int store_errno(void)
{
	return last_errno;
}

enum store_err store_fail_errno(int err)
{
	if (err < 0)
		err = -err;
	if (err == ENOMEM)
		return STORE_NOMEM;
	last_errno = err;
	return STORE_IO;
}

/* ---- damaged objects ---- */

/* A kube-apiserver's storage encoding: "k8s\0", then a protobuf Unknown. */
static const char PROTOBUF_MAGIC[4] = {'k', '8', 's', '\0'};

/* What one pass over an object's bytes finds of its identity.  The scan
 * descends only into the top-level "metadata" object; every other
 * container is checked by json_scan without a call per token. */
struct identity_scan {
	const char *name, *ns; /* what the key says */
	size_t depth;	       /* containers open */
	bool top_map;	       /* the document is an object */
	bool in_metadata;      /* depth 2 is the top-level "metadata" object */
	bool metadata_next;    /* the last depth-1 key was "metadata" */
	enum { ID_NONE, ID_NAME, ID_NAMESPACE } field; /* the depth-2 key just seen */
	bool has_name, name_ok, ns_ok;
};

static bool token_is(const char *s, size_t len, const char *want)
{
	return len == strlen(want) && (!len || !memcmp(s, want, len)); /* s may be NULL if empty */
}

static int identity_token(void *ctx, enum json_token t, const char *s, size_t len)
{
	struct identity_scan *id = ctx;
	if (id->depth == 0 && t != JSON_MAP_START)
		return JSON_SCAN_STOP; /* not an object */
	switch (t) {
	case JSON_MAP_START:
	case JSON_ARRAY_START: {
		bool metadata = id->depth == 1 && id->metadata_next && t == JSON_MAP_START;
		id->metadata_next = false;
		id->field = ID_NONE;
		if (id->depth++ == 0) {
			id->top_map = true;
			return JSON_SCAN_GO;
		}
		if (metadata) {
			id->in_metadata = true;
			return JSON_SCAN_GO;
		}
		return JSON_SCAN_SKIP;
	}
	case JSON_MAP_END:
	case JSON_ARRAY_END:
		if (--id->depth == 1)
			id->in_metadata = false;
		return JSON_SCAN_GO;
	case JSON_KEY:
		if (id->depth == 1)
			id->metadata_next = token_is(s, len, "metadata");
		else if (id->in_metadata)
			id->field = token_is(s, len, "name")	    ? ID_NAME
				    : token_is(s, len, "namespace") ? ID_NAMESPACE
								    : ID_NONE;
		return JSON_SCAN_GO;
	case JSON_STRING:
		/* the last of duplicate keys counts; a NUL never matches */
		if (id->in_metadata && id->depth == 2 && id->field == ID_NAME) {
			id->has_name = len > 0;
			id->name_ok = token_is(s, len, id->name) && (!len || !memchr(s, '\0', len));
		} else if (id->in_metadata && id->depth == 2 && id->field == ID_NAMESPACE) {
			id->ns_ok = !len || !id->ns || token_is(s, len, id->ns);
		}
		break;
	default:
		break;
	}
	id->metadata_next = false;
	id->field = ID_NONE;
	return JSON_SCAN_GO;
}

const char *store_object_fault(const char *ns, const char *name, const char *data, size_t len)
{
	static const struct json_scan_limits limits = {
	    .depth_max = STREAM_DEPTH_MAX,
	    .gap_max = (unsigned long long)-1, /* the bytes are all here */
	    .number_max = 4096,
	};
	if (!data || !len)
		return "empty";
	if (len >= sizeof PROTOBUF_MAGIC && !memcmp(data, PROTOBUF_MAGIC, sizeof PROTOBUF_MAGIC))
		return "protobuf written by a kube-apiserver, not JSON";
	struct identity_scan id = {
	    .name = name ? name : "", .ns = ns && *ns ? ns : NULL, .ns_ok = true};
	struct json_scan *js = json_scan_new(&limits, false, identity_token, &id);
	if (!js)
		return NULL; /* out of memory: not a verdict on the bytes */
	int rc = json_scan_feed(js, data, len);
	rc = rc ? rc : json_scan_finish(js);
	json_scan_free(js);
	if (rc < 0 || !id.top_map)
		return "not a single JSON object";
	if (!id.has_name)
		return "no metadata.name";
	if (!id.name_ok)
		return "metadata.name differs from the key's name";
	if (id.ns && !id.ns_ok)
		return "metadata.namespace differs from the key's namespace";
	return NULL;
}

/* Keys read damaged, until a list rewrites them: "<store>\n<component>\n
 * <group>\n<resource>\n<namespace>\n<name>", the component left empty
 * where one copy serves every component (etcd).  Bounded: past the bound a
 * damaged read is still skipped and counted, but no longer logged nor
 * remembered (a relist then rewrites it only if its rv changed). */
#define DAMAGE_KEYS_MAX 4096

static pthread_mutex_t damage_mu = PTHREAD_MUTEX_INITIALIZER;
static struct strmap damaged_keys = STRMAP_INIT;
static bool damage_full_logged;
static _Atomic uint64_t damaged_reads;

uint64_t store_damaged_reads(void)
{
	return atomic_load(&damaged_reads);
}

static int damage_id(struct buf *b, const struct store *s, const char *component, const char *group,
		     const char *resource, const char *ns, const char *name)
{
	if (s->ops->shares_objects)
		component = ""; /* any component's list rewrites the one copy */
	return buf_printf(b, "%p\n%s\n%s\n%s\n%s\n%s", (const void *)s, component ? component : "",
			  group ? group : "", resource ? resource : "", ns ? ns : "",
			  name ? name : "");
}

/* Count, remember and (the first time) log a damaged read. */
static void damage_note(struct store *s, const char *component, const char *group,
			const char *resource, const char *ns, const char *name, const char *why)
{
	atomic_fetch_add(&damaged_reads, 1);
	struct buf id = BUF_INIT;
	if (damage_id(&id, s, component, group, resource, ns, name) < 0) {
		buf_free(&id);
		return;
	}
	bool first = false, full = false;
	pthread_mutex_lock(&damage_mu);
	if (strmap_get(&damaged_keys, id.data)) {
		/* logged already */
	} else if (damaged_keys.len < DAMAGE_KEYS_MAX) {
		first = strmap_put(&damaged_keys, id.data, NULL) != NULL;
	} else if (!damage_full_logged) {
		damage_full_logged = full = true;
	}
	pthread_mutex_unlock(&damage_mu);
	buf_free(&id);
	if (first)
		log_warn("store: %s%s%s %s%s%s is damaged (%s; read for %s): not served; the next "
			 "list of it rewrites it",
			 resource ? resource : "", group && *group ? "." : "", group ? group : "",
			 ns && *ns ? ns : "", ns && *ns ? "/" : "", name ? name : "", why,
			 component ? component : "");
	if (full)
		log_warn("store: more than %d damaged objects: the others are skipped and counted "
			 "(yurthub_store_damaged_reads_total), not logged",
			 DAMAGE_KEYS_MAX);
}

static bool read_ok(struct store *s, const char *component, const char *group, const char *resource,
		    const char *ns, const char *name, const char *data, size_t len)
{
	const char *why = store_object_fault(ns, name, data, len);
	if (why)
		damage_note(s, component, group, resource, ns, name, why);
	return !why;
}

bool store_damage_take(struct store *s, const char *component, const char *group,
		       const char *resource, const char *ns, const char *name)
{
	if (!atomic_load(&damaged_reads))
		return false; /* the common case: nothing was ever damaged */
	struct buf id = BUF_INIT;
	bool was = false;
	if (damage_id(&id, s, component, group, resource, ns, name) == 0) {
		pthread_mutex_lock(&damage_mu);
		was = strmap_get(&damaged_keys, id.data) != NULL;
		if (was)
			strmap_del(&damaged_keys, id.data);
		pthread_mutex_unlock(&damage_mu);
	}
	buf_free(&id);
	return was;
}

/* A closed store's keys: another store may get its address. */
static void damage_forget_store(const struct store *s)
{
	char prefix[32];
	int n = snprintf(prefix, sizeof prefix, "%p\n", (const void *)s);
	if (n < 0 || (size_t)n >= sizeof prefix)
		return;
	pthread_mutex_lock(&damage_mu);
	for (;;) {
		struct strmap_entry *e;
		size_t i = 0;
		while ((e = strmap_next(&damaged_keys, &i)) && strncmp(e->key, prefix, (size_t)n))
			;
		if (!e)
			break;
		strmap_del(&damaged_keys, e->key);
	}
	if (!damaged_keys.len)
		strmap_free(&damaged_keys); /* the table too */
	pthread_mutex_unlock(&damage_mu);
}

void store_view_state_free(struct store_view_state *s)
{
	if (!s)
		return;
	free(s->namespace);
	free(s->label_selector);
	free(s->field_selector);
	s->namespace = s->label_selector = s->field_selector = NULL;
}

enum store_err store_key_build(struct store *s, const struct store_key_info *info,
			       struct store_key *out)
{
	return s->ops->key_build(s, info, out);
}

enum store_err store_create(struct store *s, const struct store_key *key, const char *data,
			    size_t len)
{
	return s->ops->create(s, key, data, len);
}

enum store_err store_delete(struct store *s, const struct store_key *key)
{
	return s->ops->delete (s, key);
}

enum store_err store_get(struct store *s, const struct store_key *key, struct buf *out)
{
	enum store_err e = s->ops->get(s, key, out);
	if (e == STORE_OK && !read_ok(s, key->component, key->group, key->resource, key->namespace,
				      key->name, out->data, out->len)) {
		buf_reset(out);
		e = STORE_DAMAGED;
	}
	return e;
}

struct checked_list {
	struct store *s;
	const struct store_key *root;
	store_object_fn fn;
	void *ctx;
};

static int checked_object(void *ctx, const struct store_key *key, const char *data, size_t len)
{
	struct checked_list *c = ctx;
	const struct store_key *r = c->root;
	if (!read_ok(c->s, r->component, r->group, r->resource, key->namespace, key->name, data,
		     len))
		return 0;
	return c->fn(c->ctx, key, data, len);
}

enum store_err store_list(struct store *s, const struct store_key *root, store_object_fn fn,
			  void *ctx)
{
	struct checked_list c = {s, root, fn, ctx};
	return s->ops->list(s, root, checked_object, &c);
}

enum store_err store_update(struct store *s, const struct store_key *key, const char *data,
			    size_t len, uint64_t rv, struct buf *stored)
{
	return s->ops->update(s, key, data, len, rv, stored);
}

enum store_err store_replace_begin(struct store *s, const struct store_view *view,
				   struct store_replace **out)
{
	return s->ops->replace_begin(s, view, out);
}

enum store_err store_replace_add(struct store_replace *r, const struct store_item *item)
{
	return r->store->ops->replace_add(r, item);
}

enum store_err store_replace_commit(struct store_replace *r, uint64_t list_rv)
{
	return r->store->ops->replace_commit(r, list_rv);
}

void store_replace_abort(struct store_replace *r)
{
	if (r)
		r->store->ops->replace_abort(r);
}

enum store_err store_item_check(const struct store_item *it, const char *view_ns,
				bool is_ns_resource)
{
	const char *ns = it->namespace && !is_ns_resource ? it->namespace : "";
	if (!it->name || !key_segment_ok(it->name, KEY_NAME_MAX))
		return STORE_BAD_KEY;
	if (*ns && !key_segment_ok(ns, KEY_NAME_MAX))
		return STORE_BAD_KEY;
	if (*view_ns && !is_ns_resource && strcmp(ns, view_ns))
		return STORE_INVALID_CONTENT; /* not under the view's root */
	if (!it->data || !it->len)
		return STORE_EMPTY_CONTENT;
	return STORE_OK;
}

enum store_err store_replace_view(struct store *s, const struct store_view *view, uint64_t list_rv,
				  const struct store_item *items, size_t n)
{
	struct store_replace *r;
	enum store_err e = store_replace_begin(s, view, &r);
	if (e != STORE_OK)
		return e;
	for (size_t i = 0; e == STORE_OK && i < n; i++)
		e = store_replace_add(r, &items[i]);
	if (e != STORE_OK) {
		store_replace_abort(r);
		return e;
	}
	return store_replace_commit(r, list_rv);
}

enum store_err store_view_event(struct store *s, const struct store_view *view,
				const struct store_key *key, enum store_event type,
				const char *data, size_t len, uint64_t rv)
{
	return s->ops->view_event(s, view, key, type, data, len, rv);
}

enum store_err store_get_view(struct store *s, const struct store_view *view,
			      struct store_view_state *out)
{
	return s->ops->get_view(s, view, out);
}

enum store_err store_set_view_rv(struct store *s, const struct store_view *view, uint64_t rv)
{
	return s->ops->set_view_rv(s, view, rv);
}

enum store_err store_list_views(struct store *s, const char *component, const struct store_gvr *gvr,
				store_view_fn fn, void *ctx)
{
	return s->ops->list_views(s, component, gvr, fn, ctx);
}

enum store_err store_list_keys(struct store *s, const char *component, const struct store_gvr *gvr,
			       store_key_fn fn, void *ctx)
{
	return s->ops->list_keys(s, component, gvr, fn, ctx);
}

enum store_err store_delete_component(struct store *s, const char *component)
{
	return s->ops->delete_component(s, component);
}

enum store_err store_list_components(struct store *s, store_name_fn fn, void *ctx)
{
	return s->ops->list_components(s, fn, ctx);
}

enum store_err store_count_objects(struct store *s, uint64_t *out)
{
	/* An optional op: no new error value for it, the errno says why. */
	if (!s->ops->count_objects)
		return store_fail_errno(ENOTSUP);
	return s->ops->count_objects(s, out);
}

/* What an iterator's keys leave out (they only name namespace and name):
 * the collection its objects are checked against. */
struct store_read_scope {
	char *component, *group, *resource;
};

static void scope_free(struct store_read_scope *sc)
{
	if (!sc)
		return;
	free(sc->component);
	free(sc->group);
	free(sc->resource);
	free(sc);
}

static enum store_err iter_scoped(const struct store_key *root, enum store_err e,
				  struct store_iter **out)
{
	if (e != STORE_OK)
		return e;
	struct store_read_scope *sc = calloc(1, sizeof *sc);
	if (sc && (!(sc->component = strdup(root->component ? root->component : "")) ||
		   !(sc->group = strdup(root->group ? root->group : "")) ||
		   !(sc->resource = strdup(root->resource ? root->resource : "")))) {
		scope_free(sc);
		sc = NULL;
	}
	if (!sc) {
		(*out)->store->ops->iter_free(*out);
		*out = NULL;
		return STORE_NOMEM;
	}
	(*out)->scope = sc;
	return STORE_OK;
}

enum store_err store_iter_begin(struct store *s, const struct store_key *root,
				const char *start_after, struct store_iter **out)
{
	return iter_scoped(root, s->ops->iter_begin(s, root, start_after, out), out);
}

enum store_err store_iter_begin_matching(struct store *s, const struct store_key *root,
					 const char *start_after, const struct store_match *match,
					 struct store_iter **out)
{
	if (!s->ops->iter_begin_matching || !match)
		return store_iter_begin(s, root, start_after, out);
	return iter_scoped(root, s->ops->iter_begin_matching(s, root, start_after, match, out),
			   out);
}

enum store_err store_iter_next(struct store_iter *it, const struct store_key **key, struct buf *out)
{
	const struct store_read_scope *sc = it->scope;
	for (;;) {
		enum store_err e = it->store->ops->iter_next(it, key, out);
		if (e != STORE_OK || !sc ||
		    read_ok(it->store, sc->component, sc->group, sc->resource, (*key)->namespace,
			    (*key)->name, out->data, out->len))
			return e;
	}
}

void store_iter_free(struct store_iter *it)
{
	if (!it)
		return;
	scope_free(it->scope);
	it->scope = NULL;
	it->store->ops->iter_free(it);
}

/* ---- the scrub ---- */

static _Atomic uint64_t scrubs_done;

uint64_t store_scrubs_done(void)
{
	return atomic_load(&scrubs_done);
}

/* Names gathered before they are walked: a visitor must not call the store
 * back (the disk store lists under no lock, etcd a page at a time, but
 * neither promises it). */
struct name_set {
	struct strmap map;
	bool oom;
};

static int name_into_set(void *ctx, const char *name)
{
	struct name_set *set = ctx;
	if (strmap_put(&set->map, name, NULL))
		return 0;
	set->oom = true;
	return 1;
}

/* Every object of the component's collection named by resdir, through the
 * backend's own iterator (pages of it, not the collection in memory), each
 * checked as a read checks it. */
static enum store_err scrub_collection(struct store *s, const char *component, const char *resdir,
				       const atomic_bool *cancel, struct store_scrub_stats *st)
{
	char *res, *ver, *grp;
	if (key_parse_resource_dir(resdir, &res, &ver, &grp) < 0)
		return STORE_OK; /* not a collection of the hub's */
	struct store_key_info info = {component, grp, ver, res, "", ""};
	struct store_key root;
	struct store_iter *it = NULL;
	enum store_err e = store_key_build(s, &info, &root);
	if (e == STORE_BAD_KEY || e == STORE_EMPTY_KEY)
		e = STORE_NOT_FOUND; /* a directory this store would not have made */
	else if (e == STORE_OK)
		e = s->ops->iter_begin(s, &root, NULL, &it);
	struct buf data = BUF_INIT;
	const struct store_key *k;
	while (e == STORE_OK && !(cancel && atomic_load(cancel)) &&
	       (e = s->ops->iter_next(it, &k, &data)) == STORE_OK) {
		st->objects++;
		st->bytes += data.len;
		if (!read_ok(s, component, grp, res, k->namespace, k->name, data.data, data.len))
			st->damaged++;
	}
	if (it)
		s->ops->iter_free(it);
	store_key_free(&root);
	buf_free(&data);
	free(res);
	free(ver);
	free(grp);
	if (e == STORE_OK || e == STORE_NOT_FOUND) /* the end, or a collection gone meanwhile */
		e = cancel && atomic_load(cancel) ? STORE_UNAVAILABLE : STORE_OK;
	return e;
}

enum store_err store_scrub(struct store *s, const atomic_bool *cancel,
			   struct store_scrub_stats *stats)
{
	struct store_scrub_stats st = {0, 0, 0};
	if (stats)
		*stats = st;
	/* An optional op: no new error value for it, the errno says why. */
	if (!s->ops->list_resources)
		return store_fail_errno(ENOTSUP);
	struct name_set comps = {STRMAP_INIT, false};
	enum store_err e = store_list_components(s, name_into_set, &comps), first = STORE_OK;
	if (e == STORE_OK && comps.oom)
		e = STORE_NOMEM;
	struct strmap_entry *c;
	for (size_t i = 0; e == STORE_OK && (c = strmap_next(&comps.map, &i));) {
		struct name_set res = {STRMAP_INIT, false};
		e = s->ops->list_resources(s, c->key, name_into_set, &res);
		if (e == STORE_NOT_FOUND)
			e = STORE_OK; /* deleted meanwhile */
		if (e == STORE_OK && res.oom)
			e = STORE_NOMEM;
		struct strmap_entry *r;
		for (size_t j = 0; e == STORE_OK && (r = strmap_next(&res.map, &j));) {
			e = scrub_collection(s, c->key, r->key, cancel, &st);
			/* one unreadable collection (a disk's EIO) does not stop
			 * the others; etcd away or no memory does */
			if (e != STORE_OK && e != STORE_UNAVAILABLE && e != STORE_NOMEM) {
				first = first != STORE_OK ? first : e;
				e = STORE_OK;
			}
		}
		strmap_free(&res.map);
	}
	strmap_free(&comps.map);
	e = e != STORE_OK ? e : first;
	if (e == STORE_OK)
		atomic_fetch_add(&scrubs_done, 1);
	if (stats)
		*stats = st;
	return e;
}

enum store_err store_save_cluster_info(struct store *s, const char *url_path, const char *data,
				       size_t len)
{
	return s->ops->save_cluster_info(s, url_path, data, len);
}

enum store_err store_get_cluster_info(struct store *s, const char *url_path, struct buf *out)
{
	return s->ops->get_cluster_info(s, url_path, out);
}

void store_close(struct store *s)
{
	if (!s)
		return;
	damage_forget_store(s);
	s->ops->close(s);
}
