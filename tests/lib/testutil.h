/*
 * testutil.h - small helpers shared by the C tests: temporary directories,
 * file fixtures, and realistic Kubernetes objects.
 */
#ifndef YURTHUB_TESTS_TESTUTIL_H
#define YURTHUB_TESTS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Make a fresh directory under $TMPDIR (or /tmp): 0 or -1. */
int test_mkdtemp(char *out, size_t size, const char *tag);
/* rm -rf; errors ignored. */
void test_rm_rf(const char *path);
/* Write a file (mkdir -p of its parent first); 0 or -1. */
int test_write_file(const char *dir, const char *rel, const char *data);
/* Read a whole file; malloc'ed, NULL if absent. */
char *test_read_file(const char *dir, const char *rel);
/* Does dir/rel exist? */
int test_exists(const char *dir, const char *rel);
/* Count regular files below dir (recursively). */
int test_count_files(const char *dir);
/* A realistic pod of about `size` bytes (2-3 KB is typical); malloc'ed. */
char *test_pod_json(const char *ns, const char *name, uint64_t rv, const char *node, size_t size);

#endif
