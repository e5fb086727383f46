/* fsutil.c - careful file-system helpers, see fsutil.h. */
#include "util/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- resolving paths without following links ---- */

static int walk_segments(int dirfd, const char *path)
{
	int cur = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -errno;
	const char *seg = path;
	while (*seg) {
		const char *end = strchr(seg, '/');
		size_t n = end ? (size_t)(end - seg) : strlen(seg);
		if (n == 2 && seg[0] == '.' && seg[1] == '.') {
			close(cur);
			return -EXDEV;
		}
		if (n > 0 && !(n == 1 && seg[0] == '.')) {
			char *name = strndup(seg, n);
			if (!name) {
				close(cur);
				return -ENOMEM;
			}
			int next =
			    openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int err = errno;
			free(name);
			close(cur);
			if (next < 0)
				return -err;
			cur = next;
		}
		if (!end)
			break;
		seg = end + 1;
	}
	return cur;
}

int fs_open_dir_at(int dirfd, const char *path)
{
	static atomic_int no_openat2;
	if (!*path)
		return -EINVAL;
	if (path[0] == '/') {
		/* An absolute path is the operator's (a flag, a test's temporary
		 * directory): it is opened as given, links included. */
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	if (!atomic_load(&no_openat2)) {
		struct open_how how = {
		    .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		    .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
		};
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS && errno != EPERM)
			return -errno;
		/* Before Linux 5.6 (or under a seccomp filter that does not
		 * know it): walk one segment at a time. */
		atomic_store(&no_openat2, 1);
	}
	return walk_segments(dirfd, path);
}

int fs_open_parent_at(int dirfd, const char *path, const char **last)
{
	const char *slash = strrchr(path, '/');
	*last = slash ? slash + 1 : path;
	if (!**last)
		return -EINVAL;
	if (!slash)
		return fs_open_dir_at(dirfd, ".");
	char *parent = strndup(path, (size_t)(slash - path));
	if (!parent)
		return -ENOMEM;
	int fd = fs_open_dir_at(dirfd, *parent ? parent : ".");
	free(parent);
	return fd;
}

int fs_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int check_regular(const struct stat *st, size_t max)
{
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	return (size_t)st->st_size > max ? -EFBIG : 0;
}

/* Read the whole of an open regular file into out, and close it.  Files of
 * the cache never change once in place (they are renamed in whole), so the
 * size fstat gives is the size: a read that has it all is the last one. */
static int read_open_file(int fd, struct buf *out, size_t max, struct stat *stp)
{
	struct stat local, *st = stp ? stp : &local;
	int rc = fstat(fd, st) < 0 ? -errno : check_regular(st, max);
	size_t size = rc == 0 ? (size_t)st->st_size : 0;
	buf_reset(out);
	if (rc == 0 && buf_reserve(out, size + 1) < 0)
		rc = -ENOMEM;
	while (rc == 0) {
		if (out->len >= size && buf_reserve(out, 4096) < 0) {
			rc = -ENOMEM;
			break;
		}
		ssize_t n = read(fd, out->data + out->len, out->cap - out->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		out->len += (size_t)n;
		if (out->len > max)
			rc = -EFBIG;
		if (n == 0 || out->len == size)
			break;
	}
	if (out->data)
		out->data[out->len] = '\0';
	close(fd);
	return rc;
}

int fs_read_file_stat_at(int dirfd, const char *path, struct buf *out, size_t max, struct stat *st)
{
	int fd;
	if (!strchr(path, '/') && strcmp(path, "..")) {
		/* one segment: nothing to resolve on the way */
		fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			return errno == ELOOP ? -EINVAL : -errno;
		return read_open_file(fd, out, max, st);
	}
	const char *last;
	int pfd = fs_open_parent_at(dirfd, path, &last);
	if (pfd < 0)
		return pfd == -ELOOP ? -EINVAL : pfd;
	fd = openat(pfd, last, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	int err = errno;
	close(pfd);
	if (fd < 0)
		return err == ELOOP ? -EINVAL : -err;
	return read_open_file(fd, out, max, st);
}

int fs_read_file_at(int dirfd, const char *path, struct buf *out, size_t max)
{
	return fs_read_file_stat_at(dirfd, path, out, max, NULL);
}

int fs_read_operator_file(const char *path, struct buf *out, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	return read_open_file(fd, out, max, NULL);
}

void fs_stamp(const char *path, struct file_stamp *fs)
{
	struct stat st;
	memset(fs, 0, sizeof *fs);
	if (!path || stat(path, &st) != 0) /* stat, not lstat: the link's target */
		return;
	fs->ok = true;
	fs->dev = st.st_dev;
	fs->ino = st.st_ino;
	fs->mtime = st.st_mtim;
	fs->size = st.st_size;
}

bool fs_stamp_eq(const struct file_stamp *a, const struct file_stamp *b)
{
	return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

int fs_mkdir_p_at(int dirfd, const char *path, mode_t mode, int *created)
{
	/* One segment at a time from an open directory, so that a link
	 * planted anywhere on the way is refused, not followed.  An absolute
	 * path is the operator's and may pass through links. */
	bool absolute = path[0] == '/';
	int nofollow = absolute ? 0 : O_NOFOLLOW;
	int cur = openat(absolute ? AT_FDCWD : dirfd, absolute ? "/" : ".",
			 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -errno;
	int rc = 0;
	const char *seg = path;
	while (*seg && rc == 0) {
		const char *end = strchr(seg, '/');
		size_t n = end ? (size_t)(end - seg) : strlen(seg);
		if (n == 2 && seg[0] == '.' && seg[1] == '.') {
			rc = -EXDEV;
			break;
		}
		if (n > 0 && !(n == 1 && seg[0] == '.')) {
			char *name = strndup(seg, n);
			if (!name) {
				rc = -ENOMEM;
				break;
			}
			if (mkdirat(cur, name, mode) == 0) {
				if (created)
					*created = 1;
			} else if (errno != EEXIST) {
				rc = -errno;
			}
			if (rc == 0) {
				int next = openat(cur, name,
						  O_RDONLY | O_DIRECTORY | nofollow | O_CLOEXEC);
				if (next < 0)
					rc = errno == ELOOP ? -ENOTDIR : -errno;
				else
					close(cur), cur = next;
			}
			free(name);
		}
		if (!end)
			break;
		seg = end + 1;
	}
	close(cur);
	return rc;
}

int fs_fsync_dir_at(int dirfd, const char *path)
{
	int fd = fs_open_dir_at(dirfd, path);
	if (fd < 0)
		return fd;
	int rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static int rm_entry(int parent, const char *name);

static int rm_tree_fd(int fd)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = -errno;
		close(fd);
		return e;
	}
	int rc = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = rm_entry(dirfd(d), de->d_name);
		if (r < 0 && rc == 0)
			rc = r;
		errno = 0;
	}
	if (errno && rc == 0)
		rc = -errno;
	closedir(d);
	return rc;
}

static int rm_entry(int parent, const char *name)
{
	if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	int rc = rm_tree_fd(fd);
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT && rc == 0)
		rc = -errno;
	return rc;
}

int fs_rm_rf_at(int dirfd, const char *path)
{
	const char *last;
	int parent = fs_open_parent_at(dirfd, path, &last);
	if (parent < 0)
		return parent == -ENOENT ? 0 : parent;
	int rc = rm_entry(parent, last);
	close(parent);
	return rc;
}

int fs_write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode)
{
	static atomic_uint seq;
	char tmp[64];
	snprintf(tmp, sizeof tmp, ".tmp.%ld.%u", (long)getpid(), atomic_fetch_add(&seq, 1));
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int rc = fs_write_all(fd, data, len);
	if (rc == 0 && fdatasync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = -errno;
	if (rc < 0) {
		unlinkat(dirfd, tmp, 0);
		return rc;
	}
	return fs_fsync_dir_at(dirfd, ".");
}

int fs_stat_at(int dirfd, const char *path, struct stat *st)
{
	const char *last;
	int parent = fs_open_parent_at(dirfd, path, &last);
	if (parent < 0)
		return parent;
	int rc = fstatat(parent, last, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	close(parent);
	return rc;
}

int fs_exists_at(int dirfd, const char *path)
{
	struct stat st;
	int rc = fs_stat_at(dirfd, path, &st);
	if (rc == 0)
		return 1;
	return rc == -ENOENT ? 0 : rc;
}

int fs_is_dir_at(int dirfd, const char *path)
{
	struct stat st;
	int rc = fs_stat_at(dirfd, path, &st);
	if (rc < 0)
		return rc;
	return S_ISDIR(st.st_mode) ? 1 : 0;
}

int fs_rename_at(int olddir, const char *oldpath, int newdir, const char *newpath,
		 unsigned int flags)
{
	const char *oldlast, *newlast;
	int op = fs_open_parent_at(olddir, oldpath, &oldlast);
	if (op < 0)
		return op;
	int np = fs_open_parent_at(newdir, newpath, &newlast);
	if (np < 0) {
		close(op);
		return np;
	}
	int rc = renameat2(op, oldlast, np, newlast, flags) < 0 ? -errno : 0;
	close(op);
	close(np);
	return rc;
}

int fs_unlink_at(int dirfd, const char *path)
{
	const char *last;
	int parent = fs_open_parent_at(dirfd, path, &last);
	if (parent < 0)
		return parent;
	int rc = unlinkat(parent, last, 0) < 0 ? -errno : 0;
	close(parent);
	return rc;
}

int fs_opendir_at(int dirfd, const char *path, DIR **out)
{
	*out = NULL;
	int fd = fs_open_dir_at(dirfd, path);
	if (fd < 0)
		return fd;
	DIR *dp = fdopendir(fd);
	if (!dp) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	*out = dp;
	return 0;
}

unsigned char fs_entry_type(DIR *dp, const struct dirent *de)
{
	if (de->d_type != DT_UNKNOWN)
		return de->d_type;
	struct stat st;
	if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	return S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
}
