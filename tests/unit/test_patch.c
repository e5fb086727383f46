/*
 * test_patch.c - kube/patch: every example of RFC 7386 appendix A and RFC
 * 6902 appendix A, kubelet-like strategic merge patches (node status,
 * pod status, finalizers, env, ports, directives), and malformed or hostile
 * input.  Each table row is its own cmocka test, named after its row.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/patch.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

struct pcase {
	const char *name;
	enum patch_type type;
	const char *doc, *patch;
	const char *want; /* NULL: must fail */
	const char *err;  /* for failures: part of the message, or NULL */
};

/* ---- helpers ---- */

/* Apply; on success *res is the output (malloc'ed), else the message. */
static int run(enum patch_type t, const char *doc, size_t dl, const char *patch, size_t pl,
	       char **res)
{
	struct buf out = BUF_INIT;
	char *err = NULL;
	int rc = patch_apply(t, doc, dl, patch, pl, &out, &err);
	if (rc == 0) {
		free(err);
		*res = buf_steal(&out);
	} else {
		buf_free(&out);
		*res = err;
	}
	return rc;
}

/* Checks after freeing, so that a failed assertion leaks nothing. */
static void expect(enum patch_type t, const char *doc, const char *patch, const char *want,
		   const char *err_part)
{
	char *res = NULL;
	int rc = run(t, doc, strlen(doc), patch, strlen(patch), &res);
	char got[4096];
	snprintf(got, sizeof got, "%s", res ? res : "(null)");
	bool one_line = res && !strchr(res, '\n');
	free(res);
	if (want) {
		if (rc != 0)
			fail_msg("unexpected failure: %s", got);
		assert_string_equal(got, want);
		return;
	}
	if (rc == 0)
		fail_msg("unexpected success: %s", got);
	assert_true(one_line);
	if (err_part && !strstr(got, err_part))
		fail_msg("message \"%s\" lacks \"%s\"", got, err_part);
}

static void run_case(void **state)
{
	const struct pcase *c = *state;
	expect(c->type, c->doc, c->patch, c->want, c->err);
}

#define M PATCH_MERGE
#define S PATCH_STRATEGIC
#define J PATCH_JSON

/* ---- RFC 7386 ---- */

static const struct pcase merge_cases[] = {
    {"7386 replace member", M, "{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}", NULL},
    {"7386 add member", M, "{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}", NULL},
    {"7386 null removes", M, "{\"a\":\"b\"}", "{\"a\":null}", "{}", NULL},
    {"7386 null removes one", M, "{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}",
     NULL},
    {"7386 array to string", M, "{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}", NULL},
    {"7386 string to array", M, "{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}", NULL},
    {"7386 nested", M, "{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}",
     "{\"a\":{\"b\":\"d\"}}", NULL},
    {"7386 array replaced", M, "{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}", NULL},
    /* The rows whose document or result is not an object: refused here. */
    {"7386 array document", M, "[\"a\",\"b\"]", "[\"c\",\"d\"]", NULL, "not a JSON object"},
    {"7386 array patch", M, "{\"a\":\"b\"}", "[\"c\"]", NULL, "not a JSON object"},
    {"7386 null patch", M, "{\"a\":\"foo\"}", "null", NULL, "not a JSON object"},
    {"7386 string patch", M, "{\"a\":\"foo\"}", "\"bar\"", NULL, "not a JSON object"},
    {"7386 null kept", M, "{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}", NULL},
    {"7386 array document 2", M, "[1,2]", "{\"a\":\"b\",\"c\":null}", NULL, "not a JSON object"},
    {"7386 nested nulls dropped", M, "{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}",
     NULL},
    {"7386 section 3", M,
     "{\"title\":\"Goodbye!\",\"author\":{\"givenName\":\"John\",\"familyName\":\"Doe\"},"
     "\"tags\":[\"example\",\"sample\"],\"content\":\"This will be unchanged\"}",
     "{\"title\":\"Hello!\",\"phoneNumber\":\"+01-123-456-7890\",\"author\":{\"familyName\":"
     "null},\"tags\":[\"example\"]}",
     "{\"title\":\"Hello!\",\"author\":{\"givenName\":\"John\"},\"tags\":[\"example\"],"
     "\"content\":\"This will be unchanged\",\"phoneNumber\":\"+01-123-456-7890\"}",
     NULL},
    {"merge keeps int64 and reals", M,
     "{\"i\":9223372036854775807,\"n\":-9223372036854775808,\"r\":0.1,\"e\":1e300}",
     "{\"x\":1.5,\"y\":2.0}",
     "{\"i\":9223372036854775807,\"n\":-9223372036854775808,\"r\":0.1,\"e\":1e+300,"
     "\"x\":1.5,\"y\":2.0}",
     NULL},
    {"merge keeps escapes", M, "{\"s\":\"a\\u0000b\\n\\\"\\\\\\u00e9\"}", "{}",
     "{\"s\":\"a\\u0000b\\n\\\"\\\\\xc3\xa9\"}", NULL},
    {"merge malformed document", M, "{\"a\":", "{}", NULL, "malformed document"},
    {"merge malformed patch", M, "{}", "{\"a\"}", NULL, "malformed patch"},
    {"merge trailing garbage", M, "{} x", "{}", NULL, "malformed document"},
    {"merge empty document", M, "", "{}", NULL, "malformed document"},
};

/* ---- RFC 6902 ---- */

static const struct pcase json_cases[] = {
    {"6902 A.1 add member", J, "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]", "{\"foo\":\"bar\",\"baz\":\"qux\"}",
     NULL},
    {"6902 A.2 add element", J, "{\"foo\":[\"bar\",\"baz\"]}",
     "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
     "{\"foo\":[\"bar\",\"qux\",\"baz\"]}", NULL},
    {"6902 A.3 remove member", J, "{\"baz\":\"qux\",\"foo\":\"bar\"}",
     "[{\"op\":\"remove\",\"path\":\"/baz\"}]", "{\"foo\":\"bar\"}", NULL},
    {"6902 A.4 remove element", J, "{\"foo\":[\"bar\",\"qux\",\"baz\"]}",
     "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]", "{\"foo\":[\"bar\",\"baz\"]}", NULL},
    {"6902 A.5 replace", J, "{\"baz\":\"qux\",\"foo\":\"bar\"}",
     "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]",
     "{\"baz\":\"boo\",\"foo\":\"bar\"}", NULL},
    {"6902 A.6 move member", J,
     "{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
     "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
     "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}", NULL},
    {"6902 A.7 move element", J, "{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
     "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]",
     "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}", NULL},
    {"6902 A.8 test success", J, "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
     "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},"
     "{\"op\":\"test\",\"path\":\"/foo/1\",\"value\":2}]",
     "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}", NULL},
    {"6902 A.9 test error", J, "{\"baz\":\"qux\"}",
     "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]", NULL, "op[0] (test)"},
    {"6902 A.10 add nested", J, "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
     "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}", NULL},
    {"6902 A.11 unknown members", J, "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]",
     "{\"foo\":\"bar\",\"baz\":\"qux\"}", NULL},
    {"6902 A.12 nonexistent target", J, "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]", NULL,
     "op[0] (add): path \"/baz/bat\" does not exist"},
    {"6902 A.13 duplicate op", J, "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"op\":\"remove\"}]", NULL,
     "malformed patch"},
    {"6902 A.14 escapes", J, "{\"/\":9,\"~1\":10}",
     "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]", "{\"/\":9,\"~1\":10}", NULL},
    {"6902 A.15 string vs number", J, "{\"/\":9,\"~1\":10}",
     "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]", NULL, "test failed"},
    {"6902 A.16 append array", J, "{\"foo\":[\"bar\"]}",
     "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
     "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}", NULL},
    {"json copy", J, "{\"a\":{\"b\":[1]}}",
     "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/c\"},"
     "{\"op\":\"add\",\"path\":\"/c/b/-\",\"value\":2}]",
     "{\"a\":{\"b\":[1]},\"c\":{\"b\":[1,2]}}", NULL},
    {"json slash key", J, "{\"a/b\":1,\"m~n\":2}",
     "[{\"op\":\"replace\",\"path\":\"/a~1b\",\"value\":3},"
     "{\"op\":\"remove\",\"path\":\"/m~0n\"}]",
     "{\"a/b\":3}", NULL},
    {"json empty key", J, "{\"\":1}", "[{\"op\":\"replace\",\"path\":\"/\",\"value\":2}]",
     "{\"\":2}", NULL},
    {"json add replaces member", J, "{\"a\":1,\"b\":2}",
     "[{\"op\":\"add\",\"path\":\"/a\",\"value\":3}]", "{\"a\":3,\"b\":2}", NULL},
    {"json add at end index", J, "{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/1\",\"value\":2}]",
     "{\"a\":[1,2]}", NULL},
    {"json add past end", J, "{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/2\",\"value\":2}]",
     NULL, "does not exist"},
    {"json leading zero index", J, "{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/01\"}]",
     NULL, "\"/a/01\" does not exist"},
    {"json remove dash", J, "{\"a\":[1]}", "[{\"op\":\"remove\",\"path\":\"/a/-\"}]", NULL,
     "does not exist"},
    {"json replace missing", J, "{\"a\":1}",
     "[{\"op\":\"test\",\"path\":\"/a\",\"value\":1},"
     "{\"op\":\"replace\",\"path\":\"/b\",\"value\":1}]",
     NULL, "op[1] (replace): path \"/b\" does not exist"},
    {"json test missing", J, "{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/b\",\"value\":1}]", NULL,
     "op[0] (test): path \"/b\" does not exist"},
    {"json move missing from", J, "{\"a\":1}",
     "[{\"op\":\"move\",\"from\":\"/x\",\"path\":\"/b\"}]", NULL,
     "op[0] (move): from \"/x\" does not exist"},
    {"json copy missing from", J, "{\"a\":1}",
     "[{\"op\":\"copy\",\"from\":\"/a/0\",\"path\":\"/b\"}]", NULL, "from \"/a/0\""},
    {"json move into child", J, "{\"a\":{\"b\":1}}",
     "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/c\"}]", NULL, "parent of the path"},
    {"json move onto itself", J, "{\"a\":{\"b\":1}}",
     "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a\"}]", "{\"a\":{\"b\":1}}", NULL},
    {"json move to sibling prefix", J, "{\"a\":1}",
     "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/ab\"}]", "{\"ab\":1}", NULL},
    {"json test numbers by value", J, "{\"a\":1,\"b\":{\"c\":[1.0,\"x\"]}}",
     "[{\"op\":\"test\",\"path\":\"/a\",\"value\":1.0},"
     "{\"op\":\"test\",\"path\":\"/b\",\"value\":{\"c\":[1,\"x\"]}}]",
     "{\"a\":1,\"b\":{\"c\":[1.0,\"x\"]}}", NULL},
    {"json test root", J, "{\"a\":1}", "[{\"op\":\"test\",\"path\":\"\",\"value\":{\"a\":1}}]",
     "{\"a\":1}", NULL},
    {"json replace root", J, "{\"a\":1}",
     "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"b\":2}}]", "{\"b\":2}", NULL},
    {"json root becomes array", J, "{\"a\":1}",
     "[{\"op\":\"replace\",\"path\":\"\",\"value\":[1]}]", NULL, "not a JSON object"},
    {"json remove root", J, "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"\"}]", NULL,
     "does not exist"},
    {"json pointer without slash", J, "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"a\"}]", NULL,
     "not a JSON pointer"},
    {"json bad escape", J, "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a~2\"}]", NULL,
     "not a JSON pointer"},
    {"json trailing tilde", J, "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a~\"}]", NULL,
     "not a JSON pointer"},
    {"json NUL in pointer", J, "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a\\u0000\"}]", NULL,
     "not a JSON pointer"},
    {"json through scalar", J, "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":1}]",
     NULL, "does not exist"},
    {"json missing value", J, "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/b\"}]", NULL,
     "\"value\" missing"},
    {"json null value", J, "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/b\",\"value\":null}]",
     "{\"a\":1,\"b\":null}", NULL},
    {"json missing path", J, "{\"a\":1}", "[{\"op\":\"remove\"}]", NULL, "\"path\" missing"},
    {"json unknown op", J, "{\"a\":1}", "[{\"op\":\"frob\\n\",\"path\":\"/a\"}]", NULL,
     "unknown op \"frob\\n\""},
    {"json op not object", J, "{\"a\":1}", "[1]", NULL, "op[0]"},
    {"json patch not array", J, "{\"a\":1}", "{\"op\":\"remove\",\"path\":\"/a\"}", NULL,
     "not a JSON array"},
    {"json empty patch", J, "{\"a\":1}", "[]", "{\"a\":1}", NULL},
    {"json huge index", J, "{\"a\":[1]}",
     "[{\"op\":\"remove\",\"path\":\"/a/99999999999999999999999999\"}]", NULL, "does not exist"},
};

/* ---- strategic merge patch ---- */

#define NODE_DOC                                                                                   \
	"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"status\":{"     \
	"\"conditions\":["                                                                         \
	"{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"T0\"},"         \
	"{\"type\":\"DiskPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"T0\"},"           \
	"{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"T0\",\"reason\":"         \
	"\"KubeletReady\"},"                                                                       \
	"{\"type\":\"NetworkUnavailable\",\"status\":\"False\"}],"                                 \
	"\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"},"                       \
	"{\"type\":\"Hostname\",\"address\":\"n1\"}],"                                             \
	"\"images\":[{\"names\":[\"a\"],\"sizeBytes\":1},{\"names\":[\"b\"],\"sizeBytes\":2}],"    \
	"\"volumesInUse\":[\"v1\",\"v2\"]}}"

static const struct pcase smp_cases[] = {
    {"node status heartbeat", S, NODE_DOC,
     "{\"status\":{\"$setElementOrder/conditions\":[{\"type\":\"MemoryPressure\"},"
     "{\"type\":\"DiskPressure\"},{\"type\":\"Ready\"},{\"type\":\"PIDPressure\"}],"
     "\"conditions\":[{\"type\":\"Ready\",\"lastHeartbeatTime\":\"T1\"},"
     "{\"type\":\"PIDPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"T1\"},"
     "{\"$patch\":\"delete\",\"type\":\"NetworkUnavailable\"}]}}",
     "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"status\":{"
     "\"conditions\":["
     "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"T0\"},"
     "{\"type\":\"DiskPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"T0\"},"
     "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"T1\",\"reason\":"
     "\"KubeletReady\"},"
     "{\"type\":\"PIDPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"T1\"}],"
     "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"},"
     "{\"type\":\"Hostname\",\"address\":\"n1\"}],"
     "\"images\":[{\"names\":[\"a\"],\"sizeBytes\":1},{\"names\":[\"b\"],\"sizeBytes\":2}],"
     "\"volumesInUse\":[\"v1\",\"v2\"]}}",
     NULL},
    {"node images and volumesInUse replaced, addresses merged", S, NODE_DOC,
     "{\"status\":{\"images\":[{\"names\":[\"c\"],\"sizeBytes\":3}],\"volumesInUse\":[\"v3\"],"
     "\"addresses\":[{\"type\":\"Hostname\",\"address\":\"n2\"}]}}",
     "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"status\":{"
     "\"conditions\":["
     "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"T0\"},"
     "{\"type\":\"DiskPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"T0\"},"
     "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"T0\",\"reason\":"
     "\"KubeletReady\"},"
     "{\"type\":\"NetworkUnavailable\",\"status\":\"False\"}],"
     "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"},"
     "{\"type\":\"Hostname\",\"address\":\"n2\"}],"
     "\"images\":[{\"names\":[\"c\"],\"sizeBytes\":3}],\"volumesInUse\":[\"v3\"]}}",
     NULL},
    {"lease renew", S,
     "{\"kind\":\"Lease\",\"spec\":{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,"
     "\"renewTime\":\"T0\"}}",
     "{\"spec\":{\"renewTime\":\"T1\"}}",
     "{\"kind\":\"Lease\",\"spec\":{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,"
     "\"renewTime\":\"T1\"}}",
     NULL},
    {"pod containerStatuses by name", S,
     "{\"status\":{\"phase\":\"Pending\",\"containerStatuses\":["
     "{\"name\":\"a\",\"ready\":false,\"restartCount\":0,\"state\":{\"waiting\":{\"reason\":"
     "\"ContainerCreating\"}}},"
     "{\"name\":\"b\",\"ready\":true,\"restartCount\":2}]}}",
     "{\"status\":{\"phase\":\"Running\",\"$setElementOrder/containerStatuses\":[{\"name\":"
     "\"a\"},{\"name\":\"b\"}],\"containerStatuses\":[{\"name\":\"a\",\"ready\":true,"
     "\"state\":{\"running\":{\"startedAt\":\"T1\"},\"waiting\":null}}]}}",
     "{\"status\":{\"phase\":\"Running\",\"containerStatuses\":["
     "{\"name\":\"a\",\"ready\":true,\"restartCount\":0,\"state\":{\"running\":{\"startedAt\":"
     "\"T1\"}}},"
     "{\"name\":\"b\",\"ready\":true,\"restartCount\":2}]}}",
     NULL},
    {"pod podIPs by ip, conditions added", S, "{\"status\":{\"podIPs\":[{\"ip\":\"10.1.0.5\"}]}}",
     "{\"status\":{\"podIPs\":[{\"ip\":\"fd00::5\"}],\"conditions\":[{\"type\":\"Ready\","
     "\"status\":\"True\",\"message\":null}]}}",
     "{\"status\":{\"podIPs\":[{\"ip\":\"10.1.0.5\"},{\"ip\":\"fd00::5\"}],\"conditions\":[{"
     "\"type\":\"Ready\",\"status\":\"True\"}]}}",
     NULL},
    {"finalizers union", S, "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}",
     "{\"metadata\":{\"finalizers\":[\"b\",\"c\",\"c\"]}}",
     "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}", NULL},
    {"finalizers new", S, "{\"metadata\":{}}", "{\"metadata\":{\"finalizers\":[\"x\"]}}",
     "{\"metadata\":{\"finalizers\":[\"x\"]}}", NULL},
    {"env by name in containers by name", S,
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"env\":[{\"name\":\"A\","
     "\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}]},{\"name\":\"d\",\"image\":\"y\"}]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"B\",\"value\":\"3\"},"
     "{\"name\":\"C\",\"value\":\"4\"},{\"name\":\"A\",\"$patch\":\"delete\"}]}]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"env\":[{\"name\":\"B\","
     "\"value\":\"3\"},{\"name\":\"C\",\"value\":\"4\"}]},{\"name\":\"d\",\"image\":\"y\"}]}}",
     NULL},
    {"service ports by port", S,
     "{\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80,\"targetPort\":8080},"
     "{\"name\":\"https\",\"port\":443,\"targetPort\":8443}]}}",
     "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":9090},{\"port\":53,\"protocol\":"
     "\"UDP\"}]}}",
     "{\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80,\"targetPort\":9090},"
     "{\"name\":\"https\",\"port\":443,\"targetPort\":8443},{\"port\":53,\"protocol\":"
     "\"UDP\"}]}}",
     NULL},
    {"container ports by containerPort", S,
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,\"name\":"
     "\"web\"}]}]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,"
     "\"hostPort\":8080},{\"containerPort\":81}]}]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,\"name\":"
     "\"web\",\"hostPort\":8080},{\"containerPort\":81}]}]}}",
     NULL},
    {"endpoint addresses replaced", S, "{\"subsets\":[{\"addresses\":[{\"ip\":\"1.1.1.1\"}]}]}",
     "{\"subsets\":[{\"addresses\":[{\"ip\":\"2.2.2.2\"}]}]}",
     "{\"subsets\":[{\"addresses\":[{\"ip\":\"2.2.2.2\"}]}]}", NULL},
    {"tolerations replaced", S,
     "{\"spec\":{\"tolerations\":[{\"key\":\"a\",\"operator\":\"Exists\"}]}}",
     "{\"spec\":{\"tolerations\":[{\"key\":\"b\",\"operator\":\"Exists\"}]}}",
     "{\"spec\":{\"tolerations\":[{\"key\":\"b\",\"operator\":\"Exists\"}]}}", NULL},
    {"taints by key", S,
     "{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"},{\"key\":\"b\","
     "\"effect\":\"NoSchedule\"}]}}",
     "{\"spec\":{\"taints\":[{\"key\":\"b\",\"$patch\":\"delete\"},{\"key\":\"a\",\"effect\":"
     "\"NoExecute\"}]}}",
     "{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoExecute\"}]}}", NULL},
    {"deleteFromPrimitiveList", S, "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\",\"b\"]}}",
     "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"b\",\"z\"]}}",
     "{\"metadata\":{\"finalizers\":[\"a\",\"c\"]}}", NULL},
    {"deleteFromPrimitiveList and add", S, "{\"spec\":{\"podCIDRs\":[\"a\",\"b\"]}}",
     "{\"spec\":{\"$deleteFromPrimitiveList/podCIDRs\":[\"a\"],\"podCIDRs\":[\"c\"]}}",
     "{\"spec\":{\"podCIDRs\":[\"b\",\"c\"]}}", NULL},
    {"deleteFromPrimitiveList missing list", S, "{\"a\":1}",
     "{\"$deleteFromPrimitiveList/finalizers\":[\"x\"]}", "{\"a\":1}", NULL},
    {"deleteFromPrimitiveList not a list", S, "{\"a\":1}",
     "{\"$deleteFromPrimitiveList/finalizers\":\"x\"}", NULL, "not a list"},
    {"patch replace map", S, "{\"spec\":{\"selector\":{\"a\":\"1\",\"b\":\"2\"},\"x\":1}}",
     "{\"spec\":{\"selector\":{\"$patch\":\"replace\",\"c\":\"3\",\"d\":null}}}",
     "{\"spec\":{\"selector\":{\"c\":\"3\"},\"x\":1}}", NULL},
    {"patch replace list", S,
     "{\"status\":{\"conditions\":[{\"type\":\"A\",\"status\":\"True\"},{\"type\":\"B\","
     "\"status\":\"True\"}]}}",
     "{\"status\":{\"conditions\":[{\"type\":\"C\",\"status\":\"False\"},{\"$patch\":"
     "\"replace\"}]}}",
     "{\"status\":{\"conditions\":[{\"type\":\"C\",\"status\":\"False\"}]}}", NULL},
    {"patch delete map", S, "{\"spec\":{\"template\":{\"a\":1},\"b\":2}}",
     "{\"spec\":{\"template\":{\"$patch\":\"delete\"}}}", "{\"spec\":{\"b\":2}}", NULL},
    {"patch delete top", S, "{\"a\":1}", "{\"$patch\":\"delete\"}", "{}", NULL},
    {"patch replace top", S, "{\"a\":1}", "{\"$patch\":\"replace\",\"b\":{\"c\":null}}",
     "{\"b\":{}}", NULL},
    {"retainKeys ignored", S, "{\"spec\":{\"strategy\":{\"type\":\"A\",\"x\":1}}}",
     "{\"spec\":{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"B\"}}}",
     "{\"spec\":{\"strategy\":{\"type\":\"B\",\"x\":1}}}", NULL},
    {"null deletes and unknown dollar keys kept", S, "{\"a\":1,\"b\":2}",
     "{\"a\":null,\"$ref\":\"x\",\"c\":{\"d\":null,\"e\":[{\"f\":null}]}}",
     "{\"b\":2,\"$ref\":\"x\",\"c\":{\"e\":[{}]}}", NULL},
    {"new keyed list stripped", S, "{}",
     "{\"env\":[{\"name\":\"A\",\"value\":null},{\"name\":\"B\",\"$patch\":\"delete\"}]}",
     "{\"env\":[{\"name\":\"A\"}]}", NULL},
    {"type change replaces", S, "{\"a\":{\"b\":1},\"c\":[1]}", "{\"a\":[1],\"c\":{\"d\":1}}",
     "{\"a\":[1],\"c\":{\"d\":1}}", NULL},
    {"ownerReferences by uid", S,
     "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"u1\",\"name\":\"a\"}]}}",
     "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"u1\",\"controller\":true},{\"uid\":"
     "\"u2\",\"name\":\"b\"}]}}",
     "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"u1\",\"name\":\"a\",\"controller\":true},"
     "{\"uid\":\"u2\",\"name\":\"b\"}]}}",
     NULL},
    {"volumeMounts by mountPath", S,
     "{\"volumeMounts\":[{\"name\":\"a\",\"mountPath\":\"/a\"},{\"name\":\"b\",\"mountPath\":"
     "\"/b\"}]}",
     "{\"volumeMounts\":[{\"name\":\"c\",\"mountPath\":\"/a\"}]}",
     "{\"volumeMounts\":[{\"name\":\"c\",\"mountPath\":\"/a\"},{\"name\":\"b\",\"mountPath\":"
     "\"/b\"}]}",
     NULL},
    {"duplicate keys all deleted", S,
     "{\"conditions\":[{\"type\":\"A\",\"n\":1},{\"type\":\"A\",\"n\":2},{\"type\":\"B\"}]}",
     "{\"conditions\":[{\"type\":\"A\",\"$patch\":\"delete\"}]}",
     "{\"conditions\":[{\"type\":\"B\"}]}", NULL},
    {"delete then add same key", S, "{\"conditions\":[{\"type\":\"A\",\"n\":1}]}",
     "{\"conditions\":[{\"type\":\"A\",\"$patch\":\"delete\"},{\"type\":\"A\",\"n\":2}]}",
     "{\"conditions\":[{\"type\":\"A\",\"n\":2}]}", NULL},
    {"element lacks merge key", S, "{\"conditions\":[]}",
     "{\"conditions\":[{\"status\":\"True\"}]}", NULL, "lacks merge key \"type\""},
    {"non-object in keyed list", S, "{\"conditions\":[]}", "{\"conditions\":[1]}", NULL,
     "non-object"},
    {"unknown directive", S, "{\"a\":{}}", "{\"a\":{\"$patch\":\"merge\"}}", NULL,
     "unknown $patch"},
    {"unknown list directive", S, "{\"env\":[]}", "{\"env\":[{\"name\":\"a\",\"$patch\":1}]}", NULL,
     "unknown $patch"},
    {"strategic patch not object", S, "{}", "[1]", NULL, "not a JSON object"},
    {"strategic malformed", S, "{}", "{\"a\":tru}", NULL, "malformed patch"},
};

/* ---- single tests ---- */

static void test_types(void **state)
{
	(void)state;
	assert_int_equal(patch_type_of("application/merge-patch+json"), PATCH_MERGE);
	assert_int_equal(patch_type_of("Application/Merge-Patch+JSON; charset=utf-8"), PATCH_MERGE);
	assert_int_equal(patch_type_of("application/strategic-merge-patch+json"), PATCH_STRATEGIC);
	assert_int_equal(patch_type_of(" application/json-patch+json ;x=y"), PATCH_JSON);
	assert_int_equal(patch_type_of("application/apply-patch+yaml"), PATCH_UNSUPPORTED);
	assert_int_equal(patch_type_of("application/json"), PATCH_UNSUPPORTED);
	assert_int_equal(patch_type_of("application/merge-patch+jsonx"), PATCH_UNSUPPORTED);
	assert_int_equal(patch_type_of(""), PATCH_UNSUPPORTED);
	assert_int_equal(patch_type_of(NULL), PATCH_UNSUPPORTED);
}

static void test_unsupported_apply(void **state)
{
	(void)state;
	static char junk[] = "junk";
	struct buf out = BUF_INIT;
	char *err = junk; /* not read: set on every return */
	int rc = patch_apply(PATCH_UNSUPPORTED, "{}", 2, "{}", 2, &out, &err);
	bool has_err = err != NULL && err != junk;
	if (has_err)
		free(err);
	err = junk;
	int rc2 = patch_apply(PATCH_MERGE, "{}", 2, "{}", 2, &out, &err);
	bool cleared = err == NULL;
	buf_free(&out);
	assert_int_equal(rc, -1);
	assert_true(has_err);
	assert_int_equal(rc2, 0);
	assert_true(cleared);
}

/* The output is appended; a failure leaves it as it was; err may be NULL. */
static void test_out_buffer(void **state)
{
	(void)state;
	struct buf out = BUF_INIT;
	char *err = NULL;
	buf_append_str(&out, "x");
	const char *jp = "[{\"op\":\"remove\",\"path\":\"/a\"}]";
	int rc1 = patch_apply(PATCH_MERGE, "{}", 2, "{\"a\":1}", 7, &out, &err);
	int rc2 = patch_apply(PATCH_JSON, "{}", 2, jp, strlen(jp), &out, NULL);
	char got[64];
	snprintf(got, sizeof got, "%s", buf_cstr(&out));
	size_t len = out.len;
	buf_free(&out);
	free(err);
	assert_int_equal(rc1, 0);
	assert_int_equal(rc2, -1);
	assert_string_equal(got, "x{\"a\":1}");
	assert_int_equal(len, 8);
}

/* n nested arrays holding 1, inside {"a": ...}. */
static char *nested(size_t n)
{
	char *s = malloc(2 * n + 16);
	assert_non_null(s);
	strcpy(s, "{\"a\":");
	size_t l = strlen(s);
	memset(s + l, '[', n);
	s[l + n] = '1';
	memset(s + l + n + 1, ']', n);
	strcpy(s + l + 2 * n + 1, "}");
	return s;
}

static void test_depth(void **state)
{
	(void)state;
	char *ok = nested(511), *deep = nested(512), *res = NULL, *res2 = NULL, *res3 = NULL;
	int rc1 = run(PATCH_MERGE, ok, strlen(ok), "{}", 2, &res);
	int rc2 = run(PATCH_MERGE, deep, strlen(deep), "{}", 2, &res2);
	int rc3 = run(PATCH_STRATEGIC, "{}", 2, deep, strlen(deep), &res3);
	bool same = res && strcmp(res, ok) == 0;
	bool msg = res2 && strstr(res2, "deeper than 512");
	free(ok);
	free(deep);
	free(res);
	free(res2);
	free(res3);
	assert_int_equal(rc1, 0);
	assert_true(same);
	assert_int_equal(rc2, -1);
	assert_true(msg);
	assert_int_equal(rc3, -1);
}

/* Brackets inside strings do not count; a very deep document is refused. */
static void test_depth_strings_and_huge(void **state)
{
	(void)state;
	char *s = malloc(100020), *res = NULL, *res2 = NULL;
	assert_non_null(s);
	strcpy(s, "{\"a\":\"");
	memset(s + 6, '[', 100000);
	strcpy(s + 100006, "\"}");
	int rc1 = run(PATCH_MERGE, s, strlen(s), "{}", 2, &res);
	bool same = res && strcmp(res, s) == 0;
	memset(s, '[', 100000);
	int rc2 = run(PATCH_JSON, "{}", 2, s, 100000, &res2);
	free(s);
	free(res);
	free(res2);
	assert_int_equal(rc1, 0);
	assert_true(same);
	assert_int_equal(rc2, -1);
}

/* JSON patch may not build a result deeper than the limit either. */
static void test_depth_by_copy(void **state)
{
	(void)state;
	struct buf patch = BUF_INIT;
	char *doc = nested(300), *res = NULL, *res2 = NULL;
	buf_append_str(&patch, "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/a");
	for (int i = 0; i < 250; i++)
		buf_append_str(&patch, "/0");
	buf_append_str(&patch, "\"}]");
	int rc1 = run(PATCH_JSON, doc, strlen(doc), patch.data, patch.len, &res);
	const char *ok = "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b\"}]";
	int rc2 = run(PATCH_JSON, doc, strlen(doc), ok, strlen(ok), &res2);
	bool msg = res && strstr(res, "deeper");
	buf_free(&patch);
	free(doc);
	free(res);
	free(res2);
	assert_int_equal(rc1, -1);
	assert_true(msg);
	assert_int_equal(rc2, 0);
}

/* A large document and patch go through. */
static void test_large(void **state)
{
	(void)state;
	struct buf doc = BUF_INIT, patch = BUF_INIT;
	buf_append_str(&doc, "{\"metadata\":{\"finalizers\":[");
	buf_append_str(&patch, "{\"metadata\":{\"finalizers\":[");
	for (int i = 0; i < 50000; i++) {
		buf_printf(&doc, "%s\"f%d\"", i ? "," : "", i);
		buf_printf(&patch, "%s\"f%d\"", i ? "," : "", i + 25000);
	}
	buf_append_str(&doc, "]}}");
	buf_append_str(&patch, "]}}");
	char *res = NULL;
	int rc = run(PATCH_STRATEGIC, doc.data, doc.len, patch.data, patch.len, &res);
	bool tail = res && strstr(res, ",\"f74999\"]}}") && !strstr(res, "\"f75000\"");
	buf_free(&doc);
	buf_free(&patch);
	free(res);
	assert_int_equal(rc, 0);
	assert_true(tail);
}

static int add_case(struct CMUnitTest *tests, size_t *n, const char *group, const struct pcase *c)
{
	char *name = NULL;
	if (asprintf(&name, "%s: %s", group, c->name) < 0)
		return -1;
	tests[(*n)++] = (struct CMUnitTest){name, run_case, NULL, NULL, (void *)c};
	return 0;
}

int main(void)
{
	const struct CMUnitTest singles[] = {
	    cmocka_unit_test(test_types),
	    cmocka_unit_test(test_unsupported_apply),
	    cmocka_unit_test(test_out_buffer),
	    cmocka_unit_test(test_depth),
	    cmocka_unit_test(test_depth_strings_and_huge),
	    cmocka_unit_test(test_depth_by_copy),
	    cmocka_unit_test(test_large),
	};
	static const struct {
		const char *group;
		const struct pcase *cases;
		size_t n;
	} groups[] = {
	    {"merge", merge_cases, N_ELEMS(merge_cases)},
	    {"json", json_cases, N_ELEMS(json_cases)},
	    {"strategic", smp_cases, N_ELEMS(smp_cases)},
	};
	size_t total = N_ELEMS(singles), n = 0;
	for (size_t g = 0; g < N_ELEMS(groups); g++)
		total += groups[g].n;
	struct CMUnitTest *tests = calloc(total, sizeof *tests);
	if (!tests)
		return 1;
	for (size_t g = 0; g < N_ELEMS(groups); g++)
		for (size_t i = 0; i < groups[g].n; i++)
			if (add_case(tests, &n, groups[g].group, &groups[g].cases[i]) < 0)
				return 1;
	for (size_t i = 0; i < N_ELEMS(singles); i++)
		tests[n++] = singles[i];
	int rc = _cmocka_run_group_tests("patch", tests, n, NULL, NULL);
	for (size_t i = 0; i < n - N_ELEMS(singles); i++)
		free((char *)tests[i].name);
	free(tests);
	return rc;
}
