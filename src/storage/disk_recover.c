/*
 * disk_recover.c - bringing a cache directory back to a clean state at start.
 *
 * Runs before the store serves anything, in this order:
 *   1. YurtHub's own backups: an entry "tmp_X" is a copy YurtHub made before
 *      rewriting X; its recovery restores it over X, and so do we, so that a
 *      cache the Go hub left mid-write is read as it would have read it.
 *   2. Our journal records: each replace is finished or rolled back
 *      (see disk_replace.c for why the inode of the target decides).
 *   3. Everything left in staging/ and every ".tmp.*" file of an atomic
 *      write is garbage of an interrupted operation and is removed.
 * Only directories are read (no object file is opened), so that a node
 * that boots offline is serving within a second even with a large cache.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/meta.h"
#include "storage/disk_internal.h"
#include "util/fsutil.h"
#include "util/log.h"

#define WALK_DEPTH_MAX 6

struct names {
	char **v;
	unsigned char *types;
	size_t n, cap;
};

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	free(ns->types);
	memset(ns, 0, sizeof *ns);
}

/* All entries of an open directory (not . and ..), with their types. */
static int read_names(int at_fd, const char *path, struct names *out)
{
	memset(out, 0, sizeof *out);
	DIR *dp;
	int rc = fs_opendir_at(at_fd, path, &dp);
	if (rc < 0)
		return rc;
	struct dirent *de;
	while ((de = readdir(dp)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		unsigned char type = fs_entry_type(dp, de);
		if (!type)
			continue; /* gone meanwhile */
		if (out->n == out->cap) {
			size_t cap = out->cap ? out->cap * 2 : 32;
			char **v = realloc(out->v, cap * sizeof *v);
			unsigned char *t = v ? realloc(out->types, cap) : NULL;
			if (v)
				out->v = v;
			if (!v || !t) {
				rc = -ENOMEM;
				break;
			}
			out->types = t;
			out->cap = cap;
		}
		if (!(out->v[out->n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		out->types[out->n++] = type;
	}
	closedir(dp);
	if (rc < 0)
		names_free(out);
	return rc;
}

/* ---- 1. YurtHub backups ---- */

static int restore_backup(int dirfd, const char *backup, unsigned char type)
{
	const char *orig = backup + 4; /* after "tmp_" */
	if (!*orig)
		return 0;
	struct stat st;
	if (fstatat(dirfd, orig, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		bool same_kind = (type == DT_DIR) == (S_ISDIR(st.st_mode) != 0);
		if (!same_kind) {
			log_warn("disk store: backup %s and %s differ in type; backup removed",
				 backup, orig);
			return fs_rm_rf_at(dirfd, backup);
		}
		int rc = fs_rm_rf_at(dirfd, orig);
		if (rc < 0)
			return rc;
	}
	return renameat(dirfd, backup, dirfd, orig) < 0 ? -errno : 1;
}

static int restore_backups_in(int dirfd, const char *path, int depth, unsigned *restored)
{
	if (depth > WALK_DEPTH_MAX)
		return 0;
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct names ns = {0};
	int rc = read_names(fd, ".", &ns);
	bool changed = false;
	for (size_t i = 0; rc == 0 && i < ns.n; i++) {
		const char *name = ns.v[i];
		if (depth == 0 && name[0] == '_')
			continue; /* _internal and cluster info: not YurtHub's objects */
		if (!strncmp(name, "tmp_", 4) && (ns.types[i] == DT_DIR || ns.types[i] == DT_REG)) {
			int r = restore_backup(fd, name, ns.types[i]);
			if (r < 0)
				rc = r;
			if (r > 0) {
				(*restored)++;
				changed = true;
			}
			continue; /* a restored tree holds no backups of its own */
		}
		if (ns.types[i] == DT_DIR)
			rc = restore_backups_in(fd, name, depth + 1, restored);
	}
	if (rc == 0 && changed && fsync(fd) < 0)
		rc = -errno;
	names_free(&ns);
	close(fd);
	return rc;
}

/* ---- 2. journal records ---- */

/* A path below the cache directory: no empty, "." or ".." segment. */
static bool relative_path_ok(const char *p)
{
	if (!*p || *p == '/')
		return false;
	for (;;) {
		const char *end = strchr(p, '/');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!end)
			return true;
		p = end + 1;
	}
}

void disk_journal_rec_free(struct disk_journal_rec *r)
{
	free(r->tree);
	free(r->target);
	free(r->component);
	free(r->resdir);
	for (size_t i = 0; i < r->ndrops; i++)
		free(r->drops[i]);
	free(r->drops);
	view_set_free(&r->views);
	memset(r, 0, sizeof *r);
}

static char *json_strdup(json_t *j, const char *name)
{
	const char *s = json_string_value(json_object_get(j, name));
	return s ? strdup(s) : NULL;
}

/* The target is the tree write_journal names: <component>/<resdir>, or a
 * namespace in it.  Anything else would let a damaged record rename or
 * write outside the resource it is about. */
static bool target_ok(const struct disk_journal_rec *r)
{
	size_t cl = strlen(r->component), rl = strlen(r->resdir);
	const char *t = r->target;
	if (strncmp(t, r->component, cl) || t[cl] != '/' || strncmp(t + cl + 1, r->resdir, rl))
		return false;
	t += cl + 1 + rl;
	return !*t || (*t == '/' && key_segment_ok(t + 1, KEY_NAME_MAX));
}

/* A resource directory's name: its parts use no '/' and it is never "..". */
static bool resdir_ok(const char *resdir)
{
	char *res, *ver, *grp;
	if (key_parse_resource_dir(resdir, &res, &ver, &grp) < 0)
		return false;
	free(res);
	free(ver);
	free(grp);
	return true;
}

/* A delta's drops: paths inside the target, "<ns>/<name>" or "<name>",
 * each part a name this store writes.  0, or -1 for anything else. */
static int decode_drops(json_t *arr, struct disk_journal_rec *out)
{
	if (!json_is_array(arr))
		return -1;
	size_t n = json_array_size(arr);
	if (!(out->drops = calloc(n ? n : 1, sizeof *out->drops)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		const char *p = json_string_value(json_array_get(arr, i));
		if (!p || !relative_path_ok(p))
			return -1;
		const char *slash = strchr(p, '/');
		if (slash && (strchr(slash + 1, '/') || !key_segment_ok(slash + 1, KEY_NAME_MAX)))
			return -1;
		if (!(out->drops[out->ndrops] = strdup(p)))
			return -1;
		out->ndrops++;
		char *cut = strchr(out->drops[i], '/');
		if (cut)
			*cut = '\0';
		bool ok = key_segment_ok(out->drops[i], KEY_NAME_MAX);
		if (cut)
			*cut = '/';
		if (!ok)
			return -1;
	}
	return 0;
}

int disk_journal_decode(const char *data, size_t len, struct disk_journal_rec *out)
{
	memset(out, 0, sizeof *out);
	json_t *j = json_loadb(data, len, 0, NULL);
	const char *op = json_string_value(json_object_get(j, "op"));
	const char *ino = json_string_value(json_object_get(j, "ino"));
	const char *views = json_string_value(json_object_get(j, "views"));
	out->tree = json_strdup(j, "tree");
	out->target = json_strdup(j, "target");
	out->component = json_strdup(j, "component");
	out->resdir = json_strdup(j, "resdir");
	int rc = -1;
	out->delta = op && !strcmp(op, "delta");
	if (op && (!strcmp(op, "replace") || out->delta) && ino && views && out->tree &&
	    out->target && out->component && out->resdir && key_component_ok(out->component) &&
	    out->tree[0] == 'r' && !strchr(out->tree, '/') && relative_path_ok(out->target) &&
	    resdir_ok(out->resdir) && target_ok(out) &&
	    view_set_decode(views, strlen(views), &out->views) == 0 &&
	    (!out->delta || decode_drops(json_object_get(j, "drops"), out) == 0)) {
		kube_rv_parse(ino, strlen(ino), &out->ino);
		rc = 0;
	}
	json_decref(j);
	if (rc < 0)
		disk_journal_rec_free(out);
	return rc;
}

/* A delta's record is its commit: finish it (*forward).  Its target
 * cannot have gone (nothing runs between the crash and this); if it has,
 * there is nothing to finish it on, and the delta is dropped. */
static int delta_roll(struct disk_store *d, const struct disk_journal_rec *r, bool *forward)
{
	int t_fd = fs_open_dir_at(d->base_fd, r->target);
	if (t_fd < 0) {
		fs_rm_rf_at(d->staging_fd, r->tree);
		return t_fd == -ENOENT || t_fd == -ENOTDIR ? 0 : t_fd;
	}
	int n_fd = fs_open_dir_at(d->staging_fd, r->tree);
	int rc = disk_delta_apply(n_fd, t_fd, r->drops, r->ndrops);
	if (n_fd >= 0)
		close(n_fd);
	close(t_fd);
	if (rc == 0)
		rc = disk_syncfs(d);
	if (rc == 0)
		rc = disk_views_save(d, r->component, r->resdir, &r->views);
	if (rc < 0)
		return rc;
	fs_rm_rf_at(d->staging_fd, r->tree);
	*forward = true;
	return 0;
}

/* Finish or undo the replace a decoded record announces. */
static int journal_roll(struct disk_store *d, const struct disk_journal_rec *r, bool *forward)
{
	if (r->delta)
		return delta_roll(d, r, forward);
	int rc = 0;
	struct stat st;
	char old[64];
	snprintf(old, sizeof old, "%so", r->tree);
	if (fs_stat_at(d->base_fd, r->target, &st) == 0 && (uint64_t)st.st_ino == r->ino) {
		rc = disk_views_save(d, r->component, r->resdir, &r->views);
		if (rc < 0)
			return rc;
		*forward = true;
	} else if (fs_exists_at(d->base_fd, r->target) == 0 &&
		   fs_exists_at(d->staging_fd, old) == 1) {
		/* The two-rename fallback stopped half way: put the old tree
		 * back. */
		rc = fs_rename_at(d->staging_fd, old, d->base_fd, r->target, 0);
		if (rc < 0)
			return rc;
		fs_fsync_dir_at(d->base_fd, ".");
	}
	fs_rm_rf_at(d->staging_fd, r->tree);
	fs_rm_rf_at(d->staging_fd, old);
	return 0;
}

int disk_journal_apply(struct disk_store *d, const char *name, bool *forward)
{
	*forward = false;
	struct buf b = BUF_INIT;
	struct disk_journal_rec rec;
	int rc = fs_read_file_at(d->journal_fd, name, &b, 64u << 20);
	/* A record that does not decode was never made durable (or was damaged
	 * from outside), so the swap it announces never happened: dropping it
	 * is rolling back. */
	if (rc == 0 && disk_journal_decode(buf_cstr(&b), b.len, &rec) == 0) {
		rc = journal_roll(d, &rec, forward);
		disk_journal_rec_free(&rec);
	} else {
		rc = 0;
	}
	buf_free(&b);
	if (rc < 0)
		return rc;
	return unlinkat(d->journal_fd, name, 0) < 0 ? -errno : 0;
}

static int apply_journals(struct disk_store *d, struct disk_recovery_report *report)
{
	struct names ns = {0};
	int rc = read_names(d->journal_fd, ".", &ns);
	if (rc < 0)
		return rc;
	for (size_t i = 0; rc == 0 && i < ns.n; i++) {
		if (ns.types[i] != DT_REG)
			continue;
		bool forward = false;
		rc = disk_journal_apply(d, ns.v[i], &forward);
		if (forward)
			report->journals_rolled_forward++;
		else
			report->journals_rolled_back++;
	}
	if (rc == 0 && ns.n)
		rc = fs_fsync_dir_at(d->journal_fd, ".");
	names_free(&ns);
	return rc;
}

/* ---- 3. garbage ---- */

static int clear_dir(int dirfd, unsigned *removed)
{
	struct names ns = {0};
	int rc = read_names(dirfd, ".", &ns);
	for (size_t i = 0; rc == 0 && i < ns.n; i++) {
		rc = fs_rm_rf_at(dirfd, ns.v[i]);
		if (removed && rc == 0)
			(*removed)++;
	}
	names_free(&ns);
	return rc;
}

static int remove_atomic_temps(int dirfd)
{
	struct names ns = {0};
	int rc = read_names(dirfd, ".", &ns);
	for (size_t i = 0; rc == 0 && i < ns.n; i++)
		if (!strncmp(ns.v[i], ".tmp.", 5) && ns.types[i] == DT_REG)
			rc = unlinkat(dirfd, ns.v[i], 0) < 0 ? -errno : 0;
	names_free(&ns);
	return rc;
}

static int sweep_temps(struct disk_store *d)
{
	int rc = remove_atomic_temps(d->base_fd);
	struct names comps = {0};
	if (rc == 0)
		rc = read_names(d->views_fd, ".", &comps);
	if (rc < 0)
		return rc;
	if (rc == 0)
		rc = remove_atomic_temps(d->views_fd);
	for (size_t i = 0; rc == 0 && i < comps.n; i++) {
		if (comps.types[i] != DT_DIR)
			continue;
		int fd = openat(d->views_fd, comps.v[i],
				O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		rc = remove_atomic_temps(fd);
		close(fd);
	}
	names_free(&comps);
	return rc;
}

int disk_recover(struct disk_store *d, struct disk_recovery_report *report, char **err)
{
	memset(report, 0, sizeof *report);
	const char *step = "restoring YurtHub backups";
	int rc = restore_backups_in(d->base_fd, ".", 0, &report->yurthub_backups_restored);
	if (rc == 0) {
		step = "applying journal";
		rc = apply_journals(d, report);
	}
	if (rc == 0) {
		step = "clearing staging";
		rc = clear_dir(d->staging_fd, &report->staging_removed);
	}
	if (rc == 0) {
		step = "removing temporary files";
		rc = sweep_temps(d);
	}
	if (rc < 0) {
		struct buf b = BUF_INIT;
		if (buf_printf(&b, "recovery of %s failed while %s: %s", d->path, step,
			       strerror(-rc)) == 0)
			*err = buf_steal(&b);
		return rc;
	}
	if (report->yurthub_backups_restored || report->journals_rolled_forward ||
	    report->journals_rolled_back || report->staging_removed)
		log_info("disk store: recovered %s: %u YurtHub backups restored, %u replaces "
			 "finished, %u rolled back, %u staging entries removed",
			 d->path, report->yurthub_backups_restored, report->journals_rolled_forward,
			 report->journals_rolled_back, report->staging_removed);
	return 0;
}
