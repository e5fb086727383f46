/*
 * keeper.c - the dummy interface made at start, kept by a thread, deleted
 * at stop; see keeper.h.
 */
#include "netif/keeper.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netif/dummy.h"
#include "util/log.h"

#define PERIOD_MS     60000 /* YurtHub's SyncNetworkPeriod */
#define PERIOD_MS_MIN 100
#define PERIOD_MS_MAX 3600000
#define WHY_MAX	      256

struct netif_keeper {
	const char *name, *ip;
	long period_ms;
	bool failing; /* the last check failed, and that was warned about */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC, as housekeeping's */
	bool stop;
};

static long period_ms(void)
{
	const char *s = getenv("YURTHUB_TEST_NETIF_PERIOD_MS");
	if (!s || !*s)
		return PERIOD_MS;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < PERIOD_MS_MIN || v > PERIOD_MS_MAX) {
		log_warn("YURTHUB_TEST_NETIF_PERIOD_MS=%s ignored: want %d to %d (milliseconds)", s,
			 PERIOD_MS_MIN, PERIOD_MS_MAX);
		return PERIOD_MS;
	}
	return v;
}

/* What a check put right, in words: "created", "brought up", "its address
 * added" joined by commas. */
static void changes_text(unsigned changed, char *out, size_t len)
{
	static const struct {
		unsigned bit;
		const char *what;
	} words[] = {{DUMMY_CREATED, "created"},
		     {DUMMY_SET_UP, "brought up"},
		     {DUMMY_ADDR_ADDED, "its address added"}};
	size_t n = 0;
	out[0] = '\0';
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		if ((changed & words[i].bit) && n < len) {
			int w = snprintf(out + n, len - n, "%s%s", n ? ", " : "", words[i].what);
			if (w > 0)
				n += (size_t)w;
		}
}

/* One periodic check.  Something put right means something (or someone)
 * took it away while pods may have been using it: a warning.  A failure is
 * warned about once, until a check succeeds again. */
static void check(struct netif_keeper *k)
{
	unsigned changed = 0;
	char why[WHY_MAX];
	if (dummy_ensure(k->name, k->ip, &changed, why, sizeof why) < 0) {
		if (!k->failing)
			log_warn("%s; tried again every %.1f s", why, (double)k->period_ms / 1000);
		else
			log_v(2, "%s", why);
		k->failing = true;
		return;
	}
	if (changed & DUMMY_CREATED) {
		log_warn("dummy interface %s was gone: created again with %s", k->name, k->ip);
	} else if (changed) {
		char what[96];
		changes_text(changed, what, sizeof what);
		log_warn("dummy interface %s was not in order: %s (%s)", k->name, what, k->ip);
	} else if (k->failing) {
		log_info("dummy interface %s is in order again (%s)", k->name, k->ip);
	}
	k->failing = false;
}

static void *keeper_main(void *arg)
{
	struct netif_keeper *k = arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&k->mu);
	while (!k->stop) {
		next.tv_sec += k->period_ms / 1000;
		next.tv_nsec += (k->period_ms % 1000) * 1000000L;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		int rc = 0; /* 0: woken (spuriously, or to stop) */
		while (!k->stop && rc == 0)
			rc = pthread_cond_timedwait(&k->cv, &k->mu, &next);
		if (k->stop)
			break;
		/* unlocked: stop() waits for the check in progress only */
		pthread_mutex_unlock(&k->mu);
		check(k);
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

static void remove_interface(const char *name)
{
	char why[WHY_MAX];
	int rc = dummy_remove(name, why, sizeof why);
	if (rc == 0 && !*why)
		log_info("dummy interface %s deleted", name);
	else if (rc == 0)
		log_info("%s", why);
	else if (rc == -EPERM || rc == -EACCES)
		/* found in place at start and used as it was: whoever made it
		 * keeps it */
		log_info("%s; it stays", why);
	else
		log_warn("%s", why);
}

static int start_thread(struct netif_keeper *k)
{
	if (pthread_mutex_init(&k->mu, NULL) != 0)
		return -1;
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0)
		goto no_cond;
	if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&k->cv, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		goto no_cond;
	}
	pthread_condattr_destroy(&ca);
	if (pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
		pthread_cond_destroy(&k->cv);
		goto no_cond;
	}
	return 0;
no_cond:
	pthread_mutex_destroy(&k->mu);
	return -1;
}

struct netif_keeper *netif_keeper_start(const char *name, const char *ip)
{
	unsigned changed = 0;
	char why[WHY_MAX];
	if (dummy_ensure(name, ip, &changed, why, sizeof why) < 0) {
		log_warn("%s; going on without it: pods cannot reach the hub on %s, only clients "
			 "on the host through --bind-proxy-address",
			 why, ip);
		return NULL;
	}
	char what[96];
	changes_text(changed, what, sizeof what);
	/* "created, brought up, its address added", "found in order",
	 * "found; its address added" */
	const char *found = changed & DUMMY_CREATED ? "" : changed ? "found; " : "found in order";
	log_info("dummy interface %s with %s: %s%s", name, ip, found, what);
	struct netif_keeper *k = calloc(1, sizeof *k);
	if (k) {
		k->name = name;
		k->ip = ip;
		k->period_ms = period_ms();
	}
	if (!k || start_thread(k) < 0) {
		free(k);
		log_warn("cannot start the thread that keeps dummy interface %s; going on "
			 "without it",
			 name);
		remove_interface(name);
		return NULL;
	}
	return k;
}

void netif_keeper_stop(struct netif_keeper *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thread, NULL);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
	remove_interface(k->name);
	free(k);
}
