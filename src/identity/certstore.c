/*
 * certstore.c - client-go's certificate file store, see certstore.h.
 *
 * Everything happens relative to one descriptor of the directory, and no
 * path given by the link is followed blindly: its last segment is read in
 * that directory with O_NOFOLLOW, and a directory part must be that same
 * directory.  A store someone tampered with is then "no pair" and a new one
 * is requested, never a read of some other file.
 */
#include "identity/certstore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/fsutil.h"
#include "util/log.h"

#define STAMP_LEN 19 /* YYYY-MM-DD-HH-MM-SS */

char *certstore_current_path(const char *dir, const char *prefix)
{
	size_t n = strlen(dir);
	bool slash = n && dir[n - 1] == '/';
	return str_printf("%s%s%s-current.pem", dir, slash ? "" : "/", prefix);
}

void certstore_pair_free(struct certstore_pair *p)
{
	if (p->pem.data)
		explicit_bzero(p->pem.data, p->pem.cap);
	buf_free(&p->pem);
	x509_info_free(&p->info);
}

/* Is name "<prefix>-YYYY-MM-DD-HH-MM-SS.pem"?  (So "yurthub" does not take
 * the files of "yurthub-server".) */
static bool is_stamped(const char *name, const char *prefix)
{
	size_t p = strlen(prefix);
	if (strncmp(name, prefix, p) || name[p] != '-')
		return false;
	const char *s = name + p + 1;
	static const char shape[] = "dddd-dd-dd-dd-dd-dd.pem";
	for (size_t i = 0; i < sizeof shape - 1; i++) {
		if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != shape[i])
			return false;
	}
	return s[sizeof shape - 1] == '\0';
}

/* The file a link's target names in dirfd: its last segment, when the
 * target has no directory part or one that is dirfd's directory.  A
 * malloc'ed name, or NULL with *why. */
static char *link_file(int dirfd, const char *target, const char **why)
{
	const char *slash = strrchr(target, '/');
	const char *base = slash ? slash + 1 : target;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		*why = "it does not name a file";
		return NULL;
	}
	if (slash) {
		char *d = strndup(target, (size_t)(slash - target));
		if (!d) {
			*why = "out of memory";
			return NULL;
		}
		struct stat here, there;
		int rc = fstat(dirfd, &here) == 0 && fstatat(dirfd, *d ? d : "/", &there, 0) == 0
			     ? 0
			     : -1;
		free(d);
		if (rc < 0 || here.st_dev != there.st_dev || here.st_ino != there.st_ino) {
			*why = "it points outside the store's directory";
			return NULL;
		}
	}
	char *name = strdup(base);
	if (!name)
		*why = "out of memory";
	return name;
}

/* Read the pair the current link (or file) designates into *pem.  0, or
 * -1 with *why (a static string) and *missing when there is nothing yet. */
static int read_current(int dirfd, const char *cur, struct buf *pem, const char **why,
			bool *missing, char **file)
{
	struct stat st;
	if (fstatat(dirfd, cur, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		*missing = errno == ENOENT;
		*why = *missing ? "no file yet" : strerror(errno);
		return -1;
	}
	char *name = NULL;
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(dirfd, cur, target, sizeof target - 1);
		if (n < 0 || (size_t)n >= sizeof target - 1) {
			*why = n < 0 ? strerror(errno) : "the link is too long";
			return -1;
		}
		target[n] = '\0';
		if (!(name = link_file(dirfd, target, why)))
			return -1;
	} else if (!(name = strdup(cur))) {
		*why = "out of memory";
		return -1;
	}
	int rc = fs_read_file_at(dirfd, name, pem, CERTSTORE_FILE_MAX);
	if (rc < 0) {
		*why = rc == -ENOENT   ? "the link points at a file that is gone"
		       : rc == -EFBIG  ? "the file is too large to be a certificate"
		       : rc == -EINVAL ? "the file is not a regular file"
		       : rc == -EISDIR ? "the file is a directory"
				       : strerror(-rc);
		free(name);
		return -1;
	}
	*file = name;
	return 0;
}

int certstore_load(const char *dir, const char *prefix, struct certstore_pair *out)
{
	memset(out, 0, sizeof *out);
	char *cur = str_printf("%s-current.pem", prefix);
	if (!cur)
		return -1;
	const char *why = NULL;
	char *reason = NULL, *file = NULL;
	bool missing = false;
	int rc = 0;
	int dirfd = fs_open_dir_at(AT_FDCWD, dir);
	if (dirfd < 0) {
		missing = dirfd == -ENOENT;
		why = missing ? "no directory yet" : strerror(-dirfd);
	} else if (read_current(dirfd, cur, &out->pem, &why, &missing, &file) == 0) {
		if (x509_parse_pem(out->pem.data ? out->pem.data : "", out->pem.len, &out->info,
				   &reason) < 0)
			why = reason ? reason : "out of memory";
		else if (!out->info.has_key)
			why = "the file holds no private key";
		else if (!out->info.key_matches)
			why = "the private key is not the certificate's";
		else
			rc = 1;
	}
	if (rc == 0) {
		if (missing)
			log_info("certificate store %s/%s: none (%s)", dir, cur, why);
		else
			log_warn("certificate store %s/%s%s%s: not usable, a new certificate will "
				 "be requested: %s",
				 dir, cur, file ? " -> " : "", file ? file : "", why);
		certstore_pair_free(out);
	} else {
		log_v(2, "certificate store %s/%s -> %s: %s, valid until %lld", dir, cur, file,
		      out->info.cn, (long long)out->info.not_after);
	}
	if (dirfd >= 0)
		close(dirfd);
	free(reason);
	free(file);
	free(cur);
	return rc;
}

/* ---- writing ---- */

static int cmp_desc(const void *a, const void *b)
{
	return strcmp(*(char *const *)b, *(char *const *)a);
}

/* Remove timestamped files beyond the newest CERTSTORE_KEEP, never the one
 * current names, and link temporaries a crash may have left.  Best effort:
 * each failure is logged, none is fatal. */
static void prune(int dirfd, const char *dir, const char *prefix, const char *current_file,
		  const char *tmp_prefix)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		log_warn("certificate store %s: cannot list it to prune old files: %s", dir,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d);
	char **names = NULL;
	size_t n = 0, cap = 0;
	bool removed = false, complete = true;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, tmp_prefix, strlen(tmp_prefix))) {
			if (unlinkat(dirfd, de->d_name, 0) == 0)
				removed = true;
			continue;
		}
		if (!is_stamped(de->d_name, prefix) || !strcmp(de->d_name, current_file))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			char **v = realloc(names, nc * sizeof *v);
			if (!v) {
				complete = false;
				break;
			}
			names = v;
			cap = nc;
		}
		if (!(names[n] = strdup(de->d_name))) {
			complete = false;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, cmp_desc);
	/* The current one counts as one of the kept.  Out of memory, the
	 * list is partial and its oldest may not be the oldest: keep all. */
	for (size_t i = CERTSTORE_KEEP - 1; complete && i < n; i++) {
		if (unlinkat(dirfd, names[i], 0) < 0 && errno != ENOENT)
			log_warn("certificate store %s: cannot remove old %s: %s", dir, names[i],
				 strerror(errno));
		else
			removed = true;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (removed && fsync(dirfd) < 0)
		log_warn("certificate store %s: fsync after pruning: %s", dir, strerror(errno));
}

/* mkdir -p dir, and make a new directory's entry durable in its parent. */
static int ensure_dir(const char *dir, char **err)
{
	int created = 0;
	int rc = fs_mkdir_p_at(AT_FDCWD, dir, 0700, &created);
	if (rc < 0) {
		err_printf(err, "cannot create %s: %s", dir, strerror(-rc));
		return -1;
	}
	if (created) {
		char *parent = strdup(dir);
		if (!parent) {
			err_printf(err, "out of memory");
			return -1;
		}
		size_t n = strlen(parent);
		while (n > 1 && parent[n - 1] == '/')
			parent[--n] = '\0';
		char *slash = strrchr(parent, '/');
		const char *p = !slash ? "." : slash == parent ? "/" : (*slash = '\0', parent);
		rc = fs_fsync_dir_at(AT_FDCWD, p);
		free(parent);
		if (rc < 0) {
			err_printf(err, "cannot fsync the parent of %s: %s", dir, strerror(-rc));
			return -1;
		}
	}
	return 0;
}

int certstore_save(const char *dir, const char *prefix, const char *pem, size_t len, char **err)
{
	static atomic_uint seq;
	if (ensure_dir(dir, err) < 0)
		return -1;
	int dirfd = fs_open_dir_at(AT_FDCWD, dir);
	if (dirfd < 0) {
		err_printf(err, "cannot open %s: %s", dir, strerror(-dirfd));
		return -1;
	}
	time_t now = time(NULL);
	struct tm tm;
	char *file = NULL, *cur = NULL, *tmp_prefix = NULL, *tmp = NULL;
	int rc = -1;
	if (!gmtime_r(&now, &tm)) {
		err_printf(err, "the clock cannot be read as a date");
		goto out;
	}
	file = str_printf("%s-%04d-%02d-%02d-%02d-%02d-%02d.pem", prefix, tm.tm_year + 1900,
			  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	cur = str_printf("%s-current.pem", prefix);
	tmp_prefix = str_printf(".%s-current.pem.", prefix);
	tmp = tmp_prefix ? str_printf("%s%ld.%u.tmp", tmp_prefix, (long)getpid(),
				      atomic_fetch_add(&seq, 1))
			 : NULL;
	if (!file || !cur || !tmp) {
		err_printf(err, "out of memory");
		goto out;
	}
	/* Two pairs within one second share a name: the second replaces the
	 * first in one rename, and the link, naming it, stays good. */
	int w = fs_write_file_atomic(dirfd, file, pem, len, FS_FILE_MODE);
	if (w < 0) {
		err_printf(err, "cannot write %s/%s: %s", dir, file, strerror(-w));
		goto out;
	}
	/* the link is relative: the store may be moved as a whole */
	if (symlinkat(file, dirfd, tmp) < 0) {
		err_printf(err, "cannot make a link in %s: %s", dir, strerror(errno));
		goto out;
	}
	if (renameat(dirfd, tmp, dirfd, cur) < 0) {
		err_printf(err, "cannot switch %s/%s: %s", dir, cur, strerror(errno));
		unlinkat(dirfd, tmp, 0);
		goto out;
	}
	if (fsync(dirfd) < 0) {
		err_printf(err, "cannot fsync %s: %s", dir, strerror(errno));
		goto out;
	}
	rc = 0;
	prune(dirfd, dir, prefix, file, tmp_prefix);
out:
	close(dirfd);
	free(file);
	free(cur);
	free(tmp_prefix);
	free(tmp);
	return rc;
}
