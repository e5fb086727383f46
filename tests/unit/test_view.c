/*
 * test_view.c - view records: canonical identity, the JSON view-set file
 * (encode, decode, refusal of malformed files), put/find, and evaluation of
 * a view against objects.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/store.h"
#include "storage/view.h"
#include "testutil.h"
#include "util/buf.h"

/* ---- helpers ---- */

static struct store_view make_view(const char *ns, const char *ls, const char *fs)
{
	struct store_view v = {"kubelet", {"", "v1", "pods"}, ns, ls, fs};
	return v;
}

/* The canonical record of a view; fails the test on error. */
static void canon(const char *ns, const char *ls, const char *fs, struct view_rec *out)
{
	struct store_view v = make_view(ns, ls, fs);
	char *err = NULL;
	int rc = view_canonical(&v, out, &err);
	if (rc < 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "view_canonical(%s | %s | %s): %s", ns ? ns : "(null)",
			 ls ? ls : "(null)", fs ? fs : "(null)", err ? err : "ENOMEM");
		free(err);
		fail_msg("%s", msg);
	}
	assert_null(err);
}

static void assert_same_identity(const char *ns1, const char *ls1, const char *fs1, const char *ns2,
				 const char *ls2, const char *fs2)
{
	struct view_rec a, b;
	canon(ns1, ls1, fs1, &a);
	canon(ns2, ls2, fs2, &b);
	assert_string_equal(a.namespace, b.namespace);
	assert_string_equal(a.label_selector, b.label_selector);
	assert_string_equal(a.field_selector, b.field_selector);
	view_rec_free(&a);
	view_rec_free(&b);
}

static void assert_different_identity(const char *ns1, const char *ls1, const char *fs1,
				      const char *ns2, const char *ls2, const char *fs2)
{
	struct view_rec a, b;
	canon(ns1, ls1, fs1, &a);
	canon(ns2, ls2, fs2, &b);
	int same = !strcmp(a.namespace, b.namespace) &&
		   !strcmp(a.label_selector, b.label_selector) &&
		   !strcmp(a.field_selector, b.field_selector);
	view_rec_free(&a);
	view_rec_free(&b);
	assert_false(same);
}

static int decode_str(const char *json, struct view_set *out)
{
	return view_set_decode(json, strlen(json), out);
}

static void assert_decode_fails(const char *json)
{
	struct view_set set;
	memset(&set, 0x5a, sizeof set);
	int rc = decode_str(json, &set);
	if (rc == 0) {
		size_t n = set.n;
		view_set_free(&set);
		fail_msg("decoded (%zu views), want an error: %s", n, json);
	}
	assert_int_equal(rc, -1);
	assert_null(set.v);
	assert_int_equal(set.n, 0);
	view_set_free(&set); /* harmless on the emptied set */
}

#define V(ns, ls, fs, rv)                                                                          \
	"{\"namespace\":\"" ns "\",\"labelSelector\":\"" ls "\",\"fieldSelector\":\"" fs           \
	"\",\"resourceVersion\":\"" rv "\"}"

/* ---- view_canonical ---- */

static void test_canonical_plain(void **state)
{
	struct view_rec r;
	canon("", "", "", &r);
	assert_string_equal(r.namespace, "");
	assert_string_equal(r.label_selector, "");
	assert_string_equal(r.field_selector, "");
	assert_int_equal(r.rv, 0);
	view_rec_free(&r);
	assert_null(r.namespace);

	canon(NULL, NULL, NULL, &r);
	assert_string_equal(r.namespace, "");
	assert_string_equal(r.label_selector, "");
	assert_string_equal(r.field_selector, "");
	view_rec_free(&r);

	canon("kube-system", "app=web", "spec.nodeName=n1", &r);
	assert_string_equal(r.namespace, "kube-system");
	assert_string_equal(r.label_selector, "app=web");
	assert_string_equal(r.field_selector, "spec.nodeName=n1");
	view_rec_free(&r);
}

static void test_canonical_equivalences(void **state)
{
	assert_same_identity(NULL, NULL, NULL, "", "", "");
	assert_same_identity("", "b=2,a=1", "", "", "a=1,b=2", "");
	assert_same_identity("", "a==1", "", "", "a=1", "");
	assert_same_identity("", "a in (x)", "", "", "a=x", "");
	assert_same_identity("", "a notin (x)", "", "", "a!=x", "");
	assert_same_identity("", "a in (y,x,x)", "", "", "a in (x,y)", "");
	assert_same_identity("", "  a = 1 ,  b  ", "", "", "b,a=1", "");
	assert_same_identity("", "a=1,a=1", "", "", "a=1", "");
	assert_same_identity("", "", "spec.nodeName==n1", "", "", "spec.nodeName=n1");
	assert_same_identity("", "", "b=2,a=1", "", "", "a=1,b=2");
	assert_same_identity("", "", "spec.nodeName=n1,", "", "", "spec.nodeName=n1");

	assert_different_identity("", "", "", "default", "", "");
	assert_different_identity("", "a=1", "", "", "a=2", "");
	assert_different_identity("", "a=1", "", "", "", "a=1");
	assert_different_identity("", "a", "", "", "!a", "");
	assert_different_identity("", "", "spec.nodeName=n1", "", "", "spec.nodeName!=n1");
}

static void test_canonical_malformed(void **state)
{
	static const char *const bad_labels[] = {"a=(", "a in x", "=", "a b", "a=b=c", "a>x"};
	for (size_t i = 0; i < sizeof bad_labels / sizeof bad_labels[0]; i++) {
		struct store_view v = make_view("", bad_labels[i], "");
		struct view_rec r;
		char *err = NULL;
		assert_int_equal(view_canonical(&v, &r, &err), -1);
		assert_non_null(err);
		assert_true(strlen(err) > 0);
		assert_null(strchr(err, '\n'));
		assert_null(r.namespace);
		assert_null(r.label_selector);
		assert_null(r.field_selector);
		free(err);
	}
	/* ("=x" parses, as in fields.ParseSelector: the field label check refuses it) */
	static const char *const bad_fields[] = {"novalue", "a=b=c", "a=b\\x"};
	for (size_t i = 0; i < sizeof bad_fields / sizeof bad_fields[0]; i++) {
		struct store_view v = make_view("", "", bad_fields[i]);
		struct view_rec r;
		char *err = NULL;
		assert_int_equal(view_canonical(&v, &r, &err), -1);
		assert_non_null(err);
		assert_null(r.namespace);
		free(err);
	}
}

/* ---- encode / decode ---- */

static void test_encode_format(void **state)
{
	struct view_set set = {0};
	struct view_rec r;
	canon("", "", "spec.nodeName=n1", &r);
	assert_int_equal(view_set_put(&set, &r, 42), 0);
	view_rec_free(&r);
	struct buf b = BUF_INIT;
	assert_int_equal(view_set_encode(&set, &b), 0);
	assert_string_equal(b.data, "{\"views\":[" V("", "", "spec.nodeName=n1", "42") "]}\n");
	buf_free(&b);
	view_set_free(&set);

	/* The empty set. */
	assert_int_equal(view_set_encode(&set, &b), 0);
	assert_string_equal(b.data, "{\"views\":[]}\n");
	struct view_set back;
	assert_int_equal(view_set_decode(b.data, b.len, &back), 0);
	assert_int_equal(back.n, 0);
	view_set_free(&back);
	buf_free(&b);
}

static void test_encode_decode_round_trip(void **state)
{
	static const char *const views[][3] = {
	    {"", "", ""},
	    {"", "", "spec.nodeName=n1"},
	    {"default", "app=web,tier in (a,b)", ""},
	    {"kube-system", "!legacy,k8s-app=kube-dns", "metadata.namespace!=x"},
	    /* quotes, backslashes and escaped commas/equals in field values */
	    {"ns", "", "metadata.name=a\"b"},
	    {"ns", "", "metadata.name=back\\\\slash"},
	    {"ns", "", "metadata.name=a\\,b\\=c,spec.nodeName=n\"1\\\\"},
	    {"ns2", "x>5,y<3", "status.phase=Running"},
	};
	static const uint64_t rvs[] = {0, 1, 42, 1000000007ULL, UINT64_MAX, 7, 8, 9};
	size_t n = sizeof views / sizeof views[0];
	struct view_set set = {0};
	for (size_t i = 0; i < n; i++) {
		struct view_rec r;
		canon(views[i][0], views[i][1], views[i][2], &r);
		assert_int_equal(view_set_put(&set, &r, rvs[i]), 0);
		view_rec_free(&r);
	}
	assert_int_equal(set.n, n);

	struct buf b = BUF_INIT;
	assert_int_equal(view_set_encode(&set, &b), 0);
	/* It is JSON that any parser reads. */
	json_t *j = json_loadb(b.data, b.len, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "views")), n);
	json_decref(j);

	struct view_set back;
	assert_int_equal(view_set_decode(b.data, b.len, &back), 0);
	assert_int_equal(back.n, n);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(back.v[i].namespace, set.v[i].namespace);
		assert_string_equal(back.v[i].label_selector, set.v[i].label_selector);
		assert_string_equal(back.v[i].field_selector, set.v[i].field_selector);
		assert_true(back.v[i].rv == set.v[i].rv);
		assert_ptr_equal(view_set_find(&back, &set.v[i]), &back.v[i]);
	}
	/* Encoding again gives the same bytes. */
	struct buf b2 = BUF_INIT;
	assert_int_equal(view_set_encode(&back, &b2), 0);
	assert_string_equal(b2.data, b.data);

	/* The escaped field values survived as the selector parser reads them. */
	struct view_rec k;
	canon("ns", "", "spec.nodeName=n\"1\\\\,metadata.name=a\\,b\\=c", &k);
	struct view_rec *found = view_set_find(&back, &k);
	assert_non_null(found);
	assert_true(found->rv == 8);
	view_rec_free(&k);

	buf_free(&b);
	buf_free(&b2);
	view_set_free(&back);
	view_set_free(&set);
	assert_null(set.v);
	assert_int_equal(set.n, 0);
}

static void test_decode_accepts(void **state)
{
	struct view_set set;
	/* Unknown members are ignored; the order of members does not matter. */
	const char *json = "{\"extra\":1,\"views\":[{\"resourceVersion\":\"5\",\"fieldSelector\":"
			   "\"\",\"labelSelector\":\"a=b\",\"namespace\":\"x\",\"more\":[1]}]}";
	assert_int_equal(decode_str(json, &set), 0);
	assert_int_equal(set.n, 1);
	assert_string_equal(set.v[0].namespace, "x");
	assert_string_equal(set.v[0].label_selector, "a=b");
	assert_string_equal(set.v[0].field_selector, "");
	assert_true(set.v[0].rv == 5);
	view_set_free(&set);

	/* The same view twice: one record, the later rv. */
	json = "{\"views\":[" V("", "", "", "3") "," V("", "", "", "9") "]}";
	assert_int_equal(decode_str(json, &set), 0);
	assert_int_equal(set.n, 1);
	assert_true(set.v[0].rv == 9);
	view_set_free(&set);

	/* The largest rv. */
	json = "{\"views\":[" V("", "", "", "18446744073709551615") "]}";
	assert_int_equal(decode_str(json, &set), 0);
	assert_true(set.v[0].rv == UINT64_MAX);
	view_set_free(&set);

	/* Only len bytes are read. */
	const char *two = "{\"views\":[]}GARBAGE";
	assert_int_equal(view_set_decode(two, strlen("{\"views\":[]}"), &set), 0);
	assert_int_equal(set.n, 0);
	view_set_free(&set);
}

static void test_decode_rejects(void **state)
{
	assert_decode_fails("");
	assert_decode_fails("not json");
	assert_decode_fails("{");
	assert_decode_fails("[]");
	assert_decode_fails("null");
	assert_decode_fails("{}");
	assert_decode_fails("{\"views\":{}}");
	assert_decode_fails("{\"views\":null}");
	assert_decode_fails("{\"views\":[1]}");
	assert_decode_fails("{\"views\":[null]}");
	assert_decode_fails("{\"views\":[[]]}");
	assert_decode_fails("{\"views\":[]} trailing");
	/* Missing fields. */
	assert_decode_fails("{\"views\":[{\"labelSelector\":\"\",\"fieldSelector\":\"\","
			    "\"resourceVersion\":\"1\"}]}");
	assert_decode_fails("{\"views\":[{\"namespace\":\"\",\"fieldSelector\":\"\","
			    "\"resourceVersion\":\"1\"}]}");
	assert_decode_fails("{\"views\":[{\"namespace\":\"\",\"labelSelector\":\"\","
			    "\"resourceVersion\":\"1\"}]}");
	assert_decode_fails("{\"views\":[{\"namespace\":\"\",\"labelSelector\":\"\","
			    "\"fieldSelector\":\"\"}]}");
	/* A bad record after good ones spoils the whole file. */
	assert_decode_fails("{\"views\":[" V("", "", "", "1") ",{\"namespace\":\"\"}]}");
	/* Wrong types. */
	assert_decode_fails("{\"views\":[{\"namespace\":1,\"labelSelector\":\"\","
			    "\"fieldSelector\":\"\",\"resourceVersion\":\"1\"}]}");
	assert_decode_fails("{\"views\":[{\"namespace\":\"\",\"labelSelector\":null,"
			    "\"fieldSelector\":\"\",\"resourceVersion\":\"1\"}]}");
	assert_decode_fails("{\"views\":[{\"namespace\":\"\",\"labelSelector\":\"\","
			    "\"fieldSelector\":\"\",\"resourceVersion\":42}]}");
	/* Non-numeric resourceVersions. */
	assert_decode_fails("{\"views\":[" V("", "", "", "abc") "]}");
	assert_decode_fails("{\"views\":[" V("", "", "", "12a") "]}");
	assert_decode_fails("{\"views\":[" V("", "", "", "-1") "]}");
	assert_decode_fails("{\"views\":[" V("", "", "", "+1") "]}");
	assert_decode_fails("{\"views\":[" V("", "", "", "1.5") "]}");
	assert_decode_fails("{\"views\":[" V("", "", "", " 1") "]}");
	assert_decode_fails("{\"views\":[" V("", "", "", "18446744073709551616") "]}");
	/* Duplicate keys. */
	assert_decode_fails("{\"views\":[],\"views\":[]}");
	assert_decode_fails("{\"views\":[{\"namespace\":\"\",\"namespace\":\"x\","
			    "\"labelSelector\":\"\",\"fieldSelector\":\"\",\"resourceVersion\":"
			    "\"1\"}]}");
	assert_decode_fails("{\"views\":[{\"namespace\":\"\",\"labelSelector\":\"\","
			    "\"fieldSelector\":\"\",\"resourceVersion\":\"1\","
			    "\"resourceVersion\":\"2\"}]}");
	/* NUL inside a string. */
	assert_decode_fails("{\"views\":[" V("a\\u0000b", "", "", "1") "]}");
}

/* ---- put / find ---- */

static void test_put_updates_existing(void **state)
{
	struct view_set set = {0};
	struct view_rec a, b;
	canon("", "", "spec.nodeName=n1", &a);
	canon("default", "app=web", "", &b);
	assert_int_equal(view_set_put(&set, &a, 10), 0);
	assert_int_equal(view_set_put(&set, &b, 20), 0);
	assert_int_equal(set.n, 2);
	assert_int_equal(view_set_put(&set, &a, 11), 0);
	assert_int_equal(set.n, 2);
	struct view_rec *fa = view_set_find(&set, &a);
	assert_non_null(fa);
	assert_true(fa->rv == 11);
	assert_true(view_set_find(&set, &b)->rv == 20);
	/* A lower rv is stored as given (raising is the caller's business). */
	assert_int_equal(view_set_put(&set, &a, 5), 0);
	assert_true(view_set_find(&set, &a)->rv == 5);
	assert_int_equal(set.n, 2);

	/* The same view written another way is the same record. */
	struct view_rec a2;
	canon("", "", "spec.nodeName==n1", &a2);
	assert_int_equal(view_set_put(&set, &a2, 99), 0);
	assert_int_equal(set.n, 2);
	assert_true(view_set_find(&set, &a)->rv == 99);

	/* The key is copied: freeing it leaves the set intact. */
	view_rec_free(&a);
	view_rec_free(&a2);
	assert_string_equal(set.v[0].field_selector, "spec.nodeName=n1");

	struct view_rec missing;
	canon("other", "", "", &missing);
	assert_null(view_set_find(&set, &missing));
	view_rec_free(&missing);
	view_rec_free(&b);
	view_set_free(&set);
}

static void test_put_many(void **state)
{
	struct view_set set = {0};
	for (int i = 0; i < 100; i++) {
		char ns[32];
		snprintf(ns, sizeof ns, "ns-%d", i);
		struct view_rec r;
		canon(ns, "", "", &r);
		assert_int_equal(view_set_put(&set, &r, (uint64_t)i), 0);
		view_rec_free(&r);
	}
	assert_int_equal(set.n, 100);
	for (int i = 0; i < 100; i++) {
		char ns[32];
		snprintf(ns, sizeof ns, "ns-%d", i);
		struct view_rec r;
		canon(ns, "", "", &r);
		struct view_rec *f = view_set_find(&set, &r);
		assert_non_null(f);
		assert_true(f->rv == (uint64_t)i);
		view_rec_free(&r);
	}
	view_set_free(&set);
}

/* ---- view_matcher_covers ---- */

static int covers(const char *vns, const char *ls, const char *fs, const char *ns, const char *json)
{
	struct view_rec r;
	canon(vns, ls, fs, &r);
	struct view_matcher m;
	assert_int_equal(view_matcher_init(&m, &r), 0);
	int rc = view_matcher_covers(&m, ns, json, strlen(json));
	view_matcher_free(&m);
	view_rec_free(&r);
	return rc;
}

static void test_covers_namespace(void **state)
{
	char *pod = test_pod_json("a", "web", 10, "n1", 2000);
	assert_int_equal(covers("", "", "", "a", pod), 1);
	assert_int_equal(covers("", "", "", "b", pod), 1);
	assert_int_equal(covers("", "", "", "", pod), 1);
	assert_int_equal(covers("", "", "", NULL, pod), 1);
	assert_int_equal(covers("a", "", "", "a", pod), 1);
	assert_int_equal(covers("a", "", "", "b", pod), 0);
	assert_int_equal(covers("a", "", "", "", pod), 0);
	assert_int_equal(covers("a", "", "", NULL, pod), 0);
	assert_int_equal(covers("a", "", "", "ab", pod), 0);
	assert_int_equal(covers("ab", "", "", "a", pod), 0);
	free(pod);
}

static void test_covers_labels(void **state)
{
	char *web = test_pod_json("default", "web", 10, "n1", 2500);
	char *db = test_pod_json("default", "db", 11, "n2", 2500);
	assert_int_equal(covers("", "app=web", "", "default", web), 1);
	assert_int_equal(covers("", "app=web", "", "default", db), 0);
	assert_int_equal(covers("", "app in (web,db)", "", "default", db), 1);
	assert_int_equal(covers("", "app notin (web)", "", "default", web), 0);
	assert_int_equal(covers("", "app notin (web)", "", "default", db), 1);
	assert_int_equal(covers("", "app", "", "default", web), 1);
	assert_int_equal(covers("", "!app", "", "default", web), 0);
	assert_int_equal(covers("", "missing", "", "default", web), 0);
	assert_int_equal(covers("", "!missing", "", "default", web), 1);
	assert_int_equal(covers("", "app=web,pod-template-hash=7d9c8b6f5d", "", "default", web), 1);
	assert_int_equal(covers("", "app=web,pod-template-hash=other", "", "default", web), 0);
	/* Namespace first: a matching label in another namespace is not covered. */
	assert_int_equal(covers("other", "app=web", "", "default", web), 0);
	assert_int_equal(covers("default", "app=web", "", "default", web), 1);
	free(web);
	free(db);
}

static void test_covers_fields(void **state)
{
	char *pod = test_pod_json("default", "web", 10, "n1", 2000);
	assert_int_equal(covers("", "", "spec.nodeName=n1", "default", pod), 1);
	assert_int_equal(covers("", "", "spec.nodeName=n2", "default", pod), 0);
	assert_int_equal(covers("", "", "spec.nodeName!=n2", "default", pod), 1);
	assert_int_equal(covers("", "", "metadata.name=web", "default", pod), 1);
	assert_int_equal(covers("", "", "metadata.name=web,spec.nodeName=n1", "default", pod), 1);
	assert_int_equal(covers("", "", "metadata.name=web,spec.nodeName=n2", "default", pod), 0);
	assert_int_equal(covers("", "", "status.phase=Running", "default", pod), 1);
	/* A missing field is "". */
	assert_int_equal(covers("", "", "spec.missing=", "default", pod), 1);
	assert_int_equal(covers("", "", "spec.missing=x", "default", pod), 0);
	/* Both selectors at once. */
	assert_int_equal(covers("", "app=web", "spec.nodeName=n1", "default", pod), 1);
	assert_int_equal(covers("", "app=db", "spec.nodeName=n1", "default", pod), 0);
	assert_int_equal(covers("", "app=web", "spec.nodeName=n2", "default", pod), 0);
	free(pod);
}

static void test_covers_escaped_field_value(void **state)
{
	const char *obj = "{\"metadata\":{\"name\":\"a,b=c\\\\d\",\"namespace\":\"ns\"}}";
	assert_int_equal(covers("", "", "metadata.name=a\\,b\\=c\\\\d", "ns", obj), 1);
	assert_int_equal(covers("", "", "metadata.name=a\\,b", "ns", obj), 0);
	const char *quoted = "{\"metadata\":{\"name\":\"q\\\"x\"}}";
	assert_int_equal(covers("", "", "metadata.name=q\"x", "", quoted), 1);
}

static void test_covers_malformed_json(void **state)
{
	const char *bad = "{\"metadata\":{\"labels\":{\"app\":\"web\"}";
	assert_int_equal(covers("", "app=web", "", "default", bad), -1);
	assert_int_equal(covers("", "", "metadata.name=x", "default", "not json"), -1);
	assert_int_equal(covers("", "app=web", "", "default", "[1,2]"), -1);
}

static void test_matcher_rejects_malformed_record(void **state)
{
	/* A record read from a damaged view file. */
	struct view_rec r = {"", "a=(", "", 0};
	struct view_matcher m;
	assert_int_equal(view_matcher_init(&m, &r), -1);
	struct view_rec r2 = {"", "", "novalue", 0};
	assert_int_equal(view_matcher_init(&m, &r2), -1);
	view_matcher_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_canonical_plain),
	    cmocka_unit_test(test_canonical_equivalences),
	    cmocka_unit_test(test_canonical_malformed),
	    cmocka_unit_test(test_encode_format),
	    cmocka_unit_test(test_encode_decode_round_trip),
	    cmocka_unit_test(test_decode_accepts),
	    cmocka_unit_test(test_decode_rejects),
	    cmocka_unit_test(test_put_updates_existing),
	    cmocka_unit_test(test_put_many),
	    cmocka_unit_test(test_covers_namespace),
	    cmocka_unit_test(test_covers_labels),
	    cmocka_unit_test(test_covers_fields),
	    cmocka_unit_test(test_covers_escaped_field_value),
	    cmocka_unit_test(test_covers_malformed_json),
	    cmocka_unit_test(test_matcher_rejects_malformed_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
