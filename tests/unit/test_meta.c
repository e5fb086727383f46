/*
 * test_meta.c - kube/meta: which fields are picked from an object's JSON,
 * which documents are refused, and resourceVersion parsing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/meta.h"

#define JSON(s) (s), strlen(s)

static void assert_field(const char *got, const char *want)
{
	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
}

static const char POD[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
    "\"metadata\":{\"name\":\"web-0\",\"namespace\":\"prod\",\"uid\":\"0b1c-77\","
    "\"resourceVersion\":\"123456\",\"labels\":{\"app\":\"web\",\"name\":\"label-name\"},"
    "\"annotations\":{\"resourceVersion\":\"999\",\"uid\":\"annotation-uid\"},"
    "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\","
    "\"name\":\"web\",\"uid\":\"owner-uid\"}]},"
    "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]},"
    "\"status\":{\"phase\":\"Running\"}}";

static void test_pod_fields(void **state)
{
	struct kube_meta m;

	(void)state;
	assert_int_equal(kube_meta_parse(JSON(POD), &m), 0);
	assert_field(m.kind, "Pod");
	assert_field(m.api_version, "v1");
	assert_field(m.name, "web-0");
	assert_field(m.namespace, "prod");
	assert_field(m.uid, "0b1c-77");
	assert_field(m.resource_version, "123456");
	assert_int_equal(m.rv, 123456);
	assert_int_equal(m.has_metadata, 1);
	kube_meta_free(&m);
	kube_meta_free(&m); /* freeing twice is harmless: it leaves *m empty */
}

/* Each case: a document and the fields that must (or must not) be picked. */
struct pick_case {
	const char *what;
	const char *json;
	const char *kind, *name, *namespace, *uid, *rv;
	uint64_t rv_num;
	int has_metadata;
};

static const struct pick_case pick_cases[] = {
    {"event: involvedObject fields are not the event's",
     "{\"kind\":\"Event\",\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"p\","
     "\"namespace\":\"ns\",\"uid\":\"io-uid\",\"resourceVersion\":\"77\"},"
     "\"metadata\":{\"name\":\"p.17a\",\"namespace\":\"ns\"}}",
     "Event", "p.17a", "ns", NULL, NULL, 0, 1},
    {"event with its own resourceVersion after involvedObject's",
     "{\"involvedObject\":{\"resourceVersion\":\"77\"},"
     "\"metadata\":{\"resourceVersion\":\"78\"},\"kind\":\"Event\"}",
     "Event", NULL, NULL, NULL, "78", 78, 1},
    {"objects after metadata are not metadata",
     "{\"metadata\":{\"name\":\"ev\"},\"involvedObject\":{\"name\":\"p\",\"uid\":\"u\","
     "\"namespace\":\"n\",\"resourceVersion\":\"3\"},\"source\":{\"kind\":\"S\"}}",
     NULL, "ev", NULL, NULL, NULL, 0, 1},
    {"arrays as values of picked keys are not picked",
     "{\"kind\":[\"Pod\"],\"metadata\":{\"name\":[\"n\"],\"uid\":[[\"u\"]],"
     "\"namespace\":[{\"x\":1},\"ns\"],\"resourceVersion\":[\"1\"]}}",
     NULL, NULL, NULL, NULL, NULL, 0, 1},
    {"ownerReferences[].name is not metadata.name",
     "{\"metadata\":{\"ownerReferences\":[{\"name\":\"rs\",\"uid\":\"u\",\"kind\":\"RS\"}]}}", NULL,
     NULL, NULL, NULL, NULL, 0, 1},
    {"spec.template.metadata is not the object's metadata",
     "{\"kind\":\"Deployment\",\"spec\":{\"template\":{\"metadata\":{\"name\":\"tmpl\","
     "\"namespace\":\"tns\",\"resourceVersion\":\"5\"}}},\"metadata\":{\"name\":\"d\"}}",
     "Deployment", "d", NULL, NULL, NULL, 0, 1},
    {"labels and annotations named like metadata fields",
     "{\"metadata\":{\"labels\":{\"name\":\"l\",\"uid\":\"x\"},"
     "\"annotations\":{\"namespace\":\"a\",\"resourceVersion\":\"9\"}}}",
     NULL, NULL, NULL, NULL, NULL, 0, 1},
    {"top-level name/namespace are not metadata",
     "{\"name\":\"top\",\"namespace\":\"top\",\"uid\":\"top\",\"resourceVersion\":\"1\"}", NULL,
     NULL, NULL, NULL, NULL, 0, 0},
    {"kind inside an object value is not the top-level kind",
     "{\"spec\":{\"kind\":\"Inner\"},\"items\":[{\"kind\":\"Item\"}]}", NULL, NULL, NULL, NULL,
     NULL, 0, 0},
    {"metadata as an array is not metadata", "{\"metadata\":[{\"name\":\"x\"},\"name\",\"y\"]}",
     NULL, NULL, NULL, NULL, NULL, 0, 0},
    {"metadata as a string is not metadata", "{\"metadata\":\"name\"}", NULL, NULL, NULL, NULL,
     NULL, 0, 0},
    {"empty metadata", "{\"metadata\":{}}", NULL, NULL, NULL, NULL, NULL, 0, 1},
    {"non-string values are ignored",
     "{\"kind\":7,\"metadata\":{\"name\":null,\"namespace\":true,\"uid\":{},"
     "\"resourceVersion\":42}}",
     NULL, NULL, NULL, NULL, NULL, 0, 1},
    {"escapes are decoded",
     "{\"kind\":\"K\\\"q\\\"\",\"metadata\":{\"name\":\"caf\\u00e9\","
     "\"namespace\":\"a\\/b\\\\c\",\"uid\":\"\\ud83d\\ude00\"}}",
     "K\"q\"", "caf\xc3\xa9", "a/b\\c", "\xf0\x9f\x98\x80", NULL, 0, 1},
    {"repeated keys: the last one wins",
     "{\"kind\":\"A\",\"kind\":\"B\",\"metadata\":{\"name\":\"n1\",\"name\":\"n2\","
     "\"resourceVersion\":\"1\",\"resourceVersion\":\"2\"}}",
     "B", "n2", NULL, NULL, "2", 2, 1},
    {"unparsable resourceVersion is kept as text, rv 0",
     "{\"metadata\":{\"resourceVersion\":\"abc\"}}", NULL, NULL, NULL, NULL, "abc", 0, 1},
    {"deeply nested values do not leak upwards",
     "{\"a\":[[[{\"metadata\":{\"name\":\"deep\"}}]]],\"metadata\":{\"x\":[{\"name\":\"y\"}],"
     "\"name\":\"real\"}}",
     NULL, "real", NULL, NULL, NULL, 0, 1},
    {"surrounding whitespace is fine", " \n\t{\"kind\":\"K\"}\r\n ", "K", NULL, NULL, NULL, NULL, 0,
     0},
};

static void test_picks_only_top_level_metadata(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(pick_cases) / sizeof(pick_cases[0]); i++) {
		const struct pick_case *c = &pick_cases[i];
		struct kube_meta m;

		print_message("case %zu: %s\n", i, c->what);
		assert_int_equal(kube_meta_parse(JSON(c->json), &m), 0);
		assert_field(m.kind, c->kind);
		assert_field(m.name, c->name);
		assert_field(m.namespace, c->namespace);
		assert_field(m.uid, c->uid);
		assert_field(m.resource_version, c->rv);
		assert_int_equal(m.rv, c->rv_num);
		assert_int_equal(m.has_metadata, c->has_metadata);
		kube_meta_free(&m);
	}
}

static void test_embedded_nul_is_kept(void **state)
{
	const char json[] = "{\"metadata\":{\"name\":\"a\\u0000b\"}}";
	struct kube_meta m;

	(void)state;
	assert_int_equal(kube_meta_parse(JSON(json), &m), 0);
	assert_non_null(m.name);
	assert_memory_equal(m.name, "a\0b", 4);
	kube_meta_free(&m);
}

/* Found by fuzz/fuzz_list_stream: the stream decoders read "1\u0000" as no
 * resourceVersion (0) and kube_meta_parse read it as 1, so one object had two
 * revisions depending on who looked. */
static void test_rv_with_nul_is_no_revision(void **state)
{
	const char json[] = "{\"metadata\":{\"resourceVersion\":\"1\\u0000\"}}";
	struct kube_meta m;
	uint64_t rv = 7;

	(void)state;
	assert_int_equal(kube_meta_parse(JSON(json), &m), 0);
	assert_memory_equal(m.resource_version, "1\0", 2);
	assert_int_equal(m.rv, 0);
	kube_meta_free(&m);
	assert_int_equal(kube_meta_rv(JSON(json), &rv), 0);
	assert_int_equal(rv, 0);
}

/* A name or namespace with "\u0000" is flagged: cut at the NUL it would be
 * another object's key (found by the hostile upstream e2e suite: a watch
 * event DELETED "good\u0000x" removed the cached "good"). */
static void test_nul_in_name_is_flagged(void **state)
{
	static const struct {
		const char *json;
		int flagged;
	} cases[] = {
	    {"{\"metadata\":{\"name\":\"good\\u0000x\"}}", 1},
	    {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"\\u0000\"}}", 1},
	    {"{\"metadata\":{\"name\":\"a\\u0000\",\"name\":\"a\"}}", 0},
	    {"{\"metadata\":{\"name\":\"a\",\"uid\":\"\\u0000\"},\"name\":\"\\u0000\"}", 0},
	    {"{\"metadata\":{\"name\":\"a\"}}", 0},
	};
	struct kube_meta m;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(kube_meta_parse(cases[i].json, strlen(cases[i].json), &m), 0);
		assert_int_equal(m.nul_in_name, cases[i].flagged);
		kube_meta_free(&m);
	}
}

static const char *const malformed[] = {
    "",
    "   ",
    "{",
    "{\"kind\":\"Pod\"",
    "{}x",
    "{} {}",
    "{}{}",
    "[]",
    "[{\"kind\":\"Pod\"}]",
    "42",
    "\"Pod\"",
    "null",
    "true",
    "{\"a\":}",
    "{'a':1}",
    "{\"a\":1,}",
    "{\"a\" 1}",
    "/* c */{}",
    "{\"kind\":\"bad\xff utf8\"}",
    "{\"kind\":\"bad \\x escape\"}",
    "{\"metadata\":{\"name\":\"x\"}",
    "{\"metadata\":{\"name\":\"x\"}}]",
};

static void test_malformed_is_refused_and_left_empty(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		struct kube_meta m;

		print_message("case %zu: %s\n", i, malformed[i]);
		assert_int_equal(kube_meta_parse(JSON(malformed[i]), &m), -1);
		assert_null(m.kind);
		assert_null(m.api_version);
		assert_null(m.name);
		assert_null(m.namespace);
		assert_null(m.uid);
		assert_null(m.resource_version);
		assert_int_equal(m.rv, 0);
		assert_int_equal(m.has_metadata, 0);
		kube_meta_free(&m);
	}
}

/* The length bounds the document, not a NUL. */
static void test_length_bounds_the_document(void **state)
{
	const char text[] = "{\"kind\":\"Pod\"}garbage";
	struct kube_meta m;

	(void)state;
	assert_int_equal(kube_meta_parse(text, 14, &m), 0);
	assert_field(m.kind, "Pod");
	kube_meta_free(&m);
	assert_int_equal(kube_meta_parse(text, sizeof(text) - 1, &m), -1);
	kube_meta_free(&m);
	assert_int_equal(kube_meta_parse(text, 13, &m), -1);
	kube_meta_free(&m);
}

struct rv_only_case {
	const char *json;
	int rc;
	uint64_t rv;
};

static const struct rv_only_case rv_only_cases[] = {
    {"{\"metadata\":{\"resourceVersion\":\"42\"}}", 0, 42},
    /* stops at the field: what follows is never read */
    {"{\"metadata\":{\"resourceVersion\":\"42\"}, this is not json", 0, 42},
    {"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}}", 0, 0},
    {"{\"involvedObject\":{\"resourceVersion\":\"7\"},\"metadata\":{\"resourceVersion\":\"8\"}}", 0,
     8},
    {"{\"involvedObject\":{\"resourceVersion\":\"7\"}}", 0, 0},
    {"{\"spec\":{\"template\":{\"metadata\":{\"resourceVersion\":\"7\"}}}}", 0, 0},
    {"{\"metadata\":{\"annotations\":{\"resourceVersion\":\"7\"}}}", 0, 0},
    {"{\"metadata\":{\"resourceVersion\":\"x7\"}}", 0, 0},
    {"{\"metadata\":{\"resourceVersion\":7,\"x\":1}}", 0, 0},
    {"{\"metadata\":{\"resourceVersion\":\"18446744073709551615\"}}", 0, UINT64_MAX},
    {"{\"metadata\":{\"name\":}", -1, 0},
    {"{\"kind\":\"Pod\"", -1, 0},
    {"{\"kind\":\"Pod\"} x", -1, 0},
    {"[{\"metadata\":{\"resourceVersion\":\"1\"}}]", -1, 0},
    {"\"1\"", -1, 0},
    {"", -1, 0},
};

static void test_rv_only(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rv_only_cases) / sizeof(rv_only_cases[0]); i++) {
		const struct rv_only_case *c = &rv_only_cases[i];
		uint64_t rv = 12345;

		print_message("case %zu: %s\n", i, c->json);
		assert_int_equal(kube_meta_rv(JSON(c->json), &rv), c->rc);
		assert_int_equal(rv, c->rv);
	}
}

struct rv_case {
	const char *text;
	int rc;
	uint64_t value;
};

static const struct rv_case rv_cases[] = {
    {"0", 0, 0},
    {"1", 0, 1},
    {"007", 0, 7},
    {"123456789", 0, 123456789},
    {"18446744073709551615", 0, UINT64_MAX},
    {"18446744073709551616", -1, 0},
    {"18446744073709551620", -1, 0},
    {"99999999999999999999", -1, 0},
    {"100000000000000000000", -1, 0},
    {"", -1, 0},
    {" 1", -1, 0},
    {"1 ", -1, 0},
    {"+1", -1, 0},
    {"-1", -1, 0},
    {"1.0", -1, 0},
    {"1e3", -1, 0},
    {"0x10", -1, 0},
    {"abc", -1, 0},
    {"12a", -1, 0},
};

static void test_rv_parse(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rv_cases) / sizeof(rv_cases[0]); i++) {
		const struct rv_case *c = &rv_cases[i];
		uint64_t out = 99;

		print_message("case %zu: \"%s\"\n", i, c->text);
		assert_int_equal(kube_rv_parse(c->text, strlen(c->text), &out), c->rc);
		assert_int_equal(out, c->value);
	}
}

static void test_rv_parse_uses_length(void **state)
{
	uint64_t out;

	(void)state;
	assert_int_equal(kube_rv_parse("12345", 3, &out), 0);
	assert_int_equal(out, 123);
	assert_int_equal(kube_rv_parse("12\0"
				       "3",
				       4, &out),
			 -1);
	assert_int_equal(out, 0);
	assert_int_equal(kube_rv_parse("1", 0, &out), -1);
}

/* A list of realistic pods, one document each, as the cache sees them. */
static char *make_pod(size_t i, size_t *len)
{
	char *s = NULL;
	size_t cap = 0;
	FILE *f = open_memstream(&s, &cap);

	assert_non_null(f);
	fprintf(f,
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"pod-%zu\","
		"\"namespace\":\"default\",\"uid\":\"uid-%zu\",\"resourceVersion\":\"%zu\","
		"\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"abc\"},"
		"\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"rs\",\"uid\":\"u\"}]},"
		"\"spec\":{\"nodeName\":\"node-%zu\",\"containers\":[",
		i, i, 100000 + i, i % 50);
	for (int c = 0; c < 3; c++) {
		fprintf(f, "%s{\"name\":\"c%d\",\"image\":\"nginx:1.25\",\"env\":[", c ? "," : "",
			c);
		for (int e = 0; e < 12; e++)
			fprintf(f, "%s{\"name\":\"E%d\",\"value\":\"%s\"}", e ? "," : "", e,
				"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvv");
		fprintf(f, "],\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"}]}");
	}
	fprintf(f, "],\"hostNetwork\":false},\"status\":{\"phase\":\"Running\","
		   "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
	fclose(f);
	*len = cap;
	return s;
}

static double elapsed_ms(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* Correctness over many objects.  The time bound is loose so that sanitizer
 * and debug builds pass on a busy machine; an optimised build takes about
 * 45 ms for these ~18 MB. */
static void test_many_pods(void **state)
{
	enum { PODS = 5000 };
	char **docs = calloc(PODS, sizeof(*docs));
	size_t *lens = calloc(PODS, sizeof(*lens));
	struct timespec t0, t1;
	size_t total = 0;

	(void)state;
	assert_non_null(docs);
	assert_non_null(lens);
	for (size_t i = 0; i < PODS; i++) {
		docs[i] = make_pod(i, &lens[i]);
		total += lens[i];
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0; i < PODS; i++) {
		struct kube_meta m;
		char want[32];

		assert_int_equal(kube_meta_parse(docs[i], lens[i], &m), 0);
		snprintf(want, sizeof(want), "pod-%zu", i);
		assert_string_equal(m.name, want);
		assert_int_equal(m.rv, 100000 + i);
		kube_meta_free(&m);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_message("%d pods, %zu bytes: %.1f ms\n", PODS, total, elapsed_ms(&t0, &t1));
	assert_true(elapsed_ms(&t0, &t1) < 2000.0);
	for (size_t i = 0; i < PODS; i++)
		free(docs[i]);
	free(docs);
	free(lens);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pod_fields),
	    cmocka_unit_test(test_picks_only_top_level_metadata),
	    cmocka_unit_test(test_embedded_nul_is_kept),
	    cmocka_unit_test(test_nul_in_name_is_flagged),
	    cmocka_unit_test(test_rv_with_nul_is_no_revision),
	    cmocka_unit_test(test_malformed_is_refused_and_left_empty),
	    cmocka_unit_test(test_length_bounds_the_document),
	    cmocka_unit_test(test_rv_only),
	    cmocka_unit_test(test_rv_parse),
	    cmocka_unit_test(test_rv_parse_uses_length),
	    cmocka_unit_test(test_many_pods),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
