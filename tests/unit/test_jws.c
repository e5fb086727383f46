/*
 * test_jws.c - identity/jws: bootstrap token syntax, and the detached JWS
 * of cluster-info against vectors computed outside this code - those of
 * Kubernetes' own cluster-bootstrap tests, and one for a kubeconfig made
 * with Python's hmac and checked with openssl (below) - then every way of
 * spoiling one: payload, signature, header, secret, key id, alg none,
 * dots, padding.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "identity/jws.h"
#include "util/base64.h"
#include "util/buf.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static void test_token_syntax(void **state)
{
	(void)state;
	struct bootstrap_token t;
	const char *ok = "abcdef.0123456789abcdef";
	assert_int_equal(jws_token_parse(ok, strlen(ok), &t), 0);
	assert_string_equal(t.id, "abcdef");
	assert_string_equal(t.secret, "0123456789abcdef");
	jws_token_wipe(&t);
	assert_int_equal(t.secret[0], 0);
	static const char *const bad[] = {
	    "",
	    "abcdef0123456789abcdef",
	    "abcdef.0123456789abcde",
	    "abcdef.0123456789abcdefg",
	    "abcde.0123456789abcdefg",
	    "abcdefg.0123456789abcde",
	    "ABCDEF.0123456789abcdef",
	    "abcdef.0123456789ABCDEF",
	    "abc-ef.0123456789abcdef",
	    "abcdef:0123456789abcdef",
	    " abcdef.0123456789abcde",
	    "abcdef.0123456789abcde\n",
	    "abcdef.012345.789abcdef",
	};
	for (size_t i = 0; i < N_ELEMS(bad); i++) {
		t.id[0] = 'x';
		if (jws_token_parse(bad[i], strlen(bad[i]), &t) != -1)
			fail_msg("token \"%s\" accepted", bad[i]);
		assert_int_equal(t.id[0], 0); /* nothing half-filled */
	}
	/* the length given is what counts, not a NUL */
	assert_int_equal(jws_token_parse("abcdef.0123456789abcdef!", 23, &t), 0);
	assert_int_equal(jws_token_parse("abcdef.0123456\0789abcdef", 23, &t), -1);
}

/* staging/src/k8s.io/cluster-bootstrap/token/jws/jws_test.go: id "joshua",
 * secrets and contents that are no token's, which the functions taking
 * strings allow. */
static const char go_content[] = "Hello from the other side. I must have called a thousand times.";
static const char go_secret[] = "my voice is my passcode";
static const struct {
	const char *content, *secret, *jws;
} go_vectors[] = {
    {go_content, go_secret,
     "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8"},
    {"", go_secret,
     "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk"},
    {go_content, "",
     "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8"},
};

static void test_go_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ELEMS(go_vectors); i++) {
		struct buf out = BUF_INIT;
		char *err = NULL;
		const char *c = go_vectors[i].content, *s = go_vectors[i].secret;
		assert_int_equal(jws_sign_detached(c, strlen(c), "joshua", s, &out, &err), 0);
		assert_string_equal(out.data, go_vectors[i].jws);
		if (jws_verify_detached(go_vectors[i].jws, strlen(go_vectors[i].jws), c, strlen(c),
					"joshua", s, &err) != 0)
			fail_msg("vector %zu: %s", i, err);
		buf_free(&out);
	}
}

/* A cluster-info kubeconfig, signed for token abcdef.0123456789abcdef.
 * The signature was computed at test-writing time with
 *   python3: h = b64url('{"alg":"HS256","kid":"abcdef"}')
 *            hmac.new(b"0123456789abcdef", (h + "." + b64url(kubeconfig)).encode(),
 *                     hashlib.sha256)
 * and the same signing input through
 *   openssl dgst -sha256 -hmac 0123456789abcdef -binary | basenc --base64url
 * gave the same bytes. */
static const char kubeconfig[] = "apiVersion: v1\n"
				 "clusters:\n"
				 "- cluster:\n"
				 "    certificate-authority-data: "
				 "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQo=\n"
				 "    server: https://10.0.0.1:6443\n"
				 "  name: \"\"\n"
				 "contexts: null\n"
				 "current-context: \"\"\n"
				 "kind: Config\n"
				 "preferences: {}\n"
				 "users: null\n";
#define KC_HEADER "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9"
#define KC_SIG	  "DjMG-O1qhwCbvNpzuWS3IV6fk8K_tcqbUuzdCGRhljo"
static const char kc_jws[] = KC_HEADER ".." KC_SIG;

static int verify(const char *jws, const char *payload, const char *id, const char *secret,
		  char **err)
{
	free(*err);
	*err = NULL;
	return jws_verify_detached(jws, strlen(jws), payload, strlen(payload), id, secret, err);
}

static void expect_rejected(const char *jws, const char *payload, const char *id,
			    const char *secret, const char *why)
{
	char *err = NULL;
	if (verify(jws, payload, id, secret, &err) != -1)
		fail_msg("accepted: %s", jws);
	assert_non_null(err);
	if (!strstr(err, why))
		fail_msg("\"%s\": error \"%s\" does not say \"%s\"", jws, err, why);
	/* the secret is never part of a message */
	assert_null(strstr(err, "0123456789abcdef"));
	free(err);
}

static void test_cluster_info_vector(void **state)
{
	(void)state;
	struct bootstrap_token t;
	const char *tok = "abcdef.0123456789abcdef";
	char *err = NULL;
	assert_int_equal(jws_token_parse(tok, strlen(tok), &t), 0);
	assert_int_equal(verify(kc_jws, kubeconfig, t.id, t.secret, &err), 0);
	assert_null(err);
	struct buf out = BUF_INIT;
	assert_int_equal(
	    jws_sign_detached(kubeconfig, strlen(kubeconfig), t.id, t.secret, &out, &err), 0);
	assert_string_equal(out.data, kc_jws);
	buf_free(&out);
	jws_token_wipe(&t);
}

static char *b64url_of(const char *s)
{
	struct buf b = BUF_INIT;
	assert_int_equal(base64url_encode(s, strlen(s), &b), 0);
	return buf_steal(&b);
}

/* A JWS with a header of our choosing and the right MAC for it, computed
 * here with GnuTLS's HMAC (not through jws.c): only the header's content
 * can make it fail. */
static char *signed_with_header(const char *header_json, const char *payload, const char *secret)
{
	char *h = b64url_of(header_json);
	char *p = b64url_of(payload);
	char *input = str_printf("%s.%s", h, p);
	unsigned char key[32] = {0}, mac[32];
	assert_true(strlen(secret) <= sizeof key);
	memcpy(key, secret, strlen(secret));
	assert_int_equal(
	    gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, sizeof key, input, strlen(input), mac), 0);
	struct buf sig = BUF_INIT;
	assert_int_equal(base64url_encode(mac, sizeof mac, &sig), 0);
	char *jws = str_printf("%s..%s", h, sig.data);
	assert_non_null(jws);
	buf_free(&sig);
	free(input);
	free(h);
	free(p);
	return jws;
}

static void test_tampering(void **state)
{
	(void)state;
	const char *id = "abcdef", *secret = "0123456789abcdef";

	/* the payload: one byte changed, one added, one taken away */
	struct buf kc = BUF_INIT;
	assert_int_equal(buf_append_str(&kc, kubeconfig), 0);
	kc.data[kc.len - 5] ^= 1;
	expect_rejected(kc_jws, kc.data, id, secret, "does not match");
	kc.data[kc.len - 5] ^= 1;
	assert_int_equal(buf_append_char(&kc, '\n'), 0);
	expect_rejected(kc_jws, kc.data, id, secret, "does not match");
	kc.data[kc.len - 2] = '\0';
	expect_rejected(kc_jws, kc.data, id, secret, "does not match");
	buf_free(&kc);

	/* the signature: each byte flipped in turn (as text, canonical) */
	char *j = strdup(kc_jws);
	char *s = strstr(j, "..") + 2;
	for (size_t i = 0; i + 1 < strlen(s); i++) {
		char old = s[i];
		s[i] = old == 'A' ? 'B' : 'A';
		expect_rejected(j, kubeconfig, id, secret, "does not match");
		s[i] = old;
	}
	free(j);
	expect_rejected(KC_HEADER ".." KC_SIG "A", kubeconfig, id, secret, "32 bytes");
	expect_rejected(KC_HEADER ".." KC_SIG "=", kubeconfig, id, secret, "32 bytes");
	expect_rejected(KC_HEADER "..DjMG-O1qhwCbvNpzuWS3IV6fk8K_tcqbUuzdCGRhljp", kubeconfig, id,
			secret, "32 bytes"); /* spare bits set: a second text of the same MAC */
	expect_rejected(KC_HEADER ".." KC_SIG "AAAA", kubeconfig, id, secret, "32 bytes");
	expect_rejected(KC_HEADER "..", kubeconfig, id, secret, "32 bytes");

	/* the secret, the token id */
	expect_rejected(kc_jws, kubeconfig, id, "0123456789abcdeg", "does not match");
	expect_rejected(kc_jws, kubeconfig, "abcdeg", secret, "key id is \"abcdef\"");

	/* the dots: attached payload, missing parts, extra parts */
	char *p = b64url_of(kubeconfig);
	char *attached = str_printf("%s.%s.%s", KC_HEADER, p, KC_SIG);
	expect_rejected(attached, kubeconfig, id, secret, "payload part is not empty");
	expect_rejected(KC_HEADER "." KC_SIG, kubeconfig, id, secret, "three parts");
	expect_rejected(KC_HEADER "..." KC_SIG, kubeconfig, id, secret, "three parts");
	expect_rejected(KC_HEADER ".." KC_SIG ".", kubeconfig, id, secret, "three parts");
	expect_rejected("", kubeconfig, id, secret, "three parts");
	expect_rejected("..", kubeconfig, id, secret, "not a JSON object");
	free(attached);
	free(p);

	/* headers: each with the right MAC for kubeadm's header, so the
	 * header check must catch them before or via the MAC */
	static const struct {
		const char *json, *why;
	} headers[] = {
	    {"{\"alg\":\"none\",\"kid\":\"abcdef\"}", "not HS256"},
	    {"{\"alg\":\"HS512\",\"kid\":\"abcdef\"}", "not HS256"},
	    {"{\"alg\":\"hs256\",\"kid\":\"abcdef\"}", "not HS256"},
	    {"{\"kid\":\"abcdef\"}", "not HS256"},
	    {"{\"alg\":\"HS256\"}", "key id is \"(none)\""},
	    {"{\"alg\":\"HS256\",\"kid\":\"abcdeg\"}", "key id"},
	    /* jansson refuses \u0000 unless asked */
	    {"{\"alg\":\"HS256\",\"kid\":\"abcdef\\u0000\"}", "not a JSON object"},
	    {"{\"alg\":\"HS256\",\"kid\":\"abcdef\",\"crit\":[\"b64\"]}", "\"crit\""},
	    {"{\"alg\":\"HS256\",\"kid\":\"abcdef\",\"b64\":false}", "\"b64\""},
	    {"{\"alg\":\"HS256\",\"alg\":\"HS256\",\"kid\":\"abcdef\"}", "not a JSON object"},
	    {"{\"alg\":\"HS256\",\"kid\":7}", "not a string"},
	    {"[\"HS256\"]", "not a JSON object"},
	    {"{\"alg\":\"HS256\",\"kid\":\"abcdef\"} x", "not a JSON object"},
	};
	for (size_t i = 0; i < N_ELEMS(headers); i++) {
		char *jws = signed_with_header(headers[i].json, kubeconfig, secret);
		expect_rejected(jws, kubeconfig, id, secret, headers[i].why);
		free(jws);
	}
	/* the right members in another order, or with a typ, correctly signed:
	 * authentic, so accepted; with kubeadm's signature, not (the MAC
	 * covers the header's text) */
	static const char *const fine[] = {
	    "{\"kid\":\"abcdef\",\"alg\":\"HS256\"}",
	    "{\"alg\":\"HS256\",\"kid\":\"abcdef\",\"typ\":\"JWS\"}",
	};
	for (size_t i = 0; i < N_ELEMS(fine); i++) {
		char *jws = signed_with_header(fine[i], kubeconfig, secret);
		char *err = NULL;
		if (verify(jws, kubeconfig, id, secret, &err) != 0)
			fail_msg("%s: %s", fine[i], err);
		char *swapped = str_printf("%.*s..%s", (int)(strstr(jws, "..") - jws), jws, KC_SIG);
		expect_rejected(swapped, kubeconfig, id, secret, "does not match");
		free(swapped);
		free(jws);
	}
	expect_rejected("eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9=.." KC_SIG, kubeconfig, id,
			secret, "not base64url");
	expect_rejected("e yJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9.." KC_SIG, kubeconfig, id,
			secret, "not base64url");
}

/* What is signed here verifies here, for any payload bytes (NUL too). */
static void test_sign_verify_binary(void **state)
{
	(void)state;
	unsigned char payload[256];
	for (size_t i = 0; i < sizeof payload; i++)
		payload[i] = (unsigned char)i;
	for (size_t len = 0; len <= sizeof payload; len += 37) {
		struct buf out = BUF_INIT;
		char *err = NULL;
		assert_int_equal(jws_sign_detached((char *)payload, len, "tok123",
						   "s3cr3ts3cr3ts3cr", &out, &err),
				 0);
		assert_int_equal(jws_verify_detached(out.data, out.len, (char *)payload, len,
						     "tok123", "s3cr3ts3cr3ts3cr", &err),
				 0);
		if (len) {
			payload[len - 1] ^= 0x80;
			assert_int_equal(jws_verify_detached(out.data, out.len, (char *)payload,
							     len, "tok123", "s3cr3ts3cr3ts3cr",
							     &err),
					 -1);
			payload[len - 1] ^= 0x80;
			free(err);
		}
		buf_free(&out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_token_syntax),	cmocka_unit_test(test_go_vectors),
	    cmocka_unit_test(test_cluster_info_vector), cmocka_unit_test(test_tampering),
	    cmocka_unit_test(test_sign_verify_binary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
