/*
 * inject.c - an LD_PRELOAD fault injector and call tracer for the tests of
 * the disk store.  Rules and controls: inject.h; how to run it (also under
 * ASan): tests/fault/README.md.
 *
 * It wraps what src/util/fsutil.c and src/storage/disk*.c call to change
 * the file system - writes, syncs, renames, creating opens, mkdir, unlink,
 * link, ftruncate, close - and hands each call to the next definition
 * (libc, or ASan's interceptor, found with dlsym(RTLD_NEXT)) unless a rule
 * says to fail it.  The trace records what each call did to which path and
 * inode, for the order checker (order_check.c).
 *
 * The wrappers run on every thread of the process and may run inside a
 * signal handler (a log line is a write).  So the hot path takes no lock
 * and allocates nothing: rule counters are atomics, a new rule set is built
 * aside and swapped in through an atomic pointer, paths are resolved with
 * readlink(/proc/self/fd/N) into stack buffers (never a table of fds: the
 * kernel's view stays right across renames), and a trace line is formatted
 * by hand and written with one write(2) to an O_APPEND file.  Only
 * changing the rules takes a mutex (never from a wrapper but the YH_FAULT_CTL
 * reload, which only tries it).
 */
#undef _FILE_OFFSET_BITS /* both open and open64 are defined here */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h> /* the prototypes of rename*; no stdio is used */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "inject.h"

#define RULES_MAX 16
#define SUB_MAX	  256  /* a path substring of a rule or filter */
#define PATH_BUF  2048 /* a resolved path; longer ones are cut (only tests read them) */
#define LINE_BUF  (2 * PATH_BUF + 512)
#define CONFIGS	  8 /* rule sets in rotation: a reader never sees one being rebuilt */
#define SPEC_MAX  4096

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* ---- families of calls ---- */

enum fam {
	F_WRITE = 1 << 0,
	F_FSYNC = 1 << 1,
	F_FDATASYNC = 1 << 2,
	F_SYNCFS = 1 << 3,
	F_RENAME = 1 << 4,
	F_EXCHANGE = 1 << 5,
	F_OPEN = 1 << 6,
	F_MKDIR = 1 << 7,
	F_UNLINK = 1 << 8,
	F_LINK = 1 << 9,
	F_FTRUNCATE = 1 << 10,
	F_CLOSE = 1 << 11,
	F_READ = 1 << 12, /* only when a rule names it: not part of "any" */
};

static const struct {
	const char *name;
	unsigned fams;
} fam_names[] = {
    {"write", F_WRITE},
    {"fsync", F_FSYNC},
    {"fdatasync", F_FDATASYNC},
    {"syncfs", F_SYNCFS},
    {"sync", F_FSYNC | F_FDATASYNC | F_SYNCFS},
    {"rename", F_RENAME | F_EXCHANGE},
    {"exchange", F_EXCHANGE},
    {"open", F_OPEN},
    {"mkdir", F_MKDIR},
    {"unlink", F_UNLINK},
    {"link", F_LINK},
    {"ftruncate", F_FTRUNCATE},
    {"close", F_CLOSE},
    {"read", F_READ},
    {"any", ~0u & ~(unsigned)F_READ},
};

static const struct {
	const char *name;
	int err;
} errno_names[] = {
    {"EIO", EIO},	  {"ENOSPC", ENOSPC},
    {"EDQUOT", EDQUOT},	  {"EROFS", EROFS},
    {"EACCES", EACCES},	  {"EPERM", EPERM},
    {"ENOMEM", ENOMEM},	  {"EINVAL", EINVAL},
    {"EXDEV", EXDEV},	  {"ENOENT", ENOENT},
    {"EEXIST", EEXIST},	  {"EBADF", EBADF},
    {"EINTR", EINTR},	  {"EAGAIN", EAGAIN},
    {"EMFILE", EMFILE},	  {"ENFILE", ENFILE},
    {"EFBIG", EFBIG},	  {"ENOSYS", ENOSYS},
    {"ENOTDIR", ENOTDIR}, {"EISDIR", EISDIR},
    {"EMLINK", EMLINK},	  {"ENAMETOOLONG", ENAMETOOLONG},
};

/* ---- rules ---- */

enum when { WHEN_NTH, WHEN_FROM, WHEN_EVERY };

struct rule {
	unsigned fams;
	enum when when;
	unsigned long n;
	int err;
	char path[SUB_MAX];
	atomic_ulong count;
};

struct config {
	int nrules;
	struct rule rules[RULES_MAX];
	char filter[SUB_MAX];
};

static struct config configs[CONFIGS];
static _Atomic(struct config *) current = &configs[0];
static unsigned next_config = 1;
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong hits;
static atomic_int trace_fd = -1;
static atomic_ulong trace_seq;
static char ctl_path[PATH_BUF];
static struct {
	struct timespec mtime;
	off_t size;
	ino_t ino;
	bool seen;
} ctl_state;

/* ---- the next definitions ---- */

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat2_fn)(int, const char *, int);
typedef int (*creat_fn)(const char *, mode_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);
typedef int (*fd_fn)(int);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned);
typedef int (*mkdir_fn)(const char *, mode_t);
typedef int (*mkdirat_fn)(int, const char *, mode_t);
typedef int (*path_fn)(const char *);
typedef int (*unlinkat_fn)(int, const char *, int);
typedef int (*link_fn)(const char *, const char *);
typedef int (*linkat_fn)(int, const char *, int, const char *, int);
typedef int (*ftruncate_fn)(int, off_t);

/* The next definition of name; the race of two threads storing the same
 * pointer is harmless, and dlsym does not reach back into these wrappers. */
static void *next_sym(void *_Atomic *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_relaxed);
	if (!p) {
		p = dlsym(RTLD_NEXT, name);
		atomic_store_explicit(slot, p, memory_order_relaxed);
	}
	return p;
}

#define NEXT(type, name)                                                                           \
	({                                                                                         \
		static void *_Atomic slot_;                                                        \
		(type) next_sym(&slot_, name);                                                     \
	})

/* ---- small async-signal-safe helpers ---- */

static size_t put_str(char *out, size_t pos, size_t size, const char *s)
{
	while (s && *s && pos + 1 < size)
		out[pos++] = *s++;
	out[pos < size ? pos : size - 1] = '\0';
	return pos;
}

static size_t put_num(char *out, size_t pos, size_t size, long long v)
{
	char tmp[24];
	int n = 0;
	unsigned long long u = v < 0 ? (unsigned long long)-(v + 1) + 1 : (unsigned long long)v;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[n++] = '-';
	while (n > 0 && pos + 1 < size)
		out[pos++] = tmp[--n];
	out[pos < size ? pos : size - 1] = '\0';
	return pos;
}

/* The path of an open descriptor, as the kernel has it now. */
static void fd_path(int fd, char *out, size_t size)
{
	char link[40];
	size_t n = put_str(link, 0, sizeof link, "/proc/self/fd/");
	put_num(link, n, sizeof link, fd);
	ssize_t r = readlink(link, out, size - 1);
	if (r < 0) {
		n = put_str(out, 0, size, "?fd");
		put_num(out, n, size, fd);
		return;
	}
	out[r] = '\0';
}

/* dirfd + name as one absolute path (not canonical: "a/../b" stays). */
static void at_path(int dirfd, const char *name, char *out, size_t size)
{
	out[0] = '\0';
	if (!name)
		return;
	if (name[0] == '/') {
		put_str(out, 0, size, name);
		return;
	}
	if (dirfd == AT_FDCWD) {
		if (!getcwd(out, size))
			out[0] = '\0';
	} else {
		fd_path(dirfd, out, size);
	}
	size_t n = strlen(out);
	if (*name && !(name[0] == '.' && name[1] == '\0')) {
		n = put_str(out, n, size, "/");
		put_str(out, n, size, name);
	}
}

static void parent_of(const char *path, char *out, size_t size)
{
	put_str(out, 0, size, path);
	char *slash = strrchr(out, '/');
	if (slash && slash != out)
		*slash = '\0';
	else if (slash)
		slash[1] = '\0';
}

/* ---- one call ---- */

struct call {
	const char *name; /* the libc function */
	const char *kind; /* what the checker reads: write, fsync, rename, ... */
	unsigned fam;
	int fd;		 /* fd-based calls, else -1 */
	unsigned flags;	 /* open flags, renameat2 flags, AT_REMOVEDIR */
	long long len;	 /* writes: bytes asked for */
	bool want_paths; /* resolve p1/p2 (filters or the trace need them) */
	char p1[PATH_BUF], p2[PATH_BUF];
	struct stat before1, before2; /* renames, unlinks: the victims */
	bool have1, have2;
};

static bool tracing(void)
{
	return atomic_load_explicit(&trace_fd, memory_order_relaxed) >= 0;
}

static bool matches(const char *sub, const struct call *c)
{
	return !*sub || strstr(c->p1, sub) || (c->p2[0] && strstr(c->p2, sub));
}

static void ctl_reload(void);

/* Does a rule fail this call?  0, or the errno to fail it with. */
static int decide(struct call *c)
{
	struct config *cfg = atomic_load(&current);
	if (!cfg->nrules)
		return 0;
	int err = 0;
	for (int i = 0; i < cfg->nrules; i++) {
		struct rule *r = &cfg->rules[i];
		if (!(r->fams & c->fam) || !matches(cfg->filter, c) || !matches(r->path, c))
			continue;
		unsigned long k = atomic_fetch_add(&r->count, 1) + 1;
		bool fire = r->when == WHEN_EVERY || (r->when == WHEN_NTH && k == r->n) ||
			    (r->when == WHEN_FROM && k >= r->n);
		if (fire && !err)
			err = r->err;
	}
	if (err)
		atomic_fetch_add(&hits, 1);
	return err;
}

static size_t put_ino(char *out, size_t pos, size_t size, const char *key, const struct stat *st)
{
	pos = put_str(out, pos, size, key);
	pos = put_num(out, pos, size, (long long)st->st_dev);
	pos = put_str(out, pos, size, ":");
	pos = put_num(out, pos, size, (long long)st->st_ino);
	return put_str(out, pos, size, S_ISDIR(st->st_mode) ? ":d" : ":f");
}

static size_t put_lstat(char *out, size_t pos, size_t size, const char *key, const char *path)
{
	struct stat st;
	if (!path[0] || lstat(path, &st) < 0)
		return pos;
	return put_ino(out, pos, size, key, &st);
}

static size_t put_parent(char *out, size_t pos, size_t size, const char *key, const char *path)
{
	char parent[PATH_BUF];
	parent_of(path, parent, sizeof parent);
	return put_lstat(out, pos, size, key, parent);
}

/* What the call did, in the words order_check.c reads:
 *   ino    the inode written, synced, created, linked, or renamed/unlinked
 *   ino2   the inode a rename replaced (or exchanged)
 *   pino   the directory whose entries changed (pino2: the rename's target's) */
static size_t put_effects(char *out, size_t pos, size_t size, const struct call *c, long long rc)
{
	struct stat st;
	if (c->fd >= 0 && fstat(c->fd, &st) == 0)
		pos = put_ino(out, pos, size, "\tino=", &st);
	if (!strcmp(c->kind, "open") && rc >= 0 && fstat((int)rc, &st) == 0)
		pos = put_ino(out, pos, size, "\tino=", &st);
	if (!strcmp(c->kind, "mkdir") && rc == 0)
		pos = put_lstat(out, pos, size, "\tino=", c->p1);
	if (!strcmp(c->kind, "link") && rc == 0)
		pos = put_lstat(out, pos, size, "\tino=", c->p2);
	if (c->have1)
		pos = put_ino(out, pos, size, "\tino=", &c->before1);
	if (c->have2)
		pos = put_ino(out, pos, size, "\tino2=", &c->before2);
	if (rc < 0 || !strcmp(c->kind, "write") || !strcmp(c->kind, "ftruncate") ||
	    !strcmp(c->kind, "fsync") || !strcmp(c->kind, "fdatasync") ||
	    !strcmp(c->kind, "syncfs"))
		return pos;
	if (strcmp(c->kind, "link"))
		pos = put_parent(out, pos, size, "\tpino=", c->p1);
	if (c->p2[0])
		pos = put_parent(out, pos, size, "\tpino2=", c->p2);
	return pos;
}

static void trace_line(const char *line, size_t len)
{
	int fd = atomic_load(&trace_fd);
	if (fd < 0)
		return;
	write_fn w = NEXT(write_fn, "write");
	while (len > 0) {
		ssize_t n = w(fd, line, len);
		if (n <= 0)
			return;
		line += n;
		len -= (size_t)n;
	}
}

static void trace_call(const struct call *c, long long rc, int err, bool faulted)
{
	struct config *cfg = atomic_load(&current);
	if (!tracing() || !matches(cfg->filter, c))
		return;
	char line[LINE_BUF];
	size_t size = sizeof line - 1, pos = 0;
	pos = put_str(line, pos, size, "seq=");
	pos = put_num(line, pos, size, (long long)atomic_fetch_add(&trace_seq, 1));
	pos = put_str(line, pos, size, "\ttid=");
	pos = put_num(line, pos, size, (long long)syscall(SYS_gettid));
	pos = put_str(line, pos, size, "\tkind=");
	pos = put_str(line, pos, size, c->kind);
	pos = put_str(line, pos, size, "\tcall=");
	pos = put_str(line, pos, size, c->name);
	pos = put_str(line, pos, size, "\trc=");
	pos = put_num(line, pos, size, rc);
	pos = put_str(line, pos, size, "\terr=");
	pos = put_num(line, pos, size, rc < 0 ? err : 0);
	pos = put_str(line, pos, size, faulted ? "\tfault=1" : "\tfault=0");
	pos = put_str(line, pos, size, "\tflags=");
	pos = put_num(line, pos, size, c->flags);
	if (!strcmp(c->kind, "write")) {
		pos = put_str(line, pos, size, "\tlen=");
		pos = put_num(line, pos, size, c->len);
	}
	pos = put_effects(line, pos, size, c, rc);
	pos = put_str(line, pos, size, "\tpath=");
	pos = put_str(line, pos, size, c->p1);
	if (c->p2[0]) {
		pos = put_str(line, pos, size, "\tpath2=");
		pos = put_str(line, pos, size, c->p2);
	}
	pos = put_str(line, pos, size, "\n");
	trace_line(line, pos);
}

/* Is anything on at all?  When not, a wrapper is one load and a call. */
static bool active(void)
{
	return atomic_load_explicit(&current, memory_order_relaxed)->nrules || tracing() ||
	       ctl_path[0];
}

static bool need_paths(void)
{
	struct config *cfg = atomic_load(&current);
	if (tracing() || cfg->filter[0])
		return true;
	for (int i = 0; i < cfg->nrules; i++)
		if (cfg->rules[i].path[0])
			return true;
	return false;
}

static void call_init(struct call *c, const char *name, const char *kind, unsigned fam, int fd)
{
	c->name = name;
	c->kind = kind;
	c->fam = fam;
	c->fd = fd;
	c->flags = 0;
	c->len = 0;
	c->p1[0] = c->p2[0] = '\0';
	c->have1 = c->have2 = false;
	ctl_reload();
	c->want_paths = need_paths();
	if (fd >= 0 && c->want_paths)
		fd_path(fd, c->p1, sizeof c->p1);
}

static void call_at(struct call *c, int dirfd, const char *name, int dirfd2, const char *name2)
{
	if (!c->want_paths)
		return;
	at_path(dirfd, name, c->p1, sizeof c->p1);
	if (name2)
		at_path(dirfd2, name2, c->p2, sizeof c->p2);
}

/* Renames and unlinks: what they are about to move or remove. */
static void call_victims(struct call *c)
{
	if (!tracing())
		return;
	c->have1 = c->p1[0] && lstat(c->p1, &c->before1) == 0;
	c->have2 = c->p2[0] && lstat(c->p2, &c->before2) == 0;
}

/* Run the decision; on a fault, trace it and set errno.  true: fail now. */
static bool fault(struct call *c)
{
	int err = decide(c);
	if (!err)
		return false;
	trace_call(c, -1, err, true);
	errno = err;
	return true;
}

static long long done(struct call *c, long long rc)
{
	int err = errno;
	trace_call(c, rc, err, false);
	errno = err;
	return rc;
}

/* ---- writes ---- */

/* The trace file's own writes are never traced or failed. */
static bool is_trace_fd(int fd)
{
	return fd == atomic_load_explicit(&trace_fd, memory_order_relaxed);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	write_fn next = NEXT(write_fn, "write");
	if (!active() || is_trace_fd(fd))
		return next(fd, buf, n);
	struct call c;
	call_init(&c, "write", "write", F_WRITE, fd);
	c.len = (long long)n;
	if (fault(&c))
		return -1;
	return done(&c, next(fd, buf, n));
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	pwrite_fn next = NEXT(pwrite_fn, "pwrite");
	if (!active() || is_trace_fd(fd))
		return next(fd, buf, n, off);
	struct call c;
	call_init(&c, "pwrite", "write", F_WRITE, fd);
	c.len = (long long)n;
	if (fault(&c))
		return -1;
	return done(&c, next(fd, buf, n, off));
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	pwrite_fn next = NEXT(pwrite_fn, "pwrite64");
	if (!active() || is_trace_fd(fd))
		return next(fd, buf, n, off);
	struct call c;
	call_init(&c, "pwrite64", "write", F_WRITE, fd);
	c.len = (long long)n;
	if (fault(&c))
		return -1;
	return done(&c, next(fd, buf, n, off));
}

static long long iov_len(const struct iovec *iov, int cnt)
{
	long long n = 0;
	for (int i = 0; i < cnt; i++)
		n += (long long)iov[i].iov_len;
	return n;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	writev_fn next = NEXT(writev_fn, "writev");
	if (!active() || is_trace_fd(fd))
		return next(fd, iov, cnt);
	struct call c;
	call_init(&c, "writev", "write", F_WRITE, fd);
	c.len = iov_len(iov, cnt);
	if (fault(&c))
		return -1;
	return done(&c, next(fd, iov, cnt));
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	pwritev_fn next = NEXT(pwritev_fn, "pwritev");
	if (!active() || is_trace_fd(fd))
		return next(fd, iov, cnt, off);
	struct call c;
	call_init(&c, "pwritev", "write", F_WRITE, fd);
	c.len = iov_len(iov, cnt);
	if (fault(&c))
		return -1;
	return done(&c, next(fd, iov, cnt, off));
}

static int fd_call(const char *name, const char *kind, unsigned fam, int fd)
{
	fd_fn next = NEXT(fd_fn, name);
	if (!active() || is_trace_fd(fd))
		return next(fd);
	struct call c;
	call_init(&c, name, kind, fam, fd);
	if (fault(&c))
		return -1;
	return (int)done(&c, next(fd));
}

int fsync(int fd)
{
	return fd_call("fsync", "fsync", F_FSYNC, fd);
}

int fdatasync(int fd)
{
	return fd_call("fdatasync", "fdatasync", F_FDATASYNC, fd);
}

int syncfs(int fd)
{
	return fd_call("syncfs", "syncfs", F_SYNCFS, fd);
}

int ftruncate(int fd, off_t len)
{
	ftruncate_fn next = NEXT(ftruncate_fn, "ftruncate");
	if (!active() || is_trace_fd(fd))
		return next(fd, len);
	struct call c;
	call_init(&c, "ftruncate", "ftruncate", F_FTRUNCATE, fd);
	if (fault(&c))
		return -1;
	return (int)done(&c, next(fd, len));
}

int ftruncate64(int fd, off_t len)
{
	ftruncate_fn next = NEXT(ftruncate_fn, "ftruncate64");
	if (!active() || is_trace_fd(fd))
		return next(fd, len);
	struct call c;
	call_init(&c, "ftruncate64", "ftruncate", F_FTRUNCATE, fd);
	if (fault(&c))
		return -1;
	return (int)done(&c, next(fd, len));
}

/* close is failed after the fact: Linux frees the descriptor whatever
 * close returns, and a test must not leak it.  Not traced (noise). */
int close(int fd)
{
	fd_fn next = NEXT(fd_fn, "close");
	if (!active() || is_trace_fd(fd))
		return next(fd);
	struct call c;
	call_init(&c, "close", "close", F_CLOSE, fd);
	int err = decide(&c);
	int rc = next(fd);
	if (err) {
		errno = err;
		return -1;
	}
	return rc;
}

/* ---- reads ---- */

/* A device that fails reads (EIO): only while a rule names "read", so
 * that the hub's every socket read costs nothing otherwise. */
static bool reads_faulted(void)
{
	struct config *cfg = atomic_load(&current);
	for (int i = 0; i < cfg->nrules; i++)
		if (cfg->rules[i].fams & F_READ)
			return true;
	return false;
}

static ssize_t read_common(const char *name, int fd, void *buf, size_t n, off_t off, bool at)
{
	read_fn nread = at ? NULL : NEXT(read_fn, "read");
	pread_fn npread = at ? NEXT(pread_fn, "pread") : NULL;
	if (active() && !is_trace_fd(fd) && reads_faulted()) {
		struct call c;
		call_init(&c, name, "read", F_READ, fd);
		c.len = (long long)n;
		if (fault(&c))
			return -1;
	}
	return at ? npread(fd, buf, n, off) : nread(fd, buf, n);
}

ssize_t read(int fd, void *buf, size_t n)
{
	return read_common("read", fd, buf, n, 0, false);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	return read_common("pread", fd, buf, n, off, true);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	return read_common("pread64", fd, buf, n, off, true);
}

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	(void)buflen;
	return read_common("read", fd, buf, n, 0, false);
}

/* ---- opens ---- */

static bool creating(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

static bool writable(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

static int open_common(const char *name, int dirfd, const char *path, int flags, mode_t mode,
		       bool at)
{
	openat_fn nat = at ? NEXT(openat_fn, name) : NULL;
	open_fn nopen = at ? NULL : NEXT(open_fn, name);
	/* Opens that neither create nor write change nothing: not ours. */
	if (!active() || !(creating(flags) || writable(flags)))
		return at ? nat(dirfd, path, flags, mode) : nopen(path, flags, mode);
	struct call c;
	call_init(&c, name, "open", creating(flags) ? F_OPEN : 0, -1);
	call_at(&c, at ? dirfd : AT_FDCWD, path, 0, NULL);
	c.flags = (unsigned)flags;
	if (fault(&c))
		return -1;
	int rc = at ? nat(dirfd, path, flags, mode) : nopen(path, flags, mode);
	return (int)done(&c, rc);
}

static mode_t va_mode(int flags, va_list ap)
{
	return creating(flags) ? (mode_t)va_arg(ap, unsigned) : 0;
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = va_mode(flags, ap);
	va_end(ap);
	return open_common("open", AT_FDCWD, path, flags, mode, false);
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = va_mode(flags, ap);
	va_end(ap);
	return open_common("open64", AT_FDCWD, path, flags, mode, false);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = va_mode(flags, ap);
	va_end(ap);
	return open_common("openat", dirfd, path, flags, mode, true);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = va_mode(flags, ap);
	va_end(ap);
	return open_common("openat64", dirfd, path, flags, mode, true);
}

/* The _FORTIFY_SOURCE entry points (no mode: they refuse O_CREAT). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

int __open_2(const char *path, int flags)
{
	return open_common("open", AT_FDCWD, path, flags, 0, false);
}

int __open64_2(const char *path, int flags)
{
	return open_common("open64", AT_FDCWD, path, flags, 0, false);
}

int __openat_2(int dirfd, const char *path, int flags)
{
	return open_common("openat", dirfd, path, flags, 0, true);
}

int __openat64_2(int dirfd, const char *path, int flags)
{
	return open_common("openat64", dirfd, path, flags, 0, true);
}

int creat(const char *path, mode_t mode)
{
	return open_common("open", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, false);
}

int creat64(const char *path, mode_t mode)
{
	return open_common("open64", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, false);
}

/* ---- the name space ---- */

static int rename_common(const char *name, int od, const char *op, int nd, const char *np,
			 unsigned flags, bool two)
{
	struct call c;
	call_init(&c, name, "rename", (flags & RENAME_EXCHANGE) ? F_EXCHANGE : F_RENAME, -1);
	call_at(&c, od, op, nd, np);
	c.flags = flags;
	call_victims(&c);
	if (fault(&c))
		return -1;
	int rc;
	if (!strcmp(name, "renameat2"))
		rc = NEXT(renameat2_fn, "renameat2")(od, op, nd, np, flags);
	else if (two)
		rc = NEXT(renameat_fn, "renameat")(od, op, nd, np);
	else
		rc = NEXT(rename_fn, "rename")(op, np);
	return (int)done(&c, rc);
}

int rename(const char *op, const char *np)
{
	if (!active())
		return NEXT(rename_fn, "rename")(op, np);
	return rename_common("rename", AT_FDCWD, op, AT_FDCWD, np, 0, false);
}

int renameat(int od, const char *op, int nd, const char *np)
{
	if (!active())
		return NEXT(renameat_fn, "renameat")(od, op, nd, np);
	return rename_common("renameat", od, op, nd, np, 0, true);
}

int renameat2(int od, const char *op, int nd, const char *np, unsigned flags)
{
	if (!active())
		return NEXT(renameat2_fn, "renameat2")(od, op, nd, np, flags);
	return rename_common("renameat2", od, op, nd, np, flags, true);
}

int mkdirat(int dirfd, const char *path, mode_t mode)
{
	mkdirat_fn next = NEXT(mkdirat_fn, "mkdirat");
	if (!active())
		return next(dirfd, path, mode);
	struct call c;
	call_init(&c, "mkdirat", "mkdir", F_MKDIR, -1);
	call_at(&c, dirfd, path, 0, NULL);
	if (fault(&c))
		return -1;
	return (int)done(&c, next(dirfd, path, mode));
}

int mkdir(const char *path, mode_t mode)
{
	mkdir_fn next = NEXT(mkdir_fn, "mkdir");
	if (!active())
		return next(path, mode);
	struct call c;
	call_init(&c, "mkdir", "mkdir", F_MKDIR, -1);
	call_at(&c, AT_FDCWD, path, 0, NULL);
	if (fault(&c))
		return -1;
	return (int)done(&c, next(path, mode));
}

static int unlink_common(const char *name, int dirfd, const char *path, int flags)
{
	struct call c;
	call_init(&c, name, "unlink", F_UNLINK, -1);
	call_at(&c, dirfd, path, 0, NULL);
	c.flags = (unsigned)flags;
	call_victims(&c);
	if (fault(&c))
		return -1;
	int rc;
	if (!strcmp(name, "unlinkat"))
		rc = NEXT(unlinkat_fn, "unlinkat")(dirfd, path, flags);
	else
		rc = NEXT(path_fn, name)(path);
	return (int)done(&c, rc);
}

int unlinkat(int dirfd, const char *path, int flags)
{
	if (!active())
		return NEXT(unlinkat_fn, "unlinkat")(dirfd, path, flags);
	return unlink_common("unlinkat", dirfd, path, flags);
}

int unlink(const char *path)
{
	if (!active())
		return NEXT(path_fn, "unlink")(path);
	return unlink_common("unlink", AT_FDCWD, path, 0);
}

int rmdir(const char *path)
{
	if (!active())
		return NEXT(path_fn, "rmdir")(path);
	return unlink_common("rmdir", AT_FDCWD, path, AT_REMOVEDIR);
}

int linkat(int od, const char *op, int nd, const char *np, int flags)
{
	linkat_fn next = NEXT(linkat_fn, "linkat");
	if (!active())
		return next(od, op, nd, np, flags);
	struct call c;
	call_init(&c, "linkat", "link", F_LINK, -1);
	call_at(&c, od, op, nd, np);
	c.flags = (unsigned)flags;
	if (fault(&c))
		return -1;
	return (int)done(&c, next(od, op, nd, np, flags));
}

int link(const char *op, const char *np)
{
	link_fn next = NEXT(link_fn, "link");
	if (!active())
		return next(op, np);
	struct call c;
	call_init(&c, "link", "link", F_LINK, -1);
	call_at(&c, AT_FDCWD, op, AT_FDCWD, np);
	if (fault(&c))
		return -1;
	return (int)done(&c, next(op, np));
}

/* ---- the rules ---- */

static int parse_errno(const char *s, size_t n)
{
	for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
		if (strlen(errno_names[i].name) == n && !strncmp(errno_names[i].name, s, n))
			return errno_names[i].err;
	int v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > 100000)
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static unsigned parse_fam(const char *s, size_t n)
{
	for (size_t i = 0; i < sizeof fam_names / sizeof fam_names[0]; i++)
		if (strlen(fam_names[i].name) == n && !strncmp(fam_names[i].name, s, n))
			return fam_names[i].fams;
	return 0;
}

static bool parse_when(const char *s, size_t n, struct rule *r)
{
	if (n == 1 && s[0] == '*') {
		r->when = WHEN_EVERY;
		return true;
	}
	r->when = n > 1 && s[n - 1] == '+' ? WHEN_FROM : WHEN_NTH;
	if (r->when == WHEN_FROM)
		n--;
	r->n = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		r->n = r->n * 10 + (unsigned long)(s[i] - '0');
	}
	return n > 0 && r->n > 0;
}

/* One rule "CALL:WHEN:ERRNO[:PATH]" of length n. */
static bool parse_rule(const char *s, size_t n, struct rule *r)
{
	const char *end = s + n, *f[4] = {s, NULL, NULL, NULL};
	size_t len[4] = {0};
	int k = 0;
	for (const char *p = s; p < end && k < 3; p++)
		if (*p == ':')
			f[++k] = p + 1;
	if (k < 2)
		return false;
	for (int i = 0; i <= k; i++)
		len[i] = (size_t)((i < k ? f[i + 1] - 1 : end) - f[i]);
	r->fams = parse_fam(f[0], len[0]);
	r->err = parse_errno(f[2], len[2]);
	memset(r->path, 0, sizeof r->path);
	if (k == 3 && len[3] < SUB_MAX)
		memcpy(r->path, f[3], len[3]);
	atomic_store(&r->count, 0);
	return r->fams && r->err > 0 && parse_when(f[1], len[1], r) &&
	       !(k == 3 && len[3] >= SUB_MAX);
}

static int parse_spec(const char *spec, struct config *cfg)
{
	cfg->nrules = 0;
	const char *p = spec ? spec : "";
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\n'))
			n--;
		while (n > 0 && *p == ' ')
			p++, n--;
		if (n > 0) {
			if (cfg->nrules == RULES_MAX || !parse_rule(p, n, &cfg->rules[cfg->nrules]))
				return -1;
			cfg->nrules++;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

int yh_fault_set(const char *spec, const char *path_filter);
int yh_fault_set(const char *spec, const char *path_filter)
{
	if (path_filter && strlen(path_filter) >= SUB_MAX)
		return -1;
	pthread_mutex_lock(&config_lock);
	struct config *cfg = &configs[next_config % CONFIGS];
	int rc = parse_spec(spec, cfg);
	if (rc == 0) {
		memset(cfg->filter, 0, sizeof cfg->filter);
		if (path_filter)
			memcpy(cfg->filter, path_filter, strlen(path_filter));
		next_config++;
		atomic_store(&hits, 0);
		atomic_store(&current, cfg);
	}
	pthread_mutex_unlock(&config_lock);
	return rc;
}

unsigned long yh_fault_hits(void);
unsigned long yh_fault_hits(void)
{
	return atomic_load(&hits);
}

int yh_fault_trace(const char *file);
int yh_fault_trace(const char *file)
{
	int fd = -1;
	if (file) {
		open_fn o = NEXT(open_fn, "open");
		fd = o(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd < 0)
			return -1;
	}
	int old = atomic_exchange(&trace_fd, fd);
	if (old >= 0)
		NEXT(fd_fn, "close")(old);
	return 0;
}

void yh_fault_mark(const char *text);
void yh_fault_mark(const char *text)
{
	if (!tracing())
		return;
	char line[LINE_BUF];
	size_t size = sizeof line - 1, pos = 0;
	pos = put_str(line, pos, size, "seq=");
	pos = put_num(line, pos, size, (long long)atomic_fetch_add(&trace_seq, 1));
	pos = put_str(line, pos, size, "\ttid=");
	pos = put_num(line, pos, size, (long long)syscall(SYS_gettid));
	pos = put_str(line, pos, size, "\tkind=mark\ttext=");
	pos = put_str(line, pos, size, text);
	pos = put_str(line, pos, size, "\n");
	trace_line(line, pos);
}

/* ---- YH_FAULT_CTL: rules from a file that the test rewrites ---- */

static void ctl_apply(void)
{
	open_fn o = NEXT(open_fn, "open");
	int fd = o(ctl_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		yh_fault_set("", NULL); /* no file: no rules */
		return;
	}
	char buf[SPEC_MAX + SUB_MAX + 4];
	ssize_t n = NEXT(read_fn, "read")(fd, buf, sizeof buf - 1);
	NEXT(fd_fn, "close")(fd);
	buf[n > 0 ? n : 0] = '\0';
	char *nl = strchr(buf, '\n');
	const char *filter = NULL;
	if (nl) {
		*nl = '\0';
		filter = nl + 1;
		char *nl2 = strchr(nl + 1, '\n');
		if (nl2)
			*nl2 = '\0';
	}
	if (yh_fault_set(buf, filter && *filter ? filter : NULL) < 0) {
		static const char msg[] = "inject: cannot parse YH_FAULT_CTL file\n";
		NEXT(write_fn, "write")(2, msg, sizeof msg - 1);
	}
}

/* Called at the start of every wrapped call: cheap when nothing changed. */
static void ctl_reload(void)
{
	if (!ctl_path[0])
		return;
	struct stat st;
	if (stat(ctl_path, &st) < 0)
		memset(&st, 0, sizeof st);
	if (ctl_state.seen && st.st_ino == ctl_state.ino && st.st_size == ctl_state.size &&
	    st.st_mtim.tv_sec == ctl_state.mtime.tv_sec &&
	    st.st_mtim.tv_nsec == ctl_state.mtime.tv_nsec)
		return;
	static pthread_mutex_t reload_lock = PTHREAD_MUTEX_INITIALIZER;
	if (pthread_mutex_trylock(&reload_lock) != 0)
		return; /* another thread is at it */
	ctl_state.seen = true;
	ctl_state.ino = st.st_ino;
	ctl_state.size = st.st_size;
	ctl_state.mtime = st.st_mtim;
	ctl_apply();
	pthread_mutex_unlock(&reload_lock);
}

__attribute__((constructor)) static void inject_init(void)
{
	const char *spec = getenv("YH_FAULT");
	const char *filter = getenv("YH_FAULT_PATH");
	const char *trace = getenv("YH_FAULT_TRACE");
	const char *ctl = getenv("YH_FAULT_CTL");
	if (ctl && *ctl && strlen(ctl) < sizeof ctl_path)
		memcpy(ctl_path, ctl, strlen(ctl) + 1);
	if ((spec && *spec) || (filter && *filter)) {
		if (yh_fault_set(spec ? spec : "", filter && *filter ? filter : NULL) < 0) {
			static const char msg[] = "inject: YH_FAULT does not parse\n";
			NEXT(write_fn, "write")(2, msg, sizeof msg - 1);
			abort();
		}
	}
	if (trace && *trace && yh_fault_trace(trace) < 0) {
		static const char msg[] = "inject: cannot open YH_FAULT_TRACE\n";
		NEXT(write_fn, "write")(2, msg, sizeof msg - 1);
		abort();
	}
}
