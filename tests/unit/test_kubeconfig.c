/*
 * test_kubeconfig.c - kube/kubeconfig: realistic kubelet kubeconfigs (files,
 * inline data, tokens), choosing the context, the validation errors and their
 * messages, and hostile YAML (alias bombs, deep nesting, wrong types,
 * binary) that must fail cleanly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "testutil.h"
#include "util/buf.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define CA_PEM                                                                                     \
	"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUTestCA\n-----END CERTIFICATE-----\n"
#define CERT_PEM                                                                                   \
	"-----BEGIN CERTIFICATE-----\nMIIB0TCCAXegAwIBAgIINodeCert\n-----END CERTIFICATE-----\n"
#define KEY_PEM "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIKeyKeyKey\n-----END EC PRIVATE KEY-----\n"

/* A temporary directory with the files a kubelet kubeconfig points at,
 * made once for the whole group. */
struct fixture {
	char dir[256];
};

static struct fixture fx;

static char *path_in(const struct fixture *f, const char *rel)
{
	char *p = NULL;
	assert_true(asprintf(&p, "%s/%s", f->dir, rel) > 0);
	return p;
}

static int group_setup(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	if (test_mkdtemp(f->dir, sizeof f->dir, "kubeconfig") < 0)
		return -1;
	if (test_write_file(f->dir, "pki/ca.crt", CA_PEM) < 0 ||
	    test_write_file(f->dir, "pki/kubelet-client-2024.pem", CERT_PEM KEY_PEM) < 0 ||
	    test_write_file(f->dir, "pki/client.crt", CERT_PEM) < 0 ||
	    test_write_file(f->dir, "pki/client.key", KEY_PEM) < 0 ||
	    test_write_file(f->dir, "token", "abcdef.0123456789abcdef\n") < 0)
		return -1;
	char *target = path_in(f, "pki/kubelet-client-2024.pem");
	char *link = path_in(f, "pki/kubelet-client-current.pem");
	int rc = symlink(target, link);
	free(target);
	free(link);
	return rc;
}

static int group_teardown(void **state)
{
	(void)state;
	test_rm_rf(fx.dir);
	return 0;
}

/* Write text as dir/rel and load it: the return code, *kc and *err. */
static int load_text(const struct fixture *f, const char *rel, const char *text,
		     struct kubeconfig *kc, char **err)
{
	assert_int_equal(test_write_file(f->dir, rel, text), 0);
	char *p = path_in(f, rel);
	int rc = kubeconfig_load(p, kc, err);
	free(p);
	return rc;
}

static void assert_zeroed(const struct kubeconfig *kc)
{
	assert_null(kc->server);
	assert_null(kc->ca_file);
	assert_null(kc->token);
	assert_null(kc->ca_data.data);
	assert_null(kc->client_key_data.data);
	assert_false(kc->insecure_skip_tls_verify);
}

/* A failure: -1, a zeroed result, and one line that contains want. */
static void expect_error(int rc, struct kubeconfig *kc, char *err, const char *want)
{
	if (rc != -1)
		fail_msg("loaded, expected an error with \"%s\"", want);
	assert_zeroed(kc);
	assert_non_null(err);
	assert_null(strchr(err, '\n'));
	assert_true(!strncmp(err, "kubeconfig", 10));
	if (!strstr(err, want))
		fail_msg("error \"%s\" lacks \"%s\"", err, want);
	free(err);
	kubeconfig_free(kc);
}

static void expect_parse_error(const char *yaml, size_t len, const char *want)
{
	struct kubeconfig kc;
	char *err = NULL;
	int rc = kubeconfig_parse(yaml, len, "/nonexistent", &kc, &err);
	expect_error(rc, &kc, err, want);
}

static void assert_path(const struct fixture *f, const char *got, const char *rel)
{
	char *want = path_in(f, rel);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(want);
}

static void assert_buf(const struct buf *b, const char *want)
{
	assert_int_equal(b->len, strlen(want));
	assert_string_equal(buf_cstr(b), want);
}

static char *b64(const char *s)
{
	static const char tbl[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(s);
	char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;
	assert_non_null(o);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)(unsigned char)s[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)(unsigned char)s[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)s[i + 2];
		*p++ = tbl[v >> 18];
		*p++ = tbl[v >> 12 & 63];
		*p++ = i + 1 < n ? tbl[v >> 6 & 63] : '=';
		*p++ = i + 2 < n ? tbl[v & 63] : '=';
	}
	*p = '\0';
	return o;
}

/* ---- realistic files ---- */

static const char kubelet_conf[] = "apiVersion: v1\n"
				   "clusters:\n"
				   "- cluster:\n"
				   "    certificate-authority: pki/ca.crt\n"
				   "    server: https://10.0.0.1:6443\n"
				   "  name: default-cluster\n"
				   "contexts:\n"
				   "- context:\n"
				   "    cluster: default-cluster\n"
				   "    namespace: default\n"
				   "    user: default-auth\n"
				   "  name: default-context\n"
				   "current-context: default-context\n"
				   "kind: Config\n"
				   "preferences: {}\n"
				   "users:\n"
				   "- name: default-auth\n"
				   "  user:\n"
				   "    client-certificate: %s/pki/kubelet-client-current.pem\n"
				   "    client-key: ./pki/kubelet-client-current.pem\n";

static void test_kubelet_files(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	struct kubeconfig kc;
	char *text = NULL, *err = NULL;
	assert_true(asprintf(&text, kubelet_conf, f->dir) > 0);
	if (load_text(f, "kubelet.conf", text, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_null(err);
	assert_string_equal(kc.server, "https://10.0.0.1:6443");
	assert_path(f, kc.ca_file, "pki/ca.crt");
	assert_path(f, kc.client_cert_file, "pki/kubelet-client-current.pem");
	assert_path(f, kc.client_key_file, "./pki/kubelet-client-current.pem");
	assert_int_equal(kc.ca_data.len, 0);
	assert_int_equal(kc.client_cert_data.len, 0);
	assert_null(kc.token);
	assert_null(kc.token_file);
	assert_null(kc.tls_server_name);
	assert_false(kc.insecure_skip_tls_verify);
	kubeconfig_free(&kc);
	kubeconfig_free(&kc); /* twice is harmless */
	free(text);
}

/* A kubeconfig reached through a link resolves against the link's directory. */
static void test_linked_kubeconfig(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	struct kubeconfig kc;
	char *text = NULL, *err = NULL;
	assert_true(asprintf(&text, kubelet_conf, f->dir) > 0);
	assert_int_equal(test_write_file(f->dir, "real/kubelet.conf", text), 0);
	char *target = path_in(f, "real/kubelet.conf"), *link = path_in(f, "linked.conf");
	assert_int_equal(symlink(target, link), 0);
	if (kubeconfig_load(link, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_path(f, kc.ca_file, "pki/ca.crt");
	kubeconfig_free(&kc);
	free(target);
	free(link);
	free(text);
}

static void test_inline_data(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	struct kubeconfig kc;
	char *ca = b64(CA_PEM), *cert = b64(CERT_PEM), *key = b64(KEY_PEM), *text = NULL;
	char *err = NULL;
	assert_true(asprintf(&text,
			     "apiVersion: v1\nkind: Config\n"
			     "clusters:\n- name: c\n  cluster:\n"
			     "    server: \"https://api.example.com:6443\"\n"
			     "    certificate-authority-data: %s\n"
			     "    tls-server-name: kubernetes.default.svc\n"
			     "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
			     "current-context: x\n"
			     "users:\n- name: u\n  user:\n"
			     "    client-certificate-data: %s\n"
			     "    client-key-data: >-\n      %.40s\n      %s\n",
			     ca, cert, key, key + 40) > 0);
	if (load_text(f, "inline.conf", text, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://api.example.com:6443");
	assert_string_equal(kc.tls_server_name, "kubernetes.default.svc");
	assert_buf(&kc.ca_data, CA_PEM);
	assert_buf(&kc.client_cert_data, CERT_PEM);
	assert_buf(&kc.client_key_data, KEY_PEM);
	assert_null(kc.ca_file);
	assert_null(kc.client_cert_file);
	assert_null(kc.client_key_file);
	kubeconfig_free(&kc);
	free(ca);
	free(cert);
	free(key);
	free(text);
}

static void test_token(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	struct kubeconfig kc;
	char *err = NULL;
	const char *text = "clusters:\n- name: c\n  cluster:\n    server: https://h:6443\n"
			   "    insecure-skip-tls-verify: true\n"
			   "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
			   "current-context: x\n"
			   "users:\n- name: u\n  user:\n    token: abcdef.0123456789abcdef\n";
	if (load_text(f, "token.conf", text, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_string_equal(kc.token, "abcdef.0123456789abcdef");
	assert_true(kc.insecure_skip_tls_verify);
	assert_null(kc.token_file);
	assert_null(kc.client_cert_file);
	kubeconfig_free(&kc);
}

static void test_token_file(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	struct kubeconfig kc;
	char *err = NULL;
	const char *text = "clusters:\n- name: c\n  cluster:\n    server: https://h:6443\n"
			   "    certificate-authority: pki/ca.crt\n"
			   "    insecure-skip-tls-verify: false\n"
			   "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
			   "current-context: x\n"
			   "users:\n- name: u\n  user:\n    tokenFile: token\n";
	if (load_text(f, "tokenfile.conf", text, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_path(f, kc.token_file, "token");
	assert_null(kc.token);
	assert_false(kc.insecure_skip_tls_verify);
	kubeconfig_free(&kc);
}

/* kubeconfig_parse resolves against the base directory it is given. */
static void test_parse_base_dir(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	struct kubeconfig kc;
	char *err = NULL;
	const char *text = "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
			   "    certificate-authority: ca.crt\n"
			   "contexts:\n- name: x\n  context: {cluster: c}\n";
	char *pki = path_in(f, "pki");
	if (kubeconfig_parse(text, strlen(text), pki, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_path(f, kc.ca_file, "pki/ca.crt");
	assert_null(kc.token);
	kubeconfig_free(&kc);
	free(pki);

	/* a relative base directory is taken from the working directory */
	char *cwd = get_current_dir_name(), *want = NULL;
	assert_non_null(cwd);
	assert_true(asprintf(&want, "cannot read %s/no/such/dir/ca.crt: No such file", cwd) > 0);
	int rc = kubeconfig_parse(text, strlen(text), "no/such/dir", &kc, &err);
	expect_error(rc, &kc, err, want);
	free(want);
	free(cwd);
}

/* ---- choosing the context ---- */

static const char three_contexts[] = "apiVersion: v1\nkind: Config\n"
				     "clusters:\n"
				     "- {name: prod, cluster: {server: 'https://prod:6443'}}\n"
				     "- {name: stage, cluster: {server: 'https://stage:6443'}}\n"
				     "- {name: dev, cluster: {server: 'https://dev:6443'}}\n"
				     "contexts:\n"
				     "- {name: prod-admin, context: {cluster: prod, user: admin}}\n"
				     "- {name: stage-node, context: {cluster: stage, user: node}}\n"
				     "- {name: dev-admin, context: {cluster: dev, user: admin}}\n"
				     "%s"
				     "users:\n"
				     "- {name: admin, user: {token: admin-token}}\n"
				     "- {name: node, user: {token: node-token}}\n";

static void test_current_context(void **state)
{
	static const struct {
		const char *current, *server, *token;
	} cases[] = {
	    {"current-context: stage-node\n", "https://stage:6443", "node-token"},
	    {"current-context: prod-admin\n", "https://prod:6443", "admin-token"},
	    {"current-context: \"dev-admin\"\n", "https://dev:6443", "admin-token"},
	};
	struct fixture *f = &fx;
	(void)state;
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		struct kubeconfig kc;
		char *text = NULL, *err = NULL;
		assert_true(asprintf(&text, three_contexts, cases[i].current) > 0);
		if (load_text(f, "multi.conf", text, &kc, &err) != 0)
			fail_msg("%s", err);
		assert_string_equal(kc.server, cases[i].server);
		assert_string_equal(kc.token, cases[i].token);
		kubeconfig_free(&kc);
		free(text);
	}
}

static void test_context_errors(void **state)
{
	static const struct {
		const char *current, *want;
	} cases[] = {
	    {"", "current-context: missing, and there are 3 contexts"},
	    {"current-context: \"\"\n", "current-context: missing"},
	    {"current-context: nope\n", "current-context: no contexts entry named \"nope\""},
	    {"current-context: [a]\n", "current-context: expected a string"},
	    {"current-context: \"a\\nb\\tc\"\n", "no contexts entry named \"a?b?c\""},
	};
	struct fixture *f = &fx;
	(void)state;
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		struct kubeconfig kc;
		char *text = NULL, *err = NULL;
		assert_true(asprintf(&text, three_contexts, cases[i].current) > 0);
		int rc = load_text(f, "multi.conf", text, &kc, &err);
		expect_error(rc, &kc, err, cases[i].want);
		free(text);
	}
}

/* Whatever the file holds, the message stays short. */
static void test_long_message(void **state)
{
	struct buf b = BUF_INIT;
	struct kubeconfig kc;
	char *err = NULL;
	(void)state;
	assert_int_equal(buf_append_str(&b, "current-context: "), 0);
	for (int i = 0; i < 100000; i++)
		assert_int_equal(buf_append_char(&b, 'x'), 0);
	assert_int_equal(buf_append_str(&b, "\ncontexts: []\n"), 0);
	assert_int_equal(kubeconfig_parse(b.data, b.len, NULL, &kc, &err), -1);
	assert_non_null(err);
	assert_true(strlen(err) <= 1024);
	assert_non_null(strstr(err, "current-context: no contexts entry named \"xxx"));
	assert_string_equal(err + strlen(err) - 3, "...");
	free(err);
	buf_free(&b);
}

static void test_single_context_fallback(void **state)
{
	struct kubeconfig kc;
	char *err = NULL;
	const char *text = "clusters:\n- {name: a, cluster: {server: 'https://a'}}\n"
			   "- {name: b, cluster: {server: 'https://b'}}\n"
			   "contexts:\n- {name: only, context: {cluster: b, user: ub}}\n"
			   "users:\n- {name: ua, user: {token: ta}}\n"
			   "- {name: ub, user: {token: tb}}\n";
	(void)state;
	if (kubeconfig_parse(text, strlen(text), NULL, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://b");
	assert_string_equal(kc.token, "tb");
	kubeconfig_free(&kc);
}

/* A bootstrap file without contexts: the one cluster and the one user. */
static void test_no_contexts_fallback(void **state)
{
	struct kubeconfig kc;
	char *err = NULL;
	const char *text =
	    "apiVersion: v1\nkind: Config\n"
	    "clusters:\n- name: boot\n  cluster:\n    server: https://boot:6443\n"
	    "users:\n- name: kubelet-bootstrap\n  user:\n    token: 07401b.f395accd246ae52d\n";
	(void)state;
	if (kubeconfig_parse(text, strlen(text), NULL, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://boot:6443");
	assert_string_equal(kc.token, "07401b.f395accd246ae52d");
	kubeconfig_free(&kc);

	const char *two = "clusters:\n- {name: a, cluster: {server: x}}\n"
			  "- {name: b, cluster: {server: y}}\n"
			  "users:\n- {name: u, user: {token: t}}\n";
	expect_parse_error(two, strlen(two), "contexts: missing");
	/* one cluster and no user: the kubeconfig of kube-public/cluster-info */
	const char *info = "clusters:\n- {name: '', cluster: {server: 'https://x'}}\nusers: null\n";
	if (kubeconfig_parse(info, strlen(info), NULL, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://x");
	assert_null(kc.token);
	kubeconfig_free(&kc);
	const char *two_users = "clusters:\n- {name: a, cluster: {server: x}}\n"
				"users:\n- {name: u, user: {token: t}}\n- {name: v, user: {}}\n";
	expect_parse_error(two_users, strlen(two_users), "contexts: missing");
}

/* A context without a user gives a cluster and no credentials. */
static void test_context_without_user(void **state)
{
	struct kubeconfig kc;
	char *err = NULL;
	const char *text = "clusters:\n- {name: a, cluster: {server: 'https://a'}}\n"
			   "contexts:\n- {name: c, context: {cluster: a}}\ncurrent-context: c\n";
	(void)state;
	if (kubeconfig_parse(text, strlen(text), NULL, &kc, &err) != 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://a");
	assert_null(kc.token);
	assert_null(kc.client_cert_file);
	kubeconfig_free(&kc);
}

/* ---- validation errors ---- */

struct bad_case {
	const char *yaml, *want;
};

#define CTX	"contexts:\n- {name: x, context: {cluster: c, user: u}}\ncurrent-context: x\n"
#define CLUSTER "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
#define USERS	"users:\n- {name: u, user: {token: t}}\n"

static const struct bad_case bad_cases[] = {
    {CTX "clusters:\n- name: c\n  cluster:\n    certificate-authority: pki/ca.crt\n"
	 "users:\n- {name: u, user: {token: t}}\n",
     "clusters[0].cluster.server: missing"},
    {CTX "clusters:\n- name: c\n  cluster:\n    server: ''\n"
	 "users:\n- {name: u, user: {token: t}}\n",
     "clusters[0].cluster.server: missing"},
    {CTX "clusters:\n- name: c\n"
	 "users:\n- {name: u, user: {token: t}}\n",
     "clusters[0].cluster.server: missing"},
    {CTX CLUSTER "    certificate-authority-data: 'not base64!'\n"
		 "users:\n- {name: u, user: {token: t}}\n",
     "clusters[0].cluster.certificate-authority-data: invalid base64"},
    {CTX CLUSTER "users:\n- {name: other, user: {}}\n- name: u\n  user:\n"
		 "    client-certificate-data: Zm9v\n    client-key-data: Zm9v=\n",
     "users[1].user.client-key-data: invalid base64"},
    {CTX CLUSTER "users:\n- name: u\n  user:\n    client-certificate: pki/nope.crt\n"
		 "    client-key: pki/client.key\n",
     "users[0].user.client-certificate: cannot read "},
    {CTX CLUSTER "    certificate-authority: /nonexistent/ca.crt\n"
		 "users:\n- {name: u, user: {token: t}}\n",
     "clusters[0].cluster.certificate-authority: cannot read /nonexistent/ca.crt: No such file"},
    {CTX CLUSTER "    certificate-authority: pki\n"
		 "users:\n- {name: u, user: {token: t}}\n",
     "certificate-authority: cannot read "},
    {CTX CLUSTER "users:\n- name: u\n  user:\n    tokenFile: missing-token\n",
     "users[0].user.tokenFile: cannot read "},
    {CTX CLUSTER "    certificate-authority: pki/ca.crt\n    certificate-authority-data: Zm9v\n"
		 "users:\n- {name: u, user: {token: t}}\n",
     "both certificate-authority and certificate-authority-data"},
    {CTX CLUSTER "users:\n- name: u\n  user:\n    client-certificate: pki/client.crt\n"
		 "    client-certificate-data: Zm9v\n    client-key: pki/client.key\n",
     "users[0].user: both client-certificate and client-certificate-data"},
    {CTX CLUSTER "users:\n- name: u\n  user:\n    client-certificate: pki/client.crt\n",
     "users[0].user: client-certificate given without client-key"},
    {CTX CLUSTER "users:\n- name: u\n  user:\n    client-key-data: Zm9v\n",
     "users[0].user: client-key given without client-certificate"},
    {CTX "clusters:\n- {name: d, cluster: {server: x}}\nusers:\n- {name: u, user: {}}\n",
     "contexts[0].context.cluster: no clusters entry named \"c\""},
    {CTX CLUSTER "users:\n- {name: v, user: {}}\n",
     "contexts[0].context.user: no users entry named \"u\""},
    {"contexts:\n- {name: x, context: {user: u}}\ncurrent-context: x\n" CLUSTER,
     "contexts[0].context.cluster: missing"},
    {CTX "clusters:\n- {name: c, cluster: {server: a}}\n- {name: c, cluster: {server: b}}\n",
     "clusters[1].name: \"c\" given more than once"},
    {CTX CLUSTER "clusters: []\n", "clusters: given more than once"},
    {CTX USERS CLUSTER "    server: https://again\n",
     "clusters[0].cluster.server: given more than once"},
    {CTX USERS CLUSTER "    insecure-skip-tls-verify: \"true\"\n",
     "insecure-skip-tls-verify: expected true or false"},
    {CTX USERS CLUSTER "    insecure-skip-tls-verify: maybe\n",
     "insecure-skip-tls-verify: expected true or false"},
    {CTX USERS CLUSTER "    tls-server-name: \"a\\0b\"\n", "tls-server-name: contains a NUL byte"},
};

/* One row of bad_cases, loaded from a file beside the fixture's files. */
static void run_validation_case(void **state)
{
	const struct bad_case *c = *state;
	struct kubeconfig kc;
	char *err = NULL;
	int rc = load_text(&fx, "bad.conf", c->yaml, &kc, &err);
	expect_error(rc, &kc, err, c->want);
}

/* The whole message, with the path of the file. */
static void test_error_message_format(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	struct kubeconfig kc;
	char *err = NULL;
	const char *text = CTX CLUSTER "users:\n- name: u\n  user:\n"
				       "    client-certificate-data: Zm9v\n"
				       "    client-key-data: '%%%%'\n";
	int rc = load_text(f, "k.conf", text, &kc, &err);
	char *p = path_in(f, "k.conf"), *want = NULL;
	assert_true(
	    asprintf(&want, "kubeconfig %s: users[0].user.client-key-data: invalid base64", p) > 0);
	assert_int_equal(rc, -1);
	assert_string_equal(err, want);
	free(err);
	free(want);
	free(p);

	err = NULL;
	rc = kubeconfig_load("/nonexistent/kubelet.conf", &kc, &err);
	assert_int_equal(rc, -1);
	assert_string_equal(err, "kubeconfig /nonexistent/kubelet.conf: cannot read: No such file "
				 "or directory");
	free(err);
	kubeconfig_free(&kc);
}

/* Null values are absent values; YAML 1.1 booleans are booleans. */
static void test_nulls_and_booleans(void **state)
{
	struct kubeconfig kc;
	char *err = NULL;
	const char *text =
	    CTX "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
		"    certificate-authority-data: null\n"
		"    certificate-authority: ~\n"
		"    tls-server-name:\n"
		"    insecure-skip-tls-verify: yes\n"
		"users:\n- name: u\n  user:\n    token: !!null ''\n    tokenFile: \"\"\n";
	(void)state;
	if (kubeconfig_parse(text, strlen(text), "/", &kc, &err) != 0)
		fail_msg("%s", err);
	assert_null(kc.ca_file);
	assert_int_equal(kc.ca_data.len, 0);
	assert_null(kc.tls_server_name);
	assert_true(kc.insecure_skip_tls_verify);
	assert_null(kc.token);
	assert_null(kc.token_file);
	kubeconfig_free(&kc);
}

/* Anchors and aliases used the way people do use them. */
static void test_aliases_allowed(void **state)
{
	struct kubeconfig kc;
	char *err = NULL;
	const char *text = "clusters:\n- name: c\n  cluster: &cl\n    server: &srv https://h:6443\n"
			   "- name: d\n  cluster: *cl\n"
			   "contexts:\n- {name: x, context: {cluster: d, user: u}}\n"
			   "current-context: x\n"
			   "users:\n- name: u\n  user: {token: *srv}\n";
	(void)state;
	if (kubeconfig_parse(text, strlen(text), "/", &kc, &err) != 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://h:6443");
	assert_string_equal(kc.token, "https://h:6443");
	kubeconfig_free(&kc);
}

/* ---- hostile input ---- */

static void test_billion_laughs(void **state)
{
	struct buf b = BUF_INIT;
	(void)state;
	assert_int_equal(buf_append_str(&b,
					"a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\","
					"\"lol\",\"lol\",\"lol\"]\n"),
			 0);
	for (char c = 'b'; c <= 'i'; c++) {
		assert_int_equal(buf_printf(&b, "%c: &%c [", c, c), 0);
		for (int i = 0; i < 9; i++)
			assert_int_equal(buf_printf(&b, "%s*%c", i ? "," : "", c - 1), 0);
		assert_int_equal(buf_append_str(&b, "]\n"), 0);
	}
	/* the bomb is also where the clusters should be */
	assert_int_equal(buf_append_str(&b, "clusters: *i\nusers: *i\ncontexts: *i\n"
					    "current-context: lol\n"),
			 0);
	expect_parse_error(b.data, b.len, "contexts[0]: expected a mapping");
	buf_free(&b);
}

static void test_alias_flood(void **state)
{
	struct buf b = BUF_INIT;
	(void)state;
	assert_int_equal(buf_append_str(&b, "x: &x [1]\nflood: ["), 0);
	for (int i = 0; i < 100000; i++)
		assert_int_equal(buf_append_str(&b, "*x,"), 0);
	assert_int_equal(buf_append_str(&b, "*x]\n"), 0);
	expect_parse_error(b.data, b.len, "anchors and aliases");
	buf_reset(&b);
	for (int i = 0; i < 5000; i++)
		assert_int_equal(buf_printf(&b, "k%d: &a%d v\n", i, i), 0);
	expect_parse_error(b.data, b.len, "anchors and aliases");
	buf_free(&b);
}

/* Cycles through aliases end in a type error, not in a loop. */
static void test_alias_cycles(void **state)
{
	static const char *const texts[] = {
	    "clusters: &c [*c]\ncontexts: &d [*d]\n",
	    "current-context: x\ncontexts: &c\n- name: x\n  context: *c\n",
	    "clusters: &c\n- name: c\n  cluster: *c\ncontexts:\n- {name: x, context: {cluster: c}}",
	};
	static const char *const wants[] = {"contexts[0]: expected a mapping",
					    "contexts[0].context: expected a mapping",
					    "clusters[0].cluster: expected a mapping"};
	(void)state;
	for (size_t i = 0; i < N_ELEMS(texts); i++)
		expect_parse_error(texts[i], strlen(texts[i]), wants[i]);
}

/* depth levels of open, then x, then depth levels of close. */
static char *nested(const char *open, const char *close, size_t depth, size_t *len)
{
	size_t ol = strlen(open), cl = strlen(close);
	char *s = malloc(depth * (ol + cl) + 2);
	size_t at = 0;
	assert_non_null(s);
	for (size_t i = 0; i < depth; i++, at += ol)
		memcpy(s + at, open, ol);
	s[at++] = 'x';
	for (size_t i = 0; i < depth; i++, at += cl)
		memcpy(s + at, close, cl);
	s[at] = '\0';
	*len = at;
	return s;
}

static void test_deep_nesting(void **state)
{
	static const struct {
		const char *open, *close;
		size_t depth;
	} cases[] = {
	    {"[", "]", 10000},	       {"{a: ", "}", 10000}, {"- ", "", 10000},
	    {"clusters: [", "]", 100}, {"[", "]", 2000000},
	};
	(void)state;
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		size_t len;
		char *s = nested(cases[i].open, cases[i].close, cases[i].depth, &len);
		expect_parse_error(s, len, "nested deeper than");
		free(s);
	}
}

static const struct bad_case wrong_type_cases[] = {
    {"- a\n- b\n", "the top level is not a mapping"},
    {"just a string\n", "the top level is not a mapping"},
    {"", "empty document"},
    {"# only a comment\n", "empty document"},
    {"---\n...\n", "empty document"},
    {"clusters: {name: c}\ncontexts: [{name: x, context: {cluster: c}}]\n",
     "clusters: expected a list"},
    {"clusters: [[1]]\ncontexts: [{name: x, context: {cluster: c}}]\n",
     "clusters[0]: expected a mapping"},
    {"clusters: [{name: c, cluster: [a]}]\ncontexts: [{name: x, context: {cluster: c}}]\n",
     "clusters[0].cluster: expected a mapping"},
    {"clusters: [{name: c, cluster: {server: [a]}}]\n"
     "contexts: [{name: x, context: {cluster: c}}]\n",
     "clusters[0].cluster.server: expected a string"},
    {"clusters: [{name: [c], cluster: {server: a}}]\n"
     "contexts: [{name: x, context: {cluster: c}}]\n",
     "clusters[0].name: expected a string"},
    {"contexts: [{name: x, context: ctx}]\n", "contexts[0].context: expected a mapping"},
    {"contexts: [{name: x, context: {cluster: {a: b}}}]\n",
     "contexts[0].context.cluster: expected a string"},
    {"contexts: 7\n", "contexts: expected a list"},
    {"users: {}\nclusters: [{name: c, cluster: {server: a}}]\n", "users: expected a list"},
    {"clusters: [{name: c, cluster: {server: a}}]\n"
     "contexts: [{name: x, context: {cluster: c, user: u}}]\nusers: [{name: u, user: [1]}]\n",
     "users[0].user: expected a mapping"},
    {"clusters: [{name: c, cluster: {server: a}}]\n"
     "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
     "users: [{name: u, user: {token: {a: 1}}}]\n",
     "users[0].user.token: expected a string"},
    {"a: [unclosed\n", "invalid YAML at line"},
    {"a: 'unterminated\n", "invalid YAML at line"},
    {"a: *undefined\n", "invalid YAML"},
    {"a: b\n  c: d\n", "invalid YAML"},
    {"\tkey: value\n", "invalid YAML"},
};

/* One row of wrong_type_cases, parsed from text. */
static void run_wrong_type_case(void **state)
{
	const struct bad_case *c = *state;
	expect_parse_error(c->yaml, strlen(c->yaml), c->want);
}

static void test_binary_garbage(void **state)
{
	static const char non_utf8[] = "clusters:\n- name: \xff\xfe\n";
	static const char nul_inside[] = "clusters: []\n\0users: []\n";
	(void)state;
	expect_parse_error(non_utf8, sizeof non_utf8 - 1, "invalid YAML");
	expect_parse_error(nul_inside, sizeof nul_inside - 1, "invalid YAML");
	expect_parse_error("\xc3", 1, "invalid YAML");

	unsigned char junk[4096];
	uint32_t x = 88172645u;
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < sizeof junk; i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			junk[i] = (unsigned char)x;
		}
		struct kubeconfig kc;
		char *err = NULL;
		int rc = kubeconfig_parse((const char *)junk, sizeof junk, "/", &kc, &err);
		expect_error(rc, &kc, err, "kubeconfig");
	}
}

/* Random byte flips of a valid file: each either loads or fails cleanly. */
static void test_mutations(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	char *text = NULL;
	uint32_t x = 123456789u;
	int loaded = 0, failed = 0;
	assert_true(asprintf(&text, kubelet_conf, f->dir) > 0);
	size_t len = strlen(text);
	char *copy = malloc(len + 1);
	assert_non_null(copy);
	for (int round = 0; round < 3000; round++) {
		memcpy(copy, text, len + 1);
		for (int k = 0; k < 1 + round % 4; k++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			copy[x % len] = (char)(x >> 8);
		}
		struct kubeconfig kc;
		char *err = NULL;
		if (kubeconfig_parse(copy, len, f->dir, &kc, &err) == 0) {
			assert_null(err);
			assert_non_null(kc.server);
			loaded++;
		} else {
			assert_non_null(err);
			assert_null(strchr(err, '\n'));
			failed++;
		}
		free(err);
		kubeconfig_free(&kc);
	}
	assert_true(loaded > 0);
	assert_true(failed > 0);
	free(copy);
	free(text);
}

static void test_size_limit(void **state)
{
	struct fixture *f = &fx;
	(void)state;
	size_t n = (4u << 20) + 1;
	char *big = malloc(n + 1);
	assert_non_null(big);
	memset(big, '#', n);
	big[n] = '\0';
	big[n - 1] = '\n';
	expect_parse_error(big, n, "larger than");
	struct kubeconfig kc;
	char *err = NULL;
	int rc = load_text(f, "big.conf", big, &kc, &err);
	expect_error(rc, &kc, err, "larger than");

	/* a huge but legal scalar just under the limit is fine */
	static const char head[] = "clusters: [{name: c, cluster: {server: https://h}}]\n"
				   "contexts: [{name: x, context: {cluster: c}}]\nbig: ";
	memcpy(big, head, sizeof head - 1);
	memset(big + sizeof head - 1, 'a', (4u << 20) - sizeof head);
	big[(4u << 20) - 1] = '\n';
	if (kubeconfig_parse(big, 4u << 20, "/", &kc, &err) != 0)
		fail_msg("%s", err);
	assert_string_equal(kc.server, "https://h");
	kubeconfig_free(&kc);
	free(big);
}

static int add_rows(struct CMUnitTest *t, size_t *n, const char *prefix,
		    const struct bad_case *rows, size_t count, CMUnitTestFunction fn)
{
	for (size_t i = 0; i < count; i++) {
		char *name = NULL;
		if (asprintf(&name, "%s %zu: %s", prefix, i, rows[i].want) < 0)
			return -1;
		t[(*n)++] = (struct CMUnitTest){name, fn, NULL, NULL, (void *)&rows[i]};
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest singles[] = {
	    cmocka_unit_test(test_kubelet_files),
	    cmocka_unit_test(test_linked_kubeconfig),
	    cmocka_unit_test(test_inline_data),
	    cmocka_unit_test(test_token),
	    cmocka_unit_test(test_token_file),
	    cmocka_unit_test(test_parse_base_dir),
	    cmocka_unit_test(test_current_context),
	    cmocka_unit_test(test_context_errors),
	    cmocka_unit_test(test_long_message),
	    cmocka_unit_test(test_single_context_fallback),
	    cmocka_unit_test(test_no_contexts_fallback),
	    cmocka_unit_test(test_context_without_user),
	    cmocka_unit_test(test_error_message_format),
	    cmocka_unit_test(test_nulls_and_booleans),
	    cmocka_unit_test(test_aliases_allowed),
	    cmocka_unit_test(test_billion_laughs),
	    cmocka_unit_test(test_alias_flood),
	    cmocka_unit_test(test_alias_cycles),
	    cmocka_unit_test(test_deep_nesting),
	    cmocka_unit_test(test_binary_garbage),
	    cmocka_unit_test(test_mutations),
	    cmocka_unit_test(test_size_limit),
	};
	size_t total = N_ELEMS(singles) + N_ELEMS(bad_cases) + N_ELEMS(wrong_type_cases), n = 0;
	struct CMUnitTest *tests = calloc(total, sizeof *tests);
	if (!tests)
		return 1;
	for (size_t i = 0; i < N_ELEMS(singles); i++) {
		tests[n] = singles[i];
		tests[n].name = strdup(singles[i].name);
		if (!tests[n++].name)
			return 1;
	}
	if (add_rows(tests, &n, "validation", bad_cases, N_ELEMS(bad_cases), run_validation_case) <
		0 ||
	    add_rows(tests, &n, "wrong type", wrong_type_cases, N_ELEMS(wrong_type_cases),
		     run_wrong_type_case) < 0)
		return 1;
	int rc = _cmocka_run_group_tests("kubeconfig", tests, n, group_setup, group_teardown);
	for (size_t i = 0; i < n; i++)
		free((char *)tests[i].name);
	free(tests);
	return rc;
}
