/* view.c - view records and their evaluation, see view.h. */
#include "storage/view.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/meta.h"
#include "storage/key.h"
#include "util/log.h"

void view_rec_free(struct view_rec *r)
{
	free(r->namespace);
	free(r->label_selector);
	free(r->field_selector);
	memset(r, 0, sizeof *r);
}

int view_rec_copy(struct view_rec *out, const struct view_rec *r)
{
	out->namespace = strdup(r->namespace);
	out->label_selector = strdup(r->label_selector);
	out->field_selector = strdup(r->field_selector);
	out->rv = r->rv;
	if (!out->namespace || !out->label_selector || !out->field_selector) {
		view_rec_free(out);
		return -1;
	}
	return 0;
}

int view_canonical(const struct store_view *view, struct view_rec *out, char **err)
{
	memset(out, 0, sizeof *out);
	*err = NULL;
	out->namespace = strdup(view->namespace ? view->namespace : "");
	if (!out->namespace)
		goto fail;
	if (selector_canonicalize(SELECTOR_LABEL, view->label_selector, &out->label_selector, err) <
	    0)
		goto fail;
	if (selector_canonicalize(SELECTOR_FIELD, view->field_selector, &out->field_selector, err) <
	    0)
		goto fail;
	return 0;
fail:
	view_rec_free(out);
	return -1;
}

static const char *json_str(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int view_set_decode(const char *json, size_t len, struct view_set *out)
{
	memset(out, 0, sizeof *out);
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *views = root ? json_object_get(root, "views") : NULL;
	if (!json_is_array(views))
		goto fail;
	size_t i;
	json_t *v;
	json_array_foreach(views, i, v)
	{
		const char *ns = json_str(v, "namespace");
		const char *ls = json_str(v, "labelSelector");
		const char *fs = json_str(v, "fieldSelector");
		const char *rv = json_str(v, "resourceVersion");
		uint64_t n = 0;
		if (!ns || !ls || !fs || !rv || (*rv && kube_rv_parse(rv, strlen(rv), &n) < 0))
			goto fail;
		struct view_rec key = {(char *)ns, (char *)ls, (char *)fs, 0};
		if (view_set_put(out, &key, n) < 0)
			goto fail;
	}
	json_decref(root);
	return 0;
fail:
	json_decref(root);
	view_set_free(out);
	return -1;
}

int view_set_encode(const struct view_set *set, struct buf *out)
{
	if (buf_append_str(out, "{\"views\":[") < 0)
		return -1;
	for (size_t i = 0; i < set->n; i++) {
		const struct view_rec *r = &set->v[i];
		int rc = buf_append_str(out, i ? ",{\"namespace\":" : "{\"namespace\":");
		rc = rc ?: buf_append_json_str(out, r->namespace, strlen(r->namespace));
		rc = rc ?: buf_append_str(out, ",\"labelSelector\":");
		rc = rc ?: buf_append_json_str(out, r->label_selector, strlen(r->label_selector));
		rc = rc ?: buf_append_str(out, ",\"fieldSelector\":");
		rc = rc ?: buf_append_json_str(out, r->field_selector, strlen(r->field_selector));
		rc = rc
			 ?: buf_printf(out, ",\"resourceVersion\":\"%llu\"}",
				       (unsigned long long)r->rv);
		if (rc < 0)
			return -1;
	}
	return buf_append_str(out, "]}\n");
}

struct view_rec *view_set_find(struct view_set *set, const struct view_rec *key)
{
	for (size_t i = 0; i < set->n; i++) {
		struct view_rec *r = &set->v[i];
		if (!strcmp(r->namespace, key->namespace) &&
		    !strcmp(r->label_selector, key->label_selector) &&
		    !strcmp(r->field_selector, key->field_selector))
			return r;
	}
	return NULL;
}

int view_set_put(struct view_set *set, const struct view_rec *key, uint64_t rv)
{
	struct view_rec *r = view_set_find(set, key);
	if (r) {
		r->rv = rv;
		return 0;
	}
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 4;
		struct view_rec *v = realloc(set->v, cap * sizeof *v);
		if (!v)
			return -1;
		set->v = v;
		set->cap = cap;
	}
	r = &set->v[set->n];
	if (view_rec_copy(r, key) < 0)
		return -1;
	r->rv = rv;
	set->n++;
	return 0;
}

void view_set_free(struct view_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		view_rec_free(&set->v[i]);
	free(set->v);
	memset(set, 0, sizeof *set);
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (h ^ '\n') * 1099511628211ULL; /* a separator: ("ab","") != ("a","b") */
}

void view_rec_id(const char *resdir, const struct view_rec *r, char out[VIEW_ID_LEN + 1])
{
	uint64_t h = 1469598103934665603ULL;
	h = fnv1a(h, resdir);
	h = fnv1a(h, r->namespace);
	h = fnv1a(h, r->label_selector);
	h = fnv1a(h, r->field_selector);
	snprintf(out, VIEW_ID_LEN + 1, "%016llx", (unsigned long long)h);
}

int view_matcher_init(struct view_matcher *m, const struct view_rec *r)
{
	memset(m, 0, sizeof *m);
	m->namespace = r->namespace;
	char *err = NULL;
	if (selector_parse(SELECTOR_LABEL, r->label_selector, &m->labels, &err) < 0 ||
	    selector_parse(SELECTOR_FIELD, r->field_selector, &m->fields, &err) < 0) {
		free(err);
		view_matcher_free(m);
		return -1;
	}
	return 0;
}

void view_matcher_free(struct view_matcher *m)
{
	selector_free(m->labels);
	selector_free(m->fields);
	m->labels = m->fields = NULL;
}

int view_matcher_covers(const struct view_matcher *m, const char *ns, const char *json, size_t len)
{
	if (*m->namespace && strcmp(m->namespace, ns ? ns : ""))
		return 0;
	if (selector_is_empty(m->labels) && selector_is_empty(m->fields))
		return 1;
	return selector_match_json(m->labels, m->fields, json, len);
}

enum store_err view_identity(const struct store_view *view, enum key_layout layout,
			     struct view_rec *rec, char **resdir)
{
	*resdir = NULL;
	if (!view || !view->component || !*view->component || !view->gvr.resource ||
	    !*view->gvr.resource)
		return STORE_EMPTY_KEY;
	if (!key_component_ok(view->component))
		return STORE_BAD_KEY;
	if (view->namespace && *view->namespace && !key_segment_ok(view->namespace, KEY_NAME_MAX))
		return STORE_BAD_KEY;
	*resdir = key_resource_dir(layout, view->gvr.resource, view->gvr.version, view->gvr.group);
	if (!*resdir)
		return STORE_BAD_KEY;
	char *err = NULL;
	if (view_canonical(view, rec, &err) < 0) {
		enum store_err e = err ? STORE_BAD_KEY : STORE_NOMEM;
		if (err)
			log_debug("store: %s", err);
		free(err);
		free(*resdir);
		*resdir = NULL;
		return e;
	}
	return STORE_OK;
}

int view_state_fill(struct store_view_state *out, const struct view_rec *r)
{
	memset(out, 0, sizeof *out);
	out->namespace = strdup(r->namespace);
	out->label_selector = strdup(r->label_selector);
	out->field_selector = strdup(r->field_selector);
	out->rv = r->rv;
	if (!out->namespace || !out->label_selector || !out->field_selector) {
		store_view_state_free(out);
		return -1;
	}
	return 0;
}

enum store_err view_set_visit(const struct view_set *set, store_view_fn fn, void *ctx)
{
	for (size_t i = 0; i < set->n; i++) {
		struct store_view_state st;
		if (view_state_fill(&st, &set->v[i]) < 0)
			return STORE_NOMEM;
		int stop = fn(ctx, &st);
		store_view_state_free(&st);
		if (stop)
			break;
	}
	return STORE_OK;
}
