/*
 * test_selectable.c - kube/selectable: the picked document answers every
 * selector the API server accepts for the resource exactly as the whole
 * object does, and the picker gives up where it could read the object
 * differently from a JSON parser.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/selectable.h"
#include "kube/selector.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const char *PODS[] = {
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-1\",\"namespace\":"
    "\"default\",\"labels\":{\"app\":\"web\",\"tier\":\"front\",\"n\":\"7\"},"
    "\"resourceVersion\":\"12\"},\"spec\":{\"nodeName\":\"node1\",\"containers\":[{\"name\":"
    "\"c\",\"image\":\"node2\"}],\"hostNetwork\":true,\"restartPolicy\":\"Always\"},"
    "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\",\"podIPs\":[{\"ip\":"
    "\"10.0.0.1\"}]}}",
    /* whitespace everywhere, nodeName of another node, labels absent */
    " { \"metadata\" : { \"name\" : \"db-0\" , \"namespace\" : \"prod\" } ,\n"
    " \"spec\" : { \"nodeName\" : \"node2\" , \"x\" : { \"nodeName\" : \"node1\" } } ,"
    " \"status\" : { \"phase\" : \"Pending\" } } ",
    /* no spec, numbers and nulls around */
    "{\"metadata\":{\"name\":\"x\",\"labels\":{\"app\":\"db\"},\"generation\":3},"
    "\"status\":null,\"extra\":[1,2,{\"a\":\"}\"}]}",
    /* values with escapes and brackets in strings */
    "{\"metadata\":{\"name\":\"q\\\"uote\",\"namespace\":\"default\",\"labels\":{\"app\":"
    "\"w\\u0065b\"}},\"spec\":{\"nodeName\":\"node1\",\"schedulerName\":\"{[\"}}",
};

static const char *LABELS[] = {
    "",	     "app=web", "app!=web", "app in (web,db)", "app notin (web)",    "tier",
    "!tier", "n>5",	"n<5",	    "app=db",	       "app=web,tier=front",
};

static const char *FIELDS[] = {
    "",
    "spec.nodeName=node1",
    "spec.nodeName!=node1",
    "spec.nodeName=node2",
    "status.phase=Running",
    "metadata.name=web-1",
    "metadata.namespace=default",
    "spec.hostNetwork=true",
    "spec.restartPolicy=Always",
    "spec.schedulerName={[",
    "status.podIP=10.0.0.1,spec.nodeName=node1",
    "metadata.name=q\"uote",
};

static void test_agrees_with_the_whole_object(void **state)
{
	(void)state;
	size_t checked = 0, ruled_out = 0;
	for (size_t o = 0; o < N_ELEMS(PODS); o++) {
		struct buf doc = BUF_INIT;
		assert_int_equal(selectable_pick("", "pods", PODS[o], strlen(PODS[o]), &doc), 0);
		for (size_t l = 0; l < N_ELEMS(LABELS); l++) {
			for (size_t f = 0; f < N_ELEMS(FIELDS); f++) {
				struct selector *ls = NULL, *fs = NULL;
				char *err = NULL;
				assert_int_equal(
				    selector_parse(SELECTOR_LABEL, LABELS[l], &ls, &err), 0);
				assert_int_equal(
				    selector_parse(SELECTOR_FIELD, FIELDS[f], &fs, &err), 0);
				assert_true(selectable_answers("", "pods", fs));
				int whole = selector_match_json(ls, fs, PODS[o], strlen(PODS[o]));
				int picked = selector_match_json(ls, fs, doc.data, doc.len);
				if (whole != picked)
					fail_msg("object %zu, %s / %s: whole %d, picked %d (%s)", o,
						 LABELS[l], FIELDS[f], whole, picked, doc.data);
				checked += whole == 1;
				/* the index's summary never rules out a match */
				uint64_t bloom = selector_bloom(doc.data, doc.len);
				if (whole == 1 && (!selector_may_match_bloom(ls, bloom) ||
						   !selector_may_match_bloom(fs, bloom)))
					fail_msg("object %zu, %s / %s: ruled out by its summary", o,
						 LABELS[l], FIELDS[f]);
				ruled_out += whole != 1 && (!selector_may_match_bloom(ls, bloom) ||
							    !selector_may_match_bloom(fs, bloom));
				selector_free(ls);
				selector_free(fs);
			}
		}
		buf_free(&doc);
	}
	assert_true(checked > 20);   /* the table does select something */
	assert_true(ruled_out > 50); /* and the summary does rule out */
}

static void test_document_is_small(void **state)
{
	(void)state;
	struct buf doc = BUF_INIT;
	assert_int_equal(selectable_pick("", "pods", PODS[0], strlen(PODS[0]), &doc), 0);
	assert_null(strstr(doc.data, "containers"));
	assert_null(strstr(doc.data, "resourceVersion"));
	assert_non_null(strstr(doc.data, "\"nodeName\":\"node1\""));
	assert_true(doc.len < strlen(PODS[0]));
	buf_free(&doc);
}

static void test_gives_up_where_a_parser_could_differ(void **state)
{
	(void)state;
	const char *bad[] = {
	    "",
	    "[]",
	    "{\"metadata\":{\"name\":\"a\"}",				     /* cut short */
	    "{\"metadata\":{\"name\":\"a\"}} trailing",			     /* garbage after */
	    "{\"m\\u0065tadata\":{\"name\":\"a\"}}",			     /* escaped key */
	    "{\"metadata\":{\"name\":\"a\"},\"metadata\":{\"name\":\"b\"}}", /* head twice */
	    "{\"metadata\":{\"name\":\"a\",\"name\":\"b\"}}",		     /* leaf twice */
	    "{\"metadata\":{\"name\":}}",				     /* no value */
	    "{\"spec\":{\"nodeName\":\"unterminated}}",
	};
	for (size_t i = 0; i < N_ELEMS(bad); i++) {
		struct buf doc = BUF_INIT;
		assert_int_equal(buf_append_str(&doc, "kept"), 0);
		if (selectable_pick("", "pods", bad[i], strlen(bad[i]), &doc) != -1)
			fail_msg("picked %s", bad[i]);
		assert_string_equal(doc.data, "kept");
		buf_free(&doc);
	}
}

static void test_answers_only_known_fields(void **state)
{
	(void)state;
	struct selector *fs = NULL;
	char *err = NULL;
	assert_int_equal(selector_parse(SELECTOR_FIELD, "spec.nodeName=n", &fs, &err), 0);
	assert_true(selectable_answers("", "pods", fs));
	assert_false(selectable_answers("", "configmaps", fs));		/* not selectable there */
	assert_false(selectable_answers("example.com", "widgets", fs)); /* unknown table */
	selector_free(fs);
	assert_int_equal(selector_parse(SELECTOR_FIELD, "metadata.name=n", &fs, &err), 0);
	assert_true(selectable_answers("example.com", "widgets", fs));
	selector_free(fs);
	assert_true(selectable_answers("", "pods", NULL));
}

static void test_summary_of_escaped_values_rules_nothing_out(void **state)
{
	(void)state;
	const char *doc = "{\"metadata\":{\"labels\":{\"app\":\"w\\u0065b\"}}}";
	struct selector *ls = NULL;
	char *err = NULL;
	assert_int_equal(selector_parse(SELECTOR_LABEL, "app=web", &ls, &err), 0);
	assert_int_equal(selector_match_json(ls, NULL, doc, strlen(doc)), 1);
	assert_true(selector_may_match_bloom(ls, selector_bloom(doc, strlen(doc))));
	selector_free(ls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_agrees_with_the_whole_object),
	    cmocka_unit_test(test_document_is_small),
	    cmocka_unit_test(test_gives_up_where_a_parser_could_differ),
	    cmocka_unit_test(test_answers_only_known_fields),
	    cmocka_unit_test(test_summary_of_escaped_values_rules_nothing_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
