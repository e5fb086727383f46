/*
 * disk_commit.c - leader/follower group commit, see disk_commit.h.
 *
 * Small batches sync file by file (fdatasync, fsync of each directory), so
 * that a lone write does not pay for the whole file system; batches above
 * SYNC_EACH_MAX use one syncfs(2) instead.
 */
#include "storage/disk_commit.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fsutil.h"
#include "util/strmap.h"

#define SYNC_EACH_MAX 8

struct commit_queue {
	int base_fd, staging_fd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct commit_op *head, **tail;
	bool leader_active, held;
	size_t waiting;
	struct commit_stats stats;
};

struct commit_queue *commit_queue_new(int base_fd, int staging_fd)
{
	struct commit_queue *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->base_fd = base_fd;
	q->staging_fd = staging_fd;
	q->tail = &q->head;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	return q;
}

void commit_queue_free(struct commit_queue *q)
{
	if (!q)
		return;
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q);
}

void commit_hold(struct commit_queue *q, bool hold)
{
	pthread_mutex_lock(&q->lock);
	q->held = hold;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

size_t commit_waiting(struct commit_queue *q)
{
	pthread_mutex_lock(&q->lock);
	size_t n = q->waiting;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void commit_get_stats(struct commit_queue *q, struct commit_stats *out)
{
	pthread_mutex_lock(&q->lock);
	*out = q->stats;
	pthread_mutex_unlock(&q->lock);
}

static int sync_whole_fs(struct commit_queue *q, unsigned long *syncs)
{
	(*syncs)++;
	return syncfs(q->base_fd) < 0 ? -errno : 0;
}

/* Make the staged data of the batch durable. */
static int sync_data(struct commit_queue *q, struct commit_op *batch, size_t nfiles,
		     unsigned long *syncs)
{
	if (nfiles > SYNC_EACH_MAX)
		return sync_whole_fs(q, syncs);
	for (struct commit_op *op = batch; op; op = op->next) {
		if (op->kind != COMMIT_RENAME)
			continue;
		(*syncs)++;
		if (fdatasync(op->fd) < 0)
			return -errno;
	}
	return 0;
}

static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
}

/* Make the renames and unlinks of the batch durable. */
static int sync_dirs(struct commit_queue *q, struct commit_op *batch, unsigned long *syncs)
{
	struct strmap dirs = STRMAP_INIT;
	bool whole = false;
	int rc = 0;
	for (struct commit_op *op = batch; op && !whole; op = op->next) {
		if (op->err)
			continue;
		if (op->created_dirs) {
			whole = true;
			break;
		}
		char *p = parent_of(op->dst);
		if (!p || !strmap_put(&dirs, p, NULL))
			whole = true;
		free(p);
		if (dirs.len > SYNC_EACH_MAX)
			whole = true;
	}
	if (whole) {
		rc = sync_whole_fs(q, syncs);
	} else {
		struct strmap_entry *e;
		for (size_t i = 0; (e = strmap_next(&dirs, &i));) {
			(*syncs)++;
			int r = fs_fsync_dir_at(q->base_fd, e->key);
			if (r < 0 && rc == 0)
				rc = r;
		}
	}
	strmap_free(&dirs);
	return rc;
}

static void apply_op(struct commit_queue *q, struct commit_op *op)
{
	int rc;
	if (op->kind == COMMIT_RENAME)
		rc = fs_rename_at(q->staging_fd, op->staged, q->base_fd, op->dst, 0);
	else if ((rc = fs_unlink_at(q->base_fd, op->dst)) == -ENOENT)
		rc = 0;
	op->err = rc;
}

static void process_batch(struct commit_queue *q, struct commit_op *batch, unsigned long *syncs)
{
	size_t nfiles = 0;
	for (struct commit_op *op = batch; op; op = op->next)
		nfiles += op->kind == COMMIT_RENAME;
	int rc = nfiles ? sync_data(q, batch, nfiles, syncs) : 0;
	for (struct commit_op *op = batch; op; op = op->next) {
		op->err = rc;
		if (rc == 0)
			apply_op(q, op);
		if (op->kind == COMMIT_RENAME) {
			close(op->fd);
			op->fd = -1;
			if (op->err) /* never renamed: the staged copy is garbage */
				unlinkat(q->staging_fd, op->staged, 0);
		}
	}
	/* A failed directory sync fails the calls: the renames happened but are
	 * not known to be durable. */
	rc = sync_dirs(q, batch, syncs);
	for (struct commit_op *op = batch; op; op = op->next)
		if (rc < 0 && op->err == 0)
			op->err = rc;
}

void commit_run(struct commit_queue *q, struct commit_op *op)
{
	op->done = false;
	op->err = 0;
	op->next = NULL;
	pthread_mutex_lock(&q->lock);
	*q->tail = op;
	q->tail = &op->next;
	q->waiting++;
	pthread_cond_broadcast(&q->cond);
	while (!op->done) {
		if (q->leader_active || q->held) {
			pthread_cond_wait(&q->cond, &q->lock);
			continue;
		}
		q->leader_active = true;
		struct commit_op *batch = q->head;
		q->head = NULL;
		q->tail = &q->head;
		q->waiting = 0;
		pthread_mutex_unlock(&q->lock);

		unsigned long syncs = 0, n = 0;
		process_batch(q, batch, &syncs);

		pthread_mutex_lock(&q->lock);
		for (struct commit_op *o = batch, *next; o; o = next) {
			next = o->next;
			o->done = true;
			n++;
		}
		q->stats.batches++;
		q->stats.ops += n;
		q->stats.syncs += syncs;
		q->leader_active = false;
		pthread_cond_broadcast(&q->cond);
	}
	pthread_mutex_unlock(&q->lock);
}
