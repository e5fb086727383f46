/*
 * cache_cmd.c - `yurthub cache`: list, print, check and recover a cache
 * directory from the command line (synopsis in cache_cmd.h).
 *
 * ls (of objects), get and views go through the disk store opened read-only,
 * so that they see the directory exactly as the hub does.  verify reads the
 * tree itself, never following a symbolic link, because its job is to find
 * what the store would trip over.  Only recover opens the store read-write:
 * that takes the directory's lock and runs the store's crash recovery.
 */
#include "cli/cache_cmd.h"
#include "cli/cache_cmd_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/behind.h"
#include "kube/meta.h"
#include "storage/disk.h"
#include "storage/key.h"
#include "storage/store.h"
#include "storage/view.h"
#include "util/buf.h"
#include "util/fsutil.h"

#define FILE_READ_MAX  (64u << 20) /* largest file read back, as the store's limit */
#define PRIVATE_DIR    "yurthub-c" /* the C hub's state, below _internal/ */
#define PARTIAL_PREFIX "partialobjectmetadatas."

static const char USAGE[] =
    "usage: yurthub cache COMMAND DIR [ARGS]\n"
    "\n"
    "  ls DIR [COMPONENT [RESOURCE.VERSION.GROUP [NAMESPACE]]]\n"
    "        list components, the resources of a component, or objects\n"
    "  get DIR COMPONENT RESOURCE.VERSION.GROUP [NAMESPACE] NAME\n"
    "        print one stored object\n"
    "  views DIR COMPONENT RESOURCE.VERSION.GROUP\n"
    "        print the list views recorded for a resource\n"
    "  verify DIR\n"
    "        check every file and directory; exit 1 when problems are found\n"
    "  recover DIR\n"
    "        take the directory's lock and finish or undo interrupted writes\n"
    "\n"
    "A cache in YurtHub's legacy layout names resources bare (e.g. pods).\n"
    "Only recover writes to DIR; the other commands work while a hub runs.\n"
    "For an etcd store: yurthub cache --etcd-servers=URL --node-name=NODE --help\n";

/* ---- messages ---- */

static void vreport(FILE *err, const char *cmd, const char *fmt, va_list ap)
{
	fprintf(err, "yurthub cache%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	vfprintf(err, fmt, ap);
	fputc('\n', err);
}

/* One line naming what is wrong with the command line; exit status 2. */
int usage_error(FILE *err, const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(err, cmd, fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

/* One line saying what failed; exit status 1. */
int failure(FILE *err, const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(err, cmd, fmt, ap);
	va_end(ap);
	return EXIT_PROBLEMS;
}

/* A store error on `what` (a path below DIR), with the exit status it means. */
int store_failure(FILE *err, const char *cmd, const char *what, enum store_err e)
{
	switch (e) {
	case STORE_NOT_FOUND:
		return failure(err, cmd, "%s: not found", what);
	case STORE_EMPTY_KEY:
		/* Component and resource are never empty here: a bare resource
		 * name given for a cache in the RESOURCE.VERSION.GROUP layout. */
		return failure(err, cmd,
			       "%s: not found (this cache names resources "
			       "RESOURCE.VERSION.GROUP)",
			       what);
	case STORE_EMPTY_CONTENT:
		return failure(err, cmd, "%s: a collection, not an object", what);
	case STORE_BAD_KEY:
		return usage_error(err, cmd, "%s: invalid name", what);
	case STORE_IO:
		/* The disk store reads no symbolic link or special file. */
		if (store_errno() == EINVAL)
			return failure(err, cmd, "%s: not a regular file", what);
		return failure(err, cmd, "%s: %s", what, strerror(store_errno()));
	default:
		return failure(err, cmd, "%s: %s", what, store_strerror(e));
	}
}

/* ---- directory entries ---- */

struct entry {
	char *name;
	mode_t mode; /* from lstat: a link is a link */
};

struct entries {
	struct entry *v;
	size_t n, cap;
};

static void entries_free(struct entries *es)
{
	for (size_t i = 0; i < es->n; i++)
		free(es->v[i].name);
	free(es->v);
	memset(es, 0, sizeof *es);
}

static int entries_add(struct entries *es, const char *name, mode_t mode)
{
	if (es->n == es->cap) {
		size_t cap = es->cap ? es->cap * 2 : 32;
		struct entry *v = realloc(es->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		es->v = v;
		es->cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	es->v[es->n].name = copy;
	es->v[es->n].mode = mode;
	es->n++;
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* Read dp to the end; each entry is lstat'ed relative to fd.  An entry that
 * vanishes meanwhile (a hub is writing) is skipped. */
static int read_all_entries(DIR *dp, int fd, struct entries *out)
{
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(dp);
		if (!de)
			return errno ? -errno : 0;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		if (entries_add(out, de->d_name, st.st_mode) < 0)
			return -ENOMEM;
	}
}

/* The entries of the open directory fd, sorted by name.  fd stays open (its
 * own offset is untouched).  0 or -errno. */
static int read_entries(int fd, struct entries *out)
{
	memset(out, 0, sizeof *out);
	int own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (own < 0)
		return -errno;
	DIR *dp = fdopendir(own);
	if (!dp) {
		int rc = -errno;
		close(own);
		return rc;
	}
	int rc = read_all_entries(dp, fd, out);
	closedir(dp);
	if (rc < 0)
		entries_free(out);
	else if (out->n > 1)
		qsort(out->v, out->n, sizeof *out->v, entry_cmp);
	return rc;
}

/* A directory below parent, never through a symbolic link. */
static int open_subdir(int parent, const char *name)
{
	return openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* DIR itself, as the operator named it (a link to it is fine). */
static int open_cache_dir(const char *dir)
{
	return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- output lines, sorted before printing ---- */

struct lines {
	char **v;
	size_t n, cap;
};

/* Takes ownership of line (NULL means the allocation failed). */
static int lines_add(struct lines *l, char *line)
{
	if (!line)
		return -ENOMEM;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		char **v = realloc(l->v, cap * sizeof *v);
		if (!v) {
			free(line);
			return -ENOMEM;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = line;
	return 0;
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void lines_print_sorted(struct lines *l, FILE *out)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof *l->v, line_cmp);
	for (size_t i = 0; i < l->n; i++)
		fprintf(out, "%s\n", l->v[i]);
}

static void lines_free(struct lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

/* "a/b/c" from the given parts (NULL parts skipped); NULL on ENOMEM. */
static char *join_path(const char *const *parts, size_t n)
{
	struct buf b = BUF_INIT;
	for (size_t i = 0; i < n; i++) {
		if (!parts[i])
			continue;
		if ((b.len && buf_append_char(&b, '/') < 0) || buf_append_str(&b, parts[i]) < 0) {
			buf_free(&b);
			return NULL;
		}
	}
	return buf_steal(&b); /* "" when every part was NULL */
}

/* ---- the store, read-only ---- */

static struct store *open_read_only(const char *dir, const char *cmd, FILE *err)
{
	char *msg = NULL;
	struct store *s = disk_store_open(dir, DISK_READ_ONLY, NULL, &msg);
	if (!s)
		failure(err, cmd, "%s", msg ? msg : "cannot open the cache directory");
	free(msg);
	return s;
}

/* RESOURCE.VERSION.GROUP (or a legacy bare resource) split in its parts. */
struct resource_arg {
	char *resource, *version, *group;
};

static int resource_arg_parse(const char *text, struct resource_arg *r)
{
	return key_parse_resource_dir(text, &r->resource, &r->version, &r->group);
}

static void resource_arg_free(struct resource_arg *r)
{
	free(r->resource);
	free(r->version);
	free(r->group);
	memset(r, 0, sizeof *r);
}

static struct store_gvr resource_gvr(const struct resource_arg *r)
{
	struct store_gvr gvr = {r->group, r->version, r->resource};
	return gvr;
}

static int bad_resource(FILE *err, const char *cmd, const char *text)
{
	return usage_error(err, cmd,
			   "'%s' is not RESOURCE.VERSION.GROUP (nor a legacy bare resource)", text);
}

/* ---- ls ---- */

/* Names `ls` shows at the component and resource levels: directories that
 * are neither the hub's (_*), hidden (.*), nor YurtHub backups (tmp_*). */
static bool listed_dir(const struct entry *e)
{
	return S_ISDIR(e->mode) && e->name[0] != '_' && e->name[0] != '.' &&
	       !starts_with(e->name, "tmp_");
}

static int print_listed_dirs(int fd, const char *what, FILE *out, FILE *err)
{
	struct entries es;
	int rc = read_entries(fd, &es);
	if (rc < 0)
		return failure(err, "ls", "%s: %s", what, strerror(-rc));
	for (size_t i = 0; i < es.n; i++)
		if (listed_dir(&es.v[i]))
			fprintf(out, "%s\n", es.v[i].name);
	entries_free(&es);
	return EXIT_OK;
}

static int ls_components(const char *dir, FILE *out, FILE *err)
{
	int fd = open_cache_dir(dir);
	if (fd < 0)
		return failure(err, "ls", "%s: %s", dir, strerror(errno));
	int rc = print_listed_dirs(fd, dir, out, err);
	close(fd);
	return rc;
}

static int ls_resources(const char *dir, const char *component, FILE *out, FILE *err)
{
	if (!key_component_ok(component))
		return usage_error(err, "ls", "'%s' is not a valid component name", component);
	int base = open_cache_dir(dir);
	if (base < 0)
		return failure(err, "ls", "%s: %s", dir, strerror(errno));
	int fd = open_subdir(base, component);
	int saved = errno;
	close(base);
	if (fd < 0 && (saved == ENOENT || saved == ENOTDIR || saved == ELOOP))
		return failure(err, "ls", "%s: no such component", component);
	if (fd < 0)
		return failure(err, "ls", "%s: %s", component, strerror(saved));
	int rc = print_listed_dirs(fd, component, out, err);
	close(fd);
	return rc;
}

struct ls_walk {
	const char *namespace; /* NULL: every namespace, printed as ns/name */
	struct lines lines;
	int err;
};

static int collect_object_key(void *ctx, const struct store_key *key)
{
	struct ls_walk *w = ctx;
	if (w->namespace && strcmp(key->namespace, w->namespace))
		return 0;
	const char *parts[] = {w->namespace || !*key->namespace ? NULL : key->namespace, key->name};
	if (lines_add(&w->lines, join_path(parts, 2)) < 0) {
		w->err = -ENOMEM;
		return 1;
	}
	return 0;
}

int cache_ls_objects(struct store *s, const char *component, const char *resdir,
		     const char *namespace, FILE *out, FILE *err)
{
	struct resource_arg r;
	if (resource_arg_parse(resdir, &r) < 0)
		return bad_resource(err, "ls", resdir);
	struct ls_walk w = {namespace, {NULL, 0, 0}, 0};
	struct store_gvr gvr = resource_gvr(&r);
	enum store_err e = store_list_keys(s, component, &gvr, collect_object_key, &w);
	int rc = EXIT_OK;
	const char *parts[] = {component, resdir};
	char *what = join_path(parts, 2);
	if (!what || w.err)
		rc = failure(err, "ls", "%s", strerror(ENOMEM));
	else if (e != STORE_OK)
		rc = store_failure(err, "ls", what, e);
	else
		lines_print_sorted(&w.lines, out);
	free(what);
	lines_free(&w.lines);
	resource_arg_free(&r);
	return rc;
}

static int cmd_ls(char **args, int n, FILE *out, FILE *err)
{
	if (n == 1)
		return ls_components(args[0], out, err);
	if (n == 2)
		return ls_resources(args[0], args[1], out, err);
	const char *namespace = n == 4 ? args[3] : NULL;
	if (namespace && !key_segment_ok(namespace, KEY_NAME_MAX))
		return usage_error(err, "ls", "'%s' is not a valid namespace", namespace);
	struct store *s = open_read_only(args[0], "ls", err);
	if (!s)
		return EXIT_PROBLEMS;
	int rc = cache_ls_objects(s, args[1], args[2], namespace, out, err);
	store_close(s);
	return rc;
}

/* ---- get ---- */

static void print_object(const struct buf *b, FILE *out)
{
	if (b->len)
		fwrite(b->data, 1, b->len, out);
	if (!b->len || b->data[b->len - 1] != '\n')
		fputc('\n', out);
}

int cache_get_object(struct store *s, char **args, int n, FILE *out, FILE *err)
{
	struct resource_arg r;
	if (resource_arg_parse(args[2], &r) < 0)
		return bad_resource(err, "get", args[2]);
	const char *namespace = n == 5 ? args[3] : "";
	const char *name = args[n - 1];
	const char *parts[] = {args[1], args[2], *namespace ? namespace : NULL, name};
	char *what = join_path(parts, 4);
	struct store_key_info info = {args[1], r.group, r.version, r.resource, namespace, name};
	struct store_key key = {0};
	struct buf data = BUF_INIT;
	int rc = EXIT_OK;
	enum store_err e = what ? store_key_build(s, &info, &key) : STORE_NOMEM;
	if (e == STORE_OK)
		e = store_get(s, &key, &data);
	if (e == STORE_OK)
		print_object(&data, out);
	else
		rc = store_failure(err, "get", what ? what : name, e);
	buf_free(&data);
	store_key_free(&key);
	free(what);
	resource_arg_free(&r);
	return rc;
}

static int cmd_get(char **args, int n, FILE *out, FILE *err)
{
	struct store *s = open_read_only(args[0], "get", err);
	if (!s)
		return EXIT_PROBLEMS;
	int rc = cache_get_object(s, args, n, out, err);
	store_close(s);
	return rc;
}

/* ---- views ---- */

struct views_walk {
	FILE *out;
	size_t count;
	const char *id_resdir; /* etcd: the holdings name views by id */
};

static int print_view(void *ctx, const struct store_view_state *v)
{
	struct views_walk *w = ctx;
	fprintf(w->out, "namespace=%s labelSelector=%s fieldSelector=%s resourceVersion=%" PRIu64,
		*v->namespace ? v->namespace : "*", v->label_selector, v->field_selector, v->rv);
	if (w->id_resdir) {
		struct view_rec r = {v->namespace, v->label_selector, v->field_selector, v->rv};
		char id[VIEW_ID_LEN + 1];
		view_rec_id(w->id_resdir, &r, id);
		fprintf(w->out, " id=%s", id);
	}
	fputc('\n', w->out);
	w->count++;
	return 0;
}

int cache_list_views(struct store *s, const char *component, const char *resdir, FILE *out,
		     FILE *err)
{
	struct resource_arg r;
	if (resource_arg_parse(resdir, &r) < 0)
		return bad_resource(err, "views", resdir);
	const char *parts[] = {component, resdir};
	char *what = join_path(parts, 2);
	struct views_walk w = {out, 0, !strcmp(s->ops->name, "etcd") ? resdir : NULL};
	struct store_gvr gvr = resource_gvr(&r);
	enum store_err e =
	    what ? store_list_views(s, component, &gvr, print_view, &w) : STORE_NOMEM;
	int rc = EXIT_OK;
	if (e != STORE_OK)
		rc = store_failure(err, "views", what ? what : resdir, e);
	else if (w.count == 0)
		rc = failure(err, "views", "%s: never listed", what);
	free(what);
	resource_arg_free(&r);
	return rc;
}

static int cmd_views(char **args, int n, FILE *out, FILE *err)
{
	struct store *s = open_read_only(args[0], "views", err);
	if (!s)
		return EXIT_PROBLEMS;
	int rc = cache_list_views(s, args[1], args[2], out, err);
	store_close(s);
	return rc;
}

/* ---- verify ---- */

struct verify {
	FILE *out;
	struct buf path; /* the directory being read, relative to DIR ("" for DIR) */
	unsigned long objects, problems;
	unsigned long unsettled; /* staging and journal entries: see unsettled_entry */
	int fatal;		 /* -ENOMEM: the walk stopped */
};

static void problem(struct verify *v, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(struct verify *v, const char *name, const char *fmt, ...)
{
	va_list ap;
	v->problems++;
	if (v->path.len)
		fprintf(v->out, "%s/", v->path.data);
	fprintf(v->out, "%s: ", name);
	va_start(ap, fmt);
	vfprintf(v->out, fmt, ap);
	va_end(ap);
	fputc('\n', v->out);
}

/* Handles one entry of the directory open at fd. */
typedef void (*entry_fn)(struct verify *v, int fd, const struct entry *e, const void *arg);

static void visit_entries(struct verify *v, int fd, const struct entries *es, entry_fn fn,
			  const void *arg)
{
	for (size_t i = 0; i < es->n && !v->fatal; i++)
		fn(v, fd, &es->v[i], arg);
}

/* Read the directory `name` below parent and hand each entry to fn, with
 * v->path naming that directory meanwhile. */
static void verify_dir(struct verify *v, int parent, const char *name, entry_fn fn, const void *arg)
{
	int fd = open_subdir(parent, name);
	if (fd < 0) {
		int saved = errno;
		if (saved != ENOENT)
			problem(v, name, "cannot open directory: %s", strerror(saved));
		return;
	}
	struct entries es;
	int rc = read_entries(fd, &es);
	if (rc == -ENOMEM) {
		v->fatal = rc;
	} else if (rc < 0) {
		problem(v, name, "cannot read directory: %s", strerror(-rc));
	} else {
		size_t mark = v->path.len;
		if (buf_printf(&v->path, mark ? "/%s" : "%s", name) < 0)
			v->fatal = -ENOMEM;
		else
			visit_entries(v, fd, &es, fn, arg);
		v->path.len = mark;
		if (v->path.data)
			v->path.data[mark] = '\0';
		entries_free(&es);
	}
	close(fd);
}

/* Problems any entry anywhere can have.  True when e was reported and needs
 * no further look. */
static bool odd_entry(struct verify *v, const struct entry *e)
{
	if (starts_with(e->name, "tmp_"))
		problem(v, e->name, "leftover YurtHub backup of an interrupted write");
	else if (starts_with(e->name, ".tmp."))
		problem(v, e->name, "leftover temporary file of an interrupted write");
	else if (S_ISLNK(e->mode))
		problem(v, e->name, "symbolic link");
	else if (!S_ISDIR(e->mode) && !S_ISREG(e->mode))
		problem(v, e->name, "neither a regular file nor a directory");
	else
		return false;
	return true;
}

static void file_where_dir_expected(struct verify *v, const struct entry *e)
{
	problem(v, e->name, "regular file where a directory is expected");
}

static void dir_too_deep(struct verify *v, const struct entry *e)
{
	problem(v, e->name, "directory nested deeper than the layout allows");
}

/* Read a file of the tree; false when it could not be read (reported, or
 * gone meanwhile). */
static bool read_tree_file(struct verify *v, int fd, const char *name, struct buf *b)
{
	int rc = fs_read_file_at(fd, name, b, FILE_READ_MAX);
	if (rc == -ENOMEM)
		v->fatal = rc;
	else if (rc == -EFBIG)
		problem(v, name, "larger than %u bytes", FILE_READ_MAX);
	else if (rc < 0 && rc != -ENOENT)
		problem(v, name, "cannot read: %s", strerror(-rc));
	return rc == 0;
}

/* What an object file's position in the tree says it must hold. */
struct object_place {
	const char *resource;
	const char *namespace; /* NULL: cluster-scoped */
};

static void check_object_meta(struct verify *v, const char *name, const struct buf *b,
			      const struct object_place *at)
{
	struct kube_meta m;
	if (kube_meta_parse(b->data ? b->data : "", b->len, &m) < 0) {
		problem(v, name, "not a single JSON object");
		kube_meta_free(&m);
		return;
	}
	const char *ns = m.namespace ? m.namespace : "";
	if (!m.name)
		problem(v, name, "metadata.name missing");
	else if (strcmp(m.name, name))
		problem(v, name, "metadata.name \"%s\" differs from the file name", m.name);
	if (at->namespace && strcmp(ns, at->namespace))
		problem(v, name, "metadata.namespace \"%s\" differs from the namespace directory",
			ns);
	/* YurtHub ignores the namespace given for the namespaces resource. */
	else if (!at->namespace && *ns && strcmp(at->resource, "namespaces"))
		problem(v, name, "metadata.namespace \"%s\" set on a cluster-scoped object", ns);
	kube_meta_free(&m);
}

static void check_object(struct verify *v, int fd, const struct entry *e,
			 const struct object_place *at)
{
	struct buf b = BUF_INIT;
	if (read_tree_file(v, fd, e->name, &b)) {
		v->objects++;
		if (e->mode & 077)
			problem(v, e->name, "mode %04o, want %04o", (unsigned)(e->mode & 07777),
				(unsigned)FS_FILE_MODE);
		check_object_meta(v, e->name, &b, at);
	}
	buf_free(&b);
}

/* <comp>/<resdir>/<namespace>/: objects of that namespace. */
static void namespace_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	if (odd_entry(v, e))
		return;
	if (S_ISDIR(e->mode))
		dir_too_deep(v, e);
	else
		check_object(v, fd, e, arg);
}

struct resource_level {
	const char *resource;
	bool partial; /* partialobjectmetadatas.*: holds resource directories */
};

static void verify_resource_dir(struct verify *v, int parent, const struct entry *e, bool inner);

/* <comp>/<resdir>/: cluster-scoped objects and namespace directories. */
static void resource_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	const struct resource_level *level = arg;
	if (odd_entry(v, e))
		return;
	if (level->partial) {
		if (S_ISDIR(e->mode))
			verify_resource_dir(v, fd, e, true);
		else
			file_where_dir_expected(v, e);
		return;
	}
	if (S_ISREG(e->mode)) {
		struct object_place at = {level->resource, NULL};
		check_object(v, fd, e, &at);
	} else if (!strcmp(level->resource, "namespaces")) {
		dir_too_deep(v, e); /* cluster-scoped: no namespace directories */
	} else {
		struct object_place at = {level->resource, e->name};
		verify_dir(v, fd, e->name, namespace_entry, &at);
	}
}

/* A resource directory; inner: one below partialobjectmetadatas.*, which
 * cannot hold another level. */
static void verify_resource_dir(struct verify *v, int parent, const struct entry *e, bool inner)
{
	struct resource_arg r;
	if (resource_arg_parse(e->name, &r) < 0) {
		problem(v, e->name, "not a resource directory name");
		return;
	}
	struct resource_level level = {r.resource, !inner && starts_with(e->name, PARTIAL_PREFIX)};
	verify_dir(v, parent, e->name, resource_entry, &level);
	resource_arg_free(&r);
}

/* <comp>/: resource directories only. */
static void component_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	if (odd_entry(v, e))
		return;
	if (S_ISDIR(e->mode))
		verify_resource_dir(v, fd, e, false);
	else
		file_where_dir_expected(v, e);
}

/* _internal/yurthub-c/staging/ and journal/: a write or replace in progress
 * (the hub runs) or cut short (it was killed).  Not damage: the store's
 * recovery, run at every start before anything is served (and by `recover`),
 * finishes or rolls back each of them, so they are named and counted apart
 * from the problems. */
static void unsettled_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	v->unsettled++;
	fprintf(v->out, "%s/%s: %s\n", v->path.data, e->name, (const char *)arg);
}

/* _internal/yurthub-c/views/<comp>/: one view file per resource directory. */
static void view_file_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	if (odd_entry(v, e))
		return;
	if (S_ISDIR(e->mode)) {
		dir_too_deep(v, e);
		return;
	}
	struct buf b = BUF_INIT;
	struct view_set set;
	if (read_tree_file(v, fd, e->name, &b)) {
		if (view_set_decode(b.data ? b.data : "", b.len, &set) < 0)
			problem(v, e->name, "view file does not decode");
		else
			view_set_free(&set);
	}
	buf_free(&b);
}

/* _internal/yurthub-c/views/: a directory per component. */
static void views_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	if (odd_entry(v, e))
		return;
	if (S_ISDIR(e->mode))
		verify_dir(v, fd, e->name, view_file_entry, NULL);
	else
		file_where_dir_expected(v, e);
}

struct behind_report {
	struct verify *v;
	const char *name;
};

static void report_behind(void *ctx, const struct view_behind_info *b)
{
	struct behind_report *r = ctx;
	char when[32] = "?";
	time_t t = (time_t)b->since;
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	problem(r->v, r->name,
		"the %s view of %s.%s%s%s (namespace \"%s\", labels \"%s\", fields \"%s\") has "
		"been behind the cloud since %s: a write the store could not take was lost; the "
		"hub lists it again once the store and the cloud are back",
		b->component, b->resource, b->version, *b->group ? "." : "", b->group, b->namespace,
		b->label_selector, b->field_selector, when);
}

/* _internal/yurthub-c/views-behind (cache/behind.h): each view a lost
 * write left behind is a problem until the hub has listed it again.  Kept
 * on the node's disk also with the etcd store, so that verify of
 * --disk-cache-path names them for either. */
static void check_views_behind(struct verify *v, int fd, const struct entry *e)
{
	struct buf b = BUF_INIT;
	struct behind_report r = {v, e->name};
	if (read_tree_file(v, fd, e->name, &b) && b.len &&
	    views_behind_decode(b.data, b.len, report_behind, &r) < 0)
		problem(v, e->name, "no valid record of the views behind the cloud");
	buf_free(&b);
}

/* _internal/yurthub-c/: the lock, staging, journal and views. */
static void private_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	if (odd_entry(v, e))
		return;
	if (S_ISREG(e->mode) && !strcmp(e->name, "views-behind"))
		check_views_behind(v, fd, e);
	if (!S_ISDIR(e->mode))
		return;
	if (!strcmp(e->name, "staging"))
		verify_dir(v, fd, e->name, unsettled_entry,
			   "write or replace in progress, or cut short (settled at the hub's "
			   "next start, or by `yurthub cache recover`)");
	else if (!strcmp(e->name, "journal"))
		verify_dir(v, fd, e->name, unsettled_entry,
			   "replace in progress, or cut short (finished or rolled back at the "
			   "hub's next start, or by `yurthub cache recover`)");
	else if (!strcmp(e->name, "views"))
		verify_dir(v, fd, e->name, views_entry, NULL);
}

/* _internal/: only the C hub's part is checked; YurtHub keeps its own files
 * there (the restmapper cache). */
static void internal_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	if (strcmp(e->name, PRIVATE_DIR) || odd_entry(v, e))
		return;
	if (S_ISDIR(e->mode))
		verify_dir(v, fd, e->name, private_entry, NULL);
	else
		file_where_dir_expected(v, e);
}

static bool is_cluster_info_name(const char *name)
{
	/* the service-account issuer's documents (identity/sakeys.h) too */
	return !strcmp(name, "version") || !strcmp(name, "apis") || starts_with(name, "_api") ||
	       !strcmp(name, "_openid_v1_jwks") ||
	       !strcmp(name, "_.well-known_openid-configuration");
}

static void check_cluster_info(struct verify *v, int fd, const struct entry *e)
{
	struct buf b = BUF_INIT;
	if (read_tree_file(v, fd, e->name, &b)) {
		json_t *doc = json_loadb(b.data ? b.data : "", b.len, JSON_DECODE_ANY, NULL);
		if (!doc)
			problem(v, e->name, "cluster info is not valid JSON");
		json_decref(doc);
	}
	buf_free(&b);
}

/* DIR/: components, cluster info and _internal. */
static void root_entry(struct verify *v, int fd, const struct entry *e, const void *arg)
{
	if (odd_entry(v, e))
		return;
	if (S_ISREG(e->mode)) {
		if (is_cluster_info_name(e->name))
			check_cluster_info(v, fd, e);
		else
			file_where_dir_expected(v, e);
	} else if (!strcmp(e->name, "_internal")) {
		verify_dir(v, fd, e->name, internal_entry, NULL);
	} else if (e->name[0] != '_' && e->name[0] != '.') {
		verify_dir(v, fd, e->name, component_entry, NULL);
	}
}

static int cmd_verify(char **args, int n, FILE *out, FILE *err)
{
	int fd = open_cache_dir(args[0]);
	if (fd < 0)
		return failure(err, "verify", "%s: %s", args[0], strerror(errno));
	struct verify v = {out, BUF_INIT, 0, 0, 0, 0};
	struct entries es;
	int rc = read_entries(fd, &es);
	if (rc == 0) {
		visit_entries(&v, fd, &es, root_entry, NULL);
		entries_free(&es);
	}
	close(fd);
	buf_free(&v.path);
	if (rc < 0 || v.fatal)
		return failure(err, "verify", "%s: %s", args[0], strerror(rc < 0 ? -rc : -v.fatal));
	fprintf(out, "verify: %lu objects, %lu problems", v.objects, v.problems);
	if (v.unsettled)
		fprintf(out, ", %lu writes or replaces in progress or cut short", v.unsettled);
	fputc('\n', out);
	return v.problems ? EXIT_PROBLEMS : EXIT_OK;
}

/* ---- recover ---- */

static void print_recovery(const struct disk_recovery_report *r, FILE *out)
{
	fprintf(out,
		"recover: %u YurtHub backups restored, %u replaces finished, "
		"%u replaces rolled back, %u staging entries removed\n",
		r->yurthub_backups_restored, r->journals_rolled_forward, r->journals_rolled_back,
		r->staging_removed);
}

static int cmd_recover(char **args, int n, FILE *out, FILE *err)
{
	/* The store would create a missing directory: recover only what exists. */
	struct stat st;
	if (stat(args[0], &st) < 0)
		return failure(err, "recover", "%s: %s", args[0], strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return failure(err, "recover", "%s: %s", args[0], strerror(ENOTDIR));
	struct disk_recovery_report report = {0};
	char *msg = NULL;
	struct store *s = disk_store_open(args[0], 0, &report, &msg);
	if (!s) {
		failure(err, "recover", "%s", msg ? msg : "cannot open the cache directory");
		free(msg);
		return EXIT_PROBLEMS;
	}
	print_recovery(&report, out);
	store_close(s);
	return EXIT_OK;
}

/* ---- dispatch ---- */

struct command {
	const char *name;
	int min_args, max_args; /* after the command's name */
	const char *synopsis;
	int (*run)(char **args, int n, FILE *out, FILE *err);
};

static const struct command COMMANDS[] = {
    {"ls", 1, 4, "ls DIR [COMPONENT [RESOURCE.VERSION.GROUP [NAMESPACE]]]", cmd_ls},
    {"get", 4, 5, "get DIR COMPONENT RESOURCE.VERSION.GROUP [NAMESPACE] NAME", cmd_get},
    {"views", 3, 3, "views DIR COMPONENT RESOURCE.VERSION.GROUP", cmd_views},
    {"verify", 1, 1, "verify DIR", cmd_verify},
    {"recover", 1, 1, "recover DIR", cmd_recover},
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
		if (!strcmp(COMMANDS[i].name, name))
			return &COMMANDS[i];
	return NULL;
}

static bool is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

static int check_args(const struct command *c, char **args, int n, FILE *err)
{
	if (n < c->min_args || n > c->max_args)
		return usage_error(err, c->name,
				   "wrong number of arguments; usage: yurthub cache %s",
				   c->synopsis);
	for (int i = 0; i < n; i++)
		if (!*args[i])
			return usage_error(err, c->name, "argument %d is empty", i + 1);
	return EXIT_OK;
}

static int run_command(int argc, char **argv, FILE *out, FILE *err)
{
	/* options before the command: an etcd store (cache_etcd.c) */
	if (argc >= 2 && !strncmp(argv[1], "--", 2) && !is_help(argv[1]))
		return cache_etcd_main(argc - 1, argv + 1, out, err);
	if (argc < 2) {
		fputs(USAGE, out);
		return EXIT_USAGE;
	}
	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i])) {
			fputs(USAGE, out);
			return EXIT_OK;
		}
	}
	const struct command *c = find_command(argv[1]);
	if (!c)
		return usage_error(err, NULL, "unknown command '%s' (see yurthub cache --help)",
				   argv[1]);
	int rc = check_args(c, argv + 2, argc - 2, err);
	return rc != EXIT_OK ? rc : c->run(argv + 2, argc - 2, out, err);
}

int cache_cmd_main(int argc, char **argv, FILE *out, FILE *err)
{
	int rc = run_command(argc, argv, out, err);
	if (fflush(out) != 0 || ferror(out))
		return failure(err, NULL, "cannot write the output: %s", strerror(errno));
	return rc;
}
