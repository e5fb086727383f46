/*
 * disk_internal.h - what the files of the disk store share (disk.c,
 * disk_replace.c, disk_recover.c).  Not for use outside src/storage/.
 */
#ifndef YURTHUB_STORAGE_DISK_INTERNAL_H
#define YURTHUB_STORAGE_DISK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "storage/disk.h"
#include "storage/disk_commit.h"
#include "storage/disk_index.h"
#include "storage/disk_spare.h"
#include "storage/key.h"
#include "storage/view.h"

#define DISK_PRIV_DIR	"_internal/yurthub-c"
#define DISK_OBJECT_MAX (64u << 20) /* largest object file read back */
#define RES_STRIPES	64
#define KEY_STRIPES	256

struct reap_item {
	char name[48];	  /* an entry of the staging directory to remove */
	uint64_t retired; /* disk_spares_retire()'s number for it */
	struct reap_item *next;
};

struct disk_store {
	struct store base;
	char *path;
	int flags;
	int base_fd, priv_fd, staging_fd, journal_fd, views_fd, lock_fd;
	enum key_layout layout;
	struct commit_queue *commit;
	atomic_ulong seq;
	atomic_ulong syncs, replaces;

	/* Whole-component operations exclude everything else. */
	pthread_rwlock_t global;
	/* Per resource directory: replace and view updates take it exclusively,
	 * single writes and lists share it. */
	pthread_rwlock_t res_locks[RES_STRIPES];
	/* Per object key: single writes to one key are serialised. */
	pthread_mutex_t key_locks[KEY_STRIPES];

	/* Background removal of replaced trees. */
	pthread_mutex_t reap_lock;
	pthread_cond_t reap_cond;
	struct reap_item *reap_head;
	bool reaper_running, reaper_stop, reaper_busy;
	pthread_t reaper;

	struct disk_index index;   /* what every file holds, for lists and relists */
	struct disk_spares spares; /* retired trees' inodes, for the next ones */
};

static inline struct disk_store *disk_of(struct store *s)
{
	return (struct disk_store *)s;
}

/* The locks, always taken in this order and released in the reverse one:
 *
 *   1. d->global           whole-component operations (delete_component)
 *                           exclusive, everything else shared
 *   2. a resource stripe    (disk_res_lock) replaces, view updates and
 *                           collection deletes exclusive; single writes,
 *                           lists, iterators and view reads shared
 *   3. a key stripe         single writes and deletes of one object key
 *   4. the commit queue's   inside commit_run (disk_commit.c): a leaf, no
 *                           other lock is taken while it is held
 *
 * One stripe of a kind at a time.  disk_lock_resource() takes 1 and 2
 * together, so no path reaches a stripe without the global lock.  Debug
 * builds (YURTHUB_LOCK_CHECK) check the order on every acquisition and
 * abort on a violation, so that every test run checks it. */
enum disk_lock_mode { DISK_SHARED, DISK_EXCLUSIVE };

/* The lock stripe of a resource directory "component/resdir". */
pthread_rwlock_t *disk_res_lock(struct disk_store *d, const char *component, const char *resdir);
/* Take the global lock shared, then the stripe of (component, resdir) in
 * mode; returns the stripe for disk_unlock_resource. */
pthread_rwlock_t *disk_lock_resource(struct disk_store *d, const char *component,
				     const char *resdir, enum disk_lock_mode mode);
void disk_unlock_resource(struct disk_store *d, pthread_rwlock_t *stripe);
/* The global lock alone, exclusive (whole-component operations). */
void disk_lock_all(struct disk_store *d);
void disk_unlock_all(struct disk_store *d);
/* A key stripe, under a resource stripe. */
pthread_mutex_t *disk_lock_key(struct disk_store *d, const char *path);
void disk_unlock_key(pthread_mutex_t *stripe);
/* A fresh name for the staging or journal directory: "<prefix><n>". */
void disk_seq_name(struct disk_store *d, char prefix, char *out, size_t size);
/* syncfs of the cache's file system, counted. */
int disk_syncfs(struct disk_store *d);
/* Queue a staging entry for background removal. */
void disk_reap(struct disk_store *d, const char *staging_name);

/* Call fn for every object file of the collection dir (relative to
 * base_fd): its files, with namespace dir_ns, and when dir_ns is "" the
 * files one directory down too, with that directory's name as namespace.
 * In name order.  fn returns non-zero to stop (returned then). */
typedef int (*object_path_fn)(void *ctx, const char *ns, const char *name, const char *path);
int disk_walk_collection(int base_fd, const char *dir, const char *dir_ns, object_path_fn fn,
			 void *ctx);

/* The view set of (component, resdir).  A resource directory that exists
 * without a view file was written by the Go YurtHub: it is read as one
 * unfiltered view of all namespaces (YurtHub's own meaning of it), and
 * *synthesized (may be NULL) says so. */
int disk_views_load(struct disk_store *d, const char *component, const char *resdir,
		    struct view_set *out, bool *synthesized);
/* Durably replace the view file. */
int disk_views_save(struct disk_store *d, const char *component, const char *resdir,
		    const struct view_set *set);
int disk_views_file_exists(struct disk_store *d, const char *component, const char *resdir);

/* The replace session; see disk_replace.c. */
enum store_err disk_replace_begin(struct store *s, const struct store_view *view,
				  struct store_replace **out);
enum store_err disk_replace_add(struct store_replace *r, const struct store_item *item);
enum store_err disk_replace_commit(struct store_replace *r, uint64_t list_rv);
void disk_replace_abort(struct store_replace *r);

/* Startup recovery; see disk_recover.c.  0 or -errno with *err set. */
int disk_recover(struct disk_store *d, struct disk_recovery_report *report, char **err);
/* Roll one journal record forward or back (used by recovery). */
int disk_journal_apply(struct disk_store *d, const char *name, bool *forward);

/* A journal record (see write_journal in disk_replace.c), decoded and
 * checked: every path it names stays inside the cache directory. */
struct disk_journal_rec {
	char *tree;	 /* the new tree's name in staging/: "r<n>" */
	char *target;	 /* the tree it replaces: <component>/<resdir>[/<ns>] */
	char *component; /* whose view set the replace writes */
	char *resdir;
	uint64_t ino; /* the new tree's inode: the swap happened if target has it */
	struct view_set views;
	/* A delta replace ("op":"delta"): tree holds only the new copies, to be
	 * moved into target, and drops names the objects of target to remove
	 * (paths inside target).  Its record being durable is its commit. */
	bool delta;
	char **drops;
	size_t ndrops;
};

/* Apply a delta: move every file of the tree at n_fd (none when n_fd < 0)
 * (and of its
 * namespace directories) to the same path under t_fd, then remove the
 * drops from t_fd.  Idempotent: what is moved or removed already is
 * skipped, so recovery can run it again after a crash.  0 or -errno. */
int disk_delta_apply(int n_fd, int t_fd, char *const *drops, size_t ndrops);

/* 0, or -1 for bytes that are not such a record (it is then rolled back). */
int disk_journal_decode(const char *data, size_t len, struct disk_journal_rec *out);
void disk_journal_rec_free(struct disk_journal_rec *r);

#endif
