/*
 * disk_commit.h - group commit for single-object writes of the disk store.
 *
 * A writer stages its bytes in a file of the staging directory (no sync),
 * then calls commit_run().  Whoever finds no commit in progress becomes the
 * leader: it takes every op queued so far, makes their data durable with one
 * sync, renames (or unlinks) them into place, makes the directories durable
 * with one more sync, and wakes the others.  Ops that arrive meanwhile form
 * the next batch.  So a burst of watch events shares two syncs, while every
 * call still returns only once its own write is durable.
 */
#ifndef YURTHUB_STORAGE_DISK_COMMIT_H
#define YURTHUB_STORAGE_DISK_COMMIT_H

#include <stdbool.h>
#include <stddef.h>

enum commit_kind { COMMIT_RENAME, COMMIT_UNLINK };

struct commit_op {
	enum commit_kind kind;
	int fd;		   /* RENAME: the staged file, still open; closed by commit_run */
	char staged[32];   /* RENAME: its name in the staging directory */
	const char *dst;   /* path relative to the cache directory */
	bool created_dirs; /* parents of dst were just made: their parents need a sync */
	int err;	   /* result: 0 or -errno */
	/* private to the queue */
	bool done;
	struct commit_op *next;
};

struct commit_queue;

struct commit_queue *commit_queue_new(int base_fd, int staging_fd);
void commit_queue_free(struct commit_queue *q);
/* Blocks until op is durable (op->err == 0) or failed (op->err < 0, and for a
 * RENAME the staged file is removed; the destination is untouched). */
void commit_run(struct commit_queue *q, struct commit_op *op);

/* Tests: while held, no batch starts, so that queued ops pile up into one
 * batch deterministically.  commit_waiting() counts the ops queued. */
void commit_hold(struct commit_queue *q, bool hold);
size_t commit_waiting(struct commit_queue *q);

/* Sync counters, for tests and metrics. */
struct commit_stats {
	unsigned long batches, ops, syncs;
};
void commit_get_stats(struct commit_queue *q, struct commit_stats *out);

#endif
