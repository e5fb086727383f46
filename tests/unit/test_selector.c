/*
 * test_selector.c - kube/selector: parsing and validation as Kubernetes does
 * it, canonical text, and evaluation on pod, service and deployment JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/fieldlabels.h"
#include "kube/selector.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define LABEL	   SELECTOR_LABEL
#define FIELD	   SELECTOR_FIELD

static const char *kind_name(enum selector_kind kind)
{
	return kind == LABEL ? "label" : "field";
}

/* malloc'ed: c repeated n times, then tail. */
static char *repeat(char c, size_t n, const char *prefix, const char *tail)
{
	size_t plen = strlen(prefix), tlen = strlen(tail);
	char *s = malloc(plen + n + tlen + 1);

	assert_non_null(s);
	memcpy(s, prefix, plen);
	memset(s + plen, c, n);
	memcpy(s + plen + n, tail, tlen + 1);
	return s;
}

static char *canonical_of(enum selector_kind kind, const char *text)
{
	char *out = NULL, *err = NULL;

	if (selector_canonicalize(kind, text, &out, &err) != 0) {
		print_error("%s selector \"%s\" did not parse: %s\n", kind_name(kind), text,
			    err ? err : "(no message)");
		free(err);
		fail();
	}
	assert_null(err);
	assert_non_null(out);
	return out;
}

/* ---- canonical text ---- */

struct canon_case {
	enum selector_kind kind;
	const char *text;
	const char *canonical;
};

static const struct canon_case canon_cases[] = {
    {LABEL, "", ""},
    {LABEL, "  \t\n ", ""},
    {LABEL, "a", "a"},
    {LABEL, " !a ", "!a"},
    {LABEL, "a=b", "a=b"},
    {LABEL, "a==b", "a=b"},
    {LABEL, "a != b", "a!=b"},
    {LABEL, "a=", "a="},
    {LABEL, "a==", "a="},
    {LABEL, "a!=", "a!="},
    {LABEL, "x in (b,a,b)", "x in (a,b)"},
    {LABEL, "x notin ( b , a )", "x notin (a,b)"},
    {LABEL, "x in (a)", "x=a"},
    {LABEL, "x notin (a)", "x!=a"},
    {LABEL, "x in ()", "x="},
    {LABEL, "x in (,)", "x="},
    {LABEL, "x in (,a)", "x in (,a)"},
    {LABEL, "x in (a,)", "x in (,a)"},
    {LABEL, "x in (a,,b)", "x in (,a,b)"},
    {LABEL, "a>05", "a>5"},
    {LABEL, "a < 10", "a<10"},
    {LABEL, "a>9223372036854775807", "a>9223372036854775807"},
    {LABEL, "b,a", "a,b"},
    {LABEL, "a!=x,a=y,!a,a", "a,!a,a=y,a!=x"},
    {LABEL, "a=b,a=b", "a=b"},
    {LABEL, "example.com/x=1,a=2", "a=2,example.com/x=1"},
    {LABEL, "app.kubernetes.io/name in (web)", "app.kubernetes.io/name=web"},
    {LABEL, "in=in", "in=in"},
    {LABEL, "notin", "notin"},
    {LABEL, "x in (in,notin)", "x in (in,notin)"},
    {LABEL, "A_b.C-d=V_1.x-Y", "A_b.C-d=V_1.x-Y"},
    {FIELD, "", ""},
    {FIELD, ",", ""},
    {FIELD, "metadata.name=foo", "metadata.name=foo"},
    {FIELD, "metadata.name==foo", "metadata.name=foo"},
    {FIELD, "spec.nodeName!=n1,metadata.name=a", "metadata.name=a,spec.nodeName!=n1"},
    {FIELD, "a!=1,a=1", "a=1,a!=1"},
    {FIELD, "a=1,a=1", "a=1"},
    {FIELD, "a=", "a="},
    {FIELD, "a=b,,c=d,", "a=b,c=d"},
    {FIELD, "a=b\\,c", "a=b\\,c"},
    {FIELD, "a=x\\=y\\\\z", "a=x\\=y\\\\z"},
    {FIELD, "x=a\\\\,y=b", "x=a\\\\,y=b"},
    {FIELD, "a!b=c", "a!b=c"},
    /* escapes are not looked at left of the operator: the path is "a\" */
    {FIELD, "a\\=b", "a\\=b"},
    /* fields.ParseSelector does not trim: the spaces belong to path and value */
    {FIELD, " a = b ", " a = b "},
};

static void test_canonical_text(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(canon_cases); i++) {
		const struct canon_case *c = &canon_cases[i];
		char *out = canonical_of(c->kind, c->text);
		char *again = canonical_of(c->kind, out);

		print_message("%s \"%s\" -> \"%s\"\n", kind_name(c->kind), c->text, out);
		assert_string_equal(out, c->canonical);
		/* canonical text is a fixed point */
		assert_string_equal(again, out);
		free(again);
		free(out);
	}
}

/* Each row: texts that mean the same and must print the same. */
struct equiv_case {
	enum selector_kind kind;
	const char *texts[4];
};

static const struct equiv_case equiv_cases[] = {
    {LABEL, {"b=2, a in (y,x,x)", "a in (x,y),b==2", "b == 2,a in (x, y)"}},
    {LABEL, {"a=x", "a in (x)", "a == x", "a in (x,x)"}},
    {LABEL, {"a!=x", "a notin (x)", " a != x "}},
    {LABEL, {" a , !b ", "!b,a", "!b , a,a"}},
    {LABEL, {"a>5", "a > 005", "a>5,a>5"}},
    {LABEL, {"x in (a,,b)", "x in (b,a,)", "x in (,b,a)"}},
    {LABEL, {"a=", "a in ()", "a==", "a in (,)"}},
    {FIELD, {"b=2,a=1", "a==1,b=2", ",a=1,,b==2,"}},
    {FIELD, {"a!=x,a!=y", "a!=y,a!=x", "a!=x,a!=y,a!=x"}},
};

static void test_equivalent_selectors_print_alike(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(equiv_cases); i++) {
		const struct equiv_case *c = &equiv_cases[i];
		char *first = canonical_of(c->kind, c->texts[0]);

		for (size_t j = 1; j < N_ELEMS(c->texts) && c->texts[j]; j++) {
			char *other = canonical_of(c->kind, c->texts[j]);

			print_message("\"%s\" ~ \"%s\"\n", c->texts[0], c->texts[j]);
			assert_string_equal(other, first);
			free(other);
		}
		free(first);
	}
}

static void test_different_selectors_print_differently(void **state)
{
	static const char *const labels[] = {
	    "a", "!a", "a=x", "a!=x", "a in (x,y)", "a notin (x,y)", "a>1", "a<1", "a=y", "b",
	};
	char *texts[N_ELEMS(labels)];

	(void)state;
	for (size_t i = 0; i < N_ELEMS(labels); i++)
		texts[i] = canonical_of(LABEL, labels[i]);
	for (size_t i = 0; i < N_ELEMS(labels); i++) {
		for (size_t j = i + 1; j < N_ELEMS(labels); j++)
			assert_string_not_equal(texts[i], texts[j]);
	}
	for (size_t i = 0; i < N_ELEMS(labels); i++)
		free(texts[i]);
}

static void test_null_and_empty(void **state)
{
	struct selector *s = NULL;
	char *err = NULL, *text;

	(void)state;
	assert_true(selector_is_empty(NULL));
	text = selector_canonical(NULL);
	assert_string_equal(text, "");
	free(text);

	assert_int_equal(selector_parse(LABEL, NULL, &s, &err), 0);
	assert_null(err);
	assert_true(selector_is_empty(s));
	text = selector_canonical(s);
	assert_string_equal(text, "");
	free(text);
	selector_free(s);

	assert_int_equal(selector_parse(FIELD, ",,", &s, &err), 0);
	assert_true(selector_is_empty(s));
	selector_free(s);

	assert_int_equal(selector_parse(LABEL, "a", &s, &err), 0);
	assert_false(selector_is_empty(s));
	selector_free(s);

	selector_free(NULL);
	/* no message wanted: still refused, nothing leaks */
	assert_int_equal(selector_parse(LABEL, "a in (", &s, NULL), -1);
	assert_null(s);
}

/* ---- parse errors: the API server's words ---- */

/* k8s.io/apimachinery's messages (labels.Parse, validation, field.Error,
 * fields.ParseSelector), which the hub gives offline as kube-apiserver
 * gives them online. */
#define REQ "unable to parse requirement: "
#define QN_MSG                                                                                     \
	"must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "   \
	"an "                                                                                      \
	"alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "     \
	"validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define DNS_MSG                                                                                    \
	"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "  \
	"or "                                                                                      \
	"'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "   \
	"used for validation is "                                                                  \
	"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define LV_MSG                                                                                     \
	"a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "   \
	"or "                                                                                      \
	"'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "         \
	"'my_value',  or '12345', regex used for validation is "                                   \
	"'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
#define KEY(k)	       REQ "<nil>: Invalid value: \"" k "\": "
#define VALUE(i, k, v) REQ "values[" #i "][" k "]: Invalid value: \"" v "\": "
#define NOT_INT(v)                                                                                 \
	REQ "values[0]: Invalid value: \"" v                                                       \
	    "\": for 'Gt', 'Lt' operators, the value must be an integer"

struct error_case {
	enum selector_kind kind;
	const char *text;
	const char *message; /* exactly */
};

static const struct error_case error_cases[] = {
    /* syntax */
    {LABEL, "a in (b", REQ "found '', expected: ',' or ')'"},
    {LABEL, "a in (b,c", REQ "found '', expected: ',' or ')'"},
    {LABEL, "a in (b c)", REQ "found 'c', expected: ',' or ')'"},
    {LABEL, "a in (b))", "found ')', expected: ',' or 'end of string'"},
    {LABEL, "a in b", REQ "found 'b' expected: '('"},
    {LABEL, "a in", REQ "found '' expected: '('"},
    {LABEL, "a notin", REQ "found '' expected: '('"},
    {LABEL, "a in (", REQ "found '', expected: ',', ')' or identifier"},
    {LABEL, "a in ((b))", REQ "found '(', expected: ',', ')' or identifier"},
    {LABEL, "a in (a,,)", REQ "found ')', expected: ',', or identifier"},
    {LABEL, "a in (,,)", REQ "found ')', expected: ',', or identifier"},
    {LABEL, "a in (b,=)", REQ "found '=', expected: ',', or identifier"},
    {LABEL, "(a)", "found '(', expected: !, identifier, or 'end of string'"},
    {LABEL, ")", "found ')', expected: !, identifier, or 'end of string'"},
    {LABEL, "=b", "found '=', expected: !, identifier, or 'end of string'"},
    {LABEL, "a=b)", "found ')', expected: ',' or 'end of string'"},
    {LABEL, "a,", "found '', expected: identifier after ','"},
    {LABEL, ",a", "found ',', expected: !, identifier, or 'end of string'"},
    {LABEL, "a,,b", "found ',', expected: identifier after ','"},
    {LABEL, "!", REQ "found '', expected: identifier"},
    {LABEL, "!!a", REQ "found '!', expected: identifier"},
    {LABEL, "!=a", "found '!=', expected: !, identifier, or 'end of string'"},
    {LABEL, "!a=b", "found '=', expected: ',' or 'end of string'"},
    {LABEL, "!a in (b)", "found 'in', expected: ',' or 'end of string'"},
    {LABEL, "a b", REQ "found 'b', expected: in, notin, =, ==, !=, gt, lt"},
    {LABEL, "a !b", REQ "found '!', expected: in, notin, =, ==, !=, gt, lt"},
    {LABEL, "a=b c", "found 'c', expected: ',' or 'end of string'"},
    {LABEL, "a=b=c", "found '=', expected: ',' or 'end of string'"},
    {LABEL, "a=(b)", REQ "found '(', expected: identifier"},
    {LABEL, "a=!b", REQ "found '!', expected: identifier"},
    {LABEL, "a>>1", REQ "found '>', expected: identifier"},
    /* > and < want an integer that is also a valid label value */
    {LABEL, "a>b", NOT_INT("b")},
    {LABEL, "a>", NOT_INT("")},
    {LABEL, "a<1.5", NOT_INT("1.5")},
    {LABEL, "a>99999999999999999999", NOT_INT("99999999999999999999")},
    {LABEL, "a>9223372036854775808", NOT_INT("9223372036854775808")},
    {LABEL, "a>-1", VALUE(0, "a", "-1") LV_MSG},
    {LABEL, "a<+1", VALUE(0, "a", "+1") LV_MSG},
    {LABEL, "a>x-",
     REQ "[values[0]: Invalid value: \"x-\": for 'Gt', 'Lt' operators, the value "
	 "must be an integer, values[0][a]: Invalid value: \"x-\": " LV_MSG "]"},
    /* keys */
    {LABEL, "A/b", KEY("A/b") "prefix part " DNS_MSG},
    {LABEL, "a_b/c=1", KEY("a_b/c") "prefix part " DNS_MSG},
    {LABEL, "a..b/c", KEY("a..b/c") "prefix part " DNS_MSG},
    {LABEL, "-a/b", KEY("-a/b") "prefix part " DNS_MSG},
    {LABEL, "a-/b", KEY("a-/b") "prefix part " DNS_MSG},
    {LABEL, "a./b", KEY("a./b") "prefix part " DNS_MSG},
    {LABEL, "a/b/c",
     KEY("a/b/c") "a valid label key " QN_MSG " with an optional DNS subdomain prefix and '/' "
		  "(e.g. 'example.com/MyName')"},
    {LABEL, "/b", KEY("/b") "prefix part must be non-empty"},
    {LABEL, "a/", KEY("a/") "name part must be non-empty; name part " QN_MSG},
    {LABEL, "-A/",
     KEY("-A/") "prefix part " DNS_MSG "; name part must be non-empty; name part " QN_MSG},
    {LABEL, "-a", KEY("-a") "name part " QN_MSG},
    {LABEL, "a-", KEY("a-") "name part " QN_MSG},
    {LABEL, "a@b in (c)", KEY("a@b") "name part " QN_MSG},
    {LABEL, "caf\xc3\xa9=x", KEY("caf\xc3\xa9") "name part " QN_MSG},
    {LABEL, "a\"b", KEY("a\\\"b") "name part " QN_MSG},
    {LABEL, "x/.a", KEY("x/.a") "name part " QN_MSG},
    /* values */
    {LABEL, "a=-b", VALUE(0, "a", "-b") LV_MSG},
    {LABEL, "a=b-", VALUE(0, "a", "b-") LV_MSG},
    {LABEL, "a!=b@c", VALUE(0, "a", "b@c") LV_MSG},
    {LABEL, "a in (ok,-bad)", VALUE(0, "a", "-bad") LV_MSG}, /* numbered once sorted */
    {LABEL, "a in (zz-,ok,-bad)",
     REQ "[values[0][a]: Invalid value: \"-bad\": " LV_MSG
	 ", values[2][a]: Invalid value: \"zz-\": " LV_MSG "]"},
    {LABEL, "a notin (x_)", VALUE(0, "a", "x_") LV_MSG},
    {LABEL, "a=b/c", VALUE(0, "a", "b/c") LV_MSG},
    /* fields */
    {FIELD, "a=b=c", "invalid field selector: unescaped character in value: 61"},
    {FIELD, "a===b", "invalid field selector: unescaped character in value: 61"},
    {FIELD, "a!==b", "invalid field selector: unescaped character in value: 61"},
    {FIELD, "a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"},
    {FIELD, "x=1,a=b=c", "invalid field selector: unescaped character in value: 61"},
    {FIELD, "z=,,y=b\\c,x=,a=b=c", "invalid field selector: unescaped character in value: 61"},
    {FIELD, "z=,x,a=b\\c", "invalid field selector: invalid escape sequence: \\c"},
    {FIELD, "a=b\\c", "invalid field selector: invalid escape sequence: \\c"},
    {FIELD, "a=b\\", "invalid field selector: invalid escape sequence: \\"},
    {FIELD, "a=\\n", "invalid field selector: invalid escape sequence: \\n"},
    {FIELD, "a=\\ ", "invalid field selector: invalid escape sequence: \\ "},
    {FIELD, "abc", "invalid selector: 'abc'; can't understand 'abc'"},
    {FIELD, "a!b", "invalid selector: 'a!b'; can't understand 'a!b'"},
};

static void check_error(enum selector_kind kind, const char *text, const char *message)
{
	struct selector *s = (struct selector *)&s; /* must be reset to NULL */
	char *err = NULL;

	print_message("%s \"%s\"\n", kind_name(kind), text);
	assert_int_equal(selector_parse(kind, text, &s, &err), -1);
	assert_null(s);
	assert_non_null(err);
	if (strcmp(err, message)) {
		print_error("message \"%s\"\n   wanted \"%s\"\n", err, message);
		fail();
	}
	free(err);
}

static void test_parse_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(error_cases); i++)
		check_error(error_cases[i].kind, error_cases[i].text, error_cases[i].message);
}

/* Terms with an empty path parse, as in fields.ParseSelector: the API
 * server refuses them when it checks the field labels, and so does the
 * hub (kube/fieldlabels.c). */
static void test_field_empty_path_parses(void **state)
{
	struct selector *s;
	char *err = NULL;

	(void)state;
	assert_int_equal(selector_parse(FIELD, "=x", &s, &err), 0);
	assert_int_equal(selector_term_count(s), 1);
	assert_string_equal(selector_term_key(s, 0), "");
	selector_free(s);
	assert_int_equal(selector_parse(FIELD, "!=x,spec.nodeName==n1", &s, &err), 0);
	assert_int_equal(selector_term_count(s), 2);
	assert_string_equal(selector_term_key(s, 1), "spec.nodeName");
	selector_free(s);
}

/* The fields kube-apiserver lets clients select on, and its words for the
 * others (core/v1's field label conversions, or the default one). */
static void check_fields(const char *group, const char *resource, const char *text,
			 const char *message)
{
	struct selector *s;
	char *err = NULL, *why = (char *)"untouched";

	assert_int_equal(selector_parse(FIELD, text, &s, &err), 0);
	int rc = field_labels_check(group, resource, s, &why);
	selector_free(s);
	if (!message) {
		assert_int_equal(rc, 0);
		assert_null(why);
		return;
	}
	assert_int_equal(rc, -1);
	assert_non_null(why);
	if (strcmp(why, message)) {
		print_error("%s %s: \"%s\", wanted \"%s\"\n", resource, text, why, message);
		fail();
	}
	free(why);
}

static void test_field_labels(void **state)
{
	(void)state;
	check_fields("", "pods", "spec.nodeName=n1,status.phase!=Failed", NULL);
	check_fields("", "pods", "metadata.namespace=a,status.podIPs=10.0.0.1", NULL);
	check_fields("", "pods", "spec.foo=x", "field label not supported: spec.foo");
	check_fields("", "pods", "status.hostIP=1.2.3.4,spec.nodeName=n1",
		     "field label not supported: status.hostIP");
	check_fields("", "pods", "=x", "field label not supported: ");
	check_fields("", "nodes", "metadata.name=n1,spec.unschedulable=false", NULL);
	check_fields("", "nodes", "metadata.namespace=x",
		     "field label not supported: metadata.namespace");
	check_fields("", "services", "spec.clusterIP=None,spec.type=ClusterIP", NULL);
	check_fields("", "secrets", "type=kubernetes.io/tls", NULL);
	check_fields("", "events", "involvedObject.name=x,reason=Started,source=kubelet", NULL);
	check_fields("", "namespaces", "status.phase=Active", NULL);
	check_fields("", "replicationcontrollers", "status.replicas=3", NULL);
	/* core resources without a table of their own: the default */
	check_fields("", "configmaps", "metadata.name=kube-root-ca.crt", NULL);
	check_fields("", "endpoints", "metadata.namespace=default,metadata.name=kubernetes", NULL);
	check_fields("", "configmaps", "data.x=y",
		     "\"data.x\" is not a known field selector: only \"metadata.name\", "
		     "\"metadata.namespace\"");
	/* other groups (and custom resources): not known here, accepted */
	check_fields("discovery.k8s.io", "endpointslices", "addressType=IPv4", NULL);
	check_fields("example.com", "widgets", "spec.color=blue", NULL);
	check_fields("", "pods", "", NULL);
}

static void test_canonicalize_reports_errors(void **state)
{
	char *out = (char *)"untouched", *err = NULL;

	(void)state;
	assert_int_equal(selector_canonicalize(FIELD, "a=b=c", &out, &err), -1);
	assert_null(out);
	assert_non_null(err);
	assert_string_equal(err, "invalid field selector: unescaped character in value: 61");
	free(err);
}

/* Messages stay on one line whatever the input holds. */
static void test_error_quotes_control_characters(void **state)
{
	char *err = NULL;
	struct selector *s;

	(void)state;
	assert_int_equal(selector_parse(LABEL, "a\n=b x", &s, &err), -1);
	assert_string_equal(err, "found 'x', expected: ',' or 'end of string'");
	free(err);
	assert_int_equal(selector_parse(LABEL, "a\x01", &s, &err), -1);
	assert_null(strchr(err, '\x01'));
	assert_non_null(strstr(err, "\"a\\x01\""));
	free(err);
	assert_int_equal(selector_parse(FIELD, "a\x02", &s, &err), -1);
	assert_string_equal(err, "invalid selector: 'a\\x02'; can't understand 'a\\x02'");
	free(err);
}

/* The message ends with what is wrong (the long texts are not repeated). */
static void check_name_error(enum selector_kind kind, const char *text, const char *tail)
{
	struct selector *s;
	char *err = NULL;

	assert_int_equal(selector_parse(kind, text, &s, &err), -1);
	assert_non_null(err);
	size_t n = strlen(err), m = strlen(tail);
	if (n < m || strcmp(err + n - m, tail)) {
		print_error("message \"%s\" does not end with \"%s\"\n", err, tail);
		fail();
	}
	assert_int_equal(strncmp(err, REQ, strlen(REQ)), 0);
	free(err);
}

static void test_length_limits(void **state)
{
	char *name63 = repeat('n', 63, "", "");
	char *name64 = repeat('n', 64, "", "");
	char *prefix253 = repeat('p', 253, "", "/name");
	char *prefix254 = repeat('p', 254, "", "/name");
	char *value63 = repeat('v', 63, "a=", "");
	char *value64 = repeat('v', 64, "a=", "");
	char *set64 = repeat('v', 64, "a in (x,", ")");
	/* 253 characters of dotted labels, each label 63 long */
	char *dotted = repeat('d', 63, "", "");
	char *long_prefix;
	int n;
	struct selector *s;

	(void)state;
	n = asprintf(&long_prefix, "%s.%s.%s.%s/x", dotted, dotted, dotted,
		     "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
	assert_true(n > 0);
	assert_int_equal(strlen(long_prefix) - 2, 253);

	assert_int_equal(selector_parse(LABEL, name63, &s, NULL), 0);
	selector_free(s);
	check_name_error(LABEL, name64, "name part must be no more than 63 characters");
	assert_int_equal(selector_parse(LABEL, prefix253, &s, NULL), 0);
	selector_free(s);
	check_name_error(LABEL, prefix254, "prefix part must be no more than 253 characters");
	assert_int_equal(selector_parse(LABEL, long_prefix, &s, NULL), 0);
	selector_free(s);
	assert_int_equal(selector_parse(LABEL, value63, &s, NULL), 0);
	selector_free(s);
	check_name_error(LABEL, value64, "\": must be no more than 63 characters");
	check_name_error(LABEL, set64, "\": must be no more than 63 characters");

	free(name63);
	free(name64);
	free(prefix253);
	free(prefix254);
	free(value63);
	free(value64);
	free(set64);
	free(dotted);
	free(long_prefix);
}

/* ---- evaluation ---- */

static const char POD[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
    "\"metadata\":{\"name\":\"web-0\",\"namespace\":\"prod\",\"uid\":\"u1\","
    "\"resourceVersion\":\"10\","
    "\"labels\":{\"app\":\"web\",\"tier\":\"frontend\",\"version\":\"3\","
    "\"example.com/team\":\"blue\",\"app.kubernetes.io/name\":\"web\",\"empty\":\"\","
    "\"big\":\"99999999999999999999\",\"neg\":\"-7\",\"esc\":\"caf\\u00e9\"},"
    "\"annotations\":{\"note\":\"a,b=c\\\\d\",\"tier\":\"backend\"},"
    "\"ownerReferences\":[{\"kind\":\"StatefulSet\",\"name\":\"web\"}]},"
    "\"spec\":{\"nodeName\":\"node-1\",\"hostNetwork\":false,\"priority\":100,"
    "\"ratio\":1.50,\"serviceAccountName\":null,"
    "\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:1.25\","
    "\"ports\":[{\"containerPort\":80}]}],"
    "\"tolerations\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}],"
    "\"nodeSelector\":{\"app\":\"db\"}},"
    "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.5\",\"message\":\"caf\\u00e9 "
    "\\\"ok\\\"\","
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";

static const char HOST_POD[] =
    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"kube-proxy-x\",\"namespace\":\"kube-system\"},"
    "\"spec\":{\"hostNetwork\":true,\"nodeName\":\"node-2\"},"
    "\"status\":{\"phase\":\"Pending\"}}";

static const char SERVICE[] =
    "{\"kind\":\"Service\",\"apiVersion\":\"v1\","
    "\"metadata\":{\"name\":\"kubernetes\",\"namespace\":\"default\","
    "\"labels\":{\"component\":\"apiserver\",\"provider\":\"kubernetes\"}},"
    "\"spec\":{\"type\":\"ClusterIP\",\"clusterIP\":\"10.96.0.1\","
    "\"ports\":[{\"name\":\"https\",\"port\":443,\"targetPort\":6443}]}}";

/* Labels of the pod template are not the deployment's labels. */
static const char DEPLOYMENT[] =
    "{\"kind\":\"Deployment\",\"spec\":{\"replicas\":3,\"template\":{\"metadata\":"
    "{\"labels\":{\"app\":\"web\",\"canary\":\"true\"}}}},"
    "\"metadata\":{\"name\":\"web\",\"labels\":{\"app\":\"web\"}}}";

static const char EVENT[] =
    "{\"kind\":\"Event\",\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"web-0\","
    "\"metadata\":{\"labels\":{\"app\":\"web\"}}},"
    "\"metadata\":{\"name\":\"web-0.17\",\"namespace\":\"prod\"},\"labels\":{\"stray\":\"1\"},"
    "\"items\":[{\"metadata\":{\"labels\":{\"inarray\":\"1\"}}}]}";

struct match_case {
	const char *labels, *fields; /* NULL: no selector */
	const char *json;
	int want;
};

static const struct match_case match_cases[] = {
    {NULL, NULL, POD, 1},
    {"", "", POD, 1},
    /* label operators */
    {"app=web", NULL, POD, 1},
    {"app=api", NULL, POD, 0},
    {"app==web", NULL, POD, 1},
    {"app!=web", NULL, POD, 0},
    {"app!=api", NULL, POD, 1},
    {"missing!=x", NULL, POD, 1},
    {"missing=x", NULL, POD, 0},
    {"missing=", NULL, POD, 0},
    {"missing!=", NULL, POD, 1}, /* absent is not the same as "" */
    {"missing notin (,a)", NULL, POD, 1},
    {"app", NULL, POD, 1},
    {"!app", NULL, POD, 0},
    {"missing", NULL, POD, 0},
    {"!missing", NULL, POD, 1},
    {"app in (api,web)", NULL, POD, 1},
    {"app in (api,db)", NULL, POD, 0},
    {"missing in (a)", NULL, POD, 0},
    {"app notin (web)", NULL, POD, 0},
    {"app notin (api,db)", NULL, POD, 1},
    {"missing notin (a)", NULL, POD, 1},
    {"version>2", NULL, POD, 1},
    {"version>3", NULL, POD, 0},
    {"version<4", NULL, POD, 1},
    {"version<3", NULL, POD, 0},
    {"missing>0", NULL, POD, 0},
    {"missing<9", NULL, POD, 0},
    {"app>0", NULL, POD, 0},
    {"app<0", NULL, POD, 0},
    {"big>1", NULL, POD, 0}, /* the label value does not fit an int64 */
    {"neg<0", NULL, POD, 1}, /* label values parse as strconv.ParseInt does */
    {"example.com/team=blue", NULL, POD, 1},
    {"app.kubernetes.io/name=web", NULL, POD, 1},
    {"empty=", NULL, POD, 1},
    {"empty", NULL, POD, 1},
    {"empty in (,x)", NULL, POD, 1},
    {"empty!=", NULL, POD, 0},
    {"app=web,tier=frontend", NULL, POD, 1},
    {"app=web,tier=backend", NULL, POD, 0},
    {"app=web,!missing,version>1,tier in (frontend)", NULL, POD, 1},
    {"name=web-0", NULL, POD, 0}, /* metadata.name is not a label */
    {"note", NULL, POD, 0},	  /* annotations are not labels */
    {"app=db", NULL, POD, 0},	  /* spec.nodeSelector is not labels */
    {"component=apiserver", NULL, SERVICE, 1},
    {"component=apiserver,provider!=kubernetes", NULL, SERVICE, 0},
    {"app=web,!canary", NULL, DEPLOYMENT, 1},
    {"canary", NULL, DEPLOYMENT, 0},
    {"app", NULL, EVENT, 0},
    {"stray", NULL, EVENT, 0},
    {"inarray", NULL, EVENT, 0},
    {"!app,!stray,!inarray", NULL, EVENT, 1},
    /* fields */
    {NULL, "metadata.name=web-0", POD, 1},
    {NULL, "metadata.name==web-0", POD, 1},
    {NULL, "metadata.name!=web-0", POD, 0},
    {NULL, "metadata.namespace=prod", POD, 1},
    {NULL, "spec.nodeName=node-1", POD, 1},
    {NULL, "spec.nodeName=node-2", POD, 0},
    {NULL, "spec.nodeName!=node-2", POD, 1},
    {NULL, "status.phase=Running", POD, 1},
    {NULL, "status.phase!=Running", POD, 0},
    {NULL, "spec.hostNetwork=false", POD, 1},
    {NULL, "spec.hostNetwork=true", POD, 0},
    {NULL, "spec.hostNetwork!=true", POD, 1},
    {NULL, "spec.hostNetwork=true", HOST_POD, 1},
    {NULL, "spec.hostNetwork!=true", HOST_POD, 0},
    {NULL, "spec.priority=100", POD, 1},
    {NULL, "spec.ratio=1.50", POD, 1}, /* numbers compare as their JSON text */
    {NULL, "spec.ratio=1.5", POD, 0},
    {NULL, "spec.replicas=3", DEPLOYMENT, 1},
    {NULL, "spec.serviceAccountName=", POD, 1}, /* null is "" */
    {NULL, "spec.serviceAccountName!=", POD, 0},
    {NULL, "spec.missing=", POD, 1},
    {NULL, "spec.missing!=", POD, 0},
    {NULL, "spec.missing=x", POD, 0},
    {NULL, "spec.missing!=x", POD, 1},
    {NULL, "no.such.path=", POD, 1},
    {NULL, "spec.containers.name=nginx", POD, 0}, /* inside an array */
    {NULL, "spec.containers.name!=nginx", POD, 1},
    {NULL, "spec.tolerations.effect=NoSchedule", POD, 0},
    {NULL, "metadata.ownerReferences.name=web", POD, 0},
    {NULL, "spec.containers=", POD, 1}, /* an array is "" */
    {NULL, "spec.containers!=", POD, 0},
    {NULL, "metadata=", POD, 1}, /* an object is "" */
    {NULL, "metadata.labels.app=web", POD, 1},
    {NULL, "metadata.annotations.note=a\\,b\\=c\\\\d", POD, 1},
    {NULL, "metadata.annotations.note!=a\\,b\\=c\\\\d", POD, 0},
    {NULL, "status.message=caf\xc3\xa9 \"ok\"", POD, 1},
    {NULL, "kind=Pod", POD, 1},
    {NULL, "spec.nodeName=node-1,status.phase=Running", POD, 1},
    {NULL, "spec.nodeName=node-1,status.phase=Pending", POD, 0},
    {NULL, "status.phase=Running,status.phase=Pending", POD, 0},
    {NULL, "metadata.name=web-0,metadata.name!=x", POD, 1},
    {NULL, "spec.type=ClusterIP,metadata.namespace=default", SERVICE, 1},
    {NULL, "spec.ports.name=https", SERVICE, 0},
    {NULL, "spec.template.metadata.labels.canary=true", DEPLOYMENT, 1},
    {NULL, "involvedObject.name=web-0", EVENT, 1},
    {NULL, "metadata.name=web-0", EVENT, 0},
    /* both */
    {"app=web", "spec.nodeName=node-1", POD, 1},
    {"app=web", "spec.nodeName=node-2", POD, 0},
    {"app=api", "spec.nodeName=node-1", POD, 0},
    {"tier", "status.phase=Running,spec.hostNetwork=false", POD, 1},
    {"!tier", "status.phase=Running", POD, 0},
    /* label values decode their escapes */
    {"esc", "metadata.labels.esc=caf\xc3\xa9", POD, 1},
    /* a repeated key: the last value counts, as in encoding/json */
    {"a=2", "spec.x=2",
     "{\"metadata\":{\"labels\":{\"a\":\"1\",\"a\":\"2\"}},"
     "\"spec\":{\"x\":\"1\",\"x\":2}}",
     1},
    {"a=1", NULL, "{\"metadata\":{\"labels\":{\"a\":\"1\",\"a\":\"2\"}}}", 0},
    {NULL, "spec.x=", "{\"spec\":{\"x\":\"1\",\"x\":{\"y\":\"1\"}}}", 1},
    {NULL, "spec.x=", "{\"spec\":{\"x\":\"1\",\"x\":[\"1\"]}}", 1},
    /* a null label value decodes as a present "" */
    {"a,a=", NULL, "{\"metadata\":{\"labels\":{\"a\":null}}}", 1},
    /* metadata or labels that are not objects hold no labels */
    {"!a", NULL, "{\"metadata\":[{\"labels\":{\"a\":\"1\"}}]}", 1},
    {"!a", NULL, "{\"metadata\":{\"labels\":[{\"a\":\"1\"}]}}", 1},
    {"!a", NULL, "{\"metadata\":{\"labels\":\"a\"}}", 1},
    {"a", NULL,
     "{\"x\":{\"metadata\":{\"labels\":{\"a\":\"1\"}}},"
     "\"metadata\":{\"labels\":{\"b\":\"1\"}},\"y\":{\"labels\":{\"a\":\"1\"}}}",
     0},
    /* a path must not be completed across a closed object */
    {NULL, "a.b=1", "{\"a\":{\"c\":{}},\"b\":\"1\"}", 0},
    {NULL, "a.b=1", "{\"a\":{\"x\":{\"b\":\"1\"}},\"b\":\"1\"}", 0},
    {NULL, "a.b=1", "{\"a\":[{\"b\":\"1\"}],\"z\":{\"b\":\"1\"}}", 0},
    {NULL, "a.b=1", "{\"x\":[],\"a\":{\"b\":\"1\"}}", 1},
};

static void test_match_json(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(match_cases); i++) {
		const struct match_case *c = &match_cases[i];
		struct selector *labels = NULL, *fields = NULL;
		char *err = NULL;

		print_message("case %zu: labels \"%s\" fields \"%s\"\n", i,
			      c->labels ? c->labels : "(null)", c->fields ? c->fields : "(null)");
		if (c->labels)
			assert_int_equal(selector_parse(LABEL, c->labels, &labels, &err), 0);
		if (c->fields)
			assert_int_equal(selector_parse(FIELD, c->fields, &fields, &err), 0);
		assert_int_equal(selector_match_json(labels, fields, c->json, strlen(c->json)),
				 c->want);
		selector_free(labels);
		selector_free(fields);
	}
}

static const char *const malformed[] = {
    "",
    "  ",
    "{",
    "{\"metadata\":{\"labels\":{\"app\":\"web\"}}",
    "{} {}",
    "{}x",
    "[]",
    "[{\"metadata\":{\"labels\":{\"app\":\"web\"}}}]",
    "42",
    "\"app\"",
    "null",
    "{\"a\":}",
    "{\"a\":1,}",
    "{'a':1}",
    "{\"a\":\"\xff\"}",
    "{\"metadata\":{\"labels\":{\"app\":\"web\"}}}]",
};

static void test_malformed_json(void **state)
{
	struct selector *labels, *fields;
	char *err = NULL;

	(void)state;
	assert_int_equal(selector_parse(LABEL, "app=web", &labels, &err), 0);
	assert_int_equal(selector_parse(FIELD, "spec.nodeName!=x", &fields, &err), 0);
	for (size_t i = 0; i < N_ELEMS(malformed); i++) {
		const char *json = malformed[i];

		print_message("case %zu: %s\n", i, json);
		assert_int_equal(selector_match_json(labels, fields, json, strlen(json)), -1);
		assert_int_equal(selector_match_json(NULL, NULL, json, strlen(json)), -1);
		assert_int_equal(selector_match_json(labels, NULL, json, strlen(json)), -1);
	}
	/* the length bounds the document */
	assert_int_equal(selector_match_json(NULL, fields, "{}{}", 2), 1);
	assert_int_equal(selector_match_json(NULL, fields, "{}", 1), -1);
	selector_free(labels);
	selector_free(fields);
}

/* The quick look at the raw bytes ruled out an object whose label value was
 * written with \u escapes, which the full evaluation matches: an offline
 * list left it out.  A value written that way can no longer be ruled out. */
static void test_may_match_sees_escaped_values(void **state)
{
	static const char *const objs[] = {
	    "{\"metadata\":{\"labels\":{\"app\":\"\\u0077eb\"}}}",
	    "{\"metadata\":{\"labels\":{\"app\":\"w\\u0065\\u0062\"}}}",
	    "{\"spec\":{\"nodeName\":\"\\u0077eb\"}}",
	};
	struct selector *ls, *fs;
	char *err = NULL;

	(void)state;
	assert_int_equal(selector_parse(SELECTOR_LABEL, "app in (web,db)", &ls, &err), 0);
	assert_int_equal(selector_parse(SELECTOR_FIELD, "spec.nodeName=web", &fs, &err), 0);
	for (size_t i = 0; i < 3; i++) {
		const struct selector *s = i < 2 ? ls : fs;
		const char *j = objs[i];

		assert_int_equal(
		    selector_match_json(i < 2 ? s : NULL, i < 2 ? NULL : s, j, strlen(j)), 1);
		assert_true(selector_may_match(s, j, strlen(j)));
	}
	/* <, > and & escaped (as the API server writes them) still let it tell */
	const char *amp = "{\"metadata\":{\"labels\":{\"app\":\"x\"},\"annotations\":"
			  "{\"cmd\":\"a \\u0026\\u0026 b\"}}}";
	assert_false(selector_may_match(ls, amp, strlen(amp)));
	selector_free(ls);
	selector_free(fs);
}

/* Thousands of terms and of set values (a selector a client may send): the
 * arrays grow by doubling; every term and value must survive the growth. */
static void test_thousands_of_terms(void **state)
{
	enum { N = 3000 };
	char *text = malloc(N * 16 + 16), *set = malloc(N * 8 + 32);
	char *err = NULL;
	size_t used = 0, sused = 0;
	struct selector *many, *in;

	(void)state;
	assert_non_null(text);
	assert_non_null(set);
	sused += (size_t)sprintf(set, "app in (");
	for (int i = 0; i < N; i++) {
		used += (size_t)sprintf(text + used, "%sk%d!=x", i ? "," : "", i);
		sused += (size_t)sprintf(set + sused, "%sv%d", i ? "," : "", i);
	}
	strcpy(set + sused, ")");
	assert_int_equal(selector_parse(SELECTOR_LABEL, text, &many, &err), 0);
	assert_int_equal(selector_parse(SELECTOR_LABEL, set, &in, &err), 0);
	const char *hit = "{\"metadata\":{\"labels\":{\"app\":\"v2999\",\"k1234\":\"y\"}}}";
	const char *miss = "{\"metadata\":{\"labels\":{\"app\":\"v3000\",\"k2999\":\"x\"}}}";
	assert_int_equal(selector_match_json(in, NULL, hit, strlen(hit)), 1);
	assert_int_equal(selector_match_json(in, NULL, miss, strlen(miss)), 0);
	assert_int_equal(selector_match_json(many, NULL, hit, strlen(hit)), 1);
	assert_int_equal(selector_match_json(many, NULL, miss, strlen(miss)), 0);
	selector_free(many);
	selector_free(in);
	free(text);
	free(set);
}

/* More requirements than fit on the evaluator's stack. */
static void test_many_requirements(void **state)
{
	char labels_text[512] = "", fields_text[512] = "", json[2048];
	size_t used = 0, n;
	struct selector *labels, *fields;
	char *err = NULL;

	(void)state;
	n = (size_t)snprintf(json + used, sizeof(json) - used, "{\"metadata\":{\"labels\":{");
	used += n;
	for (int i = 0; i < 30; i++) {
		char term[32];

		snprintf(term, sizeof(term), "%sl%d=v%d", i ? "," : "", i, i);
		strcat(labels_text, term);
		snprintf(term, sizeof(term), "%sspec.f%d=%d", i ? "," : "", i, i);
		strcat(fields_text, term);
		n = (size_t)snprintf(json + used, sizeof(json) - used, "%s\"l%d\":\"v%d\"",
				     i ? "," : "", i, i);
		used += n;
	}
	n = (size_t)snprintf(json + used, sizeof(json) - used, "}},\"spec\":{");
	used += n;
	for (int i = 0; i < 30; i++) {
		n = (size_t)snprintf(json + used, sizeof(json) - used, "%s\"f%d\":%d", i ? "," : "",
				     i, i);
		used += n;
	}
	n = (size_t)snprintf(json + used, sizeof(json) - used, "}}");
	used += n;
	assert_true(used < sizeof(json));

	assert_int_equal(selector_parse(LABEL, labels_text, &labels, &err), 0);
	assert_int_equal(selector_parse(FIELD, fields_text, &fields, &err), 0);
	assert_int_equal(selector_match_json(labels, fields, json, used), 1);
	selector_free(fields);
	strcat(fields_text, ",spec.f29!=29");
	assert_int_equal(selector_parse(FIELD, fields_text, &fields, &err), 0);
	assert_int_equal(selector_match_json(labels, fields, json, used), 0);
	selector_free(labels);
	selector_free(fields);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_canonical_text),
	    cmocka_unit_test(test_equivalent_selectors_print_alike),
	    cmocka_unit_test(test_different_selectors_print_differently),
	    cmocka_unit_test(test_null_and_empty),
	    cmocka_unit_test(test_parse_errors),
	    cmocka_unit_test(test_field_empty_path_parses),
	    cmocka_unit_test(test_field_labels),
	    cmocka_unit_test(test_canonicalize_reports_errors),
	    cmocka_unit_test(test_error_quotes_control_characters),
	    cmocka_unit_test(test_length_limits),
	    cmocka_unit_test(test_match_json),
	    cmocka_unit_test(test_malformed_json),
	    cmocka_unit_test(test_many_requirements),
	    cmocka_unit_test(test_thousands_of_terms),
	    cmocka_unit_test(test_may_match_sees_escaped_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
