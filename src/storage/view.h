/*
 * view.h - the records a store keeps of list views.
 *
 * A view is (component, gvr, namespace or all, label selector, field
 * selector).  For each (component, gvr) the store keeps one small "view set":
 * the views listed so far, each with the resourceVersion of its last list
 * (raised by BOOKMARKs).  Its existence is what makes "listed and empty"
 * different from "never listed".  Selectors are kept canonical, so that the
 * same selector written two ways is one view.
 *
 * Encoded as JSON: {"views":[{"namespace":"","labelSelector":"",
 * "fieldSelector":"spec.nodeName=n1","resourceVersion":"42"}]}
 */
#ifndef YURTHUB_STORAGE_VIEW_H
#define YURTHUB_STORAGE_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "kube/selector.h"
#include "storage/key.h"
#include "storage/store.h"
#include "util/buf.h"

struct view_rec {
	char *namespace, *label_selector, *field_selector;
	uint64_t rv;
};

struct view_set {
	struct view_rec *v;
	size_t n, cap;
};

/* The canonical identity of a view as the caller gave it; 0, or -1 with a
 * malformed selector (*err says why, free it) or ENOMEM (*err NULL). */
int view_canonical(const struct store_view *view, struct view_rec *out, char **err);
void view_rec_free(struct view_rec *r);
/* A copy of r in out; 0 or -1 (ENOMEM, out then empty). */
int view_rec_copy(struct view_rec *out, const struct view_rec *r);

int view_set_decode(const char *json, size_t len, struct view_set *out);
int view_set_encode(const struct view_set *set, struct buf *out);
struct view_rec *view_set_find(struct view_set *set, const struct view_rec *key);
/* Add the view, or set its rv if present.  0 or -1 (ENOMEM). */
int view_set_put(struct view_set *set, const struct view_rec *key, uint64_t rv);
void view_set_free(struct view_set *set);

/* A short, stable name of a view of one resource directory, for records
 * that name views (the etcd store's holdings): VIEW_ID_LEN hex digits of a
 * 64-bit hash of (resdir, namespace, selectors), NUL-terminated in out. */
#define VIEW_ID_LEN 16
void view_rec_id(const char *resdir, const struct view_rec *r, char out[VIEW_ID_LEN + 1]);

/* A view ready to be evaluated against objects. */
struct view_matcher {
	const char *namespace; /* borrowed from the view_rec; "" = all */
	struct selector *labels, *fields;
};

int view_matcher_init(struct view_matcher *m, const struct view_rec *r);
void view_matcher_free(struct view_matcher *m);
/* Does the view cover an object in namespace ns with this JSON?  1, 0, or -1
 * for malformed JSON.  A view of another namespace, or one without
 * selectors, answers without looking at the JSON. */
int view_matcher_covers(const struct view_matcher *m, const char *ns, const char *json, size_t len);

/* Check a view given by a caller and give its canonical record and its
 * resource directory name (malloc'ed) in the given layout. */
enum store_err view_identity(const struct store_view *view, enum key_layout layout,
			     struct view_rec *rec, char **resdir);
/* A caller's copy of a view record; 0 or -1 (ENOMEM). */
int view_state_fill(struct store_view_state *out, const struct view_rec *r);
/* Call fn with each view of the set, until it returns non-zero. */
enum store_err view_set_visit(const struct view_set *set, store_view_fn fn, void *ctx);

#endif
