/*
 * order_check.c - replays an injector trace on a model of what is durable,
 * see order_check.h for the rules.
 *
 * Time is the line number in the trace: the injector writes a call's line
 * after the call returned and before its caller goes on, so two calls that
 * the program orders (one thread, or a join, a lock) appear in that order.
 * Inodes are keyed "dev:ino"; an inode created again (the number reused)
 * starts afresh.  Names map paths to inodes and follow renames, so that
 * "everything under the renamed directory" is known.  An inode the trace
 * never showed being created or written is taken as durable: it was there
 * before the trace began.
 */
#include "order_check.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/strmap.h"

#define PROBLEM_LINES_MAX 200 /* report lines kept; all are counted */

struct inode {
	bool data_dirty, entries_dirty;
	unsigned long dirty_line; /* when it last went from durable to not */
	unsigned long sync_line;  /* the last sync that covered it; 0: none seen */
	long long dev;
};

struct pending {
	unsigned long line;
	char *shown;   /* the path whose directory must be synced */
	char *dir_key; /* that directory's inode */
};

struct order_check {
	struct strmap inodes; /* "dev:ino" -> struct inode * */
	struct strmap names;  /* path -> "dev:ino" (malloc'ed), NULL: gone */
	char **scratch, **guard;
	size_t nscratch, nguard;
	struct pending *pend;
	size_t npend, cap_pend;
	bool in_call;
	unsigned long now;
	size_t problems;
	struct buf report;
	struct order_stats st;
};

/* One parsed line: the fields the rules read. */
struct rec {
	const char *kind, *path, *path2, *text;
	char ino[48], ino2[48], pino[48], pino2[48];
	bool ino_dir, ino2_dir, faulted;
	long long rc, dev;
	unsigned long flags;
};

struct order_check *order_check_new(void)
{
	return calloc(1, sizeof(struct order_check));
}

static void pending_clear(struct order_check *oc)
{
	for (size_t i = 0; i < oc->npend; i++) {
		free(oc->pend[i].shown);
		free(oc->pend[i].dir_key);
	}
	oc->npend = 0;
}

void order_check_free(struct order_check *oc)
{
	if (!oc)
		return;
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&oc->inodes, &i));)
		free(e->value);
	for (size_t i = 0; (e = strmap_next(&oc->names, &i));)
		free(e->value);
	strmap_free(&oc->inodes);
	strmap_free(&oc->names);
	for (size_t i = 0; i < oc->nscratch; i++)
		free(oc->scratch[i]);
	for (size_t i = 0; i < oc->nguard; i++)
		free(oc->guard[i]);
	free(oc->scratch);
	free(oc->guard);
	pending_clear(oc);
	free(oc->pend);
	buf_free(&oc->report);
	free(oc);
}

static int add_prefix(char ***v, size_t *n, const char *prefix)
{
	char **nv = realloc(*v, (*n + 1) * sizeof *nv);
	if (!nv)
		return -1;
	*v = nv;
	if (!(nv[*n] = strdup(prefix)))
		return -1;
	(*n)++;
	return 0;
}

int order_check_scratch(struct order_check *oc, const char *prefix)
{
	return add_prefix(&oc->scratch, &oc->nscratch, prefix);
}

int order_check_guard(struct order_check *oc, const char *prefix)
{
	return add_prefix(&oc->guard, &oc->nguard, prefix);
}

/* ---- small model helpers ---- */

static bool under(const char *path, const char *top)
{
	size_t n = strlen(top);
	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

static bool is_scratch(const struct order_check *oc, const char *path)
{
	for (size_t i = 0; i < oc->nscratch; i++)
		if (under(path, oc->scratch[i]))
			return true;
	return false;
}

static void problem(struct order_check *oc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void problem(struct order_check *oc, const char *fmt, ...)
{
	oc->problems++;
	if (oc->problems > PROBLEM_LINES_MAX)
		return;
	va_list ap;
	va_start(ap, fmt);
	buf_printf(&oc->report, "line %lu: ", oc->now);
	buf_vprintf(&oc->report, fmt, ap);
	buf_append_char(&oc->report, '\n');
	va_end(ap);
}

static struct inode *inode_get(struct order_check *oc, const char *key, bool create)
{
	struct strmap_entry *e = strmap_get(&oc->inodes, key);
	if (e || !create)
		return e ? e->value : NULL;
	struct inode *in = calloc(1, sizeof *in);
	if (!in || !(e = strmap_put(&oc->inodes, key, in))) {
		free(in);
		return NULL;
	}
	in->dev = atoll(key);
	return in;
}

static void make_dirty(struct order_check *oc, const char *key, bool entries)
{
	if (!*key)
		return;
	struct inode *in = inode_get(oc, key, true);
	if (!in)
		return;
	if (!in->data_dirty && !in->entries_dirty)
		in->dirty_line = oc->now;
	if (entries)
		in->entries_dirty = true;
	else
		in->data_dirty = true;
}

/* A new inode (created, or a number reused): nothing of it is durable. */
static void make_fresh(struct order_check *oc, const char *key, bool dir)
{
	struct inode *in = inode_get(oc, key, true);
	if (!in)
		return;
	in->sync_line = 0;
	in->data_dirty = in->entries_dirty = false;
	make_dirty(oc, key, dir);
}

static void make_clean(struct inode *in, unsigned long now)
{
	in->data_dirty = in->entries_dirty = false;
	in->sync_line = now;
}

static const char *name_get(const struct order_check *oc, const char *path)
{
	struct strmap_entry *e = strmap_get(&oc->names, path);
	return e ? e->value : NULL;
}

static void name_set(struct order_check *oc, const char *path, const char *key)
{
	struct strmap_entry *e = strmap_get(&oc->names, path);
	char *v = key ? strdup(key) : NULL;
	if (e) {
		free(e->value);
		e->value = v;
	} else if (v && !strmap_put(&oc->names, path, v)) {
		free(v);
	}
}

/* Names at or under top, detached from the map: (path suffix, key) pairs. */
struct moved {
	char **suffix, **key;
	size_t n;
};

static void detach(struct order_check *oc, const char *top, struct moved *m)
{
	memset(m, 0, sizeof *m);
	size_t len = strlen(top), cap = 0;
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&oc->names, &i));) {
		if (!e->value || !under(e->key, top))
			continue;
		if (m->n == cap) {
			cap = cap ? cap * 2 : 16;
			m->suffix = realloc(m->suffix, cap * sizeof *m->suffix);
			m->key = realloc(m->key, cap * sizeof *m->key);
		}
		m->suffix[m->n] = strdup(e->key + len);
		m->key[m->n++] = e->value;
		e->value = NULL;
	}
}

static void attach(struct order_check *oc, const char *top, struct moved *m)
{
	struct buf p = BUF_INIT;
	for (size_t i = 0; i < m->n; i++) {
		buf_reset(&p);
		buf_printf(&p, "%s%s", top, m->suffix[i]);
		name_set(oc, p.data, m->key[i]);
		free(m->suffix[i]);
		free(m->key[i]);
	}
	buf_free(&p);
	free(m->suffix);
	free(m->key);
}

static void moved_free(struct moved *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->suffix[i]);
		free(m->key[i]);
	}
	free(m->suffix);
	free(m->key);
}

/* ---- the rules ---- */

static bool dirty(const struct inode *in)
{
	return in && (in->data_dirty || in->entries_dirty);
}

/* publish: what the rename moves into place must be durable already. */
static void check_publish(struct order_check *oc, const struct rec *r)
{
	struct inode *top = inode_get(oc, r->ino, false);
	if (dirty(top))
		problem(oc,
			"publish: %s renamed to %s, but it changed at line %lu and was not "
			"synced since",
			r->path, r->path2, top->dirty_line);
	if (!r->ino_dir)
		return;
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&oc->names, &i));) {
		if (!e->value || !under(e->key, r->path) || !strcmp(e->key, r->path))
			continue;
		struct inode *in = inode_get(oc, e->value, false);
		if (dirty(in))
			problem(oc,
				"publish: %s renamed to %s, but %s under it changed at line %lu "
				"and was not synced since",
				r->path, r->path2, e->key, in->dirty_line);
	}
}

/* guard: the journal is durable before any directory moves. */
static void check_guard(struct order_check *oc, const struct rec *r)
{
	struct strmap_entry *e;
	for (size_t g = 0; g < oc->nguard; g++)
		for (size_t i = 0; (e = strmap_next(&oc->names, &i));) {
			if (!e->value || !under(e->key, oc->guard[g]))
				continue;
			struct inode *in = inode_get(oc, e->value, false);
			if (dirty(in))
				problem(oc,
					"guard: %s renamed to %s while %s (changed at line %lu) "
					"was not durable",
					r->path, r->path2, e->key, in->dirty_line);
		}
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash && slash != path ? strndup(path, (size_t)(slash - path)) : strdup("/");
}

/* durable: after a successful call, each rename it made is on disk. */
static void check_durable(struct order_check *oc, const struct pending *p)
{
	oc->st.renames_in_calls++;
	struct inode *d = inode_get(oc, p->dir_key, false);
	if (!d || d->sync_line <= p->line)
		problem(oc,
			"durable: the call returned success, but the directory of %s was not "
			"synced after the rename at line %lu",
			p->shown, p->line);
	/* Directories above it that changed before the rename (made for it) */
	char *dir = dir_of(p->shown);
	while (dir && strcmp(dir, "/")) {
		char *up = dir_of(dir);
		free(dir);
		dir = up;
		const char *key = dir ? name_get(oc, dir) : NULL;
		struct inode *in = key ? inode_get(oc, key, false) : NULL;
		if (in && in->entries_dirty && in->dirty_line < p->line)
			problem(oc,
				"durable: the call returned success, but %s above %s changed "
				"at line %lu and was not synced",
				dir, p->shown, in->dirty_line);
	}
	free(dir);
}

static void remember(struct order_check *oc, const struct rec *r)
{
	bool dst_scratch = is_scratch(oc, r->path2), src_scratch = is_scratch(oc, r->path);
	if (!oc->in_call || (dst_scratch && src_scratch))
		return;
	if (oc->npend == oc->cap_pend) {
		size_t cap = oc->cap_pend ? oc->cap_pend * 2 : 8;
		struct pending *p = realloc(oc->pend, cap * sizeof *p);
		if (!p)
			return;
		oc->pend = p;
		oc->cap_pend = cap;
	}
	/* Into staging (a removal): the directory it left is what shows. */
	struct pending *p = &oc->pend[oc->npend++];
	p->line = oc->now;
	p->shown = strdup(dst_scratch ? r->path : r->path2);
	p->dir_key = strdup(dst_scratch ? r->pino : r->pino2);
}

static void on_rename(struct order_check *oc, const struct rec *r)
{
	bool exchange = r->flags & 2; /* RENAME_EXCHANGE */
	oc->st.renames++;
	oc->st.exchanges += exchange;
	/* into a scratch path nothing is published: nobody reads it there (a
	 * tree of staging is checked when it is renamed out) */
	if (!is_scratch(oc, r->path2) || exchange)
		check_publish(oc, r);
	if (r->ino_dir) {
		oc->st.dir_renames++;
		check_guard(oc, r);
	}
	remember(oc, r);
	struct moved a, b;
	detach(oc, r->path, &a);
	detach(oc, r->path2, &b);
	attach(oc, r->path2, &a);
	if (exchange)
		attach(oc, r->path, &b);
	else
		moved_free(&b); /* what the rename replaced is gone */
	make_dirty(oc, r->pino, true);
	make_dirty(oc, r->pino2, true);
}

static void on_mark(struct order_check *oc, const char *text)
{
	if (!strncmp(text, "begin", 5)) {
		pending_clear(oc);
		oc->in_call = true;
		return;
	}
	if (strncmp(text, "end", 3))
		return;
	if (strstr(text, "rc=0")) {
		oc->st.ends_checked++;
		for (size_t i = 0; i < oc->npend; i++)
			check_durable(oc, &oc->pend[i]);
	}
	pending_clear(oc);
	oc->in_call = false;
}

static void on_syncfs(struct order_check *oc, long long dev)
{
	struct strmap_entry *e;
	for (size_t i = 0; (e = strmap_next(&oc->inodes, &i));) {
		struct inode *in = e->value;
		if (in->dev == dev)
			make_clean(in, oc->now);
	}
}

/* Directories the trace names in passing (a parent, a synced directory)
 * become known paths, so that the "durable" rule can walk up from a file
 * through directories the trace never saw being made. */
static void learn(struct order_check *oc, const struct rec *r)
{
	char *dir;
	if (r->pino[0] && r->path[0] && (dir = dir_of(r->path))) {
		name_set(oc, dir, r->pino);
		free(dir);
	}
	if (r->pino2[0] && r->path2[0] && (dir = dir_of(r->path2))) {
		name_set(oc, dir, r->pino2);
		free(dir);
	}
	if (r->ino_dir && r->ino[0] && r->path[0] && strcmp(r->kind, "rename") &&
	    strcmp(r->kind, "unlink"))
		name_set(oc, r->path, r->ino);
}

static void apply(struct order_check *oc, const struct rec *r)
{
	const char *k = r->kind;
	if (!strcmp(k, "mark")) {
		on_mark(oc, r->text ? r->text : "");
		return;
	}
	if (r->faulted || r->rc < 0)
		return; /* did nothing */
	learn(oc, r);
	if (!strcmp(k, "write") || !strcmp(k, "ftruncate")) {
		make_dirty(oc, r->ino, false);
	} else if (!strcmp(k, "fsync") || !strcmp(k, "fdatasync")) {
		struct inode *in = inode_get(oc, r->ino, true);
		if (in)
			make_clean(in, oc->now);
		oc->st.syncs++;
	} else if (!strcmp(k, "syncfs")) {
		on_syncfs(oc, r->dev);
		oc->st.syncs++;
	} else if (!strcmp(k, "open")) {
		if (r->flags & O_CREAT) {
			make_fresh(oc, r->ino, false);
			make_dirty(oc, r->pino, true);
		}
		name_set(oc, r->path, r->ino);
	} else if (!strcmp(k, "mkdir")) {
		make_fresh(oc, r->ino, true);
		make_dirty(oc, r->pino, true);
		name_set(oc, r->path, r->ino);
	} else if (!strcmp(k, "link")) {
		name_set(oc, r->path2, r->ino);
		make_dirty(oc, r->pino2, true);
	} else if (!strcmp(k, "unlink")) {
		struct moved gone;
		detach(oc, r->path, &gone);
		moved_free(&gone);
		make_dirty(oc, r->pino, true);
	} else if (!strcmp(k, "rename")) {
		on_rename(oc, r);
	}
}

/* ---- parsing ---- */

static void take_ino(const char *v, char *key, size_t size, bool *dir, long long *dev)
{
	const char *last = strrchr(v, ':');
	size_t n = last && last != strchr(v, ':') ? (size_t)(last - v) : strlen(v);
	snprintf(key, size, "%.*s", (int)n, v);
	if (dir)
		*dir = last && !strcmp(last, ":d");
	if (dev)
		*dev = atoll(v);
}

static bool parse(char *line, struct rec *r)
{
	memset(r, 0, sizeof *r);
	r->rc = 0;
	bool have_kind = false;
	for (char *f = strtok(line, "\t\n"); f; f = strtok(NULL, "\t\n")) {
		char *eq = strchr(f, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const char *key = f, *v = eq + 1;
		if (!strcmp(key, "kind"))
			r->kind = v, have_kind = true;
		else if (!strcmp(key, "rc"))
			r->rc = atoll(v);
		else if (!strcmp(key, "flags"))
			r->flags = strtoul(v, NULL, 10);
		else if (!strcmp(key, "fault"))
			r->faulted = !strcmp(v, "1");
		else if (!strcmp(key, "ino"))
			take_ino(v, r->ino, sizeof r->ino, &r->ino_dir, &r->dev);
		else if (!strcmp(key, "ino2"))
			take_ino(v, r->ino2, sizeof r->ino2, &r->ino2_dir, NULL);
		else if (!strcmp(key, "pino"))
			take_ino(v, r->pino, sizeof r->pino, NULL, NULL);
		else if (!strcmp(key, "pino2"))
			take_ino(v, r->pino2, sizeof r->pino2, NULL, NULL);
		else if (!strcmp(key, "path"))
			r->path = v;
		else if (!strcmp(key, "path2"))
			r->path2 = v;
		else if (!strcmp(key, "text"))
			r->text = v;
	}
	if (!r->path)
		r->path = "";
	if (!r->path2)
		r->path2 = "";
	return have_kind;
}

int order_check_line(struct order_check *oc, const char *line)
{
	char *copy = strdup(line);
	if (!copy)
		return -1;
	oc->now++;
	oc->st.lines++;
	struct rec r;
	if (!parse(copy, &r))
		problem(oc, "cannot parse: %s", line);
	else
		apply(oc, &r);
	free(copy);
	return 0;
}

int order_check_file(struct order_check *oc, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;
	while (rc == 0 && getline(&line, &cap, f) > 0)
		rc = order_check_line(oc, line);
	free(line);
	fclose(f);
	return rc;
}

size_t order_check_problems(const struct order_check *oc)
{
	return oc->problems;
}

const char *order_check_report(const struct order_check *oc)
{
	return buf_cstr(&oc->report);
}

void order_check_stats(const struct order_check *oc, struct order_stats *out)
{
	*out = oc->st;
}
