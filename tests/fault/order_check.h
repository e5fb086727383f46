/*
 * order_check.h - does a trace of file-system calls (the injector's
 * YH_FAULT_TRACE lines) survive a power loss at any point?
 *
 * The checker replays the trace on a model: which inodes hold data or
 * directory entries not yet made durable, and which path names which inode.
 * It reports a problem when
 *
 *   publish   a rename moves something into place (anywhere but a scratch
 *             path) before it is durable: a file written (or created) and
 *             not fsync'ed/fdatasync'ed since, nor covered by a syncfs of
 *             its file system; for a directory, the same for every file and
 *             directory under it, entries included;
 *   guard     a directory is renamed while something under a guarded path
 *             (the journal) is not durable: the record that makes the swap
 *             recoverable must be on disk first;
 *   durable   a call that ends successfully (a mark line "end ... rc=0")
 *             renamed something and did not sync, after that rename, the
 *             directory that now shows it (for a rename into a scratch path -
 *             staging - the directory it left), nor any directory above it
 *             that was created or changed before the rename and not synced.
 *
 * Marks: the driver writes "begin <what>" before a store call and
 * "end <what> rc=<n>" after it (yh_fault_mark).  Renames outside a
 * begin/end pair are checked for "publish" and "guard" only.
 */
#ifndef YURTHUB_TESTS_FAULT_ORDER_CHECK_H
#define YURTHUB_TESTS_FAULT_ORDER_CHECK_H

#include <stddef.h>

struct order_check;

struct order_stats {
	unsigned long lines, renames, exchanges, dir_renames, ends_checked, syncs;
	unsigned long renames_in_calls; /* renames whose "durable" rule was checked */
};

struct order_check *order_check_new(void);
void order_check_free(struct order_check *oc);
/* Paths starting with prefix need not be durable (staging). */
int order_check_scratch(struct order_check *oc, const char *prefix);
/* Paths starting with prefix must be durable at every directory rename. */
int order_check_guard(struct order_check *oc, const char *prefix);
/* Feed one trace line (with or without its newline).  -1 only when out of
 * memory; lines that do not parse count as a problem. */
int order_check_line(struct order_check *oc, const char *line);
/* Feed a whole trace file.  0 or -1 (cannot read it). */
int order_check_file(struct order_check *oc, const char *path);
/* The problems found so far: how many, and one line each (NUL-terminated,
 * owned by the checker). */
size_t order_check_problems(const struct order_check *oc);
const char *order_check_report(const struct order_check *oc);
void order_check_stats(const struct order_check *oc, struct order_stats *out);

#endif
