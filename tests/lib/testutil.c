/* testutil.c - helpers for the C tests, see testutil.h. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/selector.h"
#include "util/buf.h"
#include "util/fsutil.h"

int test_mkdtemp(char *out, size_t size, const char *tag)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(out, size, "%s/yurthub-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
	return mkdtemp(out) ? 0 : -1;
}

void test_rm_rf(const char *path)
{
	fs_rm_rf_at(AT_FDCWD, path);
}

int test_write_file(const char *dir, const char *rel, const char *data)
{
	struct buf p = BUF_INIT;
	if (buf_printf(&p, "%s/%s", dir, rel) < 0)
		return -1;
	char *slash = strrchr(p.data, '/');
	*slash = '\0';
	int rc = fs_mkdir_p_at(AT_FDCWD, p.data, 0700, NULL);
	*slash = '/';
	if (rc == 0) {
		int fd = open(p.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		rc = fd < 0 ? -1 : fs_write_all(fd, data, strlen(data));
		if (fd >= 0)
			close(fd);
	}
	buf_free(&p);
	return rc < 0 ? -1 : 0;
}

char *test_read_file(const char *dir, const char *rel)
{
	struct buf p = BUF_INIT, b = BUF_INIT;
	if (buf_printf(&p, "%s/%s", dir, rel) < 0)
		return NULL;
	int rc = fs_read_file_at(AT_FDCWD, p.data, &b, 1 << 26);
	buf_free(&p);
	if (rc < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

int test_exists(const char *dir, const char *rel)
{
	struct buf p = BUF_INIT;
	if (buf_printf(&p, "%s/%s", dir, rel) < 0)
		return 0;
	struct stat st;
	int r = lstat(p.data, &st) == 0;
	buf_free(&p);
	return r;
}

int test_count_files(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct buf p = BUF_INIT;
		buf_printf(&p, "%s/%s", dir, de->d_name);
		struct stat st;
		if (lstat(p.data, &st) == 0) {
			if (S_ISDIR(st.st_mode))
				n += test_count_files(p.data);
			else if (S_ISREG(st.st_mode))
				n++;
		}
		buf_free(&p);
	}
	closedir(d);
	return n;
}

char *test_pod_json(const char *ns, const char *name, uint64_t rv, const char *node, size_t size)
{
	struct buf b = BUF_INIT;
	buf_printf(
	    &b,
	    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
	    "\"namespace\":\"%s\",\"uid\":\"6f1c9d52-%08x-4b7e-9a4c-1e2f3a4b5c6d\","
	    "\"resourceVersion\":\"%llu\",\"creationTimestamp\":\"2026-11-01T10:00:00Z\","
	    "\"labels\":{\"app\":\"%s\",\"pod-template-hash\":\"7d9c8b6f5d\"},"
	    "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
	    "\"name\":\"%s-7d9c8b6f5d\",\"uid\":\"0a1b2c3d-1111-2222-3333-444455556666\","
	    "\"controller\":true,\"blockOwnerDeletion\":true}]},"
	    "\"spec\":{\"nodeName\":\"%s\",\"restartPolicy\":\"Always\","
	    "\"serviceAccountName\":\"default\",\"containers\":[{\"name\":\"app\","
	    "\"image\":\"registry.example.com/team/app:1.4.2\",\"ports\":[{\"containerPort\":8080,"
	    "\"protocol\":\"TCP\"}],\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":"
	    "\"128Mi\"},\"limits\":{\"memory\":\"256Mi\"}},\"env\":[",
	    name, ns, (unsigned)rv, (unsigned long long)rv, name, name, node ? node : "");
	int i = 0;
	while (b.len + 120 < size)
		buf_printf(&b,
			   "%s{\"name\":\"SETTING_%d\",\"value\":\"value-%d-abcdefghijklmnop\"}",
			   i ? "," : "", i, i),
		    i++;
	buf_printf(&b, "]}]},\"status\":{\"phase\":\"Running\",\"podIP\":\"10.244.%u.%u\"}}",
		   (unsigned)(rv / 250) % 250, (unsigned)rv % 250);
	return buf_steal(&b);
}

enum store_err test_iterate_selected(struct store *s, const char *component, const char *resource,
				     const char *ns, const char *labels, const char *fields,
				     bool matching, char **names, size_t *given, size_t *matched)
{
	struct store_key_info info = {component, "", "v1", resource, ns, ""};
	struct selector *ls = NULL, *fs = NULL;
	struct store_key root;
	struct store_iter *it = NULL;
	struct buf found = BUF_INIT, data = BUF_INIT;
	const struct store_key *k;
	size_t n = 0, m = 0;
	enum store_err e;

	if (selector_parse(SELECTOR_LABEL, labels, &ls, NULL) < 0 ||
	    selector_parse(SELECTOR_FIELD, fields, &fs, NULL) < 0) {
		fprintf(stderr, "test_iterate_selected: bad selector %s / %s\n", labels, fields);
		abort(); /* the callers' selectors are constants */
	}
	struct store_match match = {ls, fs};
	e = store_key_build(s, &info, &root);
	if (e == STORE_OK) {
		e = matching ? store_iter_begin_matching(s, &root, NULL, &match, &it)
			     : store_iter_begin(s, &root, NULL, &it);
		store_key_free(&root);
	}
	while (e == STORE_OK && (e = store_iter_next(it, &k, &data)) == STORE_OK) {
		n++;
		if (selector_match_json(ls, fs, data.data, data.len) == 1) {
			m++;
			buf_printf(&found, "%s%s", found.len ? " " : "", k->name);
		}
	}
	if (e == STORE_NOT_FOUND && it)
		e = STORE_OK; /* the end */
	store_iter_free(it);
	selector_free(ls);
	selector_free(fs);
	buf_free(&data);
	if (given)
		*given = n;
	if (matched)
		*matched = m;
	if (names)
		*names = strdup(buf_cstr(&found));
	buf_free(&found);
	return e;
}
