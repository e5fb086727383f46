/*
 * certmgr.c - the certificate rotation thread, see certmgr.h.
 *
 * Certificate times are wall-clock times (seconds since the epoch), so the
 * thread reasons in CLOCK_REALTIME milliseconds; but it never sleeps longer
 * than one template poll (a second) at a time, on a CLOCK_MONOTONIC
 * condition variable, so a clock that jumps is noticed within a second and a
 * stop is seen at once.  Only the thread touches the parsed certificate and
 * the schedule; the PEM and expiry that other threads read sit under the
 * mutex.
 */
#include "identity/certmgr.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "identity/certstore.h"
#include "util/log.h"

#define POLL_MS_DEFAULT		 1000u
#define BACKOFF_FIRST_MS_DEFAULT 2000u
#define BACKOFF_MAX_MS_DEFAULT	 32000u

struct certmgr {
	char *name, *dir, *prefix;
	struct certmgr_config cfg; /* strings point at the copies above */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
	atomic_bool stop;
	bool recheck; /* under lock */

	/* under lock: what other threads see */
	struct buf pem;	     /* the current pair, empty when none */
	long long not_after; /* of the current certificate; 0: none */
	struct certmgr_stats stats;

	/* the thread's own */
	struct x509_info info;		/* of the current certificate */
	bool have;			/* there is a current certificate */
	struct x509_template asked_for; /* what it was requested for */
	bool asked;			/* ... known (not loaded from disk) */
	long long rotate_at_ms;		/* wall clock */
	bool template_failing;		/* "unavailable" was logged */
	char *last_unfit;		/* the mismatch already logged */
};

static long long wall_ms(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_REALTIME, &t) < 0)
		return 0;
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static double random_unit(void)
{
	uint32_t r = 0;
	if (gnutls_rnd(GNUTLS_RND_NONCE, &r, sizeof r) < 0)
		r = (uint32_t)wall_ms(); /* never in practice */
	return (double)r / 4294967296.0;
}

/* Wait ms, or less when stopped or asked to look again: false when
 * stopped. */
static bool pause_ms(struct certmgr *m, long long ms)
{
	if (ms < 0)
		ms = 0;
	struct timespec until;
	if (clock_gettime(CLOCK_MONOTONIC, &until) < 0)
		return !atomic_load(&m->stop);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->lock);
	int rc = 0;
	while (!atomic_load(&m->stop) && !m->recheck && rc != ETIMEDOUT) {
		rc = pthread_cond_timedwait(&m->wake, &m->lock, &until);
		if (rc != 0 && rc != ETIMEDOUT && rc != EINTR)
			break;
	}
	m->recheck = false;
	pthread_mutex_unlock(&m->lock);
	return !atomic_load(&m->stop);
}

/* The pause after the n-th failure in a row: first, doubling, capped,
 * plus up to 10%. */
static long long backoff_ms(const struct certmgr *m, unsigned n)
{
	long long ms = m->cfg.backoff_first_ms;
	while (--n > 0 && ms < m->cfg.backoff_max_ms)
		ms *= 2;
	if (ms > m->cfg.backoff_max_ms)
		ms = m->cfg.backoff_max_ms;
	return ms + (long long)(random_unit() * 0.1 * (double)ms);
}

/* A uniformly random point between 70% and 90% of the lifetime. */
static long long rotation_point(const struct x509_info *info)
{
	long long nb = (long long)info->not_before * 1000, na = (long long)info->not_after * 1000;
	if (na <= nb)
		return nb;
	return nb + (long long)((double)(na - nb) * (0.7 + 0.2 * random_unit()));
}

static void fmt_time(long long ms, char out[32])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	if (!gmtime_r(&s, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		strcpy(out, "?");
}

/* Make pem (owned by the caller, copied) and info (taken) current. */
static int install(struct certmgr *m, const char *pem, size_t len, struct x509_info *info)
{
	struct buf copy = BUF_INIT;
	if (buf_append(&copy, pem, len) < 0)
		return -1;
	pthread_mutex_lock(&m->lock);
	if (m->pem.data)
		explicit_bzero(m->pem.data, m->pem.cap);
	buf_free(&m->pem);
	m->pem = copy;
	m->not_after = (long long)info->not_after;
	pthread_mutex_unlock(&m->lock);
	x509_info_free(&m->info);
	m->info = *info;
	memset(info, 0, sizeof *info);
	m->have = true;
	m->rotate_at_ms = rotation_point(&m->info);
	return 0;
}

static void count(struct certmgr *m, unsigned long *field)
{
	pthread_mutex_lock(&m->lock);
	(*field)++;
	pthread_mutex_unlock(&m->lock);
}

/* One request for t.  0, or -1 with *err. */
static int attempt(struct certmgr *m, const struct x509_template *t, char **err)
{
	struct buf csr = BUF_INIT, key = BUF_INIT, pair = BUF_INIT;
	struct x509_info info = {0};
	char *cert = NULL;
	int rc = -1;
	if (x509_make_csr(t, &csr, &key, err) < 0)
		goto out;
	count(m, &m->stats.requests);
	if (m->cfg.issuer.issue(m->cfg.issuer.ctx, csr.data, &cert, err) < 0 || !cert) {
		if (err && !*err)
			*err = strdup("the issuer gave no certificate and no reason");
		goto out;
	}
	if (atomic_load(&m->stop)) {
		*err = strdup("stopped");
		goto out;
	}
	/* the certificate, then a line break if it lacks one, then the key */
	size_t clen = strlen(cert);
	if (buf_append(&pair, cert, clen) < 0 ||
	    (clen && cert[clen - 1] != '\n' && buf_append_char(&pair, '\n') < 0) ||
	    buf_append(&pair, key.data, key.len) < 0) {
		*err = strdup("out of memory");
		goto out;
	}
	char *perr = NULL;
	if (x509_parse_pem(pair.data, pair.len, &info, &perr) < 0) {
		*err = str_printf("the issued certificate does not parse: %s",
				  perr ? perr : "out of memory");
		free(perr);
		goto out;
	}
	if (!info.key_matches) {
		*err = strdup("the issued certificate is not for the key of the request");
		goto out;
	}
	if ((long long)info.not_after * 1000 <= wall_ms()) {
		*err = strdup("the issued certificate has already expired");
		goto out;
	}
	if (certstore_save(m->dir, m->prefix, pair.data, pair.len, err) < 0)
		goto out;
	if (install(m, pair.data, pair.len, &info) < 0) {
		*err = strdup("out of memory");
		goto out;
	}
	x509_template_free(&m->asked_for);
	m->asked = x509_template_copy(&m->asked_for, t) == 0;
	pthread_mutex_lock(&m->lock);
	m->stats.rotations++;
	m->stats.consecutive_failures = 0;
	pthread_mutex_unlock(&m->lock);
	char na[32], at[32];
	fmt_time((long long)m->info.not_after * 1000, na);
	fmt_time(m->rotate_at_ms, at);
	log_msg('I', 0, "%s certificate: a new one for %s, valid until %s, renewed from %s",
		m->name, m->info.cn, na, at);
	if (m->cfg.on_rotated)
		m->cfg.on_rotated(m->cfg.rotated_ctx, pair.data, pair.len, &m->info);
	rc = 0;
out:
	x509_info_free(&info);
	if (key.data)
		explicit_bzero(key.data, key.cap);
	if (pair.data)
		explicit_bzero(pair.data, pair.cap);
	buf_free(&key);
	buf_free(&pair);
	buf_free(&csr);
	free(cert);
	return rc;
}

/* Why a certificate is wanted now for t, or NULL when it is not (and
 * *wait_ms says how long it may wait).  *why_owned is set when the reason
 * is malloc'ed. */
static const char *need(struct certmgr *m, const struct x509_template *t, long long *wait_ms,
			char **why_owned)
{
	long long now = wall_ms();
	*why_owned = NULL;
	if (!m->have)
		return "there is none";
	if ((long long)m->info.not_after * 1000 <= now)
		return "it has expired";
	char *why = NULL;
	if (!x509_satisfies(&m->info, t, &why)) {
		if (!(m->asked && x509_template_equal(&m->asked_for, t))) {
			*why_owned = why;
			return why ? why : "it does not fit the template";
		}
		/* issued for this very template and still unfit: the signer's
		 * choice; say so once, do not ask again until it changes */
		if (why && (!m->last_unfit || strcmp(m->last_unfit, why))) {
			log_warn("%s certificate: the signer issued one that %s; not asking again "
				 "until the template changes",
				 m->name, why);
			free(m->last_unfit);
			m->last_unfit = why;
			why = NULL;
		}
		free(why);
	}
	if (now >= m->rotate_at_ms)
		return "it is due for renewal";
	*wait_ms = m->rotate_at_ms - now;
	return NULL;
}

static void load_store(struct certmgr *m)
{
	struct certstore_pair p;
	if (certstore_load(m->dir, m->prefix, &p) == 1) {
		if (install(m, p.pem.data, p.pem.len, &p.info) == 0) {
			char na[32], at[32];
			fmt_time((long long)m->info.not_after * 1000, na);
			fmt_time(m->rotate_at_ms, at);
			log_msg('I', 0,
				"%s certificate: %s from %s, valid until %s, renewed from %s",
				m->name, m->info.cn, m->dir, na, at);
			if (m->cfg.on_loaded)
				m->cfg.on_loaded(m->cfg.rotated_ctx, m->pem.data, m->pem.len,
						 &m->info);
		}
	}
	certstore_pair_free(&p);
}

static void *run(void *arg)
{
	struct certmgr *m = arg;
	unsigned failures = 0;
	while (!atomic_load(&m->stop)) {
		struct x509_template t = {0};
		char *err = NULL;
		if (m->cfg.get_template(m->cfg.template_ctx, &t, &err) < 0) {
			if (!m->template_failing)
				log_info("%s certificate: what to ask for is not known yet (%s); "
					 "keeping what there is",
					 m->name, err ? err : "no reason given");
			m->template_failing = true;
			free(err);
			x509_template_free(&t);
			pause_ms(m, m->cfg.template_poll_ms);
			continue;
		}
		m->template_failing = false;
		long long wait = 0;
		char *owned = NULL;
		const char *why = need(m, &t, &wait, &owned);
		if (!why) {
			x509_template_free(&t);
			pause_ms(m,
				 wait < m->cfg.template_poll_ms ? wait : m->cfg.template_poll_ms);
			continue;
		}
		log_info("%s certificate: requesting a new one: %s", m->name, why);
		free(owned);
		int rc = attempt(m, &t, &err);
		x509_template_free(&t);
		if (rc == 0) {
			failures = 0;
			continue;
		}
		if (atomic_load(&m->stop)) {
			free(err);
			break;
		}
		if (failures < UINT_MAX)
			failures++;
		pthread_mutex_lock(&m->lock);
		m->stats.failures++;
		m->stats.consecutive_failures = failures;
		pthread_mutex_unlock(&m->lock);
		long long ms = backoff_ms(m, failures);
		log_warn("%s certificate: request %u failed, next in %lld ms: %s", m->name,
			 failures, ms, err ? err : "no reason given");
		free(err);
		pause_ms(m, ms);
	}
	return NULL;
}

static void destroy(struct certmgr *m)
{
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->wake);
	if (m->pem.data)
		explicit_bzero(m->pem.data, m->pem.cap);
	buf_free(&m->pem);
	x509_info_free(&m->info);
	x509_template_free(&m->asked_for);
	free(m->last_unfit);
	free(m->name);
	free(m->dir);
	free(m->prefix);
	free(m);
}

struct certmgr *certmgr_start(const struct certmgr_config *cfg, char **err)
{
	if (!cfg->dir || !cfg->prefix || !*cfg->prefix || !cfg->get_template ||
	    !cfg->issuer.issue) {
		*err = strdup("certificate manager: dir, prefix, template and issuer are needed");
		return NULL;
	}
	struct certmgr *m = calloc(1, sizeof *m);
	if (!m) {
		*err = strdup("out of memory");
		return NULL;
	}
	m->cfg = *cfg;
	m->name = strdup(cfg->name ? cfg->name : cfg->prefix);
	m->dir = strdup(cfg->dir);
	m->prefix = strdup(cfg->prefix);
	m->cfg.name = m->name;
	m->cfg.dir = m->dir;
	m->cfg.prefix = m->prefix;
	if (!m->cfg.template_poll_ms)
		m->cfg.template_poll_ms = POLL_MS_DEFAULT;
	if (!m->cfg.backoff_first_ms)
		m->cfg.backoff_first_ms = BACKOFF_FIRST_MS_DEFAULT;
	if (!m->cfg.backoff_max_ms)
		m->cfg.backoff_max_ms = BACKOFF_MAX_MS_DEFAULT;
	pthread_condattr_t ca;
	bool ok = m->name && m->dir && m->prefix && pthread_mutex_init(&m->lock, NULL) == 0;
	if (ok) {
		ok = pthread_condattr_init(&ca) == 0;
		if (ok) {
			ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
			     pthread_cond_init(&m->wake, &ca) == 0;
			pthread_condattr_destroy(&ca);
		}
		if (!ok)
			pthread_mutex_destroy(&m->lock);
	}
	if (!ok) {
		free(m->name);
		free(m->dir);
		free(m->prefix);
		free(m);
		*err = strdup("certificate manager: out of memory");
		return NULL;
	}
	load_store(m); /* before the thread: no lock is contended yet */
	int rc = pthread_create(&m->thread, NULL, run, m);
	if (rc != 0) {
		*err = str_printf("certificate manager: no thread: %s", strerror(rc));
		destroy(m);
		return NULL;
	}
	return m;
}

bool certmgr_current(struct certmgr *m, struct buf *out)
{
	bool ok = false;
	if (out->data)
		explicit_bzero(out->data, out->cap);
	buf_reset(out);
	pthread_mutex_lock(&m->lock);
	if (m->not_after && m->not_after * 1000 > wall_ms())
		ok = buf_append(out, m->pem.data, m->pem.len) == 0;
	pthread_mutex_unlock(&m->lock);
	return ok;
}

bool certmgr_ready(struct certmgr *m)
{
	pthread_mutex_lock(&m->lock);
	bool ok = m->not_after && m->not_after * 1000 > wall_ms();
	pthread_mutex_unlock(&m->lock);
	return ok;
}

long long certmgr_not_after(struct certmgr *m)
{
	pthread_mutex_lock(&m->lock);
	long long na = m->not_after;
	pthread_mutex_unlock(&m->lock);
	return na;
}

void certmgr_get_stats(struct certmgr *m, struct certmgr_stats *out)
{
	pthread_mutex_lock(&m->lock);
	*out = m->stats;
	pthread_mutex_unlock(&m->lock);
}

void certmgr_recheck(struct certmgr *m)
{
	pthread_mutex_lock(&m->lock);
	m->recheck = true;
	pthread_cond_broadcast(&m->wake);
	pthread_mutex_unlock(&m->lock);
}

void certmgr_stop(struct certmgr *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	atomic_store(&m->stop, true);
	pthread_cond_broadcast(&m->wake);
	pthread_mutex_unlock(&m->lock);
	if (m->cfg.issuer.cancel)
		m->cfg.issuer.cancel(m->cfg.issuer.ctx);
	pthread_join(m->thread, NULL);
	destroy(m);
}
