/* fault_fx.c - objects, store calls and state checks, see fault_fx.h. */
#include "fault_fx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/disk.h"

char *fx_cm(const char *ns, const char *name, uint64_t rv, size_t pad)
{
	char *padding = malloc(pad + 1);
	if (!padding)
		return NULL;
	memset(padding, 'p', pad);
	padding[pad] = '\0';
	char *s = NULL;
	if (asprintf(&s,
		     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
		     "\"namespace\":\"%s\",\"resourceVersion\":\"%llu\"},\"data\":{\"p\":\"%s\"}}",
		     name, ns, (unsigned long long)rv, padding) < 0)
		s = NULL;
	free(padding);
	return s;
}

struct store *fx_open(const char *dir)
{
	char *err = NULL;
	struct store *s = disk_store_open(dir, 0, NULL, &err);
	if (!s)
		fprintf(stderr, "open %s: %s\n", dir, err ? err : "?");
	free(err);
	return s;
}

static enum store_err key_of(struct store *s, const char *ns, const char *name, struct store_key *k)
{
	struct store_key_info info = {"agent", "", "v1", "configmaps", ns, name};
	return store_key_build(s, &info, k);
}

enum store_err fx_put(struct store *s, const char *ns, const char *name, uint64_t rv, size_t pad)
{
	struct store_key k;
	enum store_err e = key_of(s, ns, name, &k);
	if (e != STORE_OK)
		return e;
	char *data = fx_cm(ns, name, rv, pad);
	size_t len = strlen(data);
	e = store_update(s, &k, data, len, rv, NULL);
	if (e == STORE_NOT_FOUND) {
		e = store_create(s, &k, data, len);
		if (e == STORE_EXISTS)
			e = store_update(s, &k, data, len, rv, NULL);
	}
	free(data);
	store_key_free(&k);
	return e == STORE_CONFLICT ? STORE_OK : e;
}

enum store_err fx_del(struct store *s, const char *ns, const char *name)
{
	struct store_key k;
	enum store_err e = key_of(s, ns, name, &k);
	if (e == STORE_OK)
		e = store_delete(s, &k);
	store_key_free(&k);
	return e;
}

enum store_err fx_replace(struct store *s, const char *ns, uint64_t list_rv,
			  const struct fx_obj *list, size_t n, size_t pad)
{
	struct store_view v = {"agent", {"", "v1", "configmaps"}, ns, "", ""};
	struct store_replace *r;
	enum store_err e = store_replace_begin(s, &v, &r);
	for (size_t i = 0; e == STORE_OK && i < n; i++) {
		if (!list[i].rv)
			continue;
		char *data = fx_cm(ns, list[i].name, list[i].rv, pad);
		struct store_item it = {ns, list[i].name, list[i].rv, data, strlen(data)};
		e = store_replace_add(r, &it);
		free(data);
		if (e != STORE_OK)
			store_replace_abort(r);
	}
	return e == STORE_OK ? store_replace_commit(r, list_rv) : e;
}

static int count_one(void *ctx, const struct store_key *k, const char *data, size_t len)
{
	(*(size_t *)ctx)++;
	return 0;
}

static const char *differs_view(struct store *s, const char *ns, uint64_t view_rv)
{
	struct store_view v = {"agent", {"", "v1", "configmaps"}, ns, "", ""};
	struct store_view_state st;
	enum store_err e = store_get_view(s, &v, &st);
	uint64_t rv = e == STORE_OK ? st.rv : 0;
	if (e == STORE_OK)
		store_view_state_free(&st);
	if (!view_rv)
		return e == STORE_NOT_FOUND ? NULL : "the view exists, but was never listed";
	if (e != STORE_OK)
		return "the view is not there";
	return rv == view_rv ? NULL : "the view has another resourceVersion";
}

static const char *differs_object(struct store *s, const char *ns, const struct fx_obj *o,
				  size_t pad)
{
	static char why[256];
	struct store_key k;
	if (key_of(s, ns, o->name, &k) != STORE_OK)
		return "bad key";
	struct buf b = BUF_INIT;
	enum store_err e = store_get(s, &k, &b);
	store_key_free(&k);
	char *want = o->rv ? fx_cm(ns, o->name, o->rv, pad) : NULL;
	const char *res = NULL;
	if (!o->rv && e != STORE_NOT_FOUND)
		res = "absent object";
	else if (o->rv && (e != STORE_OK || strcmp(b.data, want)))
		res = "object";
	if (res) {
		snprintf(why, sizeof why, "%s %s/%s: %s (want rv %llu)", res, ns, o->name,
			 e == STORE_OK ? b.data : store_strerror(e), (unsigned long long)o->rv);
		res = why;
	}
	free(want);
	buf_free(&b);
	return res;
}

const char *fx_differs(struct store *s, const char *ns, uint64_t view_rv, const struct fx_obj *objs,
		       size_t n, size_t pad, int exact)
{
	const char *why = differs_view(s, ns, view_rv);
	for (size_t i = 0; !why && i < n; i++)
		why = differs_object(s, ns, &objs[i], pad);
	if (why || !exact)
		return why;
	size_t want = 0, have = 0;
	for (size_t i = 0; i < n; i++)
		want += objs[i].rv != 0;
	struct store_key_info info = {"agent", "", "v1", "configmaps", ns, ""};
	struct store_key root;
	if (store_key_build(s, &info, &root) != STORE_OK)
		return "bad root key";
	enum store_err e = store_list(s, &root, count_one, &have);
	store_key_free(&root);
	if (e == STORE_NOT_FOUND && want == 0)
		return NULL;
	if (e != STORE_OK)
		return "the collection cannot be listed";
	return have == want ? NULL : "the collection holds other objects too";
}
