/*
 * fsutil.h - small, careful file-system helpers.
 *
 * Everything works relative to a directory descriptor (the *at() calls), never
 * follows symbolic links for the paths it is given, and reports failures as a
 * negative errno.  The durable-write primitive every store file goes through is
 * fs_write_file_atomic(): temp file in the same directory, fsync, rename, fsync
 * of the directory.
 */
#ifndef YURTHUB_UTIL_FSUTIL_H
#define YURTHUB_UTIL_FSUTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "util/buf.h"

#define FS_FILE_MODE 0600
#define FS_DIR_MODE  0700

/* Open the directory at path (relative, several segments allowed) below
 * dirfd without following any symbolic link and without leaving dirfd
 * ("." gives a new descriptor of dirfd itself).  fd or -errno (-ELOOP for a
 * link on the way, -EXDEV for "..", -ENOTDIR). */
int fs_open_dir_at(int dirfd, const char *path);
/* Open the parent directory of path the same way and point *last at path's
 * final segment: the pair to hand to a *at() call that must not follow a
 * link anywhere.  fd (caller closes) or -errno. */
int fs_open_parent_at(int dirfd, const char *path, const char **last);

/* write(2) until done; retries EINTR.  0 or -errno. */
int fs_write_all(int fd, const void *data, size_t len);
/* Read a whole regular file (relative to dirfd) into out, at most max bytes:
 * -EFBIG when it is larger, -EISDIR / -EINVAL when it is not a regular file. */
int fs_read_file_at(int dirfd, const char *path, struct buf *out, size_t max);
/* The same, and the file's stat (taken from the open file). */
int fs_read_file_stat_at(int dirfd, const char *path, struct buf *out, size_t max, struct stat *st);
/* Read a file the operator named (a flag, a kubeconfig reference): the path
 * is taken as given, links included, unlike the *_at helpers below the
 * cache directory.  Same results as fs_read_file_at. */
int fs_read_operator_file(const char *path, struct buf *out, size_t max);
/* What stat(2) says of a file, through any symlink: enough to notice that
 * kubelet re-pointed kubelet-client-current.pem at a new file (new inode)
 * or that someone rewrote a file in place (mtime, size). */
struct file_stamp {
	bool ok; /* stat succeeded */
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	off_t size;
};
/* The stamp of path (NULL, or a file that is not there: ok false). */
void fs_stamp(const char *path, struct file_stamp *fs);
bool fs_stamp_eq(const struct file_stamp *a, const struct file_stamp *b);
/* mkdir -p of a relative path below dirfd; *created (may be NULL) is set to 1
 * when at least one directory was made, so that the caller knows to fsync. */
int fs_mkdir_p_at(int dirfd, const char *path, mode_t mode, int *created);
/* fsync the directory at path (relative to dirfd; "." for dirfd itself). */
int fs_fsync_dir_at(int dirfd, const char *path);
/* Remove path (file or whole tree) below dirfd; missing is not an error. */
int fs_rm_rf_at(int dirfd, const char *path);
/* Durably replace dirfd/name with data: temp file beside it, fsync, rename,
 * fsync of the directory.  On failure the old content is untouched. */
int fs_write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode);
/* renameat2 (flags: 0 or RENAME_EXCHANGE/RENAME_NOREPLACE) with both
 * paths resolved as fs_open_parent_at does.  0 or -errno. */
int fs_rename_at(int olddir, const char *oldpath, int newdir, const char *newpath,
		 unsigned int flags);
/* unlink of a file, resolved the same way.  0 or -errno. */
int fs_unlink_at(int dirfd, const char *path);
/* lstat of path, resolved as fs_open_parent_at does.  0 or -errno. */
int fs_stat_at(int dirfd, const char *path, struct stat *st);
/* Is there anything (any type) at path? 1 yes, 0 no, -errno on other errors. */
int fs_exists_at(int dirfd, const char *path);
/* 1 if path is a directory, 0 if it is something else, -ENOENT / -errno. */
int fs_is_dir_at(int dirfd, const char *path);

/* A directory stream of path (below dirfd, resolved as fs_open_dir_at
 * does) in *out, for readdir; 0 or -errno.  closedir() it. */
int fs_opendir_at(int dirfd, const char *path, DIR **out);
/* The type of an entry readdir gave: d_type where the file system fills
 * it in, else what lstat says (DT_DIR, DT_REG, DT_LNK for anything else);
 * 0 when the entry vanished meanwhile. */
unsigned char fs_entry_type(DIR *dp, const struct dirent *de);

#endif
