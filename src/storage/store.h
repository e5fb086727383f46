/*
 * store.h - the storage contract.
 *
 * Every backend (disk.c, etcd.c) fills one `struct store_ops` table, like
 * SQLite's VFS; the cache layer above only ever calls the store_*() wrappers
 * at the bottom of this file.  The contract (docs/contracts.md §2):
 *
 *  - Keys are built from (component, group, version, resource, namespace,
 *    name).  An empty name gives a "root key": the collection that holds the
 *    objects of a resource (optionally of one namespace).
 *  - Objects are JSON documents, stored as the cloud sent them.
 *  - update() never lets an older resourceVersion replace a newer one; equal
 *    is accepted.  On conflict it returns STORE_CONFLICT and the stored bytes.
 *  - Lists are *views*: (component, gvr, namespace or all, label selector,
 *    field selector).  A view that was listed and came back empty is
 *    different from one never listed.  A replace is a session (begin, add
 *    per object, commit or abort) so that a list can be stored while it
 *    streams past, never held whole in memory.
 *  - A component holds an object for reasons: the views whose last list or
 *    whose watch delivered it (the view's membership), and its own
 *    single-object reads and writes (create, update).  The rules that keep
 *    cached data from outliving the cloud's deletion:
 *      replace of view V with list L at rv R: the component holds every
 *        object of L (never regressing one stored at a newer rv), V's
 *        membership becomes L, and V's list is recorded at R.  An object the
 *        component holds in V's collection that L lacks is dropped when its
 *        stored copy matches V's selectors and its rv is not newer than R:
 *        the list proves that copy stale, whatever other views say (if the
 *        object lives on, changed, their own watch or list brings the new
 *        copy).  Otherwise it only leaves V's membership, and stays while
 *        another reason holds it.
 *      a watch event of V (view_event): ADDED/MODIFIED write the object in
 *        rv order and make it a member of V (RESTORE: whatever the order,
 *        for the cloud's copy over the hub's own offline edit); DELETED at
 *        rv E means the object
 *        is gone for every view: the component's copy goes, unless the stored
 *        copy is at E or newer (another view already delivered the version
 *        that left V's selector, or a newer incarnation) - then it only
 *        leaves V's membership.
 *    How a backend records membership is its own: the disk store keeps one
 *    copy per component, written only by that component's views and reads,
 *    so the selectors evaluated on that copy are its membership; etcd shares
 *    objects between components and nodes and records the reasons beside
 *    each holding (docs/etcd-store.md).
 *  - Cluster info (/version, discovery documents) is kept by URL path.
 *
 * Errors are the distinct values of enum store_err.  Calls are thread-safe.
 */
#ifndef YURTHUB_STORAGE_STORE_H
#define YURTHUB_STORAGE_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

enum store_err {
	STORE_OK = 0,
	STORE_NOT_FOUND,       /* no such key, view or cluster info */
	STORE_EXISTS,	       /* create() of a key that is present */
	STORE_EMPTY_KEY,       /* component or resource missing, or an object key without name */
	STORE_EMPTY_CONTENT,   /* no bytes to store, or the key names a collection */
	STORE_CONFLICT,	       /* update() with an rv older than the stored one */
	STORE_INVALID_CONTENT, /* content not under the root, or not a JSON object */
	STORE_BAD_KEY,	       /* unrecognised key: unsafe name (.., /, NUL, too long) */
	STORE_IO,	       /* the system said no (errno kept in store_errno()) */
	STORE_UNAVAILABLE,     /* the backend cannot be reached (etcd down) */
	STORE_NOMEM,
	STORE_DAMAGED, /* what is stored at the key is not the object it names (store_object_fault)
			*/
};

const char *store_strerror(enum store_err e);
/* errno of the last STORE_IO returned on this thread. */
int store_errno(void);

/* What a key is built from.  Strings are borrowed; "" and NULL both mean empty. */
struct store_key_info {
	const char *component;
	const char *group; /* "" for the core group */
	const char *version;
	const char *resource;
	const char *namespace;
	const char *name; /* empty: root key of the collection */
};

/* A key as one backend lays it out.  Owns its strings; free with store_key_free. */
struct store_key {
	char *path; /* backend layout, e.g. "kubelet/pods.v1.core/default/web-0" */
	char *component, *group, *version, *resource, *namespace, *name;
	int is_root;
};

void store_key_free(struct store_key *k);

struct store_gvr {
	const char *group; /* "" for core */
	const char *version;
	const char *resource;
};

/* A list view.  Selectors are given as the client sent them; the store keeps
 * them in canonical form so that equal selectors compare equal. */
struct store_view {
	const char *component;
	struct store_gvr gvr;
	const char *namespace;	    /* "" = all namespaces (or cluster-scoped) */
	const char *label_selector; /* "" = none */
	const char *field_selector; /* "" = none */
};

/* One object of a list, as the cache layer extracted it from the response. */
struct store_item {
	const char *namespace; /* "" for cluster-scoped objects */
	const char *name;
	uint64_t rv;
	const char *data;
	size_t len;
};

/* A replace in progress.  Every backend's session starts with this. */
struct store_replace {
	struct store *store;
};

/* What a view's watch says of an object. */
enum store_event {
	STORE_EVENT_PUT,     /* ADDED or MODIFIED */
	STORE_EVENT_DELETED, /* DELETED */
	/* The cloud's copy of an object the hub changed itself while offline
	 * (cache/local_changes.h): written as a PUT, but whatever the rv of the
	 * stored copy or of its deletion, which was the hub's own.  view may
	 * be NULL: the copy of a single-object read, as update() keeps it. */
	STORE_EVENT_RESTORE,
};

/* What the store knows of a view. */
struct store_view_state {
	char *namespace, *label_selector, *field_selector; /* canonical, owned */
	uint64_t rv;					   /* the list's rv, raised by bookmarks */
};

void store_view_state_free(struct store_view_state *s);

/* Visitors return 0 to go on, non-zero to stop (the call then returns STORE_OK). */
typedef int (*store_object_fn)(void *ctx, const struct store_key *key, const char *data,
			       size_t len);
typedef int (*store_key_fn)(void *ctx, const struct store_key *key);
typedef int (*store_view_fn)(void *ctx, const struct store_view_state *view);
typedef int (*store_name_fn)(void *ctx, const char *name);

/* An iterator over the objects under a root key, in (namespace, name)
 * order, for answers streamed a page at a time.  Backend-specific; starts
 * with this. */
struct store_iter {
	struct store *store;
	struct store_read_scope *scope; /* set and freed by the store_iter_* wrappers */
};

struct store;
struct selector;

/* The selectors a caller of an iterator applies (either may be NULL). */
struct store_match {
	const struct selector *labels, *fields;
};

struct store_ops {
	const char *name;
	/* One copy of an object serves every component (etcd): a damaged
	 * object is one, whichever component reads it. */
	bool shares_objects;
	enum store_err (*key_build)(struct store *s, const struct store_key_info *info,
				    struct store_key *out);
	enum store_err (*create)(struct store *s, const struct store_key *key, const char *data,
				 size_t len);
	enum store_err (*delete)(struct store *s, const struct store_key *key);
	enum store_err (*get)(struct store *s, const struct store_key *key, struct buf *out);
	enum store_err (*list)(struct store *s, const struct store_key *root, store_object_fn fn,
			       void *ctx);
	enum store_err (*update)(struct store *s, const struct store_key *key, const char *data,
				 size_t len, uint64_t rv, struct buf *stored);
	/* A view replace: begin, add each listed object (in list order; a name
	 * listed twice: the later copy wins), then commit with the list's rv,
	 * or abort.  Nothing is visible before commit (the disk store shows the
	 * whole new view at once; etcd may apply guarded parts as it goes, each
	 * safe on its own).  commit and abort free the session. */
	enum store_err (*replace_begin)(struct store *s, const struct store_view *view,
					struct store_replace **out);
	enum store_err (*replace_add)(struct store_replace *r, const struct store_item *item);
	enum store_err (*replace_commit)(struct store_replace *r, uint64_t list_rv);
	void (*replace_abort)(struct store_replace *r);
	/* One event of view's watch for the object at key: PUT (ADDED or
	 * MODIFIED) with the object's bytes and rv, or DELETED with the rv of
	 * the event (data may be NULL).  See the rules above; an object older
	 * than the stored copy (or than its deletion) is not an error. */
	enum store_err (*view_event)(struct store *s, const struct store_view *view,
				     const struct store_key *key, enum store_event type,
				     const char *data, size_t len, uint64_t rv);
	enum store_err (*get_view)(struct store *s, const struct store_view *view,
				   struct store_view_state *out);
	enum store_err (*set_view_rv)(struct store *s, const struct store_view *view, uint64_t rv);
	enum store_err (*list_views)(struct store *s, const char *component,
				     const struct store_gvr *gvr, store_view_fn fn, void *ctx);
	enum store_err (*list_keys)(struct store *s, const char *component,
				    const struct store_gvr *gvr, store_key_fn fn, void *ctx);
	enum store_err (*delete_component)(struct store *s, const char *component);
	/* Components that have anything cached. */
	enum store_err (*list_components)(struct store *s, store_name_fn fn, void *ctx);
	/* The collections the component has cached objects of, as resource
	 * directories "RESOURCE.VERSION.GROUP" (key_parse_resource_dir; a
	 * legacy disk layout's bare resource reads as the core group), for
	 * store_scrub.  May be NULL: that backend is not scrubbed. */
	enum store_err (*list_resources)(struct store *s, const char *component, store_name_fn fn,
					 void *ctx);
	/* How many objects this node holds, over all its components: an
	 * object held by two components counts twice (each holds its own
	 * copy or record).  Cluster info is not counted.  Takes no lock that
	 * writers wait on for long, so a count made while writes happen may be
	 * off by what they change.  May be NULL (the wrapper then fails). */
	enum store_err (*count_objects)(struct store *s, uint64_t *out);
	/* Objects under root, after the object "namespace/name" (or "name")
	 * given as start_after (NULL or "": from the first).  iter_next gives
	 * the next key (valid until the next call; only its namespace and name
	 * describe the object) and the object's bytes in out (reset first),
	 * STORE_NOT_FOUND at the end.  Objects written or
	 * removed meanwhile may or may not be seen; none is seen twice. */
	enum store_err (*iter_begin)(struct store *s, const struct store_key *root,
				     const char *start_after, struct store_iter **out);
	enum store_err (*iter_next)(struct store_iter *it, const struct store_key **key,
				    struct buf *out);
	void (*iter_free)(struct store_iter *it);
	/* iter_begin for a caller that keeps only the objects matching the
	 * selectors of match: the backend may leave out objects that surely do
	 * not match, without reading them (the caller still checks what it
	 * gets).  The selectors must outlive the iterator: a backend may read
	 * page by page.  May be NULL: iter_begin is used. */
	enum store_err (*iter_begin_matching)(struct store *s, const struct store_key *root,
					      const char *start_after,
					      const struct store_match *match,
					      struct store_iter **out);
	enum store_err (*save_cluster_info)(struct store *s, const char *url_path, const char *data,
					    size_t len);
	enum store_err (*get_cluster_info)(struct store *s, const char *url_path, struct buf *out);
	void (*close)(struct store *s);
};

/* Every backend's handle starts with this. */
struct store {
	const struct store_ops *ops;
};

/* ---- the calls the rest of the hub makes ---- */

enum store_err store_key_build(struct store *s, const struct store_key_info *info,
			       struct store_key *out);
enum store_err store_create(struct store *s, const struct store_key *key, const char *data,
			    size_t len);
enum store_err store_delete(struct store *s, const struct store_key *key);
enum store_err store_get(struct store *s, const struct store_key *key, struct buf *out);
enum store_err store_list(struct store *s, const struct store_key *root, store_object_fn fn,
			  void *ctx);
enum store_err store_update(struct store *s, const struct store_key *key, const char *data,
			    size_t len, uint64_t rv, struct buf *stored);
enum store_err store_replace_begin(struct store *s, const struct store_view *view,
				   struct store_replace **out);
enum store_err store_replace_add(struct store_replace *r, const struct store_item *item);
enum store_err store_replace_commit(struct store_replace *r, uint64_t list_rv);
void store_replace_abort(struct store_replace *r);
/* Whether an item may go into a replace of the view rooted at namespace
 * view_ns ("" for all): names that can be keys, inside that namespace,
 * with content.  For the namespaces resource (is_ns_resource) the item's own
 * namespace field means nothing and is ignored.  Every backend's
 * replace_add checks this first, and an item it refuses (STORE_BAD_KEY,
 * STORE_INVALID_CONTENT, STORE_EMPTY_CONTENT) leaves the session as it
 * was: the caller may skip that item and go on with the list (the cache
 * does: one odd object does not cost a view every other one). */
enum store_err store_item_check(const struct store_item *it, const char *view_ns,
				bool is_ns_resource);
/* The whole replace in one call, for lists already in memory. */
enum store_err store_replace_view(struct store *s, const struct store_view *view, uint64_t list_rv,
				  const struct store_item *items, size_t n);
enum store_err store_view_event(struct store *s, const struct store_view *view,
				const struct store_key *key, enum store_event type,
				const char *data, size_t len, uint64_t rv);
enum store_err store_get_view(struct store *s, const struct store_view *view,
			      struct store_view_state *out);
enum store_err store_set_view_rv(struct store *s, const struct store_view *view, uint64_t rv);
enum store_err store_list_views(struct store *s, const char *component, const struct store_gvr *gvr,
				store_view_fn fn, void *ctx);
enum store_err store_list_keys(struct store *s, const char *component, const struct store_gvr *gvr,
			       store_key_fn fn, void *ctx);
enum store_err store_delete_component(struct store *s, const char *component);
enum store_err store_list_components(struct store *s, store_name_fn fn, void *ctx);
/* See store_ops.count_objects; STORE_IO with store_errno() ENOTSUP for a
 * backend without it. */
enum store_err store_count_objects(struct store *s, uint64_t *out);
enum store_err store_iter_begin(struct store *s, const struct store_key *root,
				const char *start_after, struct store_iter **out);
/* See store_ops.iter_begin_matching. */
enum store_err store_iter_begin_matching(struct store *s, const struct store_key *root,
					 const char *start_after, const struct store_match *match,
					 struct store_iter **out);
enum store_err store_iter_next(struct store_iter *it, const struct store_key **key,
			       struct buf *out);
void store_iter_free(struct store_iter *it);
enum store_err store_save_cluster_info(struct store *s, const char *url_path, const char *data,
				       size_t len);
enum store_err store_get_cluster_info(struct store *s, const char *url_path, struct buf *out);
void store_close(struct store *s);

/* ---- damaged objects ----
 *
 * Anything may write at the store's keys: an operator's etcdctl, a
 * kube-apiserver sharing the etcd, a disk that lost a block.  Every object
 * read through the wrappers above is checked (store_object_fault) before
 * it is handed out: store_get() answers STORE_DAMAGED, store_list() and
 * store_iter_next() skip it.  Each such read is counted
 * (store_damaged_reads), logged once per key, and the key remembered, so
 * that the next list of a view holding it rewrites it whatever the
 * resourceVersion: a backend's replace_add asks store_damage_take() before
 * keeping a copy it believes unchanged. */

/* Why the bytes stored for object ns/name are not that object, or NULL
 * when they are: one JSON object (a kube-apiserver's "k8s\0" protobuf is
 * recognised and refused), metadata.name equal to name, metadata.namespace
 * (when set) equal to ns (ns NULL or "": not checked).  The kind is not
 * checked: the hub's fixtures and older caches hold objects whose kind is
 * absent or set by hand.  One pass of util/json_scan that descends only
 * into metadata: it runs on every object an offline list serves. */
const char *store_object_fault(const char *ns, const char *name, const char *data, size_t len);
/* Damaged objects read (and not served) since the process started. */
uint64_t store_damaged_reads(void);
/* Was object ns/name of component's group/resource read damaged?  Forgets
 * it (the caller rewrites it). */
bool store_damage_take(struct store *s, const char *component, const char *group,
		       const char *resource, const char *ns, const char *name);

/* The background scrub (housekeeping.c calls it at start, then every
 * period): reads every object of every collection of every component
 * through the backend's iterator, a page at a time (no more of the store
 * in memory than one iterator holds, no store lock held between pages),
 * and checks each as a read does: a damaged one is counted, logged once
 * and remembered, so that the next list of a view holding it rewrites it
 * whatever the resourceVersion - also when no client read it, and after a
 * restart forgot what the reads had found. */
struct store_scrub_stats {
	uint64_t objects; /* objects read */
	uint64_t bytes;	  /* their bytes */
	uint64_t damaged; /* of which damaged */
};
/* STORE_OK when every collection was read; the first error otherwise (etcd
 * away: the caller tries again later).  cancel (may be NULL) is looked at
 * before each object: once set, the scrub stops with STORE_UNAVAILABLE (a
 * hub stopping does not wait for a big store's scrub).  stats may be NULL. */
enum store_err store_scrub(struct store *s, const atomic_bool *cancel,
			   struct store_scrub_stats *stats);
/* Scrubs that read the whole store since the process started. */
uint64_t store_scrubs_done(void);

/* Set by backends when they return STORE_IO. */
enum store_err store_fail_errno(int err);

#endif
