/*
 * disk_index.c - the disk store's in-memory index of its objects, see
 * disk_index.h.
 */
#include "storage/disk_index.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/meta.h"
#include "kube/selectable.h"
#include "storage/disk_internal.h"
#include "util/fsutil.h"

void disk_index_init(struct disk_index *x)
{
	pthread_mutex_init(&x->lock, NULL);
	x->dirs = (struct strmap)STRMAP_INIT;
}

static void res_index_free(struct res_index *ri)
{
	if (!ri)
		return;
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&ri->objs, &i));)
		free(e->value);
	strmap_free(&ri->objs);
	pthread_mutex_destroy(&ri->lock);
	free(ri->group);
	free(ri->resource);
	free(ri);
}

void disk_index_free(struct disk_index *x)
{
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&x->dirs, &i));)
		res_index_free(e->value);
	strmap_free(&x->dirs);
	pthread_mutex_destroy(&x->lock);
}

static char *dir_key(const char *component, const char *resdir)
{
	size_t cl = strlen(component), rl = strlen(resdir);
	char *k = malloc(cl + rl + 2);
	if (k) {
		memcpy(k, component, cl);
		k[cl] = '/';
		memcpy(k + cl + 1, resdir, rl + 1);
	}
	return k;
}

struct res_index *disk_index_find(struct disk_store *d, const char *component, const char *resdir)
{
	char *k = dir_key(component, resdir);
	if (!k)
		return NULL;
	pthread_mutex_lock(&d->index.lock);
	struct strmap_entry *e = strmap_get(&d->index.dirs, k);
	struct res_index *ri = e ? e->value : NULL;
	pthread_mutex_unlock(&d->index.lock);
	free(k);
	return ri && !atomic_load(&ri->stale) ? ri : NULL;
}

struct index_obj *index_obj_new(const char *group, const char *resource, uint64_t rv,
				const char *data, size_t len)
{
	struct buf doc = BUF_INIT;
	if (selectable_pick(group, resource, data, len, &doc) < 0 || doc.len > UINT32_MAX)
		buf_reset(&doc);
	struct index_obj *o = malloc(sizeof *o + doc.len + 1);
	if (o) {
		o->rv = rv;
		o->bloom = selector_bloom(doc.data, doc.len);
		o->doc_len = (uint32_t)doc.len;
		if (doc.len)
			memcpy(o->doc, doc.data, doc.len);
		o->doc[doc.len] = '\0';
	}
	buf_free(&doc);
	return o;
}

int res_index_set(struct res_index *ri, const char *rel, struct index_obj *o)
{
	pthread_mutex_lock(&ri->lock);
	struct strmap_entry *e = o ? strmap_get(&ri->objs, rel) : NULL;
	int rc = 0;
	if (e) {
		free(e->value);
		e->value = o;
	} else if (!o || !strmap_put(&ri->objs, rel, o)) {
		free(o);
		atomic_store(&ri->stale, true);
		rc = -ENOMEM;
	}
	pthread_mutex_unlock(&ri->lock);
	return rc;
}

int res_index_put(struct res_index *ri, const char *rel, uint64_t rv, const char *data, size_t len)
{
	return res_index_set(ri, rel, index_obj_new(ri->group, ri->resource, rv, data, len));
}

struct load {
	struct disk_store *d;
	struct res_index *ri;
	struct buf data, rel;
	int err;
};

static int load_one(void *ctx, const char *ns, const char *name, const char *path)
{
	struct load *l = ctx;
	if (!key_segment_ok(name, KEY_NAME_MAX) || (*ns && !key_segment_ok(ns, KEY_NAME_MAX)))
		return 0; /* not a name this store writes: not an object */
	int rc = fs_read_file_at(l->d->base_fd, path, &l->data, DISK_OBJECT_MAX);
	if (rc == -ENOENT)
		return 0;
	buf_reset(&l->rel);
	if (rc == 0 &&
	    (*ns ? buf_printf(&l->rel, "%s/%s", ns, name) : buf_append_str(&l->rel, name)) < 0)
		rc = -ENOMEM;
	uint64_t rv = 0;
	/* unreadable JSON is indexed at rv 0 without a document: relists
	 * replace it, selectors read it (and skip it) */
	if (rc == 0)
		kube_meta_rv(l->data.data, l->data.len, &rv);
	if (rc == 0)
		rc = res_index_put(l->ri, l->rel.data, rv, l->data.data, l->data.len);
	if (rc < 0) {
		l->err = rc;
		return 1;
	}
	return 0;
}

/* A fresh index of component/resdir read from its files. */
static int build(struct disk_store *d, const char *component, const char *resdir,
		 struct res_index **out)
{
	*out = NULL;
	struct res_index *ri = calloc(1, sizeof *ri);
	if (!ri)
		return -ENOMEM;
	pthread_mutex_init(&ri->lock, NULL);
	ri->objs = (struct strmap)STRMAP_INIT;
	char *version = NULL;
	if (key_parse_resource_dir(resdir, &ri->resource, &version, &ri->group) < 0) {
		res_index_free(ri);
		return -EINVAL;
	}
	free(version);
	char *dir = dir_key(component, resdir);
	if (!dir) {
		res_index_free(ri);
		return -ENOMEM;
	}
	struct load l = {d, ri, BUF_INIT, BUF_INIT, 0};
	int rc = disk_walk_collection(d->base_fd, dir, "", load_one, &l);
	free(dir);
	buf_free(&l.data);
	buf_free(&l.rel);
	if (rc == -ENOENT || rc == -ENOTDIR)
		rc = 0; /* nothing stored yet: an empty index */
	if (l.err)
		rc = l.err;
	if (rc < 0) {
		res_index_free(ri);
		return rc;
	}
	*out = ri;
	return 0;
}

int disk_index_load(struct disk_store *d, const char *component, const char *resdir,
		    struct res_index **out)
{
	if ((*out = disk_index_find(d, component, resdir)))
		return 0;
	struct res_index *ri;
	int rc = build(d, component, resdir, &ri);
	if (rc < 0)
		return rc;
	char *k = dir_key(component, resdir);
	pthread_mutex_lock(&d->index.lock);
	struct strmap_entry *e = k ? strmap_get(&d->index.dirs, k) : NULL;
	if (e) { /* a stale one: nobody else holds it under the exclusive lock */
		res_index_free(e->value);
		e->value = ri;
	} else if (!k || !strmap_put(&d->index.dirs, k, ri)) {
		rc = -ENOMEM;
	}
	pthread_mutex_unlock(&d->index.lock);
	free(k);
	if (rc < 0) {
		res_index_free(ri);
		return rc;
	}
	*out = ri;
	return 0;
}

int disk_index_ensure(struct disk_store *d, const char *component, const char *resdir)
{
	pthread_rwlock_t *rl = disk_lock_resource(d, component, resdir, DISK_SHARED);
	bool built = disk_index_find(d, component, resdir) != NULL;
	disk_unlock_resource(d, rl);
	if (built)
		return 0;
	struct res_index *ri;
	rl = disk_lock_resource(d, component, resdir, DISK_EXCLUSIVE);
	int rc = disk_index_load(d, component, resdir, &ri);
	disk_unlock_resource(d, rl);
	return rc;
}

int disk_index_put(struct disk_store *d, const char *component, const char *resdir, const char *rel,
		   uint64_t rv, const char *data, size_t len)
{
	struct res_index *ri = disk_index_find(d, component, resdir);
	return ri ? res_index_put(ri, rel, rv, data, len) : 0;
}

void disk_index_remove(struct disk_store *d, const char *component, const char *resdir,
		       const char *rel)
{
	struct res_index *ri = disk_index_find(d, component, resdir);
	if (!ri)
		return;
	pthread_mutex_lock(&ri->lock);
	free(strmap_del(&ri->objs, rel));
	pthread_mutex_unlock(&ri->lock);
}

void disk_index_forget(struct disk_store *d, const char *component, const char *resdir)
{
	char *k = dir_key(component, resdir);
	if (!k)
		return; /* the index stays, and stays right: no write happened */
	pthread_mutex_lock(&d->index.lock);
	res_index_free(strmap_del(&d->index.dirs, k));
	pthread_mutex_unlock(&d->index.lock);
	free(k);
}

void disk_index_forget_component(struct disk_store *d, const char *component)
{
	size_t cl = strlen(component);
	pthread_mutex_lock(&d->index.lock);
	for (;;) {
		struct strmap_entry *e;
		char *victim = NULL;
		for (size_t i = 0; (e = strmap_next(&d->index.dirs, &i));)
			if (!strncmp(e->key, component, cl) && e->key[cl] == '/') {
				victim = e->key;
				break;
			}
		if (!victim)
			break;
		res_index_free(strmap_del(&d->index.dirs, victim));
	}
	pthread_mutex_unlock(&d->index.lock);
}

int index_obj_matches(const struct index_obj *o, const struct selector *labels,
		      const struct selector *fields)
{
	if (!o->doc_len)
		return -1;
	if (!selector_may_match_bloom(labels, o->bloom) ||
	    !selector_may_match_bloom(fields, o->bloom) ||
	    !selector_may_match(labels, o->doc, o->doc_len) ||
	    !selector_may_match(fields, o->doc, o->doc_len))
		return 0;
	return selector_match_json(labels, fields, o->doc, o->doc_len) == 1;
}

static int compare(const struct res_index *have, const struct res_index *want, const char *dir,
		   char **why)
{
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&want->objs, &i));) {
		struct strmap_entry *h = strmap_get(&have->objs, e->key);
		const struct index_obj *w = e->value, *o = h ? h->value : NULL;
		if (!o) {
			*why = str_printf("%s: %s is stored but not indexed", dir, e->key);
			return -1;
		}
		if (o->rv != w->rv || o->doc_len != w->doc_len ||
		    memcmp(o->doc, w->doc, w->doc_len)) {
			*why = str_printf("%s: %s indexed at rv %llu (%s), stored at %llu (%s)",
					  dir, e->key, (unsigned long long)o->rv, o->doc,
					  (unsigned long long)w->rv, w->doc);
			return -1;
		}
	}
	if (have->objs.len != want->objs.len) {
		for (size_t i = 0; (e = strmap_next(&have->objs, &i));)
			if (!strmap_get(&want->objs, e->key)) {
				*why = str_printf("%s: %s is indexed but not stored", dir, e->key);
				return -1;
			}
	}
	return 0;
}

int disk_index_check(struct disk_store *d, char **why)
{
	*why = NULL;
	disk_lock_all(d);
	pthread_mutex_lock(&d->index.lock);
	int rc = 0;
	struct strmap_entry *e;
	for (size_t i = 0; rc == 0 && (e = strmap_next(&d->index.dirs, &i));) {
		if (atomic_load(&((struct res_index *)e->value)->stale))
			continue; /* not used: built again when next loaded */
		const char *slash = strchr(e->key, '/');
		char *component = slash ? strndup(e->key, (size_t)(slash - e->key)) : NULL;
		struct res_index *fresh = NULL;
		rc = component ? build(d, component, slash + 1, &fresh) : -ENOMEM;
		if (rc < 0)
			*why = str_printf("%s: cannot be read: %s", e->key, strerror(-rc));
		else
			rc = compare(e->value, fresh, e->key, why);
		res_index_free(fresh);
		free(component);
	}
	pthread_mutex_unlock(&d->index.lock);
	disk_unlock_all(d);
	return rc < 0 ? -1 : 0;
}

void disk_index_size(struct disk_store *d, size_t *objects, size_t *bytes)
{
	*objects = *bytes = 0;
	pthread_mutex_lock(&d->index.lock);
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&d->index.dirs, &i));) {
		struct res_index *ri = e->value;
		pthread_mutex_lock(&ri->lock);
		*objects += ri->objs.len;
		*bytes += sizeof *ri + ri->objs.cap * sizeof(struct strmap_entry);
		struct strmap_entry *o;
		for (size_t j = 0; (o = strmap_next(&ri->objs, &j));)
			*bytes += strlen(o->key) + 1 + sizeof(struct index_obj) +
				  ((struct index_obj *)o->value)->doc_len + 1;
		pthread_mutex_unlock(&ri->lock);
	}
	pthread_mutex_unlock(&d->index.lock);
}
