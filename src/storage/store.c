/*
 * store.c - the calls the hub makes on a store, dispatched through the
 * backend's ops table, the contract's error texts, and the checks every
 * backend shares.
 */
#include "storage/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/key.h"

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
	return s->ops->get(s, key, out);
}

enum store_err store_list(struct store *s, const struct store_key *root, store_object_fn fn,
			  void *ctx)
{
	return s->ops->list(s, root, fn, ctx);
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

enum store_err store_iter_begin(struct store *s, const struct store_key *root,
				const char *start_after, struct store_iter **out)
{
	return s->ops->iter_begin(s, root, start_after, out);
}

enum store_err store_iter_begin_matching(struct store *s, const struct store_key *root,
					 const char *start_after, const struct store_match *match,
					 struct store_iter **out)
{
	if (!s->ops->iter_begin_matching || !match)
		return s->ops->iter_begin(s, root, start_after, out);
	return s->ops->iter_begin_matching(s, root, start_after, match, out);
}

enum store_err store_iter_next(struct store_iter *it, const struct store_key **key, struct buf *out)
{
	return it->store->ops->iter_next(it, key, out);
}

void store_iter_free(struct store_iter *it)
{
	if (it)
		it->store->ops->iter_free(it);
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
	if (s)
		s->ops->close(s);
}
