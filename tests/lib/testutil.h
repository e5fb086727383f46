/*
 * testutil.h - small helpers shared by the C tests: temporary directories,
 * file fixtures, and realistic Kubernetes objects.
 */
#ifndef YURTHUB_TESTS_TESTUTIL_H
#define YURTHUB_TESTS_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"

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

/* An iteration of the component's objects of (core group, v1, resource)
 * in ns ("": all) with a label and a field selector (NULL or "": none),
 * checked object by object as an offline list checks them.  matching:
 * through store_iter_begin_matching (the store may leave out what surely
 * does not match), else store_iter_begin.  Fills what is asked: the
 * matching names, "a b c" in the order given ("" for none; malloc'ed), how
 * many objects the store gave and how many of them match.  Returns the
 * store's error (STORE_OK at the end; the error that began or broke the
 * iteration).  The selectors must parse: a test's constants. */
enum store_err test_iterate_selected(struct store *s, const char *component, const char *resource,
				     const char *ns, const char *labels, const char *fields,
				     bool matching, char **names, size_t *given, size_t *matched);

#endif
