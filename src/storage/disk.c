/*
 * disk.c - the disk store: opening a cache directory, single-object
 * operations, lists, view records and cluster info.  View replaces are in
 * disk_replace.c, startup recovery in disk_recover.c; the layout and the
 * crash-safety argument are in disk.h.
 */
#include "storage/disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/meta.h"
#include "kube/selectable.h"
#include "storage/disk_internal.h"
#include "util/fsutil.h"
#include "util/log.h"

/* ---- small shared helpers ---- */

static uint64_t hash_bytes(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h ^ (h >> 31);
}

pthread_rwlock_t *disk_res_lock(struct disk_store *d, const char *component, const char *resdir)
{
	uint64_t h = hash_bytes(component) * 31 + hash_bytes(resdir);
	return &d->res_locks[h % RES_STRIPES];
}

/* ---- locks, in the order of disk_internal.h ---- */

#ifdef YURTHUB_LOCK_CHECK
/* The levels this thread holds: bit 1 global, 2 a resource stripe, 3 a key
 * stripe. */
static _Thread_local unsigned held_levels;

static void lock_order_enter(unsigned level)
{
	bool ok = !(held_levels >> level) && !(held_levels & (1u << level)) &&
		  (level == 1 || (held_levels & 2u));
	if (!ok) {
		log_error("disk store: lock level %u taken while holding 0x%x: lock order broken",
			  level, held_levels);
		abort();
	}
	held_levels |= 1u << level;
}

static void lock_order_leave(unsigned level)
{
	held_levels &= ~(1u << level);
}
#else
static void lock_order_enter(unsigned level)
{
	(void)level;
}

static void lock_order_leave(unsigned level)
{
	(void)level;
}
#endif

pthread_rwlock_t *disk_lock_resource(struct disk_store *d, const char *component,
				     const char *resdir, enum disk_lock_mode mode)
{
	pthread_rwlock_t *rl = disk_res_lock(d, component, resdir);
	lock_order_enter(1);
	pthread_rwlock_rdlock(&d->global);
	lock_order_enter(2);
	if (mode == DISK_EXCLUSIVE)
		pthread_rwlock_wrlock(rl);
	else
		pthread_rwlock_rdlock(rl);
	return rl;
}

void disk_unlock_resource(struct disk_store *d, pthread_rwlock_t *stripe)
{
	pthread_rwlock_unlock(stripe);
	lock_order_leave(2);
	pthread_rwlock_unlock(&d->global);
	lock_order_leave(1);
}

void disk_lock_all(struct disk_store *d)
{
	lock_order_enter(1);
	pthread_rwlock_wrlock(&d->global);
}

void disk_unlock_all(struct disk_store *d)
{
	pthread_rwlock_unlock(&d->global);
	lock_order_leave(1);
}

pthread_mutex_t *disk_lock_key(struct disk_store *d, const char *path)
{
	pthread_mutex_t *kl = &d->key_locks[hash_bytes(path) % KEY_STRIPES];
	lock_order_enter(3);
	pthread_mutex_lock(kl);
	return kl;
}

void disk_unlock_key(pthread_mutex_t *stripe)
{
	pthread_mutex_unlock(stripe);
	lock_order_leave(3);
}

void disk_seq_name(struct disk_store *d, char prefix, char *out, size_t size)
{
	unsigned long n = atomic_fetch_add(&d->seq, 1);
	snprintf(out, size, "%c%lu", prefix, n);
}

int disk_syncfs(struct disk_store *d)
{
	atomic_fetch_add(&d->syncs, 1);
	return syncfs(d->base_fd) < 0 ? -errno : 0;
}

/* The resource directory of a key: its path up to the second '/'. */
static char *key_resdir_path(const struct store_key *k)
{
	const char *first = strchr(k->path, '/');
	const char *second = first ? strchr(first + 1, '/') : NULL;
	return second ? strndup(k->path, (size_t)(second - k->path)) : strdup(k->path);
}

static const char *resdir_name(const char *resdir_path)
{
	const char *slash = strchr(resdir_path, '/');
	return slash ? slash + 1 : resdir_path;
}

static enum store_err read_only_error(void)
{
	return store_fail_errno(EROFS);
}

/* ---- the background reaper of replaced trees ---- */

static void *reaper_main(void *arg)
{
	struct disk_store *d = arg;
	pthread_mutex_lock(&d->reap_lock);
	for (;;) {
		while (!d->reap_head && !d->reaper_stop)
			pthread_cond_wait(&d->reap_cond, &d->reap_lock);
		if (d->reaper_stop)
			break;
		struct reap_item *it = d->reap_head;
		d->reap_head = it->next;
		d->reaper_busy = true;
		pthread_mutex_unlock(&d->reap_lock);
		/* its files for the next trees if it can (disk_spare.c), the rest
		 * removed */
		int rc = disk_spares_keep_tree(d, it->name, it->retired);
		if (rc < 0)
			rc = fs_rm_rf_at(d->staging_fd, it->name);
		if (rc < 0)
			log_warn("disk store: cannot remove staging/%s: %s", it->name,
				 strerror(-rc));
		free(it);
		pthread_mutex_lock(&d->reap_lock);
		d->reaper_busy = false;
		pthread_cond_broadcast(&d->reap_cond);
	}
	pthread_mutex_unlock(&d->reap_lock);
	return NULL;
}

void disk_reap(struct disk_store *d, const char *staging_name)
{
	struct reap_item *it = calloc(1, sizeof *it);
	if (!it) {
		fs_rm_rf_at(d->staging_fd, staging_name); /* no memory: do it now */
		return;
	}
	snprintf(it->name, sizeof it->name, "%s", staging_name);
	it->retired = disk_spares_retire(&d->spares);
	pthread_mutex_lock(&d->reap_lock);
	if (!d->reaper_running) {
		if (pthread_create(&d->reaper, NULL, reaper_main, d) == 0)
			d->reaper_running = true;
	}
	if (!d->reaper_running) {
		pthread_mutex_unlock(&d->reap_lock);
		fs_rm_rf_at(d->staging_fd, staging_name);
		free(it);
		return;
	}
	struct reap_item **tail = &d->reap_head;
	while (*tail)
		tail = &(*tail)->next;
	*tail = it;
	pthread_cond_broadcast(&d->reap_cond);
	pthread_mutex_unlock(&d->reap_lock);
}

void disk_store_drain(struct store *s)
{
	struct disk_store *d = disk_of(s);
	pthread_mutex_lock(&d->reap_lock);
	while (d->reap_head || d->reaper_busy)
		pthread_cond_wait(&d->reap_cond, &d->reap_lock);
	pthread_mutex_unlock(&d->reap_lock);
}

/* ---- view files ---- */

static char *views_file_path(const char *component, const char *resdir)
{
	struct buf p = BUF_INIT;
	if (buf_printf(&p, "%s/%s", component, resdir) < 0)
		return NULL;
	return buf_steal(&p);
}

int disk_views_file_exists(struct disk_store *d, const char *component, const char *resdir)
{
	char *p = views_file_path(component, resdir);
	if (!p)
		return -ENOMEM;
	int r = fs_exists_at(d->views_fd, p);
	free(p);
	return r;
}

int disk_views_load(struct disk_store *d, const char *component, const char *resdir,
		    struct view_set *out, bool *synthesized)
{
	memset(out, 0, sizeof *out);
	if (synthesized)
		*synthesized = false;
	char *p = views_file_path(component, resdir);
	if (!p)
		return -ENOMEM;
	struct buf b = BUF_INIT;
	int rc = d->views_fd >= 0 ? fs_read_file_at(d->views_fd, p, &b, 16u << 20) : -ENOENT;
	free(p);
	if (rc == 0) {
		if (view_set_decode(b.data, b.len, out) < 0) {
			/* Written atomically, so this is damage from outside: the
			 * safe reading is "never listed". */
			log_warn("disk store: unreadable view file for %s/%s, ignored", component,
				 resdir);
		}
		buf_free(&b);
		return 0;
	}
	buf_free(&b);
	if (rc != -ENOENT)
		return rc;
	/* No view file: a resource directory left by the Go YurtHub means what
	 * it meant there - one list of everything under it. */
	struct buf dir = BUF_INIT;
	if (buf_printf(&dir, "%s/%s", component, resdir) < 0)
		return -ENOMEM;
	int isdir = fs_is_dir_at(d->base_fd, dir.data);
	buf_free(&dir);
	if (isdir == 1) {
		struct view_rec all = {"", "", "", 0};
		if (view_set_put(out, &all, 0) < 0)
			return -ENOMEM;
		if (synthesized)
			*synthesized = true;
	}
	return 0;
}

int disk_views_save(struct disk_store *d, const char *component, const char *resdir,
		    const struct view_set *set)
{
	int created = 0;
	int rc = fs_mkdir_p_at(d->views_fd, component, FS_DIR_MODE, &created);
	if (rc == 0 && created)
		rc = fs_fsync_dir_at(d->views_fd, ".");
	if (rc < 0)
		return rc;
	struct buf b = BUF_INIT;
	if (view_set_encode(set, &b) < 0) {
		buf_free(&b);
		return -ENOMEM;
	}
	int cfd = openat(d->views_fd, component, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (cfd < 0) {
		buf_free(&b);
		return -errno;
	}
	atomic_fetch_add(&d->syncs, 2);
	rc = fs_write_file_atomic(cfd, resdir, b.data, b.len, FS_FILE_MODE);
	close(cfd);
	buf_free(&b);
	return rc;
}

/* Before the first object lands in a resource directory the hub made, an
 * empty view file marks the directory as ours: "objects, but no list yet". */
static int ensure_views_marker(struct disk_store *d, const char *component, const char *resdir)
{
	int r = disk_views_file_exists(d, component, resdir);
	if (r != 0)
		return r < 0 ? r : 0;
	struct buf dir = BUF_INIT;
	if (buf_printf(&dir, "%s/%s", component, resdir) < 0)
		return -ENOMEM;
	int isdir = fs_is_dir_at(d->base_fd, dir.data);
	buf_free(&dir);
	if (isdir == 1)
		return 0; /* YurtHub's directory: keep its meaning */
	struct view_set empty = {0};
	return disk_views_save(d, component, resdir, &empty);
}

/* ---- single objects ---- */

static enum store_err disk_key_build(struct store *s, const struct store_key_info *info,
				     struct store_key *out)
{
	return key_build_disk(disk_of(s)->layout, info, out);
}

static enum store_err check_content(const struct store_key *key, const char *data, size_t len)
{
	if (!data || len == 0)
		return STORE_EMPTY_CONTENT;
	struct kube_meta m;
	enum store_err e = STORE_OK;
	if (kube_meta_parse(data, len, &m) < 0 || m.nul_in_name)
		e = STORE_INVALID_CONTENT; /* "a\u0000b" is not object "a" */
	else if (m.name && strcmp(m.name, key->name))
		e = STORE_INVALID_CONTENT;
	else if (m.namespace && *m.namespace && *key->namespace &&
		 strcmp(m.namespace, key->namespace))
		e = STORE_INVALID_CONTENT;
	kube_meta_free(&m);
	return e;
}

static int stage_bytes(struct disk_store *d, struct commit_op *op, const char *data, size_t len)
{
	disk_seq_name(d, 'w', op->staged, sizeof op->staged);
	op->fd = openat(d->staging_fd, op->staged, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			FS_FILE_MODE);
	if (op->fd < 0)
		return -errno;
	int rc = fs_write_all(op->fd, data, len);
	if (rc < 0) {
		close(op->fd);
		op->fd = -1;
		unlinkat(d->staging_fd, op->staged, 0);
	}
	return rc;
}

static int make_parent_dirs(struct disk_store *d, const char *path, bool *created)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return 0;
	char *parent = strndup(path, (size_t)(slash - path));
	if (!parent)
		return -ENOMEM;
	int made = 0;
	int rc = fs_mkdir_p_at(d->base_fd, parent, FS_DIR_MODE, &made);
	free(parent);
	*created = made != 0;
	return rc;
}

/* WRITE_FORCE: create or update, whatever the stored rv (STORE_EVENT_RESTORE) */
enum write_mode { WRITE_CREATE, WRITE_UPDATE, WRITE_FORCE };

/* Stage, commit and wait: the write is durable when this returns 0. */
static int commit_object(struct disk_store *d, const struct store_key *key, const char *data,
			 size_t len)
{
	struct commit_op op = {.kind = COMMIT_RENAME, .fd = -1, .dst = key->path};
	int rc = make_parent_dirs(d, key->path, &op.created_dirs);
	if (rc == 0)
		rc = stage_bytes(d, &op, data, len);
	if (rc < 0)
		return rc;
	commit_run(d->commit, &op);
	return op.err;
}

/* The locks of one object key, in order (disk_internal.h), and its
 * resource directory "component/resdir". */
struct object_locks {
	char *resdir;
	pthread_rwlock_t *res;
	pthread_mutex_t *key;
};

static int lock_object(struct disk_store *d, const struct store_key *key, struct object_locks *l)
{
	if (!(l->resdir = key_resdir_path(key)))
		return -ENOMEM;
	l->res = disk_lock_resource(d, key->component, resdir_name(l->resdir), DISK_SHARED);
	l->key = disk_lock_key(d, key->path);
	return 0;
}

/* The object's path inside its resource directory: the index's name. */
static const char *object_rel(const struct store_key *key, const struct object_locks *l)
{
	size_t n = strlen(l->resdir);
	return key->path[n] == '/' ? key->path + n + 1 : key->path + n;
}

static void unlock_object(struct disk_store *d, struct object_locks *l)
{
	disk_unlock_key(l->key);
	disk_unlock_resource(d, l->res);
	free(l->resdir);
}

/* Remove an object's file durably, through the commit queue. */
static int unlink_object(struct disk_store *d, const char *path)
{
	struct commit_op op = {.kind = COMMIT_UNLINK, .fd = -1, .dst = path};
	commit_run(d->commit, &op);
	return op.err;
}

static enum store_err write_object(struct disk_store *d, const struct store_key *key,
				   const char *data, size_t len, enum write_mode mode, uint64_t rv,
				   struct buf *stored)
{
	struct buf old = BUF_INIT;
	struct object_locks locks;
	if (lock_object(d, key, &locks) < 0)
		return STORE_NOMEM;
	enum store_err e = STORE_OK;
	int rc = fs_read_file_at(d->base_fd, key->path, &old, DISK_OBJECT_MAX);
	if (rc == 0 && mode == WRITE_CREATE) {
		e = STORE_EXISTS;
	} else if (rc == -ENOENT || rc == -ENOTDIR) {
		if (mode == WRITE_UPDATE)
			e = STORE_NOT_FOUND;
	} else if (rc == -EISDIR) {
		e = STORE_BAD_KEY; /* a collection sits where the object would go */
	} else if (rc < 0) {
		e = store_fail_errno(rc);
	} else {
		uint64_t stored_rv = 0;
		kube_meta_rv(old.data, old.len, &stored_rv);
		if (rv < stored_rv && mode != WRITE_FORCE) {
			e = STORE_CONFLICT;
			if (stored && buf_append(stored, old.data, old.len) < 0)
				e = STORE_NOMEM;
		}
	}
	if (e == STORE_OK) {
		rc = ensure_views_marker(d, key->component, resdir_name(locks.resdir));
		if (rc == 0)
			rc = commit_object(d, key, data, len);
		if (rc == 0) {
			uint64_t new_rv = 0;
			kube_meta_rv(data, len, &new_rv);
			/* no memory: the index marks itself stale, and is built
			 * again when next needed; the write itself is done */
			disk_index_put(d, key->component, resdir_name(locks.resdir),
				       object_rel(key, &locks), new_rv, data, len);
		}
		if (rc < 0)
			e = store_fail_errno(rc);
	}
	unlock_object(d, &locks);
	buf_free(&old);
	return e;
}

static enum store_err disk_create(struct store *s, const struct store_key *key, const char *data,
				  size_t len)
{
	struct disk_store *d = disk_of(s);
	if (!key || !key->path)
		return STORE_EMPTY_KEY;
	if (key->is_root)
		return STORE_EMPTY_KEY;
	enum store_err e = check_content(key, data, len);
	if (e != STORE_OK)
		return e;
	if (d->flags & DISK_READ_ONLY)
		return read_only_error();
	uint64_t rv = 0;
	kube_meta_rv(data, len, &rv);
	return write_object(d, key, data, len, WRITE_CREATE, rv, NULL);
}

static enum store_err disk_update(struct store *s, const struct store_key *key, const char *data,
				  size_t len, uint64_t rv, struct buf *stored)
{
	struct disk_store *d = disk_of(s);
	if (!key || !key->path)
		return STORE_EMPTY_KEY;
	if (key->is_root)
		return STORE_EMPTY_KEY;
	enum store_err e = check_content(key, data, len);
	if (e != STORE_OK)
		return e;
	if (d->flags & DISK_READ_ONLY)
		return read_only_error();
	return write_object(d, key, data, len, WRITE_UPDATE, rv, stored);
}

/* Views of a collection being deleted go first: a crash in between must
 * leave "not cached", never "listed and empty". */
static int drop_views_under(struct disk_store *d, const struct store_key *root, const char *resdir)
{
	struct view_set set;
	int rc = disk_views_load(d, root->component, resdir, &set, NULL);
	if (rc < 0)
		return rc;
	struct view_set kept = {0};
	for (size_t i = 0; i < set.n && rc == 0; i++) {
		/* Views of another namespace survive; views of this one or of all
		 * namespaces lose objects they claim, so they go. */
		if (*root->namespace && *set.v[i].namespace &&
		    strcmp(set.v[i].namespace, root->namespace))
			rc = view_set_put(&kept, &set.v[i], set.v[i].rv) < 0 ? -ENOMEM : 0;
	}
	if (rc == 0 && (kept.n != set.n || disk_views_file_exists(d, root->component, resdir) == 0))
		rc = disk_views_save(d, root->component, resdir, &kept);
	view_set_free(&kept);
	view_set_free(&set);
	return rc;
}

static int delete_tree(struct disk_store *d, const struct store_key *root, const char *resdir)
{
	int rc = drop_views_under(d, root, resdir);
	if (rc < 0)
		return rc;
	char name[48];
	disk_seq_name(d, 'd', name, sizeof name);
	rc = fs_rename_at(d->base_fd, root->path, d->staging_fd, name, 0);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	const char *slash = strrchr(root->path, '/');
	char *parent = slash ? strndup(root->path, (size_t)(slash - root->path)) : strdup(".");
	if (!parent)
		return -ENOMEM;
	atomic_fetch_add(&d->syncs, 1);
	rc = fs_fsync_dir_at(d->base_fd, parent);
	free(parent);
	disk_reap(d, name);
	return rc;
}

static enum store_err disk_delete(struct store *s, const struct store_key *key)
{
	struct disk_store *d = disk_of(s);
	if (!key || !key->path)
		return STORE_EMPTY_KEY;
	if (d->flags & DISK_READ_ONLY)
		return read_only_error();
	int rc;
	if (key->is_root) {
		char *resdir = key_resdir_path(key);
		if (!resdir)
			return STORE_NOMEM;
		pthread_rwlock_t *rl =
		    disk_lock_resource(d, key->component, resdir_name(resdir), DISK_EXCLUSIVE);
		rc = delete_tree(d, key, resdir_name(resdir));
		disk_index_forget(d, key->component, resdir_name(resdir));
		disk_unlock_resource(d, rl);
		free(resdir);
	} else {
		struct object_locks locks;
		if (lock_object(d, key, &locks) < 0)
			return STORE_NOMEM;
		rc = fs_is_dir_at(d->base_fd, key->path);
		if (rc == 1)
			rc = -EISDIR; /* an object key naming a collection */
		else if (rc == 0)
			rc = unlink_object(d, key->path);
		else if (rc == -ENOENT || rc == -ENOTDIR)
			rc = 0; /* deleting what is not there is not an error */
		if (rc == 0)
			disk_index_remove(d, key->component, resdir_name(locks.resdir),
					  object_rel(key, &locks));
		unlock_object(d, &locks);
	}
	if (rc == -EISDIR)
		return STORE_BAD_KEY;
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}

/* DELETED at rv: the copy goes unless it is at rv or newer (the version
 * that left the view, or a newer incarnation, delivered by another view).
 * Under the key lock, so that a concurrent write of that version is either
 * seen here or comes after. */
static enum store_err delete_unless_newer(struct disk_store *d, const struct store_key *key,
					  uint64_t rv)
{
	struct buf old = BUF_INIT;
	struct object_locks locks;
	if (lock_object(d, key, &locks) < 0)
		return STORE_NOMEM;
	int rc = fs_read_file_at(d->base_fd, key->path, &old, DISK_OBJECT_MAX);
	uint64_t stored = 0;
	if (rc == 0 && (kube_meta_rv(old.data, old.len, &stored) < 0 || stored < rv)) {
		rc = unlink_object(d, key->path);
		if (rc == 0)
			disk_index_remove(d, key->component, resdir_name(locks.resdir),
					  object_rel(key, &locks));
	} else if (rc == -ENOENT || rc == -ENOTDIR) {
		rc = 0; /* not held: nothing to do */
	}
	unlock_object(d, &locks);
	buf_free(&old);
	if (rc == -EISDIR)
		return STORE_BAD_KEY;
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}

/* A view's watch event.  Each component has its own copy here, written
 * only through its own views and reads, so membership needs no record: a
 * PUT is a write in rv order, a DELETED a delete unless newer. */
static enum store_err disk_view_event(struct store *s, const struct store_view *view,
				      const struct store_key *key, enum store_event type,
				      const char *data, size_t len, uint64_t rv)
{
	struct disk_store *d = disk_of(s);
	if ((!view && type != STORE_EVENT_RESTORE) || !key || !key->path || key->is_root)
		return STORE_EMPTY_KEY;
	if (d->flags & DISK_READ_ONLY)
		return read_only_error();
	if (type == STORE_EVENT_DELETED)
		return delete_unless_newer(d, key, rv);
	enum store_err e = check_content(key, data, len);
	if (e != STORE_OK)
		return e;
	if (type == STORE_EVENT_RESTORE)
		return write_object(d, key, data, len, WRITE_FORCE, rv, NULL);
	e = write_object(d, key, data, len, WRITE_UPDATE, rv, NULL);
	if (e == STORE_NOT_FOUND)
		e = write_object(d, key, data, len, WRITE_CREATE, rv, NULL);
	if (e == STORE_EXISTS) /* created meanwhile */
		e = write_object(d, key, data, len, WRITE_UPDATE, rv, NULL);
	return e == STORE_CONFLICT ? STORE_OK : e; /* older than stored: not news */
}

static enum store_err disk_get(struct store *s, const struct store_key *key, struct buf *out)
{
	struct disk_store *d = disk_of(s);
	if (!key || !key->path)
		return STORE_EMPTY_KEY;
	struct disk_reader reader; /* the file may be one a replace retires meanwhile */
	disk_reader_enter(&d->spares, &reader);
	int rc = fs_read_file_at(d->base_fd, key->path, out, DISK_OBJECT_MAX);
	disk_reader_leave(&d->spares, &reader);
	if (rc == -ENOENT || rc == -ENOTDIR)
		return STORE_NOT_FOUND;
	if (rc == -EISDIR)
		return STORE_EMPTY_CONTENT;
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}

/* ---- walking collections ---- */

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the entries of dir (relative to dirfd) of the wanted
 * kind: files (want_dirs false) or directories.  YurtHub backups (tmp_*)
 * and dot files are skipped. */
static int sorted_entries(int at_fd, const char *dir, bool want_dirs, char ***names, size_t *n)
{
	*names = NULL;
	*n = 0;
	DIR *dp;
	int rc = fs_opendir_at(at_fd, dir, &dp);
	if (rc < 0)
		return rc;
	size_t cap = 0;
	struct dirent *de;
	while ((de = readdir(dp)) != NULL) {
		if (de->d_name[0] == '.' || !strncmp(de->d_name, "tmp_", 4))
			continue;
		unsigned char type = fs_entry_type(dp, de);
		if ((want_dirs && type != DT_DIR) || (!want_dirs && type != DT_REG))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(*names, cap * sizeof *nn);
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			*names = nn;
		}
		if (!((*names)[*n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		(*n)++;
	}
	closedir(dp);
	if (*n)
		qsort(*names, *n, sizeof **names, cmp_names);
	return rc;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int disk_walk_collection(int base_fd, const char *dir, const char *dir_ns, object_path_fn fn,
			 void *ctx)
{
	char **files = NULL, **subdirs = NULL;
	size_t nfiles = 0, nsub = 0;
	int rc = sorted_entries(base_fd, dir, false, &files, &nfiles);
	if (rc == 0 && !*dir_ns)
		rc = sorted_entries(base_fd, dir, true, &subdirs, &nsub);
	struct buf p = BUF_INIT;
	int stop = 0;
	for (size_t i = 0; rc == 0 && !stop && i < nfiles; i++) {
		buf_reset(&p);
		if (buf_printf(&p, "%s/%s", dir, files[i]) < 0)
			rc = -ENOMEM;
		else
			stop = fn(ctx, dir_ns, files[i], p.data);
	}
	for (size_t i = 0; rc == 0 && !stop && i < nsub; i++) {
		char **inner = NULL;
		size_t ninner = 0;
		buf_reset(&p);
		if (buf_printf(&p, "%s/%s", dir, subdirs[i]) < 0) {
			rc = -ENOMEM;
			break;
		}
		char *subpath = strdup(p.data);
		rc = subpath ? sorted_entries(base_fd, subpath, false, &inner, &ninner) : -ENOMEM;
		for (size_t j = 0; rc == 0 && !stop && j < ninner; j++) {
			buf_reset(&p);
			if (buf_printf(&p, "%s/%s", subpath, inner[j]) < 0)
				rc = -ENOMEM;
			else
				stop = fn(ctx, subdirs[i], inner[j], p.data);
		}
		if (rc == -ENOENT)
			rc = 0; /* a namespace directory removed meanwhile */
		free(subpath);
		free_names(inner, ninner);
	}
	buf_free(&p);
	free_names(files, nfiles);
	free_names(subdirs, nsub);
	return rc < 0 ? rc : stop;
}

struct list_walk {
	struct disk_store *d;
	const struct store_key *root;
	store_object_fn obj_fn;
	store_key_fn key_fn;
	void *ctx;
	struct buf data;
	int err;
};

static int visit_object(void *ctx, const char *ns, const char *name, const char *path)
{
	struct list_walk *w = ctx;
	struct store_key_info info = {
	    w->root->component, w->root->group, w->root->version, w->root->resource, ns, name};
	struct store_key k;
	if (key_build_disk(w->d->layout, &info, &k) != STORE_OK)
		return 0; /* a name we would not have written: not an object of ours */
	int stop = 0;
	if (w->obj_fn) {
		int rc = fs_read_file_at(w->d->base_fd, path, &w->data, DISK_OBJECT_MAX);
		if (rc == 0)
			stop = w->obj_fn(w->ctx, &k, w->data.data, w->data.len);
		else if (rc != -ENOENT)
			w->err = rc, stop = 1;
	} else {
		stop = w->key_fn(w->ctx, &k);
	}
	store_key_free(&k);
	return stop;
}

static enum store_err walk_locked(struct list_walk *w, const char *resdir)
{
	struct disk_store *d = w->d;
	pthread_rwlock_t *rl = disk_lock_resource(d, w->root->component, resdir, DISK_SHARED);
	int rc = fs_is_dir_at(d->base_fd, w->root->path);
	if (rc == 0 && w->obj_fn && !w->root->is_root) {
		rc = visit_object(w, w->root->namespace, w->root->name, w->root->path) ? 1 : 0;
	} else if (rc == 0) {
		rc = -ENOTDIR;
	} else if (rc == 1) {
		rc = disk_walk_collection(d->base_fd, w->root->path, w->root->namespace,
					  visit_object, w);
	}
	disk_unlock_resource(d, rl);
	if (w->err)
		rc = w->err;
	if (rc == -ENOENT || rc == -ENOTDIR)
		return STORE_NOT_FOUND;
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}

static enum store_err disk_list(struct store *s, const struct store_key *root, store_object_fn fn,
				void *ctx)
{
	if (!root || !root->path)
		return STORE_EMPTY_KEY;
	char *resdir = key_resdir_path(root);
	if (!resdir)
		return STORE_NOMEM;
	struct list_walk w = {disk_of(s), root, fn, NULL, ctx, BUF_INIT, 0};
	enum store_err e = walk_locked(&w, resdir_name(resdir));
	buf_free(&w.data);
	free(resdir);
	return e;
}

static enum store_err root_key_of(struct disk_store *d, const char *component,
				  const struct store_gvr *gvr, struct store_key *root)
{
	if (!component || !*component)
		return STORE_EMPTY_KEY;
	if (!gvr || !gvr->resource || !*gvr->resource)
		return STORE_EMPTY_KEY;
	struct store_key_info info = {component, gvr->group, gvr->version, gvr->resource, "", ""};
	return key_build_disk(d->layout, &info, root);
}

static enum store_err disk_list_keys(struct store *s, const char *component,
				     const struct store_gvr *gvr, store_key_fn fn, void *ctx)
{
	struct disk_store *d = disk_of(s);
	struct store_key root;
	enum store_err e = root_key_of(d, component, gvr, &root);
	if (e != STORE_OK)
		return e;
	struct list_walk w = {d, &root, NULL, fn, ctx, BUF_INIT, 0};
	e = walk_locked(&w, resdir_name(root.path));
	store_key_free(&root);
	return e;
}

/* ---- iterating a collection page by page ---- */

struct disk_iter {
	struct store_iter base;
	struct disk_store *d;
	struct store_key root;
	/* it reads files after the lock is gone, from a directory it keeps
	 * open: a tree retired meanwhile stays as it was until it is done */
	struct disk_reader reader;
	bool reading;
	/* every object under root, sorted by (namespace, name); namespaces are
	 * interned, and the names are one buffer of NUL-terminated strings, so
	 * that a big collection costs a few large blocks, given back whole to
	 * the system when the iterator goes, not thousands of small ones */
	char **nss;
	size_t nns;
	struct buf names;
	struct iter_entry {
		const char *ns;
		size_t name_at; /* in names */
	} * e;
	size_t n, cap, next;
	bool oom;
	/* what iter_next hands out: fields point into the iterator */
	struct store_key current;
	/* the directory of the namespace being read, kept open: objects come
	 * sorted by namespace, so a read is one openat of a plain name */
	int dir_fd;
	const char *dir_ns;
};

static const char *intern_ns(struct disk_iter *it, const char *ns)
{
	if (it->nns && !strcmp(it->nss[it->nns - 1], ns))
		return it->nss[it->nns - 1]; /* the walk gives one namespace at a time */
	char **v = realloc(it->nss, (it->nns + 1) * sizeof *v);
	if (!v)
		return NULL;
	it->nss = v;
	if (!(v[it->nns] = strdup(ns)))
		return NULL;
	return v[it->nns++];
}

static int collect_entry(void *ctx, const char *ns, const char *name, const char *path)
{
	(void)path;
	struct disk_iter *it = ctx;
	if (it->n == it->cap) {
		size_t cap = it->cap ? it->cap * 2 : 256;
		struct iter_entry *e = realloc(it->e, cap * sizeof *e);
		if (!e) {
			it->oom = true;
			return 1;
		}
		it->e = e;
		it->cap = cap;
	}
	const char *ins = intern_ns(it, ns ? ns : "");
	size_t at = it->names.len;
	if (!ins || buf_append(&it->names, name, strlen(name) + 1) < 0) {
		it->oom = true;
		return 1;
	}
	it->e[it->n++] = (struct iter_entry){ins, at};
	return 0;
}

static void disk_iter_free(struct store_iter *base)
{
	struct disk_iter *it = (struct disk_iter *)base;
	if (!it)
		return;
	for (size_t i = 0; i < it->nns; i++)
		free(it->nss[i]);
	buf_free(&it->names);
	free(it->e);
	free(it->nss);
	store_key_free(&it->root);
	if (it->dir_fd >= 0)
		close(it->dir_fd);
	if (it->reading)
		disk_reader_leave(&it->d->spares, &it->reader);
	free(it);
}

/* Is (ns, name) after "ns/name"?  A start without '/' is a name within one
 * namespace (or of a cluster-scoped resource): names alone are compared. */
static bool after_start(const char *ns, const char *name, const char *start)
{
	const char *slash = strchr(start, '/');
	if (!slash)
		return strcmp(name, start) > 0;
	size_t nslen = (size_t)(slash - start);
	int c = strncmp(ns, start, nslen);
	if (c == 0 && strlen(ns) != nslen)
		c = strlen(ns) > nslen ? 1 : -1;
	if (c != 0)
		return c > 0;
	return strcmp(name, slash + 1) > 0;
}

/* Collected: skip to start_after, and set what iter_next hands out. */
static void iter_ready(struct disk_iter *it, const char *start_after)
{
	if (start_after && *start_after)
		while (it->next < it->n &&
		       !after_start(it->e[it->next].ns, it->names.data + it->e[it->next].name_at,
				    start_after))
			it->next++;
	it->current = it->root;
	it->current.is_root = 0;
}

/* An empty iterator over the collection at root; collect_entry() fills it. */
static enum store_err iter_new(struct store *s, const struct store_key *root,
			       struct disk_iter **out)
{
	struct disk_iter *it = calloc(1, sizeof *it);
	*out = it;
	if (!it)
		return STORE_NOMEM;
	it->base.store = s;
	it->d = disk_of(s);
	it->dir_fd = -1;
	disk_reader_enter(&it->d->spares, &it->reader);
	it->reading = true;
	struct store_key_info info = {root->component, root->group,	root->version,
				      root->resource,  root->namespace, root->name};
	return key_build_disk(it->d->layout, &info, &it->root);
}

static enum store_err disk_iter_begin(struct store *s, const struct store_key *root,
				      const char *start_after, struct store_iter **out)
{
	struct disk_store *d = disk_of(s);
	*out = NULL;
	if (!root || !root->path)
		return STORE_EMPTY_KEY;
	struct disk_iter *it;
	enum store_err e = iter_new(s, root, &it);
	if (!it)
		return e;
	int rc = 0;
	if (e == STORE_OK) {
		/* names only, under the lock; the objects are read one by one */
		char *resdir = key_resdir_path(root);
		if (!resdir) {
			e = STORE_NOMEM;
		} else {
			pthread_rwlock_t *rl = disk_lock_resource(d, root->component,
								  resdir_name(resdir), DISK_SHARED);
			rc = disk_walk_collection(d->base_fd, root->path, root->namespace,
						  collect_entry, it);
			disk_unlock_resource(d, rl);
			free(resdir);
		}
	}
	if (e == STORE_OK && (rc == -ENOENT || rc == -ENOTDIR))
		e = STORE_NOT_FOUND;
	else if (e == STORE_OK && (rc < 0 || it->oom))
		e = it->oom ? STORE_NOMEM : store_fail_errno(rc);
	if (e != STORE_OK) {
		disk_iter_free(&it->base);
		return e;
	}
	iter_ready(it, start_after);
	*out = &it->base;
	return STORE_OK;
}

/* ---- the same, leaving out what the index says cannot match ---- */

struct candidate {
	const char *ns, *name; /* into rel (ns "" for cluster-scoped objects) */
	char *rel;
};

static int cmp_candidates(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);
	return c ? c : strcmp(x->name, y->name);
}

static void candidates_free(struct candidate *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i].rel);
	free(c);
}

/* The objects of ri under root that may match: each object's path split in
 * (namespace, name), sorted as the directory walk gives them.  Under the
 * resource lock, shared. */
static int index_candidates(struct res_index *ri, const struct store_key *root,
			    const struct store_match *m, struct candidate **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	size_t nslen = strlen(root->namespace), cap = 0;
	int rc = 0;
	pthread_mutex_lock(&ri->lock);
	struct strmap_entry *e;
	for (size_t i = 0; rc == 0 && (e = strmap_next(&ri->objs, &i));) {
		if (nslen && (strncmp(e->key, root->namespace, nslen) || e->key[nslen] != '/'))
			continue;
		if (!index_obj_matches(e->value, m->labels, m->fields))
			continue;
		const char *slash = strchr(e->key, '/');
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			struct candidate *c = realloc(*out, cap * sizeof *c);
			if (!c) {
				rc = -ENOMEM;
				break;
			}
			*out = c;
		}
		char *rel = strdup(e->key);
		if (!rel) {
			rc = -ENOMEM;
			break;
		}
		char *cut = slash ? rel + (slash - e->key) : NULL;
		if (cut)
			*cut = '\0';
		(*out)[(*n)++] = (struct candidate){cut ? rel : "", cut ? cut + 1 : rel, rel};
	}
	pthread_mutex_unlock(&ri->lock);
	if (rc == 0 && *n)
		qsort(*out, *n, sizeof **out, cmp_candidates);
	return rc;
}

static enum store_err disk_iter_begin_matching(struct store *s, const struct store_key *root,
					       const char *start_after, const struct store_match *m,
					       struct store_iter **out)
{
	struct disk_store *d = disk_of(s);
	*out = NULL;
	if (!root || !root->path || !root->is_root ||
	    (selector_is_empty(m->labels) && selector_is_empty(m->fields)) ||
	    !selectable_answers(root->group, root->resource, m->fields))
		return disk_iter_begin(s, root, start_after, out);
	char *resdir = key_resdir_path(root);
	if (!resdir)
		return STORE_NOMEM;
	const char *name = resdir_name(resdir);
	struct candidate *c = NULL;
	size_t n = 0;
	int rc = disk_index_ensure(d, root->component, name);
	pthread_rwlock_t *rl = disk_lock_resource(d, root->component, name, DISK_SHARED);
	struct res_index *ri = rc == 0 ? disk_index_find(d, root->component, name) : NULL;
	if (ri)
		rc = index_candidates(ri, root, m, &c, &n);
	disk_unlock_resource(d, rl);
	free(resdir);
	if (!ri || rc < 0) { /* no index to go by: read everything */
		candidates_free(c, n);
		return disk_iter_begin(s, root, start_after, out);
	}
	struct disk_iter *it;
	enum store_err e = iter_new(s, root, &it);
	for (size_t i = 0; e == STORE_OK && i < n; i++)
		if (collect_entry(it, c[i].ns, c[i].name, NULL) || it->oom)
			e = STORE_NOMEM;
	candidates_free(c, n);
	if (e != STORE_OK) {
		disk_iter_free(it ? &it->base : NULL);
		return e;
	}
	iter_ready(it, start_after);
	*out = &it->base;
	return STORE_OK;
}

/* Open the directory of namespace ns (relative to the root) for reading. */
static int iter_enter(struct disk_iter *it, const char *ns)
{
	if (it->dir_fd >= 0 && it->dir_ns == ns)
		return 0;
	if (it->dir_fd >= 0)
		close(it->dir_fd);
	it->dir_fd = -1;
	struct buf p = BUF_INIT;
	int rc = *ns && !*it->root.namespace ? buf_printf(&p, "%s/%s", it->root.path, ns)
					     : buf_append_str(&p, it->root.path);
	if (rc < 0)
		return -ENOMEM;
	it->dir_fd = fs_open_dir_at(it->d->base_fd, p.data);
	buf_free(&p);
	if (it->dir_fd < 0) {
		rc = it->dir_fd;
		it->dir_fd = -1;
		return rc;
	}
	it->dir_ns = ns;
	return 0;
}

static enum store_err disk_iter_next(struct store_iter *base, const struct store_key **key,
				     struct buf *out)
{
	struct disk_iter *it = (struct disk_iter *)base;
	while (it->next < it->n) {
		const struct iter_entry *e = &it->e[it->next++];
		const char *name = it->names.data + e->name_at;
		/* names this store would not have written are not objects */
		if (!key_segment_ok(name, KEY_NAME_MAX) ||
		    (*e->ns && !key_segment_ok(e->ns, KEY_NAME_MAX)))
			continue;
		int rc = iter_enter(it, e->ns);
		if (rc == 0)
			rc = fs_read_file_at(it->dir_fd, name, out, DISK_OBJECT_MAX);
		if (rc == -ENOENT)
			continue; /* removed meanwhile */
		if (rc < 0)
			return store_fail_errno(rc);
		it->current.namespace = (char *)(*it->root.namespace ? it->root.namespace : e->ns);
		it->current.name = (char *)name;
		*key = &it->current;
		return STORE_OK;
	}
	return STORE_NOT_FOUND;
}

static enum store_err disk_list_components(struct store *s, store_name_fn fn, void *ctx)
{
	struct disk_store *d = disk_of(s);
	char **names = NULL;
	size_t n = 0;
	int rc = sorted_entries(d->base_fd, ".", true, &names, &n);
	if (rc < 0)
		return store_fail_errno(rc);
	for (size_t i = 0; i < n; i++)
		if (key_component_ok(names[i]) && fn(ctx, names[i]))
			break;
	free_names(names, n);
	return STORE_OK;
}

/* The component's resource directories (store_scrub parses them).  No
 * lock: a directory made or replaced meanwhile is seen or not. */
static enum store_err disk_list_resources(struct store *s, const char *component, store_name_fn fn,
					  void *ctx)
{
	struct disk_store *d = disk_of(s);
	if (!component || !key_component_ok(component))
		return STORE_BAD_KEY;
	char **names = NULL;
	size_t n = 0;
	int rc = sorted_entries(d->base_fd, component, true, &names, &n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (fn(ctx, names[i]))
			break;
	free_names(names, n);
	if (rc == -ENOENT)
		return STORE_NOT_FOUND;
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}

/* ---- counting objects ---- */

#define COUNT_FROM_ROOT 3 /* count_files' depth for the cache directory itself */

/* Regular files under the directory name (relative to at_fd), descending
 * `depth` more levels of directories: a component directory is walked with
 * depth 2 (resource directories, then namespaces); from the cache directory
 * only component directories are entered (not _internal, not the
 * cluster-info files version, apis, _apis_...).  Dot files (atomic writes
 * in progress) and tmp_* (YurtHub's backups) are not objects.  A directory
 * gone meanwhile (a replace swapped it, a component was deleted) counts as
 * empty: the count is a snapshot of nothing, only approximate.  At most one
 * fd per level is open, and each is closed before returning. */
static int count_files(int at_fd, const char *name, int depth, uint64_t *n)
{
	DIR *dp;
	int rc = fs_opendir_at(at_fd, name, &dp);
	if (rc < 0)
		return rc == -ENOENT || rc == -ENOTDIR || rc == -ELOOP ? 0 : rc;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(dp);
		if (!de) {
			rc = errno ? -errno : 0;
			break;
		}
		if (de->d_name[0] == '.' || !strncmp(de->d_name, "tmp_", 4))
			continue;
		if (depth == COUNT_FROM_ROOT && !key_component_ok(de->d_name))
			continue;
		unsigned char type = fs_entry_type(dp, de);
		if (type == DT_DIR && depth > 0)
			rc = count_files(dirfd(dp), de->d_name, depth - 1, n);
		else if (type == DT_REG && depth < 2) /* no object sits beside resource dirs */
			(*n)++;
		if (rc < 0)
			break;
	}
	closedir(dp);
	return rc;
}

/* Takes no store lock: a walk of a big cache must not hold up writers, and
 * the gauge it feeds is approximate anyway. */
static enum store_err disk_count_objects(struct store *s, uint64_t *out)
{
	uint64_t n = 0;
	int rc = count_files(disk_of(s)->base_fd, ".", COUNT_FROM_ROOT, &n);
	if (rc < 0)
		return store_fail_errno(rc);
	*out = n;
	return STORE_OK;
}

/* ---- views ---- */

static enum store_err disk_get_view(struct store *s, const struct store_view *view,
				    struct store_view_state *out)
{
	struct disk_store *d = disk_of(s);
	struct view_rec key;
	char *resdir;
	enum store_err e = view_identity(view, d->layout, &key, &resdir);
	if (e != STORE_OK)
		return e;
	struct view_set set;
	pthread_rwlock_t *rl = disk_lock_resource(d, view->component, resdir, DISK_SHARED);
	int rc = disk_views_load(d, view->component, resdir, &set, NULL);
	disk_unlock_resource(d, rl);
	if (rc < 0) {
		e = store_fail_errno(rc);
	} else {
		struct view_rec *r = view_set_find(&set, &key);
		e = !r ? STORE_NOT_FOUND : view_state_fill(out, r) < 0 ? STORE_NOMEM : STORE_OK;
		view_set_free(&set);
	}
	view_rec_free(&key);
	free(resdir);
	return e;
}

static enum store_err disk_set_view_rv(struct store *s, const struct store_view *view, uint64_t rv)
{
	struct disk_store *d = disk_of(s);
	if (d->flags & DISK_READ_ONLY)
		return read_only_error();
	struct view_rec key;
	char *resdir;
	enum store_err e = view_identity(view, d->layout, &key, &resdir);
	if (e != STORE_OK)
		return e;
	struct view_set set;
	pthread_rwlock_t *rl = disk_lock_resource(d, view->component, resdir, DISK_EXCLUSIVE);
	int rc = disk_views_load(d, view->component, resdir, &set, NULL);
	if (rc < 0) {
		e = store_fail_errno(rc);
	} else {
		struct view_rec *r = view_set_find(&set, &key);
		if (!r) {
			e = STORE_NOT_FOUND; /* a bookmark never creates a view */
		} else if (rv > r->rv) {
			r->rv = rv;
			rc = disk_views_save(d, view->component, resdir, &set);
			if (rc < 0)
				e = store_fail_errno(rc);
		}
		view_set_free(&set);
	}
	disk_unlock_resource(d, rl);
	view_rec_free(&key);
	free(resdir);
	return e;
}

static enum store_err disk_list_views(struct store *s, const char *component,
				      const struct store_gvr *gvr, store_view_fn fn, void *ctx)
{
	struct disk_store *d = disk_of(s);
	if (!component || !*component || !gvr || !gvr->resource || !*gvr->resource)
		return STORE_EMPTY_KEY;
	if (!key_component_ok(component))
		return STORE_BAD_KEY;
	char *resdir = key_resource_dir(d->layout, gvr->resource, gvr->version, gvr->group);
	if (!resdir)
		return STORE_BAD_KEY;
	struct view_set set;
	pthread_rwlock_t *rl = disk_lock_resource(d, component, resdir, DISK_SHARED);
	int rc = disk_views_load(d, component, resdir, &set, NULL);
	disk_unlock_resource(d, rl);
	free(resdir);
	if (rc < 0)
		return store_fail_errno(rc);
	enum store_err e = view_set_visit(&set, fn, ctx);
	view_set_free(&set);
	return e;
}

/* ---- components and cluster info ---- */

static enum store_err disk_delete_component(struct store *s, const char *component)
{
	struct disk_store *d = disk_of(s);
	if (!component || !*component)
		return STORE_EMPTY_KEY;
	if (!key_component_ok(component))
		return STORE_BAD_KEY;
	if (d->flags & DISK_READ_ONLY)
		return read_only_error();
	char vname[48], dname[48];
	disk_seq_name(d, 'd', vname, sizeof vname);
	disk_seq_name(d, 'd', dname, sizeof dname);
	int rc = 0;
	disk_lock_all(d);
	/* Views first, then objects: a crash between leaves objects no view
	 * claims, which read as "never listed" - never as "listed, empty". */
	bool views_moved = renameat(d->views_fd, component, d->staging_fd, vname) == 0;
	if (!views_moved && errno != ENOENT)
		rc = -errno;
	if (rc == 0 && views_moved)
		rc = fs_fsync_dir_at(d->views_fd, ".");
	bool data_moved = false;
	if (rc == 0) {
		data_moved = renameat(d->base_fd, component, d->staging_fd, dname) == 0;
		if (!data_moved && errno != ENOENT)
			rc = -errno;
	}
	if (rc == 0 && data_moved)
		rc = fs_fsync_dir_at(d->base_fd, ".");
	atomic_fetch_add(&d->syncs, 2);
	disk_index_forget_component(d, component);
	disk_unlock_all(d);
	if (views_moved)
		disk_reap(d, vname);
	if (data_moved)
		disk_reap(d, dname);
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}

static enum store_err disk_save_cluster_info(struct store *s, const char *url_path,
					     const char *data, size_t len)
{
	struct disk_store *d = disk_of(s);
	char *name = key_cluster_info_name(url_path);
	if (!name)
		return STORE_BAD_KEY;
	enum store_err e = STORE_OK;
	if (!data || !len)
		e = STORE_EMPTY_CONTENT;
	else if (d->flags & DISK_READ_ONLY)
		e = read_only_error();
	if (e == STORE_OK) {
		atomic_fetch_add(&d->syncs, 2);
		int rc = fs_write_file_atomic(d->base_fd, name, data, len, FS_FILE_MODE);
		if (rc < 0)
			e = store_fail_errno(rc);
	}
	free(name);
	return e;
}

static enum store_err disk_get_cluster_info(struct store *s, const char *url_path, struct buf *out)
{
	struct disk_store *d = disk_of(s);
	char *name = key_cluster_info_name(url_path);
	if (!name)
		return STORE_BAD_KEY;
	int rc = fs_read_file_at(d->base_fd, name, out, DISK_OBJECT_MAX);
	free(name);
	if (rc == -ENOENT || rc == -EISDIR)
		return STORE_NOT_FOUND;
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}

/* ---- open and close ---- */

void disk_store_index_size(struct store *s, size_t *objects, size_t *bytes)
{
	disk_index_size(disk_of(s), objects, bytes);
}

int disk_store_index_check(struct store *s, char **why)
{
	return disk_index_check(disk_of(s), why);
}

static void disk_close(struct store *s)
{
	struct disk_store *d = disk_of(s);
	if (!d)
		return;
	if (d->reaper_running) {
		pthread_mutex_lock(&d->reap_lock);
		d->reaper_stop = true;
		pthread_cond_broadcast(&d->reap_cond);
		pthread_mutex_unlock(&d->reap_lock);
		pthread_join(d->reaper, NULL);
	}
	/* Trees not yet removed stay in staging: recovery removes them. */
	for (struct reap_item *it = d->reap_head, *next; it; it = next) {
		next = it->next;
		free(it);
	}
	commit_queue_free(d->commit);
	int fds[] = {d->base_fd, d->priv_fd, d->staging_fd, d->journal_fd, d->views_fd, d->lock_fd};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (int i = 0; i < RES_STRIPES; i++)
		pthread_rwlock_destroy(&d->res_locks[i]);
	for (int i = 0; i < KEY_STRIPES; i++)
		pthread_mutex_destroy(&d->key_locks[i]);
	pthread_rwlock_destroy(&d->global);
	pthread_mutex_destroy(&d->reap_lock);
	pthread_cond_destroy(&d->reap_cond);
	disk_index_free(&d->index);
	disk_spares_free(&d->spares);
	free(d->path);
	free(d);
}

static const struct store_ops disk_ops = {
    .name = "disk",
    .key_build = disk_key_build,
    .create = disk_create,
    .delete = disk_delete,
    .get = disk_get,
    .list = disk_list,
    .update = disk_update,
    .replace_begin = disk_replace_begin,
    .replace_add = disk_replace_add,
    .replace_commit = disk_replace_commit,
    .replace_abort = disk_replace_abort,
    .view_event = disk_view_event,
    .get_view = disk_get_view,
    .set_view_rv = disk_set_view_rv,
    .list_views = disk_list_views,
    .list_keys = disk_list_keys,
    .delete_component = disk_delete_component,
    .list_components = disk_list_components,
    .list_resources = disk_list_resources,
    .count_objects = disk_count_objects,
    .iter_begin = disk_iter_begin,
    .iter_next = disk_iter_next,
    .iter_free = disk_iter_free,
    .iter_begin_matching = disk_iter_begin_matching,
    .save_cluster_info = disk_save_cluster_info,
    .get_cluster_info = disk_get_cluster_info,
    .close = disk_close,
};

/* YurtHub's rule, decided once at start: if any resource directory name has
 * no dot, the cache is in the legacy layout. */
static enum key_layout detect_layout(int base_fd)
{
	char **comps = NULL;
	size_t ncomps = 0;
	enum key_layout layout = KEY_LAYOUT_ENHANCED;
	if (sorted_entries(base_fd, ".", true, &comps, &ncomps) < 0)
		ncomps = 0;
	for (size_t i = 0; i < ncomps && layout == KEY_LAYOUT_ENHANCED; i++) {
		if (comps[i][0] == '_')
			continue;
		char **res = NULL;
		size_t nres = 0;
		if (sorted_entries(base_fd, comps[i], true, &res, &nres) == 0)
			for (size_t j = 0; j < nres; j++)
				if (!strchr(res[j], '.'))
					layout = KEY_LAYOUT_LEGACY;
		free_names(res, nres);
	}
	free_names(comps, ncomps);
	return layout;
}

static int open_dir(int at, const char *path, bool create, int *out)
{
	if (create) {
		int rc = fs_mkdir_p_at(at, path, FS_DIR_MODE, NULL);
		if (rc < 0)
			return rc;
	}
	/* The cache directory itself is the operator's to place (it may be a
	 * link to another disk); below it nothing is followed. */
	if (at == AT_FDCWD) {
		*out = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		return *out < 0 ? -errno : 0;
	}
	*out = fs_open_dir_at(at, path);
	return *out < 0 ? *out : 0;
}

static char *errorf(const char *fmt, const char *a, int rc)
{
	struct buf b = BUF_INIT;
	if (buf_printf(&b, fmt, a, strerror(rc < 0 ? -rc : rc)) < 0)
		return NULL;
	return buf_steal(&b);
}

static int open_private(struct disk_store *d, char **err)
{
	bool rw = !(d->flags & DISK_READ_ONLY);
	int rc = open_dir(d->base_fd, DISK_PRIV_DIR, rw, &d->priv_fd);
	if (rc == -ENOENT && !rw)
		return 0; /* a cache the C hub never opened: nothing private */
	if (rc < 0) {
		*err = errorf("cannot open %s/" DISK_PRIV_DIR ": %s", d->path, rc);
		return rc;
	}
	if (rw) {
		d->lock_fd = openat(d->priv_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, FS_FILE_MODE);
		if (d->lock_fd < 0 || flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			rc = -errno;
			*err = errorf("cache directory %s is in use by another yurthub: %s",
				      d->path, rc);
			return rc;
		}
	}
	const char *names[] = {"staging", "journal", "views"};
	int *fds[] = {&d->staging_fd, &d->journal_fd, &d->views_fd};
	for (int i = 0; i < 3; i++) {
		rc = open_dir(d->priv_fd, names[i], rw, fds[i]);
		if (rc < 0 && !(rc == -ENOENT && !rw)) {
			*err = errorf("cannot open private directory in %s: %s", d->path, rc);
			return rc;
		}
	}
	if (rw)
		fs_fsync_dir_at(d->priv_fd, ".");
	return 0;
}

struct store *disk_store_open(const char *path, int flags, struct disk_recovery_report *report,
			      char **err)
{
	*err = NULL;
	if (!path || !*path)
		path = DISK_DEFAULT_PATH;
	struct disk_store *d = calloc(1, sizeof *d);
	if (!d || !(d->path = strdup(path))) {
		free(d);
		*err = strdup("out of memory");
		return NULL;
	}
	d->base.ops = &disk_ops;
	d->flags = flags;
	d->base_fd = d->priv_fd = d->staging_fd = d->journal_fd = d->views_fd = d->lock_fd = -1;
	atomic_init(&d->seq, 1);
	pthread_rwlock_init(&d->global, NULL);
	disk_index_init(&d->index);
	for (int i = 0; i < RES_STRIPES; i++)
		pthread_rwlock_init(&d->res_locks[i], NULL);
	for (int i = 0; i < KEY_STRIPES; i++)
		pthread_mutex_init(&d->key_locks[i], NULL);
	pthread_mutex_init(&d->reap_lock, NULL);
	pthread_cond_init(&d->reap_cond, NULL);
	disk_spares_init(&d->spares);

	bool rw = !(flags & DISK_READ_ONLY);
	int rc = open_dir(AT_FDCWD, path, rw, &d->base_fd);
	if (rc < 0) {
		*err = errorf("cannot open cache directory %s: %s", path, rc);
		goto fail;
	}
	if (open_private(d, err) < 0)
		goto fail;
	d->layout = detect_layout(d->base_fd);
	if (rw) {
		d->commit = commit_queue_new(d->base_fd, d->staging_fd);
		if (!d->commit) {
			*err = strdup("out of memory");
			goto fail;
		}
		struct disk_recovery_report dummy;
		if (disk_recover(d, report ? report : &dummy, err) < 0)
			goto fail;
		int sp = flags & DISK_NO_SPARES ? 0 : disk_spares_open(d);
		if (sp < 0) /* replaces then create every file, as they always did */
			log_warn("disk store: no pool of spare files in %s: %s", d->path,
				 strerror(-sp));
	}
	return &d->base;
fail:
	if (!*err)
		*err = strdup("cannot open cache directory");
	disk_close(&d->base);
	return NULL;
}

void disk_store_stats(struct store *s, struct disk_stats *out)
{
	struct disk_store *d = disk_of(s);
	memset(out, 0, sizeof *out);
	if (d->commit) {
		struct commit_stats cs;
		commit_get_stats(d->commit, &cs);
		out->commit_batches = cs.batches;
		out->commit_ops = cs.ops;
		out->syncs = cs.syncs;
	}
	out->syncs += atomic_load(&d->syncs);
	out->replaces = atomic_load(&d->replaces);
}
