/*
 * disk.h - the disk store: one JSON file per object, laid out exactly as
 * YurtHub lays out its cache (docs/contracts.md §3), with crash-safe writes.
 *
 *   <cache>/<component>/<resource>.<version>.<group|core>/[<namespace>/]<name>
 *   <cache>/version, <cache>/apis, <cache>/_apis_<group>_<version>, ...
 *   <cache>/_internal/yurthub-c/   the hub's private state:
 *       lock      held (flock) by the one hub that owns the directory
 *       staging/  files and trees being written; garbage after a crash
 *       journal/  records of multi-step operations, for recovery
 *       views/<component>/<resource dir>   the view set of that resource
 *       spare/    emptied files of replaced trees, for the next trees
 *                 (disk_spare.c); no tree's, read by nobody
 *
 * Single writes go through a temp file, a sync, a rename and a sync of the
 * directory, shared by concurrent writers (disk_commit.h).  A view replace
 * builds the new collection beside the old one (unchanged objects are hard
 * links), syncs once, and swaps it in with one atomic rename; a journal
 * record lets recovery finish or roll back a replace that a crash cut short.
 */
#ifndef YURTHUB_STORAGE_DISK_H
#define YURTHUB_STORAGE_DISK_H

#include <stdbool.h>

#include "storage/store.h"

#define DISK_DEFAULT_PATH "/etc/kubernetes/cache/"

enum disk_open_flags {
	DISK_READ_ONLY = 1, /* operator tools: no lock, no recovery, no writes */
	/* Replaced trees' files are kept for the next trees (disk_spare.c)
	 * where that pays, ext4 without a journal; these decide instead: */
	DISK_NO_SPARES = 2, /* never: removed (benchmarks: the store before them) */
	DISK_SPARES = 4,    /* always (tests) */
};

/* What recovery found and did at open. */
struct disk_recovery_report {
	unsigned yurthub_backups_restored; /* YurtHub tmp_* entries */
	unsigned journals_rolled_forward;
	unsigned journals_rolled_back;
	unsigned staging_removed;
};

/* Open (creating it if needed) the cache directory at path, take its lock,
 * and run recovery.  NULL on failure with *err set (malloc'ed, free it). */
struct store *disk_store_open(const char *path, int flags, struct disk_recovery_report *report,
			      char **err);

/* Sync counts, for tests and metrics. */
struct disk_stats {
	unsigned long syncs; /* all syncs issued, group commits included */
	unsigned long replaces;
	unsigned long commit_batches, commit_ops;
};
void disk_store_stats(struct store *s, struct disk_stats *out);
/* Wait until removals of replaced trees have finished (tests, shutdown). */
void disk_store_drain(struct store *s);

/* The in-memory index of the objects (storage/disk_index.h): how many it
 * holds and its size in bytes, and a check that it says what the files say (0, or -1 with *why
 * malloc'ed; takes every lock, for tests). */
void disk_store_index_size(struct store *s, size_t *objects, size_t *bytes);
int disk_store_index_check(struct store *s, char **why);

#endif
