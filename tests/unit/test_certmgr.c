/*
 * test_certmgr.c - identity/certmgr against a fake issuer that signs with a
 * test CA made by GnuTLS here, with lifetimes of a few seconds so that
 * rotation happens within the test.  Nothing sleeps and hopes: every wait
 * is on the fake's condition variable, with a deadline, for a predicate.
 *
 * Covered: first issuance into an empty store; rotation at 70-90% of the
 * lifetime with a new key each time and no gap; the backoff sequence; a
 * template change (a new IP SAN); a stored certificate that is good, that
 * has expired, that does not fit, that is corrupt; a template that is not
 * known yet; a signer that leaves out a SAN (no request loop); an answer
 * for another key; stop during a backoff and during a request.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "identity/certmgr.h"
#include "identity/certstore.h"
#include "testca.h"
#include "testutil.h"
#include "util/buf.h"
#include "util/log.h"

#define MAX_CALLS 64

static struct test_ca *g_ca;
static char g_dir[256];
/* the manager of the running test, stopped by teardown when a failed
 * assertion left it running (it would call into the next test's fake) */
static struct certmgr *g_m;

static long long mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static long long wall_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The fake: the issuer, the template source and the rotation observer. */
struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; signalled at every event */
	/* issuer behaviour */
	int lifetime_s;
	int fail_next;	/* this many calls fail */
	bool fail_all;	/* every call fails */
	bool block;	/* calls wait until unblocked or cancelled */
	bool no_sans;	/* the signer leaves the SANs out */
	bool wrong_key; /* the next answer is a certificate for another key */
	bool cancelled; /* sticky, as the contract says */
	int in_issue;	/* calls in progress */
	unsigned calls;
	long long call_ms[MAX_CALLS]; /* monotonic */
	/* template */
	bool available;
	struct x509_template tmpl;
	unsigned template_calls;
	/* rotations seen */
	unsigned rotations;
	bool bad_rotation; /* on_rotated got what does not parse */
	long long rotated_wall_ms[MAX_CALLS];
	struct x509_info last; /* cn, ips, times of the last rotated */
	struct buf last_pem;
};

static struct fake F;

static void fake_init(int lifetime_s)
{
	memset(&F, 0, sizeof F);
	pthread_mutex_init(&F.lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&F.cond, &ca);
	pthread_condattr_destroy(&ca);
	F.lifetime_s = lifetime_s;
	F.available = true;
	static const char *const orgs[] = {"system:nodes", NULL};
	static const char *const ips[] = {"127.0.0.1", NULL};
	test_template(&F.tmpl, "system:node:edge-1", orgs, NULL, ips);
}

static void fake_free(void)
{
	x509_template_free(&F.tmpl);
	x509_info_free(&F.last);
	buf_free(&F.last_pem);
	pthread_cond_destroy(&F.cond);
	pthread_mutex_destroy(&F.lock);
}

static void signal_locked(void)
{
	pthread_cond_broadcast(&F.cond);
}

static int fake_issue(void *ctx, const char *csr_pem, char **cert_pem, char **err)
{
	(void)ctx;
	pthread_mutex_lock(&F.lock);
	if (F.calls < MAX_CALLS)
		F.call_ms[F.calls] = mono_ms();
	F.calls++;
	F.in_issue++;
	signal_locked();
	while (F.block && !F.cancelled)
		pthread_cond_wait(&F.cond, &F.lock);
	int rc = -1;
	if (F.cancelled) {
		*err = strdup("cancelled");
	} else if (F.fail_all || F.fail_next > 0) {
		if (F.fail_next > 0)
			F.fail_next--;
		*err = strdup("the signer said no");
	} else {
		time_t now = time(NULL);
		/* no cmocka asserts here: this is the manager's thread */
		if (F.wrong_key) {
			F.wrong_key = false;
			char *pair = test_ca_issue_pair(g_ca, &F.tmpl, now, now + F.lifetime_s);
			const char *k = pair ? strstr(pair, "-----BEGIN EC") : NULL;
			*cert_pem = k ? strndup(pair, (size_t)(k - pair)) : NULL;
			free(pair);
		} else if (F.no_sans) {
			*cert_pem = test_ca_sign_no_sans(g_ca, csr_pem, now, now + F.lifetime_s);
		} else {
			*cert_pem = test_ca_sign(g_ca, csr_pem, now, now + F.lifetime_s);
		}
		rc = *cert_pem ? 0 : -1;
	}
	F.in_issue--;
	signal_locked();
	pthread_mutex_unlock(&F.lock);
	return rc;
}

static void fake_cancel(void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&F.lock);
	F.cancelled = true;
	signal_locked();
	pthread_mutex_unlock(&F.lock);
}

static int fake_template(void *ctx, struct x509_template *out, char **err)
{
	(void)ctx;
	pthread_mutex_lock(&F.lock);
	F.template_calls++;
	int rc = 0;
	if (!F.available) {
		*err = strdup("no cluster IP yet");
		rc = -1;
	} else if (x509_template_copy(out, &F.tmpl) < 0) {
		rc = -1;
	}
	signal_locked();
	pthread_mutex_unlock(&F.lock);
	return rc;
}

static void fake_rotated(void *ctx, const char *pem, size_t len, const struct x509_info *info)
{
	(void)ctx;
	(void)info;
	pthread_mutex_lock(&F.lock);
	if (F.rotations < MAX_CALLS)
		F.rotated_wall_ms[F.rotations] = wall_ms();
	F.rotations++;
	x509_info_free(&F.last);
	buf_reset(&F.last_pem);
	if (x509_parse_pem(pem, len, &F.last, NULL) < 0 || buf_append(&F.last_pem, pem, len) < 0)
		F.bad_rotation = true;
	signal_locked();
	pthread_mutex_unlock(&F.lock);
}

typedef bool (*pred_fn)(const void *arg);

/* Wait until pred holds (checked under the fake's lock at every event and
 * every 50 ms, since some predicates read the manager), or the deadline. */
static bool wait_for(pred_fn pred, const void *arg, long long ms)
{
	long long end = mono_ms() + ms;
	pthread_mutex_lock(&F.lock);
	bool ok;
	while (!(ok = pred(arg)) && mono_ms() < end) {
		long long until = mono_ms() + 50;
		if (until > end)
			until = end;
		struct timespec ts = {(time_t)(until / 1000), (long)(until % 1000) * 1000000L};
		pthread_cond_timedwait(&F.cond, &F.lock, &ts);
	}
	pthread_mutex_unlock(&F.lock);
	return ok;
}

static bool calls_at_least(const void *arg)
{
	return F.calls >= *(const unsigned *)arg;
}

static bool rotations_at_least(const void *arg)
{
	return F.rotations >= *(const unsigned *)arg;
}

static bool blocked_in_issue(const void *arg)
{
	(void)arg;
	return F.in_issue > 0;
}

static bool templates_at_least(const void *arg)
{
	return F.template_calls >= *(const unsigned *)arg;
}

static bool failed_once(const void *arg)
{
	struct certmgr_stats st;
	certmgr_get_stats((struct certmgr *)arg, &st);
	return st.consecutive_failures >= 1;
}

static void wait_calls(unsigned n, long long ms)
{
	if (!wait_for(calls_at_least, &n, ms))
		fail_msg("%u issue calls within %lld ms: only %u", n, ms, F.calls);
}

static void wait_rotations(unsigned n, long long ms)
{
	if (!wait_for(rotations_at_least, &n, ms))
		fail_msg("%u rotations within %lld ms: only %u (%u calls)", n, ms, F.rotations,
			 F.calls);
}

static unsigned locked_calls(void)
{
	pthread_mutex_lock(&F.lock);
	unsigned n = F.calls;
	pthread_mutex_unlock(&F.lock);
	return n;
}

/* Nothing more happens during ms: template polls go on, calls do not. */
static void expect_quiet(unsigned calls, long long ms)
{
	pthread_mutex_lock(&F.lock);
	unsigned polls = F.template_calls + (unsigned)(ms / 200);
	pthread_mutex_unlock(&F.lock);
	wait_for(templates_at_least, &polls, ms);
	assert_int_equal(locked_calls(), calls);
}

static struct certmgr *start(unsigned poll_ms, unsigned first_ms, unsigned max_ms)
{
	struct certmgr_config cfg = {
	    .name = "test",
	    .dir = g_dir,
	    .prefix = "yurthub",
	    .get_template = fake_template,
	    .issuer = {fake_issue, fake_cancel, NULL},
	    .on_rotated = fake_rotated,
	    .template_poll_ms = poll_ms,
	    .backoff_first_ms = first_ms,
	    .backoff_max_ms = max_ms,
	};
	char *err = NULL;
	struct certmgr *m = certmgr_start(&cfg, &err);
	if (!m)
		fail_msg("certmgr_start: %s", err);
	g_m = m;
	return m;
}

static void stop_promptly(struct certmgr *m, const char *when)
{
	long long t0 = mono_ms();
	g_m = NULL;
	certmgr_stop(m);
	long long took = mono_ms() - t0;
	if (took > 500)
		fail_msg("stop %s took %lld ms", when, took);
}

/* A pair in the store, laid there before the manager starts. */
static void store_pair(const char *cn, time_t nb, time_t na)
{
	struct x509_template t;
	static const char *const orgs[] = {"system:nodes", NULL};
	static const char *const ips[] = {"127.0.0.1", NULL};
	test_template(&t, cn, orgs, NULL, ips);
	char *p = test_ca_issue_pair(g_ca, &t, nb, na);
	assert_non_null(p);
	char *err = NULL;
	assert_int_equal(certstore_save(g_dir, "yurthub", p, strlen(p), &err), 0);
	free(p);
	x509_template_free(&t);
}

static const char *key_block(const struct buf *pem)
{
	const char *k = strstr(buf_cstr(pem), "-----BEGIN EC PRIVATE KEY-----");
	assert_non_null(k);
	return k;
}

static int setup_each(void **state)
{
	(void)state;
	return test_mkdtemp(g_dir, sizeof g_dir, "certmgr");
}

static int teardown_each(void **state)
{
	(void)state;
	certmgr_stop(g_m);
	g_m = NULL;
	assert_false(F.bad_rotation);
	fake_free();
	test_rm_rf(g_dir);
	return 0;
}

/* ---- tests ---- */

static void test_first_issuance(void **state)
{
	(void)state;
	fake_init(3600);
	struct certmgr *m = start(100, 100, 400);
	wait_rotations(1, 10000);
	assert_true(certmgr_ready(m));
	struct buf cur = BUF_INIT;
	assert_true(certmgr_current(m, &cur));
	/* what is current is what the store holds and what on_rotated got */
	struct certstore_pair p;
	assert_int_equal(certstore_load(g_dir, "yurthub", &p), 1);
	assert_string_equal(cur.data, p.pem.data);
	pthread_mutex_lock(&F.lock);
	assert_string_equal(F.last_pem.data, p.pem.data);
	assert_string_equal(F.last.cn, "system:node:edge-1");
	assert_int_equal(F.last.ips.n, 1);
	assert_string_equal(F.last.ips.v[0], "127.0.0.1");
	pthread_mutex_unlock(&F.lock);
	assert_int_equal(certmgr_not_after(m), (long long)p.info.not_after);
	certstore_pair_free(&p);
	buf_free(&cur);
	/* a good certificate: no second request */
	expect_quiet(1, 600);
	struct certmgr_stats st;
	certmgr_get_stats(m, &st);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.rotations, 1);
	assert_int_equal(st.failures, 0);
	stop_promptly(m, "when idle");
}

/* Lifetimes of 4 s: each renewal comes between 70% and 90% of the
 * lifetime (the thread wakes at the point, give or take the time a request
 * takes), before the expiry, with a new key; the manager is never without
 * a valid certificate on the way. */
static void test_rotation(void **state)
{
	(void)state;
	fake_init(4);
	struct certmgr *m = start(1000, 100, 400);
	wait_rotations(1, 10000);
	struct buf prev = BUF_INIT, cur = BUF_INIT;
	assert_true(certmgr_current(m, &prev));
	for (unsigned r = 2; r <= 4; r++) {
		pthread_mutex_lock(&F.lock);
		long long nb = (long long)F.last.not_before * 1000;
		long long na = (long long)F.last.not_after * 1000;
		pthread_mutex_unlock(&F.lock);
		/* ready all along: sample while waiting */
		long long end = mono_ms() + 10000;
		while (mono_ms() < end) {
			assert_true(certmgr_ready(m));
			unsigned want = r;
			if (wait_for(rotations_at_least, &want, 100))
				break;
		}
		wait_rotations(r, 1);
		pthread_mutex_lock(&F.lock);
		long long at = F.rotated_wall_ms[r - 1];
		pthread_mutex_unlock(&F.lock);
		long long life = na - nb;
		if (at < nb + life * 7 / 10 - 50 || at > nb + life * 9 / 10 + 700)
			fail_msg("rotation %u at %lld ms of a %lld ms lifetime", r, at - nb, life);
		assert_true(at < na);
		assert_true(certmgr_current(m, &cur));
		assert_string_not_equal(key_block(&cur), key_block(&prev));
		buf_reset(&prev);
		assert_int_equal(buf_append(&prev, cur.data, cur.len), 0);
	}
	buf_free(&prev);
	buf_free(&cur);
	stop_promptly(m, "after rotations");
}

/* Failures: 100, 200, 400, then 400 ms (the cap) apart, each plus up to
 * 10%; the success after them resets the count. */
static void test_backoff(void **state)
{
	(void)state;
	fake_init(3600);
	F.fail_next = 5;
	struct certmgr *m = start(100, 100, 400);
	wait_rotations(1, 15000);
	assert_int_equal(F.calls, 6);
	static const long long want[] = {100, 200, 400, 400, 400};
	for (int i = 0; i < 5; i++) {
		long long gap = F.call_ms[i + 1] - F.call_ms[i];
		/* the key generation and signing add a little */
		if (gap < want[i] || gap > want[i] * 11 / 10 + 250)
			fail_msg("gap %d: %lld ms, want %lld (+10%%)", i, gap, want[i]);
	}
	struct certmgr_stats st;
	certmgr_get_stats(m, &st);
	assert_int_equal(st.failures, 5);
	assert_int_equal(st.consecutive_failures, 0);
	assert_int_equal(st.requests, 6);
	stop_promptly(m, "after backoff");
}

/* A new IP wanted: a request at once (well, at the next template poll),
 * and the new certificate has it. */
static void test_template_change(void **state)
{
	(void)state;
	fake_init(3600);
	struct certmgr *m = start(200, 100, 400);
	wait_rotations(1, 10000);
	expect_quiet(1, 500);
	pthread_mutex_lock(&F.lock);
	assert_int_equal(x509_names_add(&F.tmpl.ips, "10.96.0.1"), 0);
	pthread_mutex_unlock(&F.lock);
	wait_rotations(2, 3000);
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.last.ips.n, 2);
	assert_string_equal(F.last.ips.v[1], "10.96.0.1");
	pthread_mutex_unlock(&F.lock);
	expect_quiet(2, 500);
	/* recheck: no waiting for the poll */
	pthread_mutex_lock(&F.lock);
	assert_int_equal(x509_names_add(&F.tmpl.dns, "kubernetes"), 0);
	pthread_mutex_unlock(&F.lock);
	certmgr_recheck(m);
	wait_rotations(3, 3000);
	stop_promptly(m, "after template changes");
}

/* A good stored certificate: ready at once, no request. */
static void test_stored_good(void **state)
{
	(void)state;
	fake_init(3600);
	time_t now = time(NULL);
	store_pair("system:node:edge-1", now - 60, now + 3600);
	struct certmgr *m = start(100, 100, 400);
	unsigned polls = 1;
	assert_true(wait_for(templates_at_least, &polls, 5000));
	assert_true(certmgr_ready(m));
	expect_quiet(0, 600);
	stop_promptly(m, "when idle");
}

/* Expired on disk: not current, a request at once, ready after it. */
static void test_stored_expired(void **state)
{
	(void)state;
	fake_init(3600);
	time_t now = time(NULL);
	store_pair("system:node:edge-1", now - 100, now - 10);
	F.block = true;
	struct certmgr *m = start(100, 100, 400);
	assert_true(wait_for(blocked_in_issue, NULL, 5000));
	assert_false(certmgr_ready(m));
	struct buf cur = BUF_INIT;
	assert_int_equal(buf_append_str(&cur, "stale"), 0);
	assert_false(certmgr_current(m, &cur));
	assert_int_equal(cur.len, 0);
	assert_int_not_equal(certmgr_not_after(m), 0); /* known, just expired */
	pthread_mutex_lock(&F.lock);
	F.block = false;
	pthread_cond_broadcast(&F.cond);
	pthread_mutex_unlock(&F.lock);
	wait_rotations(1, 5000);
	assert_true(certmgr_ready(m));
	assert_true(certmgr_current(m, &cur));
	buf_free(&cur);
	stop_promptly(m, "after renewal");
}

/* Stored for another node: it does not fit, a request at once. */
static void test_stored_unfit(void **state)
{
	(void)state;
	fake_init(3600);
	time_t now = time(NULL);
	store_pair("system:node:other", now - 60, now + 3600);
	struct certmgr *m = start(100, 100, 400);
	wait_rotations(1, 5000);
	pthread_mutex_lock(&F.lock);
	assert_string_equal(F.last.cn, "system:node:edge-1");
	pthread_mutex_unlock(&F.lock);
	stop_promptly(m, "after renewal");
}

/* A corrupt store is no store: a request, and the store is good again. */
static void test_stored_corrupt(void **state)
{
	(void)state;
	fake_init(3600);
	assert_int_equal(test_write_file(g_dir, "yurthub-2020-01-01-00-00-00.pem", "garbage"), 0);
	char *link = str_printf("%s/yurthub-current.pem", g_dir);
	assert_int_equal(symlink("yurthub-2020-01-01-00-00-00.pem", link), 0);
	free(link);
	struct certmgr *m = start(100, 100, 400);
	wait_rotations(1, 5000);
	struct certstore_pair p;
	assert_int_equal(certstore_load(g_dir, "yurthub", &p), 1);
	certstore_pair_free(&p);
	stop_promptly(m, "after renewal");
}

/* Template not known: no request, whatever the store; then one. */
static void test_template_unavailable(void **state)
{
	(void)state;
	fake_init(3600);
	F.available = false;
	struct certmgr *m = start(100, 100, 400);
	expect_quiet(0, 800);
	assert_false(certmgr_ready(m));
	pthread_mutex_lock(&F.lock);
	F.available = true;
	pthread_mutex_unlock(&F.lock);
	wait_rotations(1, 5000);
	stop_promptly(m, "after issuance");
}

/* The signer drops the IP SAN: the certificate is used, and not asked for
 * again and again - until the template changes. */
static void test_signer_drops_san(void **state)
{
	(void)state;
	fake_init(3600);
	F.no_sans = true;
	struct certmgr *m = start(100, 100, 400);
	wait_rotations(1, 5000);
	assert_true(certmgr_ready(m));
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.last.ips.n, 0);
	pthread_mutex_unlock(&F.lock);
	expect_quiet(1, 1000);
	pthread_mutex_lock(&F.lock);
	F.no_sans = false;
	assert_int_equal(x509_names_add(&F.tmpl.ips, "169.254.2.1"), 0);
	pthread_mutex_unlock(&F.lock);
	wait_rotations(2, 5000);
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.last.ips.n, 2);
	pthread_mutex_unlock(&F.lock);
	stop_promptly(m, "after renewal");
}

/* An answer for another key is a failure, not a certificate. */
static void test_wrong_key(void **state)
{
	(void)state;
	fake_init(3600);
	F.wrong_key = true;
	struct certmgr *m = start(100, 100, 400);
	wait_rotations(1, 5000);
	struct certmgr_stats st;
	certmgr_get_stats(m, &st);
	assert_int_equal(st.requests, 2);
	assert_int_equal(st.failures, 1);
	struct buf cur = BUF_INIT;
	assert_true(certmgr_current(m, &cur));
	struct x509_info info;
	assert_int_equal(x509_parse_pem(cur.data, cur.len, &info, NULL), 0);
	assert_true(info.key_matches);
	x509_info_free(&info);
	buf_free(&cur);
	stop_promptly(m, "after renewal");
}

static void test_stop_during_backoff(void **state)
{
	(void)state;
	fake_init(3600);
	F.fail_all = true;
	struct certmgr *m = start(100, 10000, 32000);
	wait_calls(1, 5000);
	assert_true(wait_for(failed_once, m, 5000));
	stop_promptly(m, "during a 10 s backoff");
	assert_int_equal(F.calls, 1);
}

static void test_stop_during_request(void **state)
{
	(void)state;
	fake_init(3600);
	F.block = true;
	struct certmgr *m = start(100, 100, 400);
	assert_true(wait_for(blocked_in_issue, NULL, 5000));
	stop_promptly(m, "during a request");
	assert_true(F.cancelled);
	assert_int_equal(F.in_issue, 0);
	assert_int_equal(F.rotations, 0);
}

static void test_start_needs_config(void **state)
{
	(void)state;
	struct certmgr_config cfg = {.dir = "/tmp", .prefix = "x"};
	char *err = NULL;
	assert_null(certmgr_start(&cfg, &err));
	assert_non_null(err);
	free(err);
	fake_init(1);
}

static int setup(void **state)
{
	(void)state;
	g_ca = test_ca_new("test-ca");
	return g_ca ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	test_ca_free(g_ca);
	return 0;
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_each, teardown_each)

int main(void)
{
	if (getenv("YURTHUB_TEST_VERBOSE"))
		log_set_verbosity(4);
	const struct CMUnitTest tests[] = {
	    T(test_first_issuance),	 T(test_rotation),	     T(test_backoff),
	    T(test_template_change),	 T(test_stored_good),	     T(test_stored_expired),
	    T(test_stored_unfit),	 T(test_stored_corrupt),     T(test_template_unavailable),
	    T(test_signer_drops_san),	 T(test_wrong_key),	     T(test_stop_during_backoff),
	    T(test_stop_during_request), T(test_start_needs_config),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
