/*
 * disk_spare.c - inodes of replaced trees, kept for the trees that follow.
 *
 * A relist that changed much writes a new tree and removes the old one
 * (disk_replace.c).  On ext4 without a journal, the inode allocator passes
 * over every inode freed in the last minute (six while the block of its
 * inode table is not written back), checking each again for every new file:
 * 10,000 files made beside 10,000 just removed cost seconds instead of a
 * fraction of one (issue 25 item 6; perf: ext4_new_inode -> find_inode_bit
 * -> recently_deleted), and until the commit an offline list of the view
 * still answers from what was stored before.
 *
 * So the files of a retired tree that no other tree shares (one link) are
 * not removed: the reaper empties each (ftruncate, which frees its blocks
 * but not its inode) and moves it to the pool, _internal/yurthub-c/spare/<n>.
 * A replace writing a new file links a spare into place (and unlinks it
 * from the pool) instead of creating one.  Relist after relist, no inode is freed or allocated; the
 * pool holds at most DISK_SPARE_MAX empty files, no data.
 *
 * Only where that pays: ext4 without a journal (pool_pays()).  With a
 * journal, or on another file system, replaced trees are removed as they
 * always were.
 *
 * Crash safety is that of a new file: a spare belongs to no tree, and one
 * renamed into a new tree is written before the syncfs that precedes that
 * tree's journal record (disk_replace.c), exactly as a file created there.
 * Whatever a crash leaves in the pool is read by nobody; the next start
 * takes it as spares again.
 *
 * A file of a retired tree may still be open by a read that began before
 * the swap (a get; an iterator, which keeps the old namespace directory
 * open): it must go on reading the old bytes.  Removing a file leaves an
 * open one alone, emptying it does not.  So a tree's files become spares
 * only once no reader that began before its retirement is left (readers
 * register, disk_reader_enter); otherwise it is removed as before.  Other
 * processes (the read-only `yurthub cache` tools) do not register: one
 * could read an emptied file if it opened it before a swap and read it
 * after the reaper, a window of one open-to-read.
 */
#include "storage/disk_spare.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "storage/disk_internal.h"
#include "util/fsutil.h"
#include "util/log.h"

#define KEEP_DEPTH_MAX	4      /* N/.old/<ns>/<name> is the deepest a tree goes */
#define EXT_SUPER_MAGIC 0xEF53 /* ext2, ext3 and ext4 alike */

void disk_spares_init(struct disk_spares *sp)
{
	memset(sp, 0, sizeof *sp);
	pthread_mutex_init(&sp->lock, NULL);
	sp->fd = -1;
}

void disk_spares_free(struct disk_spares *sp)
{
	if (sp->fd >= 0)
		close(sp->fd);
	free(sp->ids);
	pthread_mutex_destroy(&sp->lock);
}

/* Under sp->lock. */
static int push_id(struct disk_spares *sp, uint64_t id)
{
	if (sp->n == sp->cap) {
		size_t cap = sp->cap ? sp->cap * 2 : 1024;
		uint64_t *v = realloc(sp->ids, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		sp->ids = v;
		sp->cap = cap;
	}
	sp->ids[sp->n++] = id;
	return 0;
}

static bool parse_id(const char *s, uint64_t *out)
{
	if (!*s || strlen(s) > 20)
		return false;
	uint64_t v = 0;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return false;
		v = v * 10 + (uint64_t)(*c - '0');
	}
	*out = v;
	return true;
}

/* Is there a jbd2 journal for the block device of fd's file system?  The
 * kernel lists each in /proc/fs/jbd2/<device>-<journal inode>.  -1: cannot
 * tell. */
static int has_journal(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -1;
	char sys[64], dev[4096];
	snprintf(sys, sizeof sys, "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	ssize_t n = readlink(sys, dev, sizeof dev - 1);
	if (n <= 0)
		return -1;
	dev[n] = '\0';
	const char *name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	size_t len = strlen(name);
	DIR *dp = opendir("/proc/fs/jbd2");
	if (!dp)
		return errno == ENOENT ? 0 : -1; /* no journal anywhere */
	int found = 0;
	struct dirent *de;
	while (!found && (de = readdir(dp)) != NULL)
		found = !strncmp(de->d_name, name, len) && de->d_name[len] == '-';
	closedir(dp);
	return found;
}

/* Does the pool pay here?  On ext4 without a journal (or ext2/3 by the ext4
 * driver), yes: its allocator checks removed inodes (recently_deleted()
 * only runs without a journal).  Elsewhere a new file is cheap, and a spare
 * (a link, an unlink, blocks freed and taken again) costs a little more
 * than one: measured on a journaled ext4, 10,000 pods relisted took about
 * 1.0 s with spares against 0.55-0.9 s without.  When it cannot tell, it
 * keeps them. */
static bool pool_pays(int base_fd)
{
	struct statfs sf;
	if (fstatfs(base_fd, &sf) < 0)
		return true;
	if (sf.f_type != EXT_SUPER_MAGIC)
		return false;
	return has_journal(base_fd) != 1;
}

int disk_spares_open(struct disk_store *d)
{
	struct disk_spares *sp = &d->spares;
	int fd;
	if (!(d->flags & DISK_SPARES) && !pool_pays(d->base_fd)) {
		log_v(2,
		      "disk store: %s: replaced trees are removed (their inodes are cheap to "
		      "make again here)",
		      d->path);
		return 0;
	}
	if (mkdirat(d->priv_fd, DISK_SPARE_DIR, FS_DIR_MODE) < 0 && errno != EEXIST)
		return -errno;
	if ((fd = fs_open_dir_at(d->priv_fd, DISK_SPARE_DIR)) < 0)
		return fd;
	DIR *dp;
	int rc = fs_opendir_at(fd, ".", &dp);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	struct dirent *de;
	pthread_mutex_lock(&sp->lock);
	while (rc == 0 && (de = readdir(dp)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		uint64_t id;
		if (sp->n < DISK_SPARE_MAX && fs_entry_type(dp, de) == DT_REG &&
		    parse_id(de->d_name, &id)) {
			rc = push_id(sp, id);
			if (id >= sp->next_id)
				sp->next_id = id + 1;
		} else {
			fs_rm_rf_at(fd, de->d_name); /* not ours, or over the limit */
		}
	}
	sp->fd = rc == 0 ? fd : -1;
	pthread_mutex_unlock(&sp->lock);
	closedir(dp);
	if (rc < 0)
		close(fd);
	return rc;
}

uint64_t disk_spares_retire(struct disk_spares *sp)
{
	pthread_mutex_lock(&sp->lock);
	uint64_t seq = ++sp->retired;
	pthread_mutex_unlock(&sp->lock);
	return seq;
}

void disk_reader_enter(struct disk_spares *sp, struct disk_reader *r)
{
	pthread_mutex_lock(&sp->lock);
	r->seq = sp->retired;
	r->prev = NULL;
	r->next = sp->readers;
	if (sp->readers)
		sp->readers->prev = r;
	sp->readers = r;
	pthread_mutex_unlock(&sp->lock);
}

void disk_reader_leave(struct disk_spares *sp, struct disk_reader *r)
{
	pthread_mutex_lock(&sp->lock);
	if (r->prev)
		r->prev->next = r->next;
	else
		sp->readers = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&sp->lock);
}

/* Is a reader that began before retirement seq still running?  A reader
 * that entered after it resolves its paths in the trees that replaced the
 * retired one. */
static bool readers_before(struct disk_spares *sp, uint64_t seq)
{
	bool busy = false;
	pthread_mutex_lock(&sp->lock);
	for (struct disk_reader *r = sp->readers; r && !busy; r = r->next)
		busy = r->seq < seq;
	pthread_mutex_unlock(&sp->lock);
	return busy;
}

/* Empty the file dir_fd/name, if no other tree links it, and move it into
 * the pool.  0 when it is there, else -errno (the caller removes it). */
static int keep_file(struct disk_spares *sp, int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = fstat(fd, &st) < 0 ? -errno : 0;
	if (rc == 0 && (!S_ISREG(st.st_mode) || st.st_nlink != 1))
		rc = -EMLINK; /* shared with a live tree: only this name goes */
	if (rc == 0 && st.st_size > 0 && ftruncate(fd, 0) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&sp->lock);
	bool room = sp->n < DISK_SPARE_MAX;
	uint64_t id = sp->next_id++;
	pthread_mutex_unlock(&sp->lock);
	if (!room)
		return -ENOSPC;
	char idname[24];
	snprintf(idname, sizeof idname, "%" PRIu64, id);
	if (renameat2(dir_fd, name, sp->fd, idname, RENAME_NOREPLACE) < 0)
		return -errno;
	pthread_mutex_lock(&sp->lock);
	rc = push_id(sp, id);
	pthread_mutex_unlock(&sp->lock);
	if (rc < 0)
		unlinkat(sp->fd, idname, 0); /* no memory to remember it: let it go */
	return rc;
}

/* Every entry of the directory dir_fd: files into the pool where they can
 * go, removed where not; directories emptied the same way, then removed. */
static int keep_entries(struct disk_spares *sp, int dir_fd, int depth)
{
	DIR *dp;
	int rc = fs_opendir_at(dir_fd, ".", &dp);
	if (rc < 0)
		return rc;
	struct dirent *de;
	while ((de = readdir(dp)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		unsigned char type = fs_entry_type(dp, de);
		int one = 0;
		if (type == DT_DIR && depth < KEEP_DEPTH_MAX) {
			int sub = fs_open_dir_at(dirfd(dp), de->d_name);
			one = sub < 0 ? sub : keep_entries(sp, sub, depth + 1);
			if (sub >= 0)
				close(sub);
			if (unlinkat(dirfd(dp), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT &&
			    one == 0)
				one = -errno;
		} else if (type != DT_REG || keep_file(sp, dirfd(dp), de->d_name) < 0) {
			one = fs_rm_rf_at(dirfd(dp), de->d_name);
		}
		if (one < 0 && rc == 0)
			rc = one;
	}
	closedir(dp);
	return rc;
}

int disk_spares_keep_tree(struct disk_store *d, const char *name, uint64_t seq)
{
	struct disk_spares *sp = &d->spares;
	if (sp->fd < 0 || readers_before(sp, seq))
		return -EBUSY;
	int fd = fs_open_dir_at(d->staging_fd, name);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	int rc = keep_entries(sp, fd, 1);
	close(fd);
	if (rc == 0 && unlinkat(d->staging_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

static bool pop_id(struct disk_spares *sp, uint64_t *id)
{
	pthread_mutex_lock(&sp->lock);
	bool any = sp->fd >= 0 && sp->n > 0;
	if (any)
		*id = sp->ids[--sp->n];
	pthread_mutex_unlock(&sp->lock);
	return any;
}

int disk_spares_take(struct disk_store *d, int dir_fd, const char *rel)
{
	struct disk_spares *sp = &d->spares;
	uint64_t id;
	char idname[24];
	for (;;) {
		if (!pop_id(sp, &id))
			return -ENOENT;
		snprintf(idname, sizeof idname, "%" PRIu64, id);
		/* a link and an unlink, not a rename: a rename from one directory
		 * to another takes a lock of the whole file system, for which the
		 * writer threads would queue */
		if (linkat(sp->fd, idname, dir_fd, rel, 0) == 0) {
			if (unlinkat(sp->fd, idname, 0) == 0 || errno == ENOENT)
				break;
			unlinkat(dir_fd, rel, 0); /* two links: not a file of its own */
			return -ENOENT;
		}
		int err = errno;
		if (err == ENOENT)
			continue; /* gone from the pool: the next one */
		pthread_mutex_lock(&sp->lock);
		if (push_id(sp, id) < 0)
			unlinkat(sp->fd, idname, 0);
		pthread_mutex_unlock(&sp->lock);
		/* EEXIST is O_EXCL's answer; anything else, creating the file
		 * says for itself */
		return err == EEXIST ? -EEXIST : -ENOENT;
	}
	int fd = openat(dir_fd, rel, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
		  (st.st_size == 0 || ftruncate(fd, 0) == 0);
	if (!ok) {
		/* not a file of its own after all: it goes, a new one is made */
		if (fd >= 0)
			close(fd);
		unlinkat(dir_fd, rel, 0);
		return -ENOENT;
	}
	return fd;
}
