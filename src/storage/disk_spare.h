/*
 * disk_spare.h - inodes of replaced trees, kept for the trees that follow
 * (see disk_spare.c for why).  Part of the disk store, not for use outside
 * src/storage/.
 */
#ifndef YURTHUB_STORAGE_DISK_SPARE_H
#define YURTHUB_STORAGE_DISK_SPARE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define DISK_SPARE_DIR "spare" /* in the private directory */
#define DISK_SPARE_MAX 65536   /* spares kept at most; past that, files are removed */

struct disk_store;

/* A read that may hold a file of a tree across the resource lock (a get,
 * an iterator): registered from before it opens anything until it is done. */
struct disk_reader {
	uint64_t seq; /* the retirements it may have seen the trees of */
	struct disk_reader *prev, *next;
};

struct disk_spares {
	pthread_mutex_t lock; /* a leaf: nothing else is taken while it is held */
	int fd;		      /* the pool directory, -1: no pool (read-only, or none) */
	uint64_t *ids;	      /* the spares' names, decimal, a stack */
	size_t n, cap;
	uint64_t next_id;
	uint64_t retired;	     /* trees retired so far: the seq of the last */
	struct disk_reader *readers; /* live readers, newest first */
};

void disk_spares_init(struct disk_spares *sp);
void disk_spares_free(struct disk_spares *sp);
/* Open (making it) the pool in the private directory and take what a
 * previous run left in it.  0 or -errno: without a pool the store works as
 * before. */
int disk_spares_open(struct disk_store *d);

/* A replaced tree is retired (given to the reaper): its number, for
 * disk_spares_keep_tree. */
uint64_t disk_spares_retire(struct disk_spares *sp);
void disk_reader_enter(struct disk_spares *sp, struct disk_reader *r);
void disk_reader_leave(struct disk_spares *sp, struct disk_reader *r);

/* The reaper: empty the tree staging/<name> (retired as seq), moving its
 * files that no other tree shares into the pool.  Returns -EBUSY without
 * touching it when a reader that may hold one of its files is still
 * running (the caller removes it instead, which leaves open files alone),
 * else 0 or -errno (what is left, the caller removes). */
int disk_spares_keep_tree(struct disk_store *d, const char *name, uint64_t seq);

/* A file at dir_fd/rel for new content, made from a spare: an fd open for
 * writing on an empty file of its own, or -ENOENT when there is no spare
 * to use (the caller creates the file), or -EEXIST when rel exists (as
 * O_EXCL would say). */
int disk_spares_take(struct disk_store *d, int dir_fd, const char *rel);

#endif
