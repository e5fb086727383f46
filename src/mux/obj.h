/*
 * obj.h - one object of a shared cache (sharedcache.h): its JSON bytes and
 * what the cache indexes it by, held once and shared by reference.
 *
 * An object is immutable once made.  The cache's map, a list snapshot, an
 * event of the window and every watcher delivering it hold references to the
 * same struct mux_obj; the last mux_obj_unref() frees it.  So however many
 * clients list or watch a resource, each version of each object is in memory
 * once.  The reference count is atomic: references are taken and dropped by
 * the writer and by any reader thread, with or without the cache's lock.
 */
#ifndef YURTHUB_MUX_OBJ_H
#define YURTHUB_MUX_OBJ_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct mux_obj {
	atomic_size_t refs;
	uint64_t rv;	       /* metadata.resourceVersion, parsed; never 0 */
	size_t len;	       /* of data, not counting its NUL */
	const char *namespace; /* "" for a cluster-scoped object; points into data's block */
	const char *name;      /* never empty; points into data's block */
	char data[];	       /* the JSON bytes as received, NUL-terminated */
};

/* A new object (one reference, the caller's) from the bytes of one JSON
 * object, copied.  NULL with errno EINVAL when the bytes are not one JSON
 * object, lack metadata.name, have a name or namespace with a NUL in it, or
 * lack a decimal metadata.resourceVersion above 0; ENOMEM when out of
 * memory. */
struct mux_obj *mux_obj_new(const char *json, size_t len);
/* Another reference to o (o itself, for chaining).  o must not be NULL. */
struct mux_obj *mux_obj_ref(struct mux_obj *o);
/* Drop one reference; the last frees.  NULL is fine. */
void mux_obj_unref(struct mux_obj *o);
/* A new object: o's bytes with metadata.resourceVersion set to rv (as a
 * JSON merge patch, so the bytes come out compact).  What kube-apiserver
 * sends when a watcher learns of a change at rv through an older state of
 * the object: a deletion found by a relist, an object that stopped matching
 * a selector.  NULL with errno ENOMEM or EINVAL. */
struct mux_obj *mux_obj_with_rv(const struct mux_obj *o, uint64_t rv);
/* "namespace/name", or "name" for a cluster-scoped object: the cache's key,
 * which sorts as etcd's keys do within a resource.  malloc'ed; NULL on
 * ENOMEM. */
char *mux_obj_key(const struct mux_obj *o);

#endif
