/*
 * test_upstream.c - cloud/upstream: the client certificate and key are
 * re-read when their files change (kubelet rotates its certificate by
 * re-pointing a symlink at a new cert+key file), a changed pair is taken only
 * when it parses and matches, a refused change is judged (and warned about)
 * once, inline kubeconfig data is never re-read, and handles set up while the
 * pair is swapped by another thread see one whole pair (run under TSan).
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
#include <unistd.h>

#include "config.h"
#include "cloud/upstream.h"
#include "testutil.h"
#include "util/base64.h"
#include "util/buf.h"

/* Throw-away self-signed P-256 pairs, made for this test only
 * (openssl req -x509 -newkey ec ... -days 36500). */
#define CERT_A                                                                                     \
	"-----BEGIN CERTIFICATE-----\n"                                                            \
	"MIIBvjCCAWWgAwIBAgIUXCxTe8r35DmwUNZuIDKivK5KHZEwCgYIKoZIzj0EAwIw\n"                       \
	"NDEbMBkGA1UEAwwSc3lzdGVtOm5vZGU6dW5pdC1hMRUwEwYDVQQKDAxzeXN0ZW06\n"                       \
	"bm9kZXMwIBcNMjYxMTI5MjAxMjI3WhgPMjEyNjExMDUyMDEyMjdaMDQxGzAZBgNV\n"                       \
	"BAMMEnN5c3RlbTpub2RlOnVuaXQtYTEVMBMGA1UECgwMc3lzdGVtOm5vZGVzMFkw\n"                       \
	"EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEVme2mY/dIz13mnltkJ99TF+4g+VRW5I0\n"                       \
	"6RqAZ2oxOu5tmi7iiItv1SdAOXW8Msp2ZYLfKMt/SlxDEwW6M89TaaNTMFEwHQYD\n"                       \
	"VR0OBBYEFH11XGvVBFnr8NJq0wW+SP3e6XIqMB8GA1UdIwQYMBaAFH11XGvVBFnr\n"                       \
	"8NJq0wW+SP3e6XIqMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIg\n"                       \
	"JHv98ZJUo1ClY/cNnZiO5epOAZGN131I5A2dg9T6hJoCIEvEhVC/TsGVRjLCaXHP\n"                       \
	"PgdDwDv5YCSe1aTdBd9OT6Aj\n"                                                               \
	"-----END CERTIFICATE-----\n"

#define KEY_A                                                                                      \
	"-----BEGIN PRIVATE KEY-----\n"                                                            \
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg3Ok+EAxk95PwV5SY\n"                       \
	"LWoPqYWOLUYOMbU4RxQpVULx7GmhRANCAARWZ7aZj90jPXeaeW2Qn31MX7iD5VFb\n"                       \
	"kjTpGoBnajE67m2aLuKIi2/VJ0A5dbwyynZlgt8oy39KXEMTBbozz1Np\n"                               \
	"-----END PRIVATE KEY-----\n"

#define CERT_B                                                                                     \
	"-----BEGIN CERTIFICATE-----\n"                                                            \
	"MIIBvzCCAWWgAwIBAgIUIPYbnLRCo2nxBVTcfoLAbexbvaMwCgYIKoZIzj0EAwIw\n"                       \
	"NDEbMBkGA1UEAwwSc3lzdGVtOm5vZGU6dW5pdC1iMRUwEwYDVQQKDAxzeXN0ZW06\n"                       \
	"bm9kZXMwIBcNMjYxMTI5MjAxMjI3WhgPMjEyNjExMDUyMDEyMjdaMDQxGzAZBgNV\n"                       \
	"BAMMEnN5c3RlbTpub2RlOnVuaXQtYjEVMBMGA1UECgwMc3lzdGVtOm5vZGVzMFkw\n"                       \
	"EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE3X398DdLrrPz4myj+25xSC0NkRfKqjaa\n"                       \
	"FfouvWmv/W4YkoNvzQMDKbtNF2Qjf43jhhayoqjDGGuotYqarvM1/KNTMFEwHQYD\n"                       \
	"VR0OBBYEFHQRL254SnIWC4e1jKRk7iUvrqt3MB8GA1UdIwQYMBaAFHQRL254SnIW\n"                       \
	"C4e1jKRk7iUvrqt3MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIh\n"                       \
	"AJP2VT9+eKqaPUiqA7CpQ/e2nWUUZ/tDbq6FelHGRNTlAiBRkFPj0rih5O5rWtG1\n"                       \
	"BiWoi/H/AzfFTowr/RVZ9IqKkg==\n"                                                           \
	"-----END CERTIFICATE-----\n"

#define KEY_B                                                                                      \
	"-----BEGIN PRIVATE KEY-----\n"                                                            \
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPEPr/QN3pSjrwBAX\n"                       \
	"U/0J6pwibwW+YUXpZF1FH9PW83ehRANCAATdff3wN0uus/PibKP7bnFILQ2RF8qq\n"                       \
	"NpoV+i69aa/9bhiSg2/NAwMpu00XZCN/jeOGFrKiqMMYa6i1ipqu8zX8\n"                               \
	"-----END PRIVATE KEY-----\n"

static char dir[256];

static char *path_in(const char *rel)
{
	char *p = NULL;
	assert_true(asprintf(&p, "%s/%s", dir, rel) > 0);
	return p;
}

/* Replace dir/rel as a rotation tool would: a new file renamed over it. */
static void replace_file(const char *rel, const char *data)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%s.tmp", rel);
	assert_int_equal(test_write_file(dir, tmp, data), 0);
	char *from = path_in(tmp), *to = path_in(rel);
	assert_int_equal(rename(from, to), 0);
	free(from);
	free(to);
}

/* Point dir/link at dir/target, atomically (kubelet's way). */
static void repoint(const char *link, const char *target)
{
	char *t = path_in(target), *tmp = path_in("link.tmp"), *l = path_in(link);
	unlink(tmp);
	assert_int_equal(symlink(t, tmp), 0);
	assert_int_equal(rename(tmp, l), 0);
	free(t);
	free(tmp);
	free(l);
}

static void init_with(struct upstream *u, const char *cert_rel, const char *key_rel,
		      const char *kubeconfig_rel)
{
	struct config c;
	config_init(&c);
	assert_int_equal(strlist_split(&c.server_addr, "https://127.0.0.1:6443"), 0);
	if (cert_rel) {
		free(c.client_cert_file);
		free(c.client_key_file);
		c.client_cert_file = path_in(cert_rel);
		c.client_key_file = path_in(key_rel);
	}
	if (kubeconfig_rel) {
		free(c.kubeconfig);
		c.kubeconfig = path_in(kubeconfig_rel);
	}
	char *err = NULL;
	if (upstream_init(u, &c, &err) != 0)
		fail_msg("upstream_init: %s", err ? err : "?");
	config_free(&c);
}

static void assert_pair(struct upstream *u, const char *cert, const char *key)
{
	pthread_mutex_lock(&u->cert_lock);
	assert_int_equal(u->cert_pem.len, strlen(cert));
	assert_memory_equal(u->cert_pem.data, cert, strlen(cert));
	assert_int_equal(u->key_pem.len, strlen(key));
	assert_memory_equal(u->key_pem.data, key, strlen(key));
	pthread_mutex_unlock(&u->cert_lock);
}

static int setup(void **state)
{
	(void)state;
	return test_mkdtemp(dir, sizeof dir, "upstream");
}

static int teardown(void **state)
{
	(void)state;
	test_rm_rf(dir);
	return 0;
}

/* Separate --client-cert-file / --client-key-file, replaced by rename. */
static void test_separate_files(void **state)
{
	(void)state;
	assert_int_equal(test_write_file(dir, "client.crt", CERT_A), 0);
	assert_int_equal(test_write_file(dir, "client.key", KEY_A), 0);
	struct upstream u;
	init_with(&u, "client.crt", "client.key", NULL);
	assert_pair(&u, CERT_A, KEY_A);
	/* the first check re-reads the files once and finds the same bytes */
	assert_int_equal(upstream_recheck_client_cert(&u), 0);
	assert_int_equal(upstream_recheck_client_cert(&u), 0);

	/* The certificate first, then its key: the half-done rotation is
	 * refused once, and the pair is taken when the key follows. */
	replace_file("client.crt", CERT_B);
	assert_int_equal(upstream_recheck_client_cert(&u), -1);
	assert_int_equal(upstream_recheck_client_cert(&u), 0);
	assert_pair(&u, CERT_A, KEY_A);
	replace_file("client.key", KEY_B);
	assert_int_equal(upstream_recheck_client_cert(&u), 1);
	assert_pair(&u, CERT_B, KEY_B);
	assert_int_equal(upstream_recheck_client_cert(&u), 0);

	/* Garbage, then a missing file: refused once each, the pair stays. */
	replace_file("client.key", "not a key\n");
	assert_int_equal(upstream_recheck_client_cert(&u), -1);
	assert_int_equal(upstream_recheck_client_cert(&u), 0);
	char *k = path_in("client.key");
	assert_int_equal(unlink(k), 0);
	free(k);
	assert_int_equal(upstream_recheck_client_cert(&u), -1);
	assert_int_equal(upstream_recheck_client_cert(&u), 0);
	assert_pair(&u, CERT_B, KEY_B);
	/* back to a good pair */
	replace_file("client.crt", CERT_A);
	replace_file("client.key", KEY_A);
	assert_int_equal(upstream_recheck_client_cert(&u), 1);
	assert_pair(&u, CERT_A, KEY_A);
	upstream_free(&u);
}

/* kubelet's layout: one cert+key file behind kubelet-client-current.pem,
 * given as both flags, rotated by re-pointing the link. */
static void test_kubelet_symlink(void **state)
{
	(void)state;
	assert_int_equal(test_write_file(dir, "pki/kubelet-client-1.pem", CERT_A KEY_A), 0);
	assert_int_equal(test_write_file(dir, "pki/kubelet-client-2.pem", CERT_B KEY_B), 0);
	assert_int_equal(test_write_file(dir, "pki/kubelet-client-3.pem", CERT_A KEY_B), 0);
	repoint("pki/kubelet-client-current.pem", "pki/kubelet-client-1.pem");
	struct upstream u;
	init_with(&u, "pki/kubelet-client-current.pem", "pki/kubelet-client-current.pem", NULL);
	assert_int_equal(upstream_recheck_client_cert(&u), 0);
	repoint("pki/kubelet-client-current.pem", "pki/kubelet-client-2.pem");
	assert_int_equal(upstream_recheck_client_cert(&u), 1);
	assert_pair(&u, CERT_B KEY_B, CERT_B KEY_B);
	/* a file whose key does not match its certificate */
	repoint("pki/kubelet-client-current.pem", "pki/kubelet-client-3.pem");
	assert_int_equal(upstream_recheck_client_cert(&u), -1);
	assert_int_equal(upstream_recheck_client_cert(&u), 0);
	assert_pair(&u, CERT_B KEY_B, CERT_B KEY_B);
	/* re-pointed at the bytes in use: nothing to do */
	repoint("pki/kubelet-client-current.pem", "pki/kubelet-client-2.pem");
	assert_int_equal(upstream_recheck_client_cert(&u), 0);
	upstream_free(&u);
}

/* Inline kubeconfig data has no file to watch. */
static void test_inline_data_not_reread(void **state)
{
	(void)state;
	struct buf c = BUF_INIT, k = BUF_INIT, yaml = BUF_INIT;
	assert_int_equal(base64_encode(CERT_A, strlen(CERT_A), &c), 0);
	assert_int_equal(base64_encode(KEY_A, strlen(KEY_A), &k), 0);
	assert_int_equal(
	    buf_printf(&yaml,
		       "apiVersion: v1\nkind: Config\n"
		       "clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n"
		       "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
		       "current-context: x\n"
		       "users:\n- name: u\n  user:\n"
		       "    client-certificate-data: %s\n    client-key-data: %s\n",
		       buf_cstr(&c), buf_cstr(&k)),
	    0);
	assert_int_equal(test_write_file(dir, "kubelet.conf", buf_cstr(&yaml)), 0);
	struct upstream u;
	init_with(&u, NULL, NULL, "kubelet.conf");
	assert_null(u.cert_file);
	assert_null(u.key_file);
	assert_pair(&u, CERT_A, KEY_A);
	assert_int_equal(upstream_recheck_client_cert(&u), 0);
	upstream_free(&u);
	buf_free(&c);
	buf_free(&k);
	buf_free(&yaml);
}

/* Connection threads set up handles (new and reused) while the pair is
 * swapped under them: under TSan this is the data-race check. */
struct worker {
	struct upstream *u;
	int rounds;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < w->rounds; i++) {
		CURL *e = upstream_easy(w->u, &w->u->backends[0], true);
		assert_non_null(e);
		curl_easy_cleanup(e);
		CURLM *m;
		CURL *r;
		assert_int_equal(upstream_take(w->u, &w->u->backends[0], true, &m, &r), 0);
		upstream_give_back(w->u, m, r);
	}
	return NULL;
}

static void test_swap_under_threads(void **state)
{
	(void)state;
	assert_int_equal(test_write_file(dir, "t.crt", CERT_A), 0);
	assert_int_equal(test_write_file(dir, "t.key", KEY_A), 0);
	struct upstream u;
	init_with(&u, "t.crt", "t.key", NULL);
	pthread_t t[4];
	struct worker w = {&u, 200};
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, work, &w), 0);
	for (int i = 0; i < 20; i++) {
		bool b = i % 2 == 0;
		replace_file("t.crt", b ? CERT_B : CERT_A);
		replace_file("t.key", b ? KEY_B : KEY_A);
		assert_int_equal(upstream_recheck_client_cert(&u), 1);
	}
	for (size_t i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_pair(&u, CERT_A, KEY_A);
	upstream_free(&u);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_separate_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kubelet_symlink, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_inline_data_not_reread, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_swap_under_threads, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
