/*
 * obj.c - the shared cache's immutable, reference-counted objects, see
 * obj.h.
 *
 * One allocation per object: the header, then the JSON bytes, then the
 * namespace and the name, each NUL-terminated, so that an object costs one
 * malloc and a few dozen bytes above its JSON.
 */
#include "mux/obj.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/meta.h"
#include "kube/patch.h"
#include "util/buf.h"

/* What makes an object usable as a cache entry: it must have a key and a
 * position in the resource's history. */
static bool meta_usable(const struct kube_meta *m)
{
	return m->name && *m->name && !m->nul_in_name && m->rv > 0;
}

static struct mux_obj *obj_alloc(const char *json, size_t len, const char *ns, const char *name)
{
	size_t ns_len = strlen(ns), name_len = strlen(name);
	/* the three lengths are bounded by the input's size, which is in memory */
	struct mux_obj *o = malloc(sizeof(*o) + len + 1 + ns_len + 1 + name_len + 1);
	char *p;

	if (!o)
		return NULL;
	atomic_init(&o->refs, 1);
	o->len = len;
	memcpy(o->data, json, len);
	o->data[len] = '\0';
	p = o->data + len + 1;
	memcpy(p, ns, ns_len + 1);
	o->namespace = p;
	p += ns_len + 1;
	memcpy(p, name, name_len + 1);
	o->name = p;
	return o;
}

struct mux_obj *mux_obj_new(const char *json, size_t len)
{
	struct kube_meta m = {0};
	struct mux_obj *o = NULL;

	if (!json || kube_meta_parse(json, len, &m) < 0) {
		kube_meta_free(&m);
		errno = EINVAL;
		return NULL;
	}
	if (!meta_usable(&m)) {
		errno = EINVAL;
	} else {
		o = obj_alloc(json, len, m.namespace ? m.namespace : "", m.name);
		if (o)
			o->rv = m.rv;
		else
			errno = ENOMEM;
	}
	kube_meta_free(&m);
	return o;
}

struct mux_obj *mux_obj_ref(struct mux_obj *o)
{
	atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
	return o;
}

void mux_obj_unref(struct mux_obj *o)
{
	/* release/acquire: the freeing thread sees every other holder's reads
	 * done, as for any shared immutable value */
	if (o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
		free(o);
}

struct mux_obj *mux_obj_with_rv(const struct mux_obj *o, uint64_t rv)
{
	char patch[64]; /* fixed text around one uint64: at most 59 bytes */
	struct buf out = BUF_INIT;
	struct mux_obj *copy = NULL;
	char *err = NULL;

	snprintf(patch, sizeof(patch), "{\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"}}", rv);
	if (patch_apply(PATCH_MERGE, o->data, o->len, patch, strlen(patch), &out, &err) == 0)
		copy = mux_obj_new(buf_cstr(&out), out.len);
	else
		errno = err ? EINVAL : ENOMEM;
	free(err);
	buf_free(&out);
	return copy;
}

char *mux_obj_key(const struct mux_obj *o)
{
	if (!*o->namespace)
		return strdup(o->name);
	return str_printf("%s/%s", o->namespace, o->name);
}
