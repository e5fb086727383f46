/*
 * store_contract.c - the store contract suite, see store_contract.h.
 *
 * Each test gets a fresh store from the backend runner.  The tests speak only
 * through store.h, so that whatever passes here on disk must pass on etcd.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/meta.h"
#include "store_contract.h"
#include "testutil.h"

static struct contract_backend *B;

struct fixture {
	struct store *s;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	f->s = B->open_fresh(B->ctx);
	if (!f->s)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	B->destroy(B->ctx, f->s);
	free(f);
	return 0;
}

/* ---- helpers ---- */

static char *obj_json(const char *name, const char *ns, uint64_t rv, const char *labels,
		      const char *node)
{
	char *s = NULL;
	char nsfield[300] = "";
	if (ns && *ns)
		snprintf(nsfield, sizeof nsfield, "\"namespace\":\"%s\",", ns);
	int n = asprintf(
	    &s,
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",%s"
	    "\"resourceVersion\":\"%llu\",\"labels\":{%s}},\"spec\":{\"nodeName\":\"%s\"}}",
	    name, nsfield, (unsigned long long)rv, labels ? labels : "", node ? node : "");
	assert_true(n > 0);
	return s;
}

static struct store_key key_of(struct store *s, const char *comp, const char *res, const char *ns,
			       const char *name)
{
	struct store_key_info info = {comp, "", "v1", res, ns, name};
	struct store_key k;
	assert_int_equal(store_key_build(s, &info, &k), STORE_OK);
	return k;
}

static void put(struct store *s, const char *comp, const char *ns, const char *name, uint64_t rv,
		const char *labels)
{
	struct store_key k = key_of(s, comp, "pods", ns, name);
	char *j = obj_json(name, ns, rv, labels, NULL);
	assert_int_equal(store_create(s, &k, j, strlen(j)), STORE_OK);
	free(j);
	store_key_free(&k);
}

/* rv of the stored object, 0 when absent */
static uint64_t stored_rv(struct store *s, const char *comp, const char *ns, const char *name)
{
	struct store_key k = key_of(s, comp, "pods", ns, name);
	struct buf b = BUF_INIT;
	uint64_t rv = 0;
	if (store_get(s, &k, &b) == STORE_OK)
		assert_int_equal(kube_meta_rv(b.data, b.len, &rv), 0);
	buf_free(&b);
	store_key_free(&k);
	return rv;
}

struct items {
	struct store_item v[64];
	char *data[64];
	size_t n;
};

static void item_add(struct items *it, const char *ns, const char *name, uint64_t rv,
		     const char *labels)
{
	assert_true(it->n < 64);
	char *j = obj_json(name, ns, rv, labels, NULL);
	it->data[it->n] = j;
	it->v[it->n] = (struct store_item){ns, name, rv, j, strlen(j)};
	it->n++;
}

static void items_free(struct items *it)
{
	for (size_t i = 0; i < it->n; i++)
		free(it->data[i]);
	it->n = 0;
}

static struct store_view view_of(const char *comp, const char *ns, const char *ls, const char *fs)
{
	struct store_view v = {comp, {"", "v1", "pods"}, ns, ls, fs};
	return v;
}

static int count_fn(void *ctx, const struct store_key *k, const char *data, size_t len)
{
	(void)k;
	(void)data;
	(void)len;
	(*(int *)ctx)++;
	return 0;
}

static int count_list(struct store *s, const char *comp, const char *ns)
{
	struct store_key_info info = {comp, "", "v1", "pods", ns, ""};
	struct store_key root;
	assert_int_equal(store_key_build(s, &info, &root), STORE_OK);
	int n = 0;
	enum store_err e = store_list(s, &root, count_fn, &n);
	store_key_free(&root);
	return e == STORE_OK ? n : -1;
}

/* ---- keys ---- */

static void test_key_errors(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_key k;
	struct store_key_info no_comp = {"", "", "v1", "pods", "default", "a"};
	assert_int_equal(store_key_build(s, &no_comp, &k), STORE_EMPTY_KEY);
	struct store_key_info no_res = {"kubelet", "", "v1", "", "default", "a"};
	assert_int_equal(store_key_build(s, &no_res, &k), STORE_EMPTY_KEY);
	const char *bad[] = {"..", ".", "a/b", "x\ny", "tmp_x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct store_key_info bn = {"kubelet", "", "v1", "pods", "default", bad[i]};
		assert_int_equal(store_key_build(s, &bn, &k), STORE_BAD_KEY);
		struct store_key_info bns = {"kubelet", "", "v1", "pods", bad[i], "a"};
		assert_int_equal(store_key_build(s, &bns, &k), STORE_BAD_KEY);
	}
	char longname[400];
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	struct store_key_info ln = {"kubelet", "", "v1", "pods", "default", longname};
	assert_int_equal(store_key_build(s, &ln, &k), STORE_BAD_KEY);
	struct store_key_info root = {"kubelet", "", "v1", "pods", "default", ""};
	assert_int_equal(store_key_build(s, &root, &k), STORE_OK);
	assert_true(k.is_root);
	store_key_free(&k);
}

/* ---- single objects ---- */

static void test_create_get(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_key k = key_of(s, "kubelet", "pods", "default", "web-0");
	char *j = obj_json("web-0", "default", 5, NULL, "n1");
	assert_int_equal(store_create(s, &k, j, strlen(j)), STORE_OK);
	assert_int_equal(store_create(s, &k, j, strlen(j)), STORE_EXISTS);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(s, &k, &b), STORE_OK);
	assert_int_equal(b.len, strlen(j));
	assert_memory_equal(b.data, j, b.len);
	buf_free(&b);
	free(j);
	store_key_free(&k);

	struct store_key missing = key_of(s, "kubelet", "pods", "default", "nope");
	assert_int_equal(store_get(s, &missing, &b), STORE_NOT_FOUND);
	store_key_free(&missing);
	buf_free(&b);
}

static void test_create_errors(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_key k = key_of(s, "kubelet", "pods", "default", "a");
	assert_int_equal(store_create(s, &k, "", 0), STORE_EMPTY_CONTENT);
	assert_int_equal(store_create(s, &k, "{\"a\":", 5), STORE_INVALID_CONTENT);
	assert_int_equal(store_create(s, &k, "[1,2]", 5), STORE_INVALID_CONTENT);
	char *other = obj_json("b", "default", 1, NULL, NULL);
	assert_int_equal(store_create(s, &k, other, strlen(other)), STORE_INVALID_CONTENT);
	free(other);
	char *wrongns = obj_json("a", "other", 1, NULL, NULL);
	assert_int_equal(store_create(s, &k, wrongns, strlen(wrongns)), STORE_INVALID_CONTENT);
	free(wrongns);
	store_key_free(&k);
	struct store_key root = key_of(s, "kubelet", "pods", "default", "");
	char *j = obj_json("a", "default", 1, NULL, NULL);
	assert_int_equal(store_create(s, &root, j, strlen(j)), STORE_EMPTY_KEY);
	free(j);
	store_key_free(&root);
}

/* A name with a NUL, cut there, would be another object's key: refused by
 * every write, on every backend. */
static void test_nul_in_name_refused(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_key k = key_of(s, "kubelet", "pods", "default", "a");
	const char *j = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
			"\"a\\u0000b\",\"namespace\":\"default\",\"resourceVersion\":\"3\"}}";
	assert_int_equal(store_create(s, &k, j, strlen(j)), STORE_INVALID_CONTENT);
	put(s, "kubelet", "default", "a", 1, NULL);
	assert_int_equal(store_update(s, &k, j, strlen(j), 3, NULL), STORE_INVALID_CONTENT);
	struct store_view v = view_of("kubelet", "", "", "");
	assert_int_equal(store_view_event(s, &v, &k, STORE_EVENT_PUT, j, strlen(j), 3),
			 STORE_INVALID_CONTENT);
	assert_int_equal(stored_rv(s, "kubelet", "default", "a"), 1);
	store_key_free(&k);
}

static void test_update_rv_rules(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	put(s, "kubelet", "default", "p", 10, NULL);
	struct store_key k = key_of(s, "kubelet", "pods", "default", "p");
	struct buf stored = BUF_INIT;

	char *newer = obj_json("p", "default", 12, NULL, "n2");
	assert_int_equal(store_update(s, &k, newer, strlen(newer), 12, &stored), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "default", "p"), 12);

	char *equal = obj_json("p", "default", 12, "\"x\":\"y\"", "n2");
	assert_int_equal(store_update(s, &k, equal, strlen(equal), 12, &stored), STORE_OK);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(s, &k, &b), STORE_OK);
	assert_memory_equal(b.data, equal, b.len);

	char *older = obj_json("p", "default", 7, NULL, NULL);
	assert_int_equal(store_update(s, &k, older, strlen(older), 7, &stored), STORE_CONFLICT);
	assert_int_equal(stored.len, strlen(equal));
	assert_memory_equal(stored.data, equal, stored.len);
	assert_int_equal(stored_rv(s, "kubelet", "default", "p"), 12);

	struct store_key missing = key_of(s, "kubelet", "pods", "default", "q");
	char *q = obj_json("q", "default", 1, NULL, NULL);
	assert_int_equal(store_update(s, &missing, q, strlen(q), 1, NULL), STORE_NOT_FOUND);
	free(q);
	store_key_free(&missing);
	free(newer);
	free(equal);
	free(older);
	buf_free(&b);
	buf_free(&stored);
	store_key_free(&k);
}

static void test_delete(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	put(s, "kubelet", "default", "p", 1, NULL);
	struct store_key k = key_of(s, "kubelet", "pods", "default", "p");
	assert_int_equal(store_delete(s, &k), STORE_OK);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(s, &k, &b), STORE_NOT_FOUND);
	assert_int_equal(store_delete(s, &k), STORE_OK); /* missing is fine */
	buf_free(&b);
	store_key_free(&k);
}

static void test_list_root(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	assert_int_equal(count_list(s, "kubelet", ""), -1); /* never written: not found */
	put(s, "kubelet", "a", "p1", 1, NULL);
	put(s, "kubelet", "a", "p2", 2, NULL);
	put(s, "kubelet", "b", "p3", 3, NULL);
	put(s, "kube-proxy", "a", "p9", 3, NULL);
	assert_int_equal(count_list(s, "kubelet", ""), 3);
	assert_int_equal(count_list(s, "kubelet", "a"), 2);
	assert_int_equal(count_list(s, "kubelet", "b"), 1);
	assert_int_equal(count_list(s, "kube-proxy", ""), 1);
}

/* ---- views ---- */

static void test_view_listed_vs_never(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kubelet", "", "", "spec.nodeName=n1");
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &v, &st), STORE_NOT_FOUND);
	assert_int_equal(store_replace_view(s, &v, 100, NULL, 0), STORE_OK);
	assert_int_equal(store_get_view(s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 100);
	assert_string_equal(st.field_selector, "spec.nodeName=n1");
	store_view_state_free(&st);
	/* another selector is another view: still never listed */
	struct store_view other = view_of("kubelet", "", "", "spec.nodeName=n2");
	assert_int_equal(store_get_view(s, &other, &st), STORE_NOT_FOUND);
	/* and so is the same view of another component */
	struct store_view comp = view_of("kube-proxy", "", "", "spec.nodeName=n1");
	assert_int_equal(store_get_view(s, &comp, &st), STORE_NOT_FOUND);
}

static void test_view_replace_puts_and_removes(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kubelet", "", "", "");
	struct items it = {0};
	item_add(&it, "a", "p1", 10, NULL);
	item_add(&it, "a", "p2", 11, NULL);
	item_add(&it, "b", "p3", 12, NULL);
	assert_int_equal(store_replace_view(s, &v, 20, it.v, it.n), STORE_OK);
	items_free(&it);
	assert_int_equal(count_list(s, "kubelet", ""), 3);
	assert_int_equal(stored_rv(s, "kubelet", "a", "p2"), 11);

	item_add(&it, "a", "p1", 10, NULL);
	item_add(&it, "b", "p4", 21, NULL);
	assert_int_equal(store_replace_view(s, &v, 30, it.v, it.n), STORE_OK);
	items_free(&it);
	assert_int_equal(count_list(s, "kubelet", ""), 2);
	assert_int_equal(stored_rv(s, "kubelet", "a", "p2"), 0);
	assert_int_equal(stored_rv(s, "kubelet", "b", "p3"), 0);
	assert_int_equal(stored_rv(s, "kubelet", "b", "p4"), 21);
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 30);
	store_view_state_free(&st);
}

static void test_view_replace_never_regresses(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kubelet", "", "", "");
	put(s, "kubelet", "a", "p1", 50, NULL); /* a watch event newer than the list */
	struct items it = {0};
	item_add(&it, "a", "p1", 40, NULL);
	assert_int_equal(store_replace_view(s, &v, 45, it.v, it.n), STORE_OK);
	items_free(&it);
	assert_int_equal(stored_rv(s, "kubelet", "a", "p1"), 50);
}

static void test_view_replace_keeps_newer_than_list(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kubelet", "", "", "");
	put(s, "kubelet", "a", "late", 60, NULL); /* created after the list snapshot */
	put(s, "kubelet", "a", "gone", 30, NULL); /* deleted before it */
	assert_int_equal(store_replace_view(s, &v, 45, NULL, 0), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "a", "late"), 60);
	assert_int_equal(stored_rv(s, "kubelet", "a", "gone"), 0);
}

/* A relist that lacks an object whose stored copy matches the view and is
 * not newer than the list proves that copy stale, whatever other views of
 * the component say; what the view does not match is not its to drop. */
static void test_view_relist_proves_stale(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view app = view_of("kubelet", "", "app=a", "");
	struct store_view tier = view_of("kubelet", "", "tier=x", "");
	struct items it = {0};
	item_add(&it, "ns", "both", 10, "\"app\":\"a\",\"tier\":\"x\"");
	item_add(&it, "ns", "only-app", 11, "\"app\":\"a\"");
	assert_int_equal(store_replace_view(s, &app, 20, it.v, it.n), STORE_OK);
	items_free(&it);
	item_add(&it, "ns", "both", 10, "\"app\":\"a\",\"tier\":\"x\"");
	item_add(&it, "ns", "only-tier", 12, "\"tier\":\"x\"");
	item_add(&it, "ns", "late", 25, "\"app\":\"a\",\"tier\":\"x\"");
	assert_int_equal(store_replace_view(s, &tier, 26, it.v, it.n), STORE_OK);
	items_free(&it);
	/* the app view relists at 24: none of its objects is left */
	assert_int_equal(store_replace_view(s, &app, 24, NULL, 0), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "both"), 0);	  /* stale, tier or not */
	assert_int_equal(stored_rv(s, "kubelet", "ns", "only-app"), 0);	  /* stale */
	assert_int_equal(stored_rv(s, "kubelet", "ns", "only-tier"), 12); /* not the app view's */
	assert_int_equal(stored_rv(s, "kubelet", "ns", "late"), 25);	  /* newer than the list */
	/* the tier view still reads as listed; its next list brings back what lives */
	item_add(&it, "ns", "both", 28, "\"tier\":\"x\"");
	assert_int_equal(store_replace_view(s, &tier, 30, it.v, it.n), STORE_OK);
	items_free(&it);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "both"), 28);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "only-tier"), 0);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "late"), 0);
}

/* An object that left the view's selector through a copy the component got
 * another way (here a single write) is not the view's to drop. */
static void test_view_relist_leaves_what_it_does_not_match(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view app = view_of("kubelet", "", "app=a", "");
	struct items it = {0};
	item_add(&it, "ns", "p", 10, "\"app\":\"a\"");
	assert_int_equal(store_replace_view(s, &app, 20, it.v, it.n), STORE_OK);
	items_free(&it);
	struct store_key k = key_of(s, "kubelet", "pods", "ns", "p");
	char *moved = obj_json("p", "ns", 22, "\"app\":\"b\"", NULL);
	assert_int_equal(store_update(s, &k, moved, strlen(moved), 22, NULL), STORE_OK);
	free(moved);
	store_key_free(&k);
	assert_int_equal(store_replace_view(s, &app, 30, NULL, 0), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "p"), 22);
}

static enum store_err event(struct store *s, const struct store_view *v, enum store_event type,
			    const char *ns, const char *name, uint64_t rv, const char *labels,
			    const char *node)
{
	struct store_key k = key_of(s, v->component, v->gvr.resource, ns, name);
	char *j = obj_json(name, ns, rv, labels, node);
	enum store_err e = store_view_event(s, v, &k, type, j, strlen(j), rv);
	free(j);
	store_key_free(&k);
	return e;
}

/* The repro of the lost deletion: one component, two views of pods (all,
 * and its node's); a pod deleted in the cloud must be gone for both. */
static void test_view_deleted_gone_for_every_view(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view all = view_of("kubelet", "", "", "");
	struct store_view mine = view_of("kubelet", "", "", "spec.nodeName=n1");
	assert_int_equal(store_replace_view(s, &all, 10, NULL, 0), STORE_OK);
	assert_int_equal(store_replace_view(s, &mine, 10, NULL, 0), STORE_OK);
	assert_int_equal(event(s, &mine, STORE_EVENT_PUT, "ns", "p", 11, NULL, "n1"), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "p"), 11);
	assert_int_equal(event(s, &mine, STORE_EVENT_DELETED, "ns", "p", 12, NULL, "n1"), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "p"), 0);
	assert_int_equal(count_list(s, "kubelet", ""), 0);
	/* and relists of both views that lack it keep it gone */
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "q", 13, NULL, "n1"), STORE_OK);
	assert_int_equal(store_replace_view(s, &all, 14, NULL, 0), STORE_OK);
	assert_int_equal(store_replace_view(s, &mine, 14, NULL, 0), STORE_OK);
	assert_int_equal(count_list(s, "kubelet", ""), 0);
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &mine, &st), STORE_OK); /* listed, empty */
	assert_int_equal(st.rv, 14);
	store_view_state_free(&st);
	/* a DELETED of something not held is nothing */
	assert_int_equal(event(s, &all, STORE_EVENT_DELETED, "ns", "zz", 15, NULL, NULL), STORE_OK);
}

/* DELETED on a filtered watch is also how an object leaving the selector is
 * told (with the old content, at the change's rv): when another view already
 * delivered that version, or a newer one, the object stays. */
static void test_view_deleted_keeps_newer_copy(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view all = view_of("kubelet", "", "", "");
	struct store_view app = view_of("kubelet", "", "app=a", "");
	struct items it = {0};
	item_add(&it, "ns", "p", 10, "\"app\":\"a\"");
	item_add(&it, "ns", "q", 10, "\"app\":\"a\"");
	assert_int_equal(store_replace_view(s, &all, 10, it.v, it.n), STORE_OK);
	assert_int_equal(store_replace_view(s, &app, 10, it.v, it.n), STORE_OK);
	items_free(&it);
	/* p relabelled at 15: the unfiltered watch is first */
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "p", 15, "\"app\":\"b\"", NULL),
			 STORE_OK);
	assert_int_equal(event(s, &app, STORE_EVENT_DELETED, "ns", "p", 15, "\"app\":\"a\"", NULL),
			 STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "p"), 15);
	/* q relabelled at 16: the filtered watch is first; the copy goes, and
	 * comes back with the unfiltered watch's event */
	assert_int_equal(event(s, &app, STORE_EVENT_DELETED, "ns", "q", 16, "\"app\":\"a\"", NULL),
			 STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "q"), 0);
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "q", 16, "\"app\":\"b\"", NULL),
			 STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "q"), 16);
	/* the filtered view's relist drops neither: their copies left its selector */
	assert_int_equal(store_replace_view(s, &app, 20, NULL, 0), STORE_OK);
	assert_int_equal(count_list(s, "kubelet", ""), 2);
	/* an event older than the stored copy is not news, and not an error */
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "q", 12, NULL, NULL), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "q"), 16);
	/* a real deletion, at a newer rv, removes it for every view */
	assert_int_equal(event(s, &all, STORE_EVENT_DELETED, "ns", "q", 21, NULL, NULL), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "q"), 0);
}

/* The bytes stored at ns/name of the component's pods equal json. */
static void expect_stored(struct store *s, const char *comp, const char *ns, const char *name,
			  const char *json)
{
	struct store_key k = key_of(s, comp, "pods", ns, name);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(s, &k, &b), STORE_OK);
	assert_int_equal(b.len, strlen(json));
	assert_memory_equal(b.data, json, b.len);
	buf_free(&b);
	store_key_free(&k);
}

static enum store_err event_json(struct store *s, const struct store_view *v, enum store_event type,
				 const char *ns, const char *name, uint64_t rv, const char *json)
{
	struct store_key k = key_of(s, v->component, v->gvr.resource, ns, name);
	enum store_err e = store_view_event(s, v, &k, type, json, strlen(json), rv);
	store_key_free(&k);
	return e;
}

/* RESTORE is the cloud's copy over the hub's own offline edit: written
 * whatever the rv of the stored copy (a local rv can be above the cloud's),
 * where a PUT keeps the newer copy. */
static void test_view_restore_over_newer(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view all = view_of("kubelet", "", "", "");
	assert_int_equal(store_replace_view(s, &all, 5, NULL, 0), STORE_OK);
	char *local = obj_json("p", "ns", 20, "\"edit\":\"local\"", "n1");
	char *put10 = obj_json("p", "ns", 10, "\"edit\":\"put\"", "n1");
	char *cloud10 = obj_json("p", "ns", 10, "\"edit\":\"cloud\"", "n1");
	assert_int_equal(event_json(s, &all, STORE_EVENT_PUT, "ns", "p", 20, local), STORE_OK);
	expect_stored(s, "kubelet", "ns", "p", local);

	/* a PUT older than the stored copy is not news */
	assert_int_equal(event_json(s, &all, STORE_EVENT_PUT, "ns", "p", 10, put10), STORE_OK);
	expect_stored(s, "kubelet", "ns", "p", local);
	/* RESTORE replaces it */
	assert_int_equal(event_json(s, &all, STORE_EVENT_RESTORE, "ns", "p", 10, cloud10),
			 STORE_OK);
	expect_stored(s, "kubelet", "ns", "p", cloud10);
	assert_int_equal(count_list(s, "kubelet", ""), 1);
	/* and from there the rv order holds again */
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "p", 9, NULL, "n1"), STORE_OK);
	expect_stored(s, "kubelet", "ns", "p", cloud10);
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "p", 11, NULL, "n1"), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "p"), 11);
	/* the restored object is the view's: a DELETED of it removes it */
	assert_int_equal(event(s, &all, STORE_EVENT_DELETED, "ns", "p", 12, NULL, "n1"), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "p"), 0);
	free(local);
	free(put10);
	free(cloud10);
}

/* The hub's own edit deleted (store_delete, which on etcd leaves a
 * tombstone at the stored rv): the cloud's copy comes back with RESTORE,
 * whatever its rv, and the object is the view's again. */
static void test_view_restore_after_delete(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view all = view_of("kubelet", "", "", "");
	assert_int_equal(store_replace_view(s, &all, 5, NULL, 0), STORE_OK);
	char *cloud10 = obj_json("q", "ns", 10, "\"edit\":\"cloud\"", "n1");
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "q", 20, NULL, "n1"), STORE_OK);
	struct store_key k = key_of(s, "kubelet", "pods", "ns", "q");
	assert_int_equal(store_delete(s, &k), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "q"), 0);

	assert_int_equal(event_json(s, &all, STORE_EVENT_RESTORE, "ns", "q", 10, cloud10),
			 STORE_OK);
	expect_stored(s, "kubelet", "ns", "q", cloud10);
	assert_int_equal(count_list(s, "kubelet", ""), 1);
	/* the view holds it: its relist without it drops it */
	assert_int_equal(store_replace_view(s, &all, 30, NULL, 0), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "q"), 0);
	store_key_free(&k);
	free(cloud10);

	/* A plain PUT older than the deletion: etcd's tombstone keeps it out.
	 * The contract leaves this open and the disk store keeps no tombstones
	 * (the PUT writes the object again there), so only etcd is held to it;
	 * RESTORE of the same copy brings it back on both. */
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "r", 20, NULL, "n1"), STORE_OK);
	k = key_of(s, "kubelet", "pods", "ns", "r");
	assert_int_equal(store_delete(s, &k), STORE_OK);
	store_key_free(&k);
	assert_int_equal(event(s, &all, STORE_EVENT_PUT, "ns", "r", 10, NULL, "n1"), STORE_OK);
	if (strstr(B->name, "etcd"))
		assert_int_equal(stored_rv(s, "kubelet", "ns", "r"), 0);
	cloud10 = obj_json("r", "ns", 10, "\"edit\":\"cloud\"", "n1");
	assert_int_equal(event_json(s, &all, STORE_EVENT_RESTORE, "ns", "r", 10, cloud10),
			 STORE_OK);
	expect_stored(s, "kubelet", "ns", "r", cloud10);
	free(cloud10);
}

/* RESTORE without a view: the cloud's copy from a single-object read,
 * held as the read's copy (as update() keeps it). */
static void test_restore_single_read(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	put(s, "kubelet", "ns", "p", 20, "\"edit\":\"local\"");
	struct store_key k = key_of(s, "kubelet", "pods", "ns", "p");
	char *cloud10 = obj_json("p", "ns", 10, "\"edit\":\"cloud\"", "n1");
	assert_int_equal(
	    store_view_event(s, NULL, &k, STORE_EVENT_RESTORE, cloud10, strlen(cloud10), 10),
	    STORE_OK);
	expect_stored(s, "kubelet", "ns", "p", cloud10);
	/* held as a read's copy: the rv order holds again */
	char *newer = obj_json("p", "ns", 11, NULL, "n1");
	assert_int_equal(store_update(s, &k, newer, strlen(newer), 11, NULL), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "ns", "p"), 11);
	/* and after a delete it comes back */
	assert_int_equal(store_delete(s, &k), STORE_OK);
	assert_int_equal(
	    store_view_event(s, NULL, &k, STORE_EVENT_RESTORE, cloud10, strlen(cloud10), 10),
	    STORE_OK);
	expect_stored(s, "kubelet", "ns", "p", cloud10);
	assert_int_equal(count_list(s, "kubelet", ""), 1);
	free(newer);
	free(cloud10);
	store_key_free(&k);
}

static uint64_t stored_node_rv(struct store *s, const char *comp, const char *name)
{
	struct store_key k = key_of(s, comp, "nodes", "", name);
	struct buf b = BUF_INIT;
	uint64_t rv = 0;
	if (store_get(s, &k, &b) == STORE_OK)
		assert_int_equal(kube_meta_rv(b.data, b.len, &rv), 0);
	buf_free(&b);
	store_key_free(&k);
	return rv;
}

/* The same rules for a cluster-scoped resource. */
static void test_view_rules_cluster_scoped(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view all = {"kubelet", {"", "v1", "nodes"}, "", "", ""};
	struct store_view mine = {"kubelet", {"", "v1", "nodes"}, "", "", "metadata.name=n1"};
	struct items it = {0};
	item_add(&it, "", "n1", 10, NULL);
	item_add(&it, "", "n2", 10, NULL);
	assert_int_equal(store_replace_view(s, &all, 10, it.v, it.n), STORE_OK);
	items_free(&it);
	item_add(&it, "", "n1", 10, NULL);
	assert_int_equal(store_replace_view(s, &mine, 10, it.v, it.n), STORE_OK);
	items_free(&it);
	assert_int_equal(event(s, &mine, STORE_EVENT_DELETED, "", "n1", 11, NULL, NULL), STORE_OK);
	assert_int_equal(stored_node_rv(s, "kubelet", "n1"), 0);
	assert_int_equal(stored_node_rv(s, "kubelet", "n2"), 10);
	item_add(&it, "", "n1", 12, NULL);
	assert_int_equal(store_replace_view(s, &all, 12, it.v, it.n), STORE_OK); /* n1 again */
	items_free(&it);
	assert_int_equal(stored_node_rv(s, "kubelet", "n2"), 0); /* stale */
	assert_int_equal(stored_node_rv(s, "kubelet", "n1"), 12);
	assert_int_equal(store_replace_view(s, &mine, 13, NULL, 0), STORE_OK);
	assert_int_equal(stored_node_rv(s, "kubelet", "n1"), 0); /* matches mine, not newer */
}

static void test_view_namespaced_leaves_others(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	put(s, "kubelet", "b", "pb", 1, NULL);
	struct store_view va = view_of("kubelet", "a", "", "");
	struct items it = {0};
	item_add(&it, "a", "pa", 5, NULL);
	assert_int_equal(store_replace_view(s, &va, 10, it.v, it.n), STORE_OK);
	items_free(&it);
	assert_int_equal(store_replace_view(s, &va, 11, NULL, 0), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "a", "pa"), 0);
	assert_int_equal(stored_rv(s, "kubelet", "b", "pb"), 1);
	/* an item outside the view's namespace is refused */
	item_add(&it, "b", "px", 5, NULL);
	assert_int_equal(store_replace_view(s, &va, 12, it.v, it.n), STORE_INVALID_CONTENT);
	items_free(&it);
	assert_int_equal(stored_rv(s, "kubelet", "b", "px"), 0);
}

static void test_view_bookmark_rv(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kube-proxy", "", "!service.kubernetes.io/headless", "");
	assert_int_equal(store_set_view_rv(s, &v, 5), STORE_NOT_FOUND);
	assert_int_equal(store_replace_view(s, &v, 10, NULL, 0), STORE_OK);
	assert_int_equal(store_set_view_rv(s, &v, 15), STORE_OK);
	assert_int_equal(store_set_view_rv(s, &v, 12), STORE_OK); /* older: ignored */
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 15);
	store_view_state_free(&st);
}

static void test_view_selector_canonical(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v1 = view_of("kubelet", "", "b=2,a in (y,x)", "");
	struct store_view v2 = view_of("kubelet", "", "a in (x,y), b==2", "");
	assert_int_equal(store_replace_view(s, &v1, 7, NULL, 0), STORE_OK);
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &v2, &st), STORE_OK);
	assert_int_equal(st.rv, 7);
	store_view_state_free(&st);
	struct store_view bad = view_of("kubelet", "", "a in (x", "");
	assert_int_equal(store_replace_view(s, &bad, 7, NULL, 0), STORE_BAD_KEY);
	struct store_view badf = view_of("kubelet", "", "", "a=b=c");
	assert_int_equal(store_replace_view(s, &badf, 7, NULL, 0), STORE_BAD_KEY);
}

static int count_views(void *ctx, const struct store_view_state *v)
{
	(void)v;
	(*(int *)ctx)++;
	return 0;
}

static void test_list_views(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view a = view_of("kubelet", "", "", "spec.nodeName=n1");
	struct store_view b = view_of("kubelet", "kube-system", "", "metadata.name=x");
	assert_int_equal(store_replace_view(s, &a, 1, NULL, 0), STORE_OK);
	assert_int_equal(store_replace_view(s, &b, 2, NULL, 0), STORE_OK);
	struct store_gvr gvr = {"", "v1", "pods"};
	int n = 0;
	assert_int_equal(store_list_views(s, "kubelet", &gvr, count_views, &n), STORE_OK);
	assert_int_equal(n, 2);
	n = 0;
	assert_int_equal(store_list_views(s, "coredns", &gvr, count_views, &n), STORE_OK);
	assert_int_equal(n, 0);
}

static void test_view_refuses_bad_names(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kubelet", "", "", "");
	const char *bad[] = {"..", "a/b", "", "tmp_x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct items it = {0};
		item_add(&it, "ns", "fine", 1, NULL);
		it.v[0].name = bad[i];
		assert_int_equal(store_replace_view(s, &v, 5, it.v, it.n), STORE_BAD_KEY);
		items_free(&it);
	}
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &v, &st), STORE_NOT_FOUND);
	assert_int_equal(count_list(s, "kubelet", ""), -1);
}

static void test_replace_session_abort(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	put(s, "kubelet", "a", "kept", 5, NULL);
	struct store_view v = view_of("kubelet", "", "", "");
	struct store_replace *r;
	assert_int_equal(store_replace_begin(s, &v, &r), STORE_OK);
	struct items it = {0};
	item_add(&it, "a", "new", 10, NULL);
	assert_int_equal(store_replace_add(r, &it.v[0]), STORE_OK);
	items_free(&it);
	store_replace_abort(r);
	/* nothing happened: no view, the old object stands, the new one absent */
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &v, &st), STORE_NOT_FOUND);
	assert_int_equal(stored_rv(s, "kubelet", "a", "kept"), 5);
	assert_int_equal(stored_rv(s, "kubelet", "a", "new"), 0);
}

static void test_replace_session_later_copy_wins(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kubelet", "", "", "");
	struct store_replace *r;
	assert_int_equal(store_replace_begin(s, &v, &r), STORE_OK);
	struct items it = {0};
	item_add(&it, "a", "twice", 7, NULL);
	item_add(&it, "a", "other", 8, NULL);
	item_add(&it, "a", "twice", 9, NULL);
	for (size_t i = 0; i < it.n; i++)
		assert_int_equal(store_replace_add(r, &it.v[i]), STORE_OK);
	items_free(&it);
	assert_int_equal(store_replace_commit(r, 10), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "a", "twice"), 9);
	assert_int_equal(stored_rv(s, "kubelet", "a", "other"), 8);
}

static char *iterate(struct store *s, const char *ns, const char *start)
{
	struct store_key_info info = {"kubelet", "", "v1", "pods", ns, ""};
	struct store_key root;
	assert_int_equal(store_key_build(s, &info, &root), STORE_OK);
	struct store_iter *it;
	struct buf seen = BUF_INIT, data = BUF_INIT;
	enum store_err e = store_iter_begin(s, &root, start, &it);
	store_key_free(&root);
	if (e != STORE_OK)
		return NULL;
	const struct store_key *k;
	while ((e = store_iter_next(it, &k, &data)) == STORE_OK) {
		struct kube_meta m;
		assert_int_equal(kube_meta_parse(data.data, data.len, &m), 0);
		assert_string_equal(m.name, k->name);
		kube_meta_free(&m);
		buf_printf(&seen, "%s%s/%s", seen.len ? " " : "", k->namespace, k->name);
	}
	assert_int_equal(e, STORE_NOT_FOUND);
	store_iter_free(it);
	buf_free(&data);
	return buf_steal(&seen);
}

static void test_iterate_in_order(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	assert_null(iterate(s, "", NULL)); /* nothing there yet */
	put(s, "kubelet", "b", "p3", 3, NULL);
	put(s, "kubelet", "a", "p2", 2, NULL);
	put(s, "kubelet", "a", "p1", 1, NULL);
	put(s, "kubelet", "ab", "p0", 1, NULL);
	const struct {
		const char *ns, *start, *want;
	} cases[] = {
	    {"", NULL, "a/p1 a/p2 ab/p0 b/p3"},
	    {"", "a/p1", "a/p2 ab/p0 b/p3"},
	    {"", "a/p2", "ab/p0 b/p3"},
	    {"", "a/zzz", "ab/p0 b/p3"},
	    {"", "b/p3", ""},
	    {"a", NULL, "a/p1 a/p2"},
	    {"a", "p1", "a/p2"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *got = iterate(s, cases[i].ns, cases[i].start);
		assert_non_null(got);
		assert_string_equal(got, cases[i].want);
		free(got);
	}
}

/* Names the iteration with selectors ls and fs gives of kubelet's pods,
 * checked as local_list checks them (the store may give more). */
static char *iterate_matching(struct store *s, const char *ls, const char *fs)
{
	char *names = NULL;

	assert_int_equal(
	    test_iterate_selected(s, "kubelet", "pods", "", ls, fs, true, &names, NULL, NULL),
	    STORE_OK);
	assert_non_null(names);
	return names;
}

static void write_pod(struct store *s, const char *comp, const char *name, uint64_t rv,
		      const char *labels, const char *node, bool update)
{
	struct store_key k = key_of(s, comp, "pods", "a", name);
	char *j = obj_json(name, "a", rv, labels, node);
	assert_int_equal(update ? store_update(s, &k, j, strlen(j), rv, NULL)
				: store_create(s, &k, j, strlen(j)),
			 STORE_OK);
	free(j);
	store_key_free(&k);
}

/* An iteration with selectors may leave out only objects that do not
 * match, however they were written - created, listed, updated, listed
 * again by a second component - and an object whose labels changed is
 * found by its new labels, not its old ones. */
static void test_iterate_matching(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kubelet", "", NULL, NULL);
	struct store_replace *r;
	char *j1 = obj_json("p1", "a", 2, "\"app\":\"web\"", "node1");
	char *j2 = obj_json("p2", "a", 5, "\"app\":\"db\"", "node2");
	char *j3 = obj_json("p3", "a", 6, "\"app\":\"web\"", "node1");
	struct store_item listed[] = {{"a", "p1", 2, j1, strlen(j1)},
				      {"a", "p2", 5, j2, strlen(j2)},
				      {"a", "p3", 6, j3, strlen(j3)}};

	write_pod(s, "kubelet", "p1", 2, "\"app\":\"web\"", "node1", false);
	assert_int_equal(store_replace_begin(s, &v, &r), STORE_OK);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(store_replace_add(r, &listed[i]), STORE_OK);
	assert_int_equal(store_replace_commit(r, 7), STORE_OK);
	/* p2 changes its labels */
	write_pod(s, "kubelet", "p2", 8, "\"app\":\"web\",\"v\":\"2\"", "node2", true);
	/* coredns lists p3 too, at the same rv */
	struct store_view cv = view_of("coredns", "", NULL, NULL);
	assert_int_equal(store_replace_begin(s, &cv, &r), STORE_OK);
	assert_int_equal(store_replace_add(r, &listed[2]), STORE_OK);
	assert_int_equal(store_replace_commit(r, 9), STORE_OK);

	static const struct {
		const char *ls, *fs, *want;
	} cases[] = {
	    {"app=web", "", "p1 p2 p3"},
	    {"app=db", "", ""},
	    {"v=2", "", "p2"},
	    {"", "spec.nodeName=node1", "p1 p3"},
	    {"app=web", "spec.nodeName=node2", "p2"},
	    {"app in (web,db),!v", "", "p1 p3"},
	    {"", "metadata.name=p3", "p3"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *got = iterate_matching(s, cases[i].ls, cases[i].fs);
		if (strcmp(got, cases[i].want))
			fail_msg("%s / %s: got \"%s\", want \"%s\"", cases[i].ls, cases[i].fs, got,
				 cases[i].want);
		free(got);
	}
	free(j1);
	free(j2);
	free(j3);
}

static int collect_name(void *ctx, const char *name)
{
	struct buf *b = ctx;
	buf_printf(b, "%s%s", b->len ? " " : "", name);
	return 0;
}

static void test_list_components(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	put(s, "kubelet", "a", "p1", 1, NULL);
	put(s, "coredns", "a", "p2", 1, NULL);
	struct buf names = BUF_INIT;
	assert_int_equal(store_list_components(s, collect_name, &names), STORE_OK);
	assert_non_null(strstr(names.data, "kubelet"));
	assert_non_null(strstr(names.data, "coredns"));
	buf_free(&names);
}

/* ---- counting ---- */

static uint64_t counted(struct store *s)
{
	uint64_t n = 12345;
	assert_int_equal(store_count_objects(s, &n), STORE_OK);
	return n;
}

static void test_count_objects(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	assert_int_equal(counted(s), 0);
	put(s, "kubelet", "a", "p1", 1, NULL);
	put(s, "kubelet", "a", "p2", 1, NULL);
	/* The same object for a second component, written as the cache manager
	 * writes a watch event (update, else create): on etcd the copy is
	 * shared and create() would find it present. */
	struct store_key ck = key_of(s, "coredns", "pods", "a", "p1");
	char *cj = obj_json("p1", "a", 1, NULL, NULL);
	enum store_err ce = store_update(s, &ck, cj, strlen(cj), 1, NULL);
	if (ce == STORE_NOT_FOUND)
		ce = store_create(s, &ck, cj, strlen(cj));
	assert_int_equal(ce, STORE_OK);
	free(cj);
	store_key_free(&ck);
	/* cluster-scoped: one level less deep */
	struct store_key nk = key_of(s, "kubelet", "nodes", "", "n1");
	char *j = obj_json("n1", "", 2, NULL, NULL);
	assert_int_equal(store_create(s, &nk, j, strlen(j)), STORE_OK);
	free(j);
	store_key_free(&nk);
	struct items it = {0};
	item_add(&it, "b", "p3", 3, NULL);
	item_add(&it, "b", "p4", 3, NULL);
	item_add(&it, "b", "p5", 3, NULL);
	struct store_view v = view_of("kubelet", "b", "", "");
	assert_int_equal(store_replace_view(s, &v, 4, it.v, it.n), STORE_OK);
	items_free(&it);
	/* cluster info is not an object of a component */
	const char *ver = "{\"major\":\"1\"}";
	assert_int_equal(store_save_cluster_info(s, "/version", ver, strlen(ver)), STORE_OK);
	/* kubelet: p1 p2 n1 p3 p4 p5; coredns: p1 */
	assert_int_equal(counted(s), 7);

	struct store_key k = key_of(s, "kubelet", "pods", "a", "p1");
	assert_int_equal(store_delete(s, &k), STORE_OK);
	store_key_free(&k);
	assert_int_equal(counted(s), 6); /* coredns still holds its p1 */
	item_add(&it, "b", "p3", 5, NULL);
	assert_int_equal(store_replace_view(s, &v, 5, it.v, it.n), STORE_OK);
	items_free(&it);
	assert_int_equal(counted(s), 4);
	assert_int_equal(store_delete_component(s, "kubelet"), STORE_OK);
	assert_int_equal(counted(s), 1);
	s = ((struct fixture *)*state)->s = B->reopen(B->ctx, s);
	assert_non_null(s);
	assert_int_equal(counted(s), 1);
}

/* ---- component operations ---- */

struct keys_seen {
	int n;
	char names[8][64];
};

static int key_fn(void *ctx, const struct store_key *k)
{
	struct keys_seen *ks = ctx;
	if (ks->n < 8)
		snprintf(ks->names[ks->n], 64, "%s/%s", k->namespace, k->name);
	ks->n++;
	return 0;
}

static void test_list_keys(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_gvr gvr = {"", "v1", "pods"};
	struct keys_seen ks = {0};
	assert_int_equal(store_list_keys(s, "kubelet", &gvr, key_fn, &ks), STORE_NOT_FOUND);
	put(s, "kubelet", "a", "p1", 1, NULL);
	put(s, "kubelet", "b", "p2", 1, NULL);
	put(s, "coredns", "a", "p3", 1, NULL);
	assert_int_equal(store_list_keys(s, "kubelet", &gvr, key_fn, &ks), STORE_OK);
	assert_int_equal(ks.n, 2);
	assert_string_equal(ks.names[0], "a/p1");
	assert_string_equal(ks.names[1], "b/p2");
	assert_int_equal(store_list_keys(s, "", &gvr, key_fn, &ks), STORE_EMPTY_KEY);
}

static void test_delete_component(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	put(s, "kubelet", "a", "p1", 1, NULL);
	put(s, "coredns", "a", "p2", 1, NULL);
	struct store_view v = view_of("kubelet", "", "", "");
	assert_int_equal(store_replace_view(s, &v, 3, NULL, 0), STORE_OK);
	assert_int_equal(store_delete_component(s, "kubelet"), STORE_OK);
	assert_int_equal(stored_rv(s, "kubelet", "a", "p1"), 0);
	assert_int_equal(stored_rv(s, "coredns", "a", "p2"), 1);
	struct store_view_state st;
	assert_int_equal(store_get_view(s, &v, &st), STORE_NOT_FOUND);
	assert_int_equal(store_delete_component(s, "kubelet"), STORE_OK);
	assert_int_equal(store_delete_component(s, ""), STORE_EMPTY_KEY);
}

static void test_cluster_info(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct buf b = BUF_INIT;
	assert_int_equal(store_get_cluster_info(s, "/version", &b), STORE_NOT_FOUND);
	const char *v1 = "{\"major\":\"1\",\"minor\":\"30\"}";
	const char *v2 = "{\"major\":\"1\",\"minor\":\"31\"}";
	assert_int_equal(store_save_cluster_info(s, "/version", v1, strlen(v1)), STORE_OK);
	assert_int_equal(store_save_cluster_info(s, "/version", v2, strlen(v2)), STORE_OK);
	assert_int_equal(store_get_cluster_info(s, "/version", &b), STORE_OK);
	assert_string_equal(b.data, v2);
	const char *d = "{\"kind\":\"APIResourceList\"}";
	assert_int_equal(store_save_cluster_info(s, "/apis/discovery.k8s.io/v1", d, strlen(d)),
			 STORE_OK);
	buf_reset(&b);
	assert_int_equal(store_get_cluster_info(s, "/apis/discovery.k8s.io/v1", &b), STORE_OK);
	assert_string_equal(b.data, d);
	assert_int_equal(store_save_cluster_info(s, "/../../etc/passwd", d, strlen(d)),
			 STORE_BAD_KEY);
	assert_int_equal(store_save_cluster_info(s, "relative", d, strlen(d)), STORE_BAD_KEY);
	assert_int_equal(store_save_cluster_info(s, "/api", "", 0), STORE_EMPTY_CONTENT);
	buf_free(&b);
}

/* ---- concurrency and durability ---- */

struct writer_arg {
	struct store *s;
	int id;
	int errors;
};

#define WRITERS 8
#define WRITES	40

static void *writer(void *p)
{
	struct writer_arg *a = p;
	char name[32];
	for (int i = 1; i <= WRITES; i++) {
		/* half the writers share one key, half write their own */
		snprintf(name, sizeof name, "%s", a->id % 2 ? "shared" : "own");
		if (a->id % 2 == 0)
			snprintf(name, sizeof name, "own-%d", a->id);
		uint64_t rv = (uint64_t)i * WRITERS + (uint64_t)a->id;
		struct store_key_info info = {"kubelet", "", "v1", "pods", "c", name};
		struct store_key k;
		if (store_key_build(a->s, &info, &k) != STORE_OK) {
			a->errors++;
			continue;
		}
		char *j = obj_json(name, "c", rv, NULL, NULL);
		enum store_err e = store_update(a->s, &k, j, strlen(j), rv, NULL);
		if (e == STORE_NOT_FOUND) {
			e = store_create(a->s, &k, j, strlen(j));
			if (e == STORE_EXISTS)
				e = store_update(a->s, &k, j, strlen(j), rv, NULL);
		}
		if (e != STORE_OK && e != STORE_CONFLICT)
			a->errors++;
		free(j);
		store_key_free(&k);
	}
	return NULL;
}

static void test_concurrent_writers(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	pthread_t t[WRITERS];
	struct writer_arg a[WRITERS];
	for (int i = 0; i < WRITERS; i++) {
		a[i] = (struct writer_arg){s, i, 0};
		pthread_create(&t[i], NULL, writer, &a[i]);
	}
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].errors, 0);
	}
	/* the shared key ends at the highest rv any writer offered */
	uint64_t max = 0;
	for (int i = 1; i < WRITERS; i += 2)
		if ((uint64_t)WRITES * WRITERS + (uint64_t)i > max)
			max = (uint64_t)WRITES * WRITERS + (uint64_t)i;
	assert_int_equal(stored_rv(s, "kubelet", "c", "shared"), max);
	for (int i = 0; i < WRITERS; i += 2) {
		char name[32];
		snprintf(name, sizeof name, "own-%d", i);
		assert_int_equal(stored_rv(s, "kubelet", "c", name),
				 (uint64_t)WRITES * WRITERS + (uint64_t)i);
	}
}

static void test_survives_reopen(void **state)
{
	struct fixture *f = *state;
	put(f->s, "kubelet", "a", "p1", 3, NULL);
	struct store_view v = view_of("kubelet", "", "", "spec.nodeName=n1");
	assert_int_equal(store_replace_view(f->s, &v, 9, NULL, 0), STORE_OK);
	const char *ver = "{\"major\":\"1\"}";
	assert_int_equal(store_save_cluster_info(f->s, "/version", ver, strlen(ver)), STORE_OK);
	f->s = B->reopen(B->ctx, f->s);
	assert_non_null(f->s);
	assert_int_equal(stored_rv(f->s, "kubelet", "a", "p1"), 3);
	struct store_view_state st;
	assert_int_equal(store_get_view(f->s, &v, &st), STORE_OK);
	assert_int_equal(st.rv, 9);
	store_view_state_free(&st);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get_cluster_info(f->s, "/version", &b), STORE_OK);
	buf_free(&b);
}

/* ---- damaged objects (storage/store.h) ---- */

struct names {
	char v[256];
};

static int name_fn(void *ctx, const struct store_key *k, const char *data, size_t len)
{
	struct names *n = ctx;
	assert_null(store_object_fault(k->namespace, k->name, data, len));
	size_t at = strlen(n->v);
	snprintf(n->v + at, sizeof n->v - at, "%s%s/%s", at ? "," : "", k->namespace, k->name);
	return 0;
}

static void listed_names(struct store *s, struct names *out, struct names *iterated)
{
	struct store_key_info info = {"kubelet", "", "v1", "pods", "", ""};
	struct store_key root;
	assert_int_equal(store_key_build(s, &info, &root), STORE_OK);
	memset(out, 0, sizeof *out);
	assert_int_equal(store_list(s, &root, name_fn, out), STORE_OK);
	memset(iterated, 0, sizeof *iterated);
	struct store_iter *it;
	assert_int_equal(store_iter_begin(s, &root, NULL, &it), STORE_OK);
	const struct store_key *k;
	struct buf b = BUF_INIT;
	enum store_err e;
	while ((e = store_iter_next(it, &k, &b)) == STORE_OK)
		name_fn(iterated, k, b.data, b.len);
	assert_int_equal(e, STORE_NOT_FOUND);
	store_iter_free(it);
	buf_free(&b);
	store_key_free(&root);
}

/* Garbage written at an object's key is never served: a get says
 * STORE_DAMAGED, a list and an iterator skip it (a client would otherwise
 * get invalid JSON, or an object under another's name), verify names it,
 * and the next list of its view rewrites it, though at the same rv. */
static void test_damaged_objects_not_served_and_relisted(void **state)
{
	struct store *s = ((struct fixture *)*state)->s;
	struct store_view v = view_of("kubelet", "", "", "");
	struct items it = {0};
	item_add(&it, "a", "p1", 10, NULL);
	item_add(&it, "a", "p2", 11, NULL);
	item_add(&it, "a", "p3", 12, NULL);
	assert_int_equal(store_replace_view(s, &v, 20, it.v, it.n), STORE_OK);

	size_t big_len = 1400 * 1024;
	char *big = malloc(big_len);
	assert_non_null(big);
	memset(big, 'x', big_len);
	char *renamed = obj_json("p1", "a", 11, NULL, NULL);
	char *moved = obj_json("p2", "b", 11, NULL, NULL);
	static const char proto[] = "k8s\0\n\x09\n\x02v1\x12\x03Pod\x12\x00";
	const struct {
		const char *what, *data;
		size_t len;
	} garbage[] = {
	    {"not JSON", "not json {", 10},
	    {"NUL bytes", "\0\0\0\0\0\0\0\0", 8},
	    {"1.4 MB of x", big, big_len},
	    {"a kube-apiserver's protobuf", proto, sizeof proto - 1},
	    {"another object's name", renamed, strlen(renamed)},
	    {"another namespace", moved, strlen(moved)},
	    {"half an object", it.data[1], it.v[1].len / 2},
	};
	struct store_key k = key_of(s, "kubelet", "pods", "a", "p2");
	for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
		print_message("%s: %s\n", B->name, garbage[i].what);
		B->poke(B->ctx, s, &k, garbage[i].data, garbage[i].len);
		uint64_t seen = store_damaged_reads();
		struct buf b = BUF_INIT;
		assert_int_equal(store_get(s, &k, &b), STORE_DAMAGED);
		assert_int_equal(b.len, 0);
		buf_free(&b);
		struct names listed, iterated;
		listed_names(s, &listed, &iterated);
		assert_string_equal(listed.v, "a/p1,a/p3");
		assert_string_equal(iterated.v, "a/p1,a/p3");
		assert_true(store_damaged_reads() >= seen + 3);
		assert_true(B->verify_names(B->ctx, s, "p2") > 0);

		/* the cloud's list has not changed: same rvs, same list rv */
		assert_int_equal(store_replace_view(s, &v, 20, it.v, it.n), STORE_OK);
		assert_int_equal(store_get(s, &k, &b), STORE_OK);
		assert_int_equal(b.len, it.v[1].len);
		assert_memory_equal(b.data, it.data[1], b.len);
		buf_free(&b);
		listed_names(s, &listed, &iterated);
		assert_string_equal(listed.v, "a/p1,a/p2,a/p3");
		assert_int_equal(B->verify_names(B->ctx, s, "p2"), 0);
	}
	store_key_free(&k);
	free(big);
	free(renamed);
	free(moved);
	items_free(&it);
}

/* Damage no read has met - here written after a restart, which forgets
 * what the reads found - is found by the scrub, which reads every collection of
 * every component, and the next list of its view rewrites it although
 * the list's rvs say nothing changed.  The impostor keeps p2's rv, so
 * that no backend sees a changed rv in its own records. */
static void test_scrub_finds_unread_damage(void **state)
{
	struct fixture *f = *state;
	struct store_view v = view_of("kubelet", "", "", "");
	struct store_view sv = {"kube-proxy", {"", "v1", "services"}, "", "", ""};
	struct items it = {0}, svc = {0};
	item_add(&it, "a", "p1", 10, NULL);
	item_add(&it, "a", "p2", 11, NULL);
	item_add(&it, "a", "p3", 12, NULL);
	item_add(&svc, "a", "s1", 5, NULL);
	assert_int_equal(store_replace_view(f->s, &v, 20, it.v, it.n), STORE_OK);
	assert_int_equal(store_replace_view(f->s, &sv, 6, svc.v, svc.n), STORE_OK);

	struct store_scrub_stats st;
	assert_int_equal(store_scrub(f->s, NULL, &st), STORE_OK);
	assert_int_equal(st.objects, 4);
	assert_int_equal(st.damaged, 0);

	/* a restarted hub: nothing read, nothing remembered */
	f->s = B->reopen(B->ctx, f->s);
	char *impostor = obj_json("p1", "a", 11, NULL, NULL);
	struct store_key k = key_of(f->s, "kubelet", "pods", "a", "p2");
	B->poke(B->ctx, f->s, &k, impostor, strlen(impostor));

	uint64_t runs = store_scrubs_done(), reads = store_damaged_reads();
	assert_int_equal(store_scrub(f->s, NULL, &st), STORE_OK);
	assert_int_equal(st.objects, 4);
	assert_int_equal(st.damaged, 1);
	assert_true(st.bytes >= strlen(impostor) + svc.v[0].len);
	assert_int_equal(store_scrubs_done(), runs + 1);
	assert_int_equal(store_damaged_reads(), reads + 1);

	/* the cloud's list has not changed: same rvs, same list rv */
	assert_int_equal(store_replace_view(f->s, &v, 20, it.v, it.n), STORE_OK);
	struct buf b = BUF_INIT;
	assert_int_equal(store_get(f->s, &k, &b), STORE_OK);
	assert_int_equal(b.len, it.v[1].len);
	assert_memory_equal(b.data, it.data[1], b.len);
	buf_free(&b);
	assert_int_equal(store_scrub(f->s, NULL, &st), STORE_OK);
	assert_int_equal(st.objects, 4);
	assert_int_equal(st.damaged, 0);

	/* a hub stopping: the scrub gives up before its next object, and
	 * is not counted as done */
	atomic_bool cancel = true;
	runs = store_scrubs_done();
	assert_int_equal(store_scrub(f->s, &cancel, &st), STORE_UNAVAILABLE);
	assert_int_equal(st.objects, 0);
	assert_int_equal(store_scrubs_done(), runs);

	store_key_free(&k);
	free(impostor);
	items_free(&it);
	items_free(&svc);
}

int store_contract_run(struct contract_backend *b)
{
	B = b;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_key_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nul_in_name_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_update_rv_rules, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_root, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_listed_vs_never, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_replace_puts_and_removes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_replace_never_regresses, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_replace_keeps_newer_than_list, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_view_relist_proves_stale, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_relist_leaves_what_it_does_not_match, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_view_deleted_gone_for_every_view, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_deleted_keeps_newer_copy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_restore_over_newer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_restore_after_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restore_single_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_rules_cluster_scoped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_namespaced_leaves_others, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_bookmark_rv, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_selector_canonical, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_views, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_refuses_bad_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_session_abort, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_session_later_copy_wins, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_iterate_in_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_iterate_matching, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_components, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_count_objects, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delete_component, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cluster_info, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_survives_reopen, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_damaged_objects_not_served_and_relisted, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_scrub_finds_unread_damage, setup, teardown),
	};
	return cmocka_run_group_tests_name(b->name, tests, NULL, NULL);
}
