/*
 * disk_replace.c - replacing a list view on disk, all at once.
 *
 * A replace is a session: begin, one add per listed object as the list
 * streams in, commit (or abort).  The collection directory T that the view
 * spans (the resource directory, or one namespace of it) is rebuilt beside
 * itself as N in the staging directory: each added object is written into N
 * as it arrives, by up to WRITERS_MAX threads per batch, without any lock.
 * At commit, under the resource lock, T is compared with N: where the stored
 * copy is newer than the listed one it replaces it (a hard link), objects the
 * list lacks are left out when the view matches them and they are not newer
 * than the list (stale, store.h), and everything else of T is linked over
 * unchanged.  Then:
 *
 *   1. a journal record names N, its inode, T, and the new view set;
 *   2. one syncfs() makes N, its files and the record durable;
 *   3. renameat2(RENAME_EXCHANGE) swaps N and T in one step (a plain rename
 *      when T does not exist yet); the directories are synced;
 *   4. the view file is replaced (durably), the record removed;
 *   5. the old tree, now in staging, is removed in the background, or on
 *      ext4 without a journal emptied into spare files for the next trees
 *      (disk_spare.c), whose inodes N then takes instead of new ones.
 *
 * A crash before 3 leaves T untouched: recovery sees T's inode differ from
 * the record's and drops N.  A crash after 3 leaves T = N: recovery sees the
 * inode match and finishes 4 and 5.  Either way a reader sees the complete old
 * or the complete new view, and the cost is O(1) syncs for any N.
 *
 * A failure after 3 (a sync, the view file on a full disk) swaps back and
 * puts the old view file back, so that a failed call leaves the old view;
 * the record decides what a crash in between leaves.  The first list of a
 * resource writes an empty view file before making the resource directory,
 * which would otherwise read as the Go YurtHub's "all listed".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/meta.h"
#include "kube/selectable.h"
#include "storage/disk_internal.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/strmap.h"

#define PARALLEL_MIN 256 /* files below which one thread writes them all */
#define WRITERS_MAX  4

struct replace {
	struct store_replace base; /* first: the session handle callers hold */
	struct disk_store *d;
	char *component;
	struct view_rec rec;
	bool is_ns_resource; /* the namespaces resource: item namespaces ignored */
	char *resdir;
	char *tpath;   /* T, relative to the cache directory */
	bool spans_ns; /* T holds namespace directories */
	uint64_t list_rv;
	int t_fd, n_fd;	      /* T (or -1 when absent), N */
	bool stranded;	      /* the fallback moved T aside and could not put it back */
	char tree[64];	      /* N's name in staging */
	char journal[48];     /* the record's name in journal/ */
	struct strmap listed; /* relative paths added, value: the listed rv */
	struct strmap drops;  /* relative paths of T the commit removes */
	size_t nputs;	      /* listed objects whose copy in N goes in */
	size_t t_objects;     /* objects in T, as the index has them */
	bool self_answers;    /* the index's documents answer the view's selectors */
	bool delta_started;   /* a delta record is durable: the replace is committed */
	char *group, *resource;
	struct strmap n_dirs;  /* namespace directories made in N */
	struct view_set views; /* loaded, then updated with this view */
	bool had_views;	       /* there was a view file before (or a marker we wrote) */
	struct buf old_views;  /* its content, to put back when the replace fails */
	struct view_matcher self;
	struct buf scratch, rel, irel;
	struct pending_write *pending;
	size_t npending, cap_pending, pending_bytes;
};

#define BATCH_FILES 1024 /* a batch of added objects written at once */
#define BATCH_BYTES (4u << 20)

/* ---- building N ---- */

/* "<a>/<b>", or b alone when a is empty, in out; NULL on ENOMEM.  Once
 * per listed object: no printf. */
static const char *join_rel(struct buf *out, const char *a, const char *b)
{
	buf_reset(out);
	if (*a && (buf_append_str(out, a) < 0 || buf_append_char(out, '/') < 0))
		return NULL;
	return buf_append_str(out, b) < 0 ? NULL : out->data;
}

static const char *item_rel(struct replace *r, const struct store_item *it)
{
	return join_rel(&r->rel, r->spans_ns && it->namespace ? it->namespace : "", it->name);
}

/* Make the namespace directory of rel in N, once. */
static int ensure_n_dir(struct replace *r, const char *rel)
{
	const char *slash = strchr(rel, '/');
	if (!slash)
		return 0;
	char *ns = strndup(rel, (size_t)(slash - rel));
	if (!ns)
		return -ENOMEM;
	int rc = 0;
	if (!strmap_get(&r->n_dirs, ns)) {
		if (mkdirat(r->n_fd, ns, FS_DIR_MODE) < 0 && errno != EEXIST)
			rc = -errno;
		else if (!strmap_put(&r->n_dirs, ns, NULL))
			rc = -ENOMEM;
	}
	free(ns);
	return rc;
}

/* A file of N to be written: queued as objects are added, written in
 * batches, in parallel. */
struct pending_write {
	char *rel;
	char *data; /* a copy: the caller's bytes live only during add */
	size_t len;
};

static int queue_write(struct replace *r, const char *rel, const char *data, size_t len)
{
	int rc = ensure_n_dir(r, rel);
	if (rc < 0)
		return rc;
	if (r->npending == r->cap_pending) {
		size_t cap = r->cap_pending ? r->cap_pending * 2 : 256;
		struct pending_write *p = realloc(r->pending, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		r->pending = p;
		r->cap_pending = cap;
	}
	struct pending_write *w = &r->pending[r->npending];
	w->rel = strdup(rel);
	w->data = malloc(len ? len : 1);
	if (!w->rel || !w->data) {
		free(w->rel);
		free(w->data);
		return -ENOMEM;
	}
	memcpy(w->data, data, len);
	w->len = len;
	r->npending++;
	r->pending_bytes += len;
	return 0;
}

static void drop_pending(struct replace *r)
{
	for (size_t i = 0; i < r->npending; i++) {
		free(r->pending[i].rel);
		free(r->pending[i].data);
	}
	r->npending = 0;
	r->pending_bytes = 0;
}

static int write_one(struct disk_store *d, int n_fd, const struct pending_write *w)
{
	/* A spare inode of a retired tree if there is one (disk_spare.c): a
	 * new one, beside many just freed, can cost a thousand times more.
	 * O_EXCL (and the spare's RENAME_NOREPLACE): never write through a
	 * hard link into a stored file (an object listed twice has its
	 * earlier copy unlinked first). */
	int fd = disk_spares_take(d, n_fd, w->rel);
	if (fd == -ENOENT &&
	    (fd = openat(n_fd, w->rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, FS_FILE_MODE)) < 0)
		fd = -errno;
	if (fd < 0)
		return fd;
	int rc = fs_write_all(fd, w->data, w->len);
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

struct write_share {
	struct disk_store *d;
	int n_fd;
	const struct pending_write *w;
	size_t n, nthreads, index;
	int rc;
};

/* Files of one directory all go to one thread: threads creating files in
 * the same directory only spin on its lock. */
static size_t dir_slot(const char *rel, size_t nthreads)
{
	size_t h = 5381;
	for (const char *c = rel; *c && *c != '/'; c++)
		h = h * 33 + (unsigned char)*c;
	return strchr(rel, '/') ? h % nthreads : 0;
}

static void *write_share_main(void *p)
{
	struct write_share *ws = p;
	for (size_t i = 0; i < ws->n && ws->rc == 0; i++)
		if (dir_slot(ws->w[i].rel, ws->nthreads) == ws->index)
			ws->rc = write_one(ws->d, ws->n_fd, &ws->w[i]);
	return NULL;
}

/* Creating inodes is CPU work in the kernel; on a multi-core node the
 * files of a large list are written by several threads, one per group of
 * namespace directories. */
static int flush_writes(struct replace *r)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nthreads = r->npending >= PARALLEL_MIN ? (size_t)(cpus > 1 ? cpus : 1) : 1;
	if (nthreads > WRITERS_MAX)
		nthreads = WRITERS_MAX;
	struct write_share shares[WRITERS_MAX];
	pthread_t tids[WRITERS_MAX];
	bool started[WRITERS_MAX] = {false};
	for (size_t t = 0; t < nthreads; t++) {
		shares[t] =
		    (struct write_share){r->d, r->n_fd, r->pending, r->npending, nthreads, t, 0};
		if (t > 0 && pthread_create(&tids[t], NULL, write_share_main, &shares[t]) == 0)
			started[t] = true;
	}
	for (size_t t = 0; t < nthreads; t++)
		if (t == 0 || !started[t])
			write_share_main(&shares[t]); /* this thread, or one that did not start */
	int rc = 0;
	for (size_t t = 0; t < nthreads; t++) {
		if (started[t])
			pthread_join(tids[t], NULL);
		if (shares[t].rc < 0 && rc == 0)
			rc = shares[t].rc;
	}
	drop_pending(r);
	return rc;
}

static int link_old(struct replace *r, const char *rel)
{
	int rc = ensure_n_dir(r, rel);
	if (rc < 0)
		return rc;
	return linkat(r->t_fd, rel, r->n_fd, rel, 0) < 0 ? -errno : 0;
}

/* ---- deciding, from the index, what the commit changes ---- */

/* What add() decided for a listed object (the value of its entry in
 * listed): SAME_AS_STORED when T held it at the listed rv (nothing written),
 * else the index entry of the copy written into N, NULL once the commit
 * found T's copy newer and kept that. */
static char same_as_stored;
#define SAME_AS_STORED ((void *)&same_as_stored)

static bool is_put(const struct strmap_entry *l)
{
	return l && l->value && l->value != SAME_AS_STORED;
}

/* An object's path in the resource directory (the index's name) from its
 * path in T. */
static const char *index_rel(struct replace *r, const char *rel)
{
	return *r->rec.namespace ? join_rel(&r->irel, r->rec.namespace, rel) : rel;
}

/* The reverse: NULL for an object outside T. */
static const char *t_rel(const struct replace *r, const char *irel)
{
	size_t n = strlen(r->rec.namespace);
	if (!n)
		return irel;
	return !strncmp(irel, r->rec.namespace, n) && irel[n] == '/' ? irel + n + 1 : NULL;
}

/* An object of T that the list did not return: keep it?  A copy the view
 * matches, not newer than the list, is stale whatever other views say (their
 * own watch or list brings the object back if it lives on, changed).  A copy
 * the view does not match is not the view's: this component got that copy
 * through another view or a read of its own, which answer for it.  The
 * index answers, unless the view selects on what it does not hold. */
static int keep_unlisted(struct replace *r, const char *rel, const struct index_obj *o)
{
	if (o->rv > r->list_rv)
		return 1; /* written after the list's snapshot: not the list's to drop */
	const char *slash = strchr(rel, '/');
	char ns[KEY_NAME_MAX + 1] = "";
	if (slash && (size_t)(slash - rel) <= KEY_NAME_MAX)
		memcpy(ns, rel, (size_t)(slash - rel)), ns[slash - rel] = '\0';
	else if (!slash && *r->rec.namespace)
		snprintf(ns, sizeof ns, "%s", r->rec.namespace);
	if (o->doc_len && r->self_answers)
		return view_matcher_covers(&r->self, ns, o->doc, o->doc_len) != 1;
	uint64_t rv = 0;
	if (fs_read_file_at(r->t_fd, rel, &r->scratch, DISK_OBJECT_MAX) < 0 ||
	    kube_meta_rv(r->scratch.data, r->scratch.len, &rv) < 0)
		return 0; /* unreadable garbage inside the view: drop it */
	return view_matcher_covers(&r->self, ns, r->scratch.data, r->scratch.len) != 1;
}

/* Compare the list with T as the index has it, under the resource lock:
 * where T's copy is newer than the one written into N, N's goes; what T
 * holds that the list lacks is dropped or kept (keep_unlisted).  Counts
 * the puts. */
static int decide(struct replace *r, struct res_index *ri)
{
	struct strmap_entry *l;
	for (size_t i = 0; (l = strmap_next(&r->listed, &i));) {
		if (!is_put(l))
			continue; /* as stored: T's copy, newer or not, stays */
		const char *irel = index_rel(r, l->key);
		if (!irel)
			return -ENOMEM;
		struct strmap_entry *cur = strmap_get(&ri->objs, irel);
		/* Never regress: a stored copy newer than the listed one (a
		 * watch event that raced the list) stays. */
		if (cur && ((struct index_obj *)cur->value)->rv > l->num) {
			if (unlinkat(r->n_fd, l->key, 0) < 0)
				return -errno;
			free(l->value);
			l->value = NULL;
		} else {
			r->nputs++;
		}
	}
	for (size_t i = 0; (l = strmap_next(&ri->objs, &i));) {
		const char *rel = t_rel(r, l->key);
		r->t_objects += rel != NULL;
		if (!rel || strmap_get(&r->listed, rel))
			continue;
		if (!keep_unlisted(r, rel, l->value) && !strmap_put(&r->drops, rel, NULL))
			return -ENOMEM;
	}
	return 0;
}

/* A new tree: N gets every object of T that stays (listed as stored, newer
 * than listed, or unlisted and kept) as a hard link. */
static int link_kept(struct replace *r, struct res_index *ri)
{
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&ri->objs, &i));) {
		const char *rel = t_rel(r, e->key);
		if (!rel || is_put(strmap_get(&r->listed, rel)) || strmap_get(&r->drops, rel))
			continue;
		int rc = link_old(r, rel);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The index after the commit: the puts in, the drops out. */
static void index_apply(struct replace *r, struct res_index *ri)
{
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&r->listed, &i));) {
		if (!is_put(e))
			continue;
		const char *irel = index_rel(r, e->key);
		if (!irel)
			free(e->value);
		if (!irel || res_index_set(ri, irel, e->value) < 0)
			atomic_store(&ri->stale, true);
		e->value = NULL;
	}
	for (size_t i = 0; (e = strmap_next(&r->drops, &i));) {
		const char *irel = index_rel(r, e->key);
		if (!irel) {
			atomic_store(&ri->stale, true);
			continue;
		}
		pthread_mutex_lock(&ri->lock);
		free(strmap_del(&ri->objs, irel));
		pthread_mutex_unlock(&ri->lock);
	}
}

/* ---- journal, swap, finish ---- */

/* The record of this replace: a swap of N for T, or (delta) N's files
 * moved into T and r->drops removed. */
static int write_journal(struct replace *r, bool delta)
{
	struct stat st;
	if (fstat(r->n_fd, &st) < 0)
		return -errno;
	struct buf views = BUF_INIT;
	if (view_set_encode(&r->views, &views) < 0) {
		buf_free(&views);
		return -ENOMEM;
	}
	char ino[32];
	snprintf(ino, sizeof ino, "%llu", (unsigned long long)st.st_ino);
	json_t *j =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "op", delta ? "delta" : "replace",
		      "tree", r->tree, "target", r->tpath, "ino", ino, "component", r->component,
		      "resdir", r->resdir, "views", buf_cstr(&views));
	buf_free(&views);
	json_t *drops = delta && j ? json_array() : NULL;
	struct strmap_entry *e;
	for (size_t i = 0; drops && (e = strmap_next(&r->drops, &i));)
		if (json_array_append_new(drops, json_string(e->key)) < 0) {
			json_decref(drops);
			drops = NULL;
		}
	if (delta && (!drops || json_object_set_new(j, "drops", drops) < 0)) {
		json_decref(j);
		j = NULL;
	}
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return -ENOMEM;
	disk_seq_name(r->d, 'j', r->journal, sizeof r->journal);
	int fd = openat(r->d->journal_fd, r->journal, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			FS_FILE_MODE);
	int rc = fd < 0 ? -errno : fs_write_all(fd, text, strlen(text));
	if (fd >= 0 && close(fd) < 0 && rc == 0)
		rc = -errno;
	free(text);
	return rc;
}

/* ---- the delta: a relist that changed few objects ---- */

static int move_files(int n_fd, int t_fd, const char *ns)
{
	DIR *dp;
	int rc = fs_opendir_at(n_fd, ns ? ns : ".", &dp);
	if (rc < 0)
		return rc == -ENOENT && ns ? 0 : rc;
	struct dirent *de;
	struct buf rel = BUF_INIT;
	while (rc == 0 && (de = readdir(dp)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		unsigned char type = fs_entry_type(dp, de);
		if (type == DT_DIR && !ns) {
			if (mkdirat(t_fd, de->d_name, FS_DIR_MODE) < 0 && errno != EEXIST)
				rc = -errno;
			else
				rc = move_files(n_fd, t_fd, de->d_name);
			continue;
		}
		if (type != DT_REG)
			continue;
		buf_reset(&rel);
		if (ns ? buf_printf(&rel, "%s/%s", ns, de->d_name)
		       : buf_append_str(&rel, de->d_name))
			rc = -ENOMEM;
		else if (renameat(n_fd, rel.data, t_fd, rel.data) < 0 && errno != ENOENT)
			rc = -errno;
	}
	buf_free(&rel);
	closedir(dp);
	return rc;
}

int disk_delta_apply(int n_fd, int t_fd, char *const *drops, size_t ndrops)
{
	int rc = n_fd >= 0 ? move_files(n_fd, t_fd, NULL) : 0;
	for (size_t i = 0; rc == 0 && i < ndrops; i++)
		if (unlinkat(t_fd, drops[i], 0) < 0 && errno != ENOENT)
			rc = -errno;
	return rc;
}

/* Is the change small enough that moving it into T costs less than a new
 * tree of T's size? */
static bool delta_pays(const struct replace *r)
{
	return r->t_fd >= 0 && (r->nputs + r->drops.len) * 4 <= r->t_objects;
}

static int restore_views(struct replace *r);

/* Where a delta keeps T's copies it replaces or drops, until it is durable:
 * inside N, under a name no namespace can have and that recovery's
 * disk_delta_apply() skips. */
#define DELTA_OLD ".old"

/* Make the namespace directory of rel ("<ns>/<name>") in the tree at
 * fd, if rel has one and it is not there yet. */
static int ensure_ns_dir(int fd, const char *rel)
{
	const char *slash = strchr(rel, '/');
	if (!slash)
		return 0;
	char ns[KEY_NAME_MAX + 1];
	size_t n = (size_t)(slash - rel);
	if (n > KEY_NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(ns, rel, n);
	ns[n] = '\0';
	return mkdirat(fd, ns, FS_DIR_MODE) < 0 && errno != EEXIST ? -errno : 0;
}

/* Move rel from one tree to the same path in another. */
static int move_rel(int from_fd, int to_fd, const char *rel)
{
	int rc = ensure_ns_dir(to_fd, rel);
	if (rc == 0 && renameat(from_fd, rel, to_fd, rel) < 0)
		rc = -errno;
	return rc;
}

/* One change of a delta, and what applying it did. */
struct delta_step {
	const char *rel; /* in T */
	bool drop;	 /* else a put: N's copy goes in */
	bool had_old;	 /* T's copy was kept in DELTA_OLD */
};

/* Apply the steps in order, keeping T's copies, so that undo_delta() can
 * put everything back.  *done: the steps applied. */
static int apply_delta(struct replace *r, int old_fd, struct delta_step *st, size_t n, size_t *done)
{
	for (*done = 0; *done < n; (*done)++) {
		struct delta_step *s = &st[*done];
		int rc = 0;
		if (s->drop) {
			rc = move_rel(r->t_fd, old_fd, s->rel);
			s->had_old = rc == 0;
			if (rc == -ENOENT)
				rc = 0;
		} else {
			rc = ensure_ns_dir(old_fd, s->rel); /* T's copy keeps its path */
			if (rc == 0 && linkat(r->t_fd, s->rel, old_fd, s->rel, 0) == 0)
				s->had_old = true;
			else if (rc == 0 && errno != ENOENT)
				rc = -errno;
			if (rc == 0)
				rc = move_rel(r->n_fd, r->t_fd, s->rel);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Put T back as it was before apply_delta(), N's copies back in N. */
static int undo_delta(struct replace *r, int old_fd, const struct delta_step *st, size_t done)
{
	int rc = 0;
	while (done-- > 0) {
		const struct delta_step *s = &st[done];
		int one = s->drop ? 0 : move_rel(r->t_fd, r->n_fd, s->rel);
		if (one == 0 && s->had_old)
			one = move_rel(old_fd, r->t_fd, s->rel);
		if (one < 0 && rc == 0)
			rc = one;
	}
	return rc;
}

static struct delta_step *delta_steps(struct replace *r, size_t *n)
{
	struct delta_step *st = malloc((r->nputs + r->drops.len + 1) * sizeof *st);
	*n = 0;
	if (!st)
		return NULL;
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&r->listed, &i));)
		if (is_put(e))
			st[(*n)++] = (struct delta_step){e->key, false, false};
	for (size_t i = 0; (e = strmap_next(&r->drops, &i));)
		st[(*n)++] = (struct delta_step){e->key, true, false};
	return st;
}

/* The record, a sync, the moves, a sync, the view file.  A failure puts T
 * back and drops the record; if T cannot be put back, the record stays and
 * the next start finishes the replace. */
static int commit_delta(struct replace *r)
{
	struct disk_store *d = r->d;
	size_t n = 0, done = 0;
	struct delta_step *st = delta_steps(r, &n);
	if (!st)
		return -ENOMEM;
	int old_fd = -1;
	int rc = mkdirat(r->n_fd, DELTA_OLD, FS_DIR_MODE) < 0 ? -errno : 0;
	if (rc == 0 && (old_fd = fs_open_dir_at(r->n_fd, DELTA_OLD)) < 0)
		rc = old_fd;
	if (rc == 0)
		rc = write_journal(r, true);
	if (rc == 0)
		rc = disk_syncfs(d);
	if (rc == 0)
		rc = apply_delta(r, old_fd, st, n, &done);
	if (rc == 0)
		rc = disk_syncfs(d);
	bool views_tried = rc == 0;
	if (rc == 0)
		rc = disk_views_save(d, r->component, r->resdir, &r->views);
	if (rc < 0 && done) {
		/* the new view file may be in place, its directory not synced */
		int back = views_tried ? restore_views(r) : 0;
		if (back < 0)
			log_error("disk store: replace of %s failed, and its old view file cannot "
				  "be put back: %s",
				  r->tpath, strerror(-back));
		/* Put back in the page cache: the record, removed by the caller,
		 * decides only what a crash right now would leave. */
		back = undo_delta(r, old_fd, st, done);
		if (back < 0) {
			r->delta_started = true; /* the record stays: recovery finishes it */
			log_error(
			    "disk store: replace of %s failed (%s) and cannot be undone (%s): "
			    "the next start finishes it",
			    r->tpath, strerror(-rc), strerror(-back));
		}
	}
	free(st);
	if (old_fd >= 0)
		close(old_fd);
	if (rc < 0)
		return rc;
	char name[sizeof r->journal];
	snprintf(name, sizeof name, "%s", r->journal);
	r->journal[0] = '\0';
	if (unlinkat(d->journal_fd, name, 0) < 0)
		log_warn("disk store: replace of %s done, but its journal record %s stays: %s",
			 r->tpath, name, strerror(errno));
	return 0;
}

static char *parent_path(const char *p)
{
	const char *slash = strrchr(p, '/');
	return slash ? strndup(p, (size_t)(slash - p)) : strdup(".");
}

static int undo_swap(struct replace *r);
static bool swapped(const struct replace *r);

/* Undo the swap after a failure that followed it.  What counts is where the
 * trees are now (swapped()), not whether the undo's own sync worked. */
static void undo_or_log(struct replace *r, int why)
{
	int rc = undo_swap(r);
	if (swapped(r))
		log_error("disk store: replace of %s failed (%s) after the swap, which cannot be "
			  "undone (%s): recovery finishes it at the next start",
			  r->tpath, strerror(-why), strerror(rc < 0 ? -rc : EIO));
}

static char *views_path(const struct replace *r)
{
	struct buf p = BUF_INIT;
	return buf_printf(&p, "%s/%s", r->component, r->resdir) < 0 ? NULL : buf_steal(&p);
}

/* The first list of a resource makes its directory.  Before that, an empty
 * view file: a resource directory without one reads as the Go YurtHub's
 * ("everything here was listed"), so a replace that fails (or a crash)
 * after the directory is made would turn "never listed" into "listed,
 * empty".  The single-object path does the same (ensure_views_marker). */
static int mark_new_resource(struct replace *r)
{
	if (r->had_views)
		return 0;
	struct buf dir = BUF_INIT;
	if (buf_printf(&dir, "%s/%s", r->component, r->resdir) < 0)
		return -ENOMEM;
	int exists = fs_exists_at(r->d->base_fd, dir.data);
	buf_free(&dir);
	if (exists != 0)
		return exists < 0 ? exists : 0; /* YurtHub's directory: keep its meaning */
	struct view_set empty = {0};
	buf_reset(&r->old_views);
	if (view_set_encode(&empty, &r->old_views) < 0)
		return -ENOMEM;
	int rc = disk_views_save(r->d, r->component, r->resdir, &empty);
	if (rc == 0)
		r->had_views = true;
	return rc;
}

/* Put the view file back as it was before this replace: the new one may
 * have been renamed in before the sync that failed. */
static int restore_views(struct replace *r)
{
	struct disk_store *d = r->d;
	if (!r->had_views) {
		/* None before: a directory of the Go YurtHub, whose meaning the
		 * absence of the file keeps. */
		char *p = views_path(r);
		if (!p)
			return -ENOMEM;
		int rc = fs_unlink_at(d->views_fd, p);
		free(p);
		if (rc == -ENOENT)
			return 0;
		return rc < 0 ? rc : fs_fsync_dir_at(d->views_fd, r->component);
	}
	struct view_set old;
	if (view_set_decode(buf_cstr(&r->old_views), r->old_views.len, &old) < 0)
		return -EINVAL;
	int rc = disk_views_save(d, r->component, r->resdir, &old);
	view_set_free(&old);
	return rc;
}

static int swap_in(struct replace *r)
{
	struct disk_store *d = r->d;
	char *parent = parent_path(r->tpath);
	if (!parent)
		return -ENOMEM;
	int rc = 0;
	if (r->t_fd >= 0) {
		rc = fs_rename_at(d->staging_fd, r->tree, d->base_fd, r->tpath, RENAME_EXCHANGE);
		if (rc < 0) {
			if (rc != -EINVAL && rc != -ENOSYS)
				goto out;
			/* No atomic exchange on this file system: move the old
			 * tree aside under a name recovery knows ("<tree>o"). */
			char old[sizeof r->tree];
			snprintf(old, sizeof old, "%.*so", (int)sizeof old - 2, r->tree);
			rc = fs_rename_at(d->base_fd, r->tpath, d->staging_fd, old, 0);
			if (rc < 0)
				goto out;
			rc = fs_rename_at(d->staging_fd, r->tree, d->base_fd, r->tpath, 0);
			if (rc < 0) {
				int back =
				    fs_rename_at(d->staging_fd, old, d->base_fd, r->tpath, 0);
				if (back < 0) {
					/* The old tree sits in staging as "<N>o": the
					 * record, kept, makes recovery put it back. */
					r->stranded = true;
					log_error("disk store: replace of %s failed (%s) and its "
						  "old tree cannot be put back (%s): it is kept, "
						  "and the next start puts it back",
						  r->tpath, strerror(-rc), strerror(-back));
				}
				goto out;
			}
			/* The old tree is the garbage now, N no longer in staging. */
			snprintf(r->tree, sizeof r->tree, "%s", old);
		}
	} else {
		int created = 0;
		rc = mark_new_resource(r);
		if (rc == 0)
			rc = fs_mkdir_p_at(d->base_fd, parent, FS_DIR_MODE, &created);
		if (rc == 0 && created)
			rc = disk_syncfs(d);
		if (rc == 0)
			rc = fs_rename_at(d->staging_fd, r->tree, d->base_fd, r->tpath, 0);
	}
	if (rc == 0) {
		rc = fs_fsync_dir_at(d->base_fd, parent);
		if (rc == 0)
			rc = fs_fsync_dir_at(d->staging_fd, ".");
		atomic_fetch_add(&d->syncs, 2);
		/* The new tree is in place but not known to be durable: the call
		 * fails, so the old tree goes back (the record, still durable,
		 * settles whatever a crash leaves). */
		if (rc < 0)
			undo_or_log(r, rc);
	}
out:
	free(parent);
	return rc;
}

/* Put T back as it was, after a failure that followed the swap. */
static int undo_swap(struct replace *r)
{
	struct disk_store *d = r->d;
	int rc;
	size_t len = strlen(r->tree);
	if (r->t_fd >= 0 && r->tree[len - 1] != 'o') {
		rc = fs_rename_at(d->staging_fd, r->tree, d->base_fd, r->tpath, RENAME_EXCHANGE);
	} else if (r->t_fd >= 0) {
		/* The fallback moved the old tree to "<N>o": new tree back to <N>,
		 * old tree back to T, and <N> is the garbage again. */
		r->tree[len - 1] = '\0';
		rc = fs_rename_at(d->base_fd, r->tpath, d->staging_fd, r->tree, 0);
		if (rc == 0) {
			char old[sizeof r->tree];
			snprintf(old, sizeof old, "%.*so", (int)sizeof old - 2, r->tree);
			rc = fs_rename_at(d->staging_fd, old, d->base_fd, r->tpath, 0);
		}
	} else {
		rc = fs_rename_at(d->base_fd, r->tpath, d->staging_fd, r->tree, 0);
	}
	if (rc < 0)
		return rc;
	char *parent = parent_path(r->tpath);
	if (!parent)
		return -ENOMEM;
	rc = fs_fsync_dir_at(d->base_fd, parent);
	free(parent);
	return rc;
}

static int finish(struct replace *r)
{
	int rc = disk_views_save(r->d, r->component, r->resdir, &r->views);
	if (rc < 0) {
		/* The view file could not be written (a full disk, most likely):
		 * the old tree and the old view file go back, so that nothing
		 * stored is lost.  If the swap cannot be undone, the record stays
		 * and recovery finishes the replace. */
		undo_or_log(r, rc);
		if (swapped(r))
			return rc; /* the record stays: recovery finishes the replace */
		/* The old tree is back (durably or not: the record decides after a
		 * crash); the view file must say the same. */
		int back = restore_views(r);
		if (back < 0)
			log_error("disk store: replace of %s failed, and its old view file cannot "
				  "be put back: %s",
				  r->tpath, strerror(-back));
		if (unlinkat(r->d->journal_fd, r->journal, 0) == 0)
			r->journal[0] = '\0';
		return rc;
	}
	/* The view file is durable: the replace is done.  A record that cannot
	 * be removed makes the next start write the same view set again (a
	 * bookmark since then is lost, nothing else), so it is not this call's
	 * failure. */
	char name[sizeof r->journal];
	snprintf(name, sizeof name, "%s", r->journal);
	r->journal[0] = '\0';
	atomic_fetch_add(&r->d->syncs, 1);
	if (unlinkat(r->d->journal_fd, name, 0) < 0 ||
	    (rc = fs_fsync_dir_at(r->d->journal_fd, ".")) < 0)
		log_warn("disk store: replace of %s done, but its journal record %s stays: %s",
			 r->tpath, name, strerror(rc < 0 ? -rc : errno));
	return 0;
}

/* ---- the session ---- */

static int commit_locked(struct replace *r)
{
	struct disk_store *d = r->d;
	bool synthesized = false;
	int rc = disk_views_load(d, r->component, r->resdir, &r->views, &synthesized);
	if (rc == 0 && synthesized) {
		/* The Go YurtHub's "everything here was listed" stops being true
		 * with our first list of this resource: from now on only real
		 * views cover objects. */
		view_set_free(&r->views);
	}
	/* The view file as it is, to put back if the replace fails after
	 * writing the new one. */
	int had = rc == 0 && !synthesized ? disk_views_file_exists(d, r->component, r->resdir) : 0;
	if (had < 0)
		rc = had;
	else if (had > 0 && view_set_encode(&r->views, &r->old_views) < 0)
		rc = -ENOMEM;
	r->had_views = had > 0;
	if (rc == 0 && view_matcher_init(&r->self, &r->rec) < 0)
		rc = -EINVAL;
	if (rc == 0 && view_set_put(&r->views, &r->rec, r->list_rv) < 0)
		rc = -ENOMEM;
	if (rc < 0)
		return rc;
	if (r->t_fd >= 0)
		close(r->t_fd);
	r->t_fd = fs_open_dir_at(d->base_fd, r->tpath);
	if (r->t_fd < 0 && r->t_fd != -ENOENT)
		return r->t_fd;
	struct res_index *ri;
	if ((rc = disk_index_load(d, r->component, r->resdir, &ri)) < 0)
		return rc;
	r->self_answers = selectable_answers(r->group, r->resource, r->self.fields);
	if ((rc = decide(r, ri)) < 0)
		return rc;
	if (r->t_fd >= 0 && !r->nputs && !r->drops.len) {
		/* Nothing changed: the list's rv is all there is to record. */
		return disk_views_save(d, r->component, r->resdir, &r->views);
	}
	if (delta_pays(r)) {
		if ((rc = commit_delta(r)) == 0)
			index_apply(r, ri);
		else if (r->delta_started)
			disk_index_forget(d, r->component, r->resdir); /* recovery decides */
		return rc;
	}
	if (r->t_fd >= 0 && (rc = link_kept(r, ri)) < 0)
		return rc;
	if ((rc = write_journal(r, false)) < 0)
		return rc;
	if ((rc = disk_syncfs(d)) < 0)
		return rc;
	if ((rc = swap_in(r)) < 0)
		return rc;
	if ((rc = finish(r)) == 0)
		index_apply(r, ri);
	else if (swapped(r))
		disk_index_forget(d, r->component, r->resdir); /* recovery decides */
	return rc;
}

static void replace_free(struct replace *r)
{
	struct disk_store *d = r->d;
	if (r->n_fd >= 0)
		close(r->n_fd);
	if (r->t_fd >= 0)
		close(r->t_fd);
	/* Whatever happened, the staging tree is now garbage: the new tree when
	 * the swap did not happen, the old one when it did.  A record left
	 * behind (failure after the swap) is finished by recovery, which needs
	 * only T and the record. */
	if (r->tree[0])
		disk_reap(d, r->tree);
	drop_pending(r);
	free(r->pending);
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&r->listed, &i));)
		if (is_put(e))
			free(e->value);
	strmap_free(&r->listed);
	strmap_free(&r->drops);
	strmap_free(&r->n_dirs);
	view_matcher_free(&r->self);
	view_set_free(&r->views);
	view_rec_free(&r->rec);
	buf_free(&r->scratch);
	buf_free(&r->rel);
	buf_free(&r->irel);
	free(r->group);
	free(r->resource);
	buf_free(&r->old_views);
	free(r->resdir);
	free(r->tpath);
	free(r->component);
	free(r);
}

/* Is the new tree in place (T has N's inode)? */
static bool swapped(const struct replace *r)
{
	struct stat t, n;
	if (r->n_fd < 0 || fstat(r->n_fd, &n) < 0)
		return false;
	if (fs_stat_at(r->d->base_fd, r->tpath, &t) < 0)
		return false;
	return t.st_ino == n.st_ino && t.st_dev == n.st_dev;
}

static enum store_err prepare(struct replace *r, const struct store_view *view)
{
	struct disk_store *d = r->d;
	if (!view || !view->component || !*view->component || !view->gvr.resource ||
	    !*view->gvr.resource)
		return STORE_EMPTY_KEY;
	if (!key_component_ok(view->component))
		return STORE_BAD_KEY;
	r->is_ns_resource = !strcmp(view->gvr.resource, "namespaces");
	const char *ns = view->namespace && !r->is_ns_resource ? view->namespace : "";
	if (*ns && !key_segment_ok(ns, KEY_NAME_MAX))
		return STORE_BAD_KEY;
	r->resdir =
	    key_resource_dir(d->layout, view->gvr.resource, view->gvr.version, view->gvr.group);
	r->component = strdup(view->component);
	r->group = strdup(view->gvr.group ? view->gvr.group : "");
	r->resource = strdup(view->gvr.resource);
	if (!r->group || !r->resource)
		return STORE_NOMEM;
	if (!r->resdir || !r->component)
		return r->resdir ? STORE_NOMEM : STORE_BAD_KEY;
	struct store_view v = *view;
	v.namespace = ns;
	char *err = NULL;
	if (view_canonical(&v, &r->rec, &err) < 0) {
		enum store_err e = err ? STORE_BAD_KEY : STORE_NOMEM;
		if (err)
			log_debug("disk store: replace refused: %s", err);
		free(err);
		return e;
	}
	struct buf t = BUF_INIT;
	int rc = buf_printf(&t, "%s/%s", view->component, r->resdir);
	if (rc == 0 && *ns)
		rc = buf_printf(&t, "/%s", ns);
	if (rc < 0) {
		buf_free(&t);
		return STORE_NOMEM;
	}
	r->tpath = buf_steal(&t);
	r->spans_ns = !*ns;
	return STORE_OK;
}

static int make_new_tree(struct replace *r)
{
	/* T as it is now, to link unchanged objects from while adding; it is
	 * opened again under the lock at commit. */
	r->t_fd = fs_open_dir_at(r->d->base_fd, r->tpath);
	if (r->t_fd < 0)
		r->t_fd = -1;
	disk_seq_name(r->d, 'r', r->tree, sizeof r->tree);
	if (mkdirat(r->d->staging_fd, r->tree, FS_DIR_MODE) < 0) {
		r->tree[0] = '\0';
		return -errno;
	}
	r->n_fd = openat(r->d->staging_fd, r->tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return r->n_fd < 0 ? -errno : 0;
}

enum store_err disk_replace_begin(struct store *s, const struct store_view *view,
				  struct store_replace **out)
{
	struct disk_store *d = disk_of(s);
	*out = NULL;
	struct replace *r = calloc(1, sizeof *r);
	if (!r)
		return STORE_NOMEM;
	r->base.store = s;
	r->d = d;
	r->t_fd = r->n_fd = -1;
	enum store_err e = prepare(r, view);
	if (e == STORE_OK && (d->flags & DISK_READ_ONLY))
		e = store_fail_errno(EROFS);
	if (e == STORE_OK) {
		int rc = make_new_tree(r);
		/* the index tells add() what is stored already (the commit
		 * builds it if this could not) */
		if (rc == 0 && r->t_fd >= 0)
			disk_index_ensure(d, r->component, r->resdir);
		if (rc < 0)
			e = store_fail_errno(rc);
	}
	if (e != STORE_OK) {
		replace_free(r);
		return e;
	}
	*out = &r->base;
	return STORE_OK;
}

/* An object that T already holds at the listed rv costs a hard link, not a
 * new file: a relist where little changed creates (and later deletes)
 * almost no inodes.  If T changes before commit, the merge there sees it. */
/* Does T hold rel at rv (not 0: a copy without one is always rewritten)?
 * The index answers, under the resource lock; if T changes before the
 * commit, the commit sees it. */
static bool stored_at(struct replace *r, const char *rel, uint64_t rv)
{
	const char *irel = index_rel(r, rel);
	if (!irel || !rv)
		return false;
	bool same = false;
	pthread_rwlock_t *rl = disk_lock_resource(r->d, r->component, r->resdir, DISK_SHARED);
	struct res_index *ri = disk_index_find(r->d, r->component, r->resdir);
	if (ri) {
		pthread_mutex_lock(&ri->lock);
		struct strmap_entry *e = strmap_get(&ri->objs, irel);
		same = e && ((struct index_obj *)e->value)->rv == rv;
		pthread_mutex_unlock(&ri->lock);
	}
	disk_unlock_resource(r->d, rl);
	return same;
}

enum store_err disk_replace_add(struct store_replace *sr, const struct store_item *it)
{
	struct replace *r = (struct replace *)sr;
	enum store_err e = store_item_check(it, r->rec.namespace, r->is_ns_resource);
	if (e != STORE_OK)
		return e;
	struct store_item item = *it;
	if (r->is_ns_resource)
		item.namespace = "";
	const char *rel = item_rel(r, &item);
	if (!rel)
		return STORE_NOMEM;
	int rc = 0;
	struct strmap_entry *l = strmap_get(&r->listed, rel);
	if (l) {
		/* listed twice: the earlier copy goes, the later one is taken */
		if (r->npending)
			rc = flush_writes(r);
		if (rc == 0 && unlinkat(r->n_fd, rel, 0) < 0 && errno != ENOENT)
			rc = -errno;
		if (is_put(l))
			free(l->value);
		l->value = NULL;
	} else if (!(l = strmap_put(&r->listed, rel, NULL))) {
		rc = -ENOMEM;
	}
	if (rc == 0) {
		/* An object stored at the listed rv costs nothing: a relist
		 * where little changed writes (and later removes) almost no
		 * files. */
		l->num = it->rv;
		/* a copy read damaged is rewritten, whatever its rv says */
		bool damaged = store_damage_take(&r->d->base, r->component, r->group, r->resource,
						 item.namespace, item.name);
		if (!damaged && stored_at(r, rel, it->rv)) {
			l->value = SAME_AS_STORED;
		} else if (!(l->value =
				 index_obj_new(r->group, r->resource, it->rv, it->data, it->len))) {
			rc = -ENOMEM;
		} else {
			rc = queue_write(r, rel, it->data, it->len);
		}
	}
	if (rc == 0 && (r->npending >= BATCH_FILES || r->pending_bytes >= BATCH_BYTES))
		rc = flush_writes(r);
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}

void disk_replace_abort(struct store_replace *sr)
{
	if (sr)
		replace_free((struct replace *)sr);
}

enum store_err disk_replace_commit(struct store_replace *sr, uint64_t list_rv)
{
	struct replace *r = (struct replace *)sr;
	struct disk_store *d = r->d;
	r->list_rv = list_rv;
	int rc = r->npending ? flush_writes(r) : 0;
	if (rc == 0) {
		pthread_rwlock_t *rl =
		    disk_lock_resource(d, r->component, r->resdir, DISK_EXCLUSIVE);
		rc = commit_locked(r);
		if (rc < 0 && r->journal[0] && !r->delta_started && !swapped(r) && !r->stranded) {
			/* Failed before the swap: the record describes nothing. */
			unlinkat(d->journal_fd, r->journal, 0);
			r->journal[0] = '\0';
		}
		disk_unlock_resource(d, rl);
	}
	atomic_fetch_add(&d->replaces, rc == 0);
	if (rc < 0)
		log_warn("disk store: replace of %s/%s failed: %s", r->component, r->resdir,
			 strerror(-rc));
	replace_free(r);
	return rc < 0 ? store_fail_errno(rc) : STORE_OK;
}
