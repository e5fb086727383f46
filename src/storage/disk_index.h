/*
 * disk_index.h - what the disk store knows of its objects without opening
 * their files.
 *
 * For each resource directory in use ("<component>/<resource dir>") the
 * index holds every object's resourceVersion and its selectable document
 * (kube/selectable.h): all a relist needs to see what changed, and all a
 * selector needs to tell which files an offline list must open.
 *
 * It lives in memory only.  A resource directory's index is built from the
 * files the first time it is needed (disk_index_load), under the resource
 * lock held exclusively, and from then on every write of the store updates
 * it before it lets go of its locks: the index always says what the files
 * say.  Nothing of it is written to disk, so no crash can leave it stale:
 * after a restart it is built again from what recovery left.
 *
 * Entries are keyed by the object's path inside the resource directory:
 * "<namespace>/<name>", or "<name>" for cluster-scoped objects.
 */
#ifndef YURTHUB_STORAGE_DISK_INDEX_H
#define YURTHUB_STORAGE_DISK_INDEX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/selector.h"
#include "util/strmap.h"

struct disk_store;

/* One object.  doc is its selectable document, NUL-terminated; empty when
 * the picker gave up on the object (selectors then read the file). */
struct index_obj {
	uint64_t rv;
	uint64_t bloom; /* selector_bloom() of doc: most objects are ruled out by it */
	uint32_t doc_len;
	char doc[];
};

/* The index of one resource directory.  objs maps the object's path in the
 * directory to its struct index_obj (owned).  lock guards objs: single
 * writes change it under the resource lock held shared. */
struct res_index {
	char *group, *resource;
	pthread_mutex_t lock;
	struct strmap objs;
	/* An update could not be recorded (no memory): the index is no longer
	 * used, and is built again from the files when next loaded. */
	atomic_bool stale;
};

struct disk_index {
	pthread_mutex_t lock; /* guards dirs */
	struct strmap dirs;   /* "<component>/<resdir>" -> struct res_index (owned) */
};

void disk_index_init(struct disk_index *x);
void disk_index_free(struct disk_index *x);

/* The index of component/resdir if it is built (and not stale), else NULL.  The caller
 * holds the resource lock (either mode), which keeps it from going. */
struct res_index *disk_index_find(struct disk_store *d, const char *component, const char *resdir);
/* The index of component/resdir, built from the files if need be.  The
 * caller holds the resource lock exclusively.  0, or -errno. */
int disk_index_load(struct disk_store *d, const char *component, const char *resdir,
		    struct res_index **out);
/* Build it if need be, taking the resource lock exclusively for that; for
 * callers that hold no store lock.  0, or -errno. */
int disk_index_ensure(struct disk_store *d, const char *component, const char *resdir);

/* An object was written (data, len: its new bytes) or removed, under its
 * locks.  Nothing happens when the directory's index is not built. */
int disk_index_put(struct disk_store *d, const char *component, const char *resdir, const char *rel,
		   uint64_t rv, const char *data, size_t len);
void disk_index_remove(struct disk_store *d, const char *component, const char *resdir,
		       const char *rel);
/* A new entry (malloc'ed) for an object of (group, resource); NULL on ENOMEM. */
struct index_obj *index_obj_new(const char *group, const char *resource, uint64_t rv,
				const char *data, size_t len);
/* The same in an index the caller holds.  On failure the index is stale. */
int res_index_put(struct res_index *ri, const char *rel, uint64_t rv, const char *data, size_t len);
/* Set rel's entry to o (taken; NULL: the allocation failed, the index is
 * then stale).  0 or -ENOMEM. */
int res_index_set(struct res_index *ri, const char *rel, struct index_obj *o);
/* Forget the index of one directory (its tree was replaced in a way the
 * caller does not describe, or deleted), or of every directory of a
 * component.  The caller holds the resource lock exclusively, or the
 * global lock. */
void disk_index_forget(struct disk_store *d, const char *component, const char *resdir);
void disk_index_forget_component(struct disk_store *d, const char *component);

/* Does the object's document match the selectors?  1 yes, 0 no, -1 the
 * index cannot tell (no document): read the file. */
int index_obj_matches(const struct index_obj *o, const struct selector *labels,
		      const struct selector *fields);

/* Rebuild every built index from the files and compare: 0 when they agree,
 * else -1 with *why (malloc'ed) naming the first difference.  Takes the
 * store's global lock exclusively: for tests. */
int disk_index_check(struct disk_store *d, char **why);

/* Objects in the built indexes, and the bytes they hold in memory (counted
 * as allocated). */
void disk_index_size(struct disk_store *d, size_t *objects, size_t *bytes);

#endif
