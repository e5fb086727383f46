/*
 * leaders.c - the pool's leader hubs and their TCP prober (leaders.h).
 */
#include "cloud/leaders.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

struct leaders {
	int port;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop, probe_now, thread_started;
	pthread_t thread;
	/* every backend ever made (kept: a request may hold one), and the
	 * ones in use now */
	struct backend **all;
	size_t nall;
	struct backend **current;
	size_t ncurrent;
	unsigned int rr;
	atomic_ulong generation;
	/* probe rounds done, whether one is under way, and the round that
	 * probes the set last given (leaders_wait_probed) */
	unsigned long rounds, target;
	bool probing;
	pthread_cond_t probed;
};

struct leaders *leaders_new(int port)
{
	struct leaders *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->port = port;
	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->wake, &ca);
	pthread_cond_init(&l->probed, &ca);
	pthread_condattr_destroy(&ca);
	return l;
}

static char *url_of(const char *address, int port)
{
	bool v6 = strchr(address, ':') != NULL; /* YurtHub forgets the brackets */
	return str_printf(v6 ? "https://[%s]:%d" : "https://%s:%d", address, port);
}

/* The backend for url, made if new; under l->lock. */
static struct backend *backend_for(struct leaders *l, const char *url)
{
	for (size_t i = 0; i < l->nall; i++)
		if (!strcmp(l->all[i]->url, url))
			return l->all[i];
	struct backend **v = realloc(l->all, (l->nall + 1) * sizeof *v);
	if (!v)
		return NULL;
	l->all = v;
	struct backend *b = calloc(1, sizeof *b);
	if (!b || !(b->url = strdup(url))) {
		free(b);
		return NULL;
	}
	b->index = -1;
	b->leader = true;
	atomic_init(&b->healthy, 0); /* until a probe says it answers */
	l->all[l->nall++] = b;
	return b;
}

int leaders_set(struct leaders *l, const char *const *addresses, size_t n)
{
	struct backend **cur = calloc(n ? n : 1, sizeof *cur);
	if (!cur)
		return -1;
	pthread_mutex_lock(&l->lock);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *url = url_of(addresses[i], l->port);
		if (!url || !(cur[i] = backend_for(l, url)))
			rc = -1;
		free(url);
	}
	if (rc == 0) {
		free(l->current);
		l->current = cur;
		l->ncurrent = n;
		l->probe_now = true;
		/* a round under way probes the previous set */
		l->target = l->rounds + (l->probing ? 2 : 1);
		pthread_cond_signal(&l->wake);
	} else {
		free(cur);
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

struct backend *leaders_pick(struct leaders *l)
{
	if (!l)
		return NULL;
	pthread_mutex_lock(&l->lock);
	struct backend *b = NULL;
	for (size_t i = 0; i < l->ncurrent && !b; i++) {
		struct backend *c = l->current[(l->rr + i) % l->ncurrent];
		if (atomic_load(&c->healthy)) {
			b = c;
			l->rr = (unsigned int)((l->rr + i + 1) % l->ncurrent);
		}
	}
	pthread_mutex_unlock(&l->lock);
	return b;
}

void leaders_report_failure(struct leaders *l, struct backend *b)
{
	if (atomic_exchange(&b->healthy, 0))
		log_warn("leader hub %s: a request could not reach it; the cloud serves until a "
			 "probe finds it again",
			 b->url);
	pthread_mutex_lock(&l->lock);
	l->probe_now = true;
	pthread_cond_signal(&l->wake);
	pthread_mutex_unlock(&l->lock);
}

void leaders_wait_probed(struct leaders *l, long ms)
{
	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += ms / 1000;
	deadline.tv_nsec += (ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&l->lock);
	while (!l->stop && l->rounds < l->target && -clock_ms_since(&deadline) > 0)
		pthread_cond_timedwait(&l->probed, &l->lock, &deadline);
	pthread_mutex_unlock(&l->lock);
}

unsigned long leaders_generation(struct leaders *l)
{
	return l ? atomic_load(&l->generation) : 0;
}

/* ---- the prober ---- */

/* Whether a TCP connection to url's host and port opens within the probe
 * timeout. */
static bool tcp_answers(const char *url)
{
	const char *host = url + strlen("https://");
	const char *colon = strrchr(host, ':');
	if (!colon)
		return false;
	char name[256];
	size_t hn = (size_t)(colon - host);
	if (*host == '[' && hn >= 2 && host[hn - 1] == ']')
		host++, hn -= 2;
	if (hn >= sizeof name)
		return false;
	memcpy(name, host, hn);
	name[hn] = '\0';
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	if (getaddrinfo(name, colon + 1, &hints, &ai) != 0 || !ai)
		return false;
	bool ok = false;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (rc == 0) {
			ok = true;
		} else if (errno == EINPROGRESS) {
			struct pollfd p = {fd, POLLOUT, 0};
			int err = 0;
			socklen_t len = sizeof err;
			ok = poll(&p, 1, LEADERS_PROBE_TIMEOUT_MS) == 1 &&
			     getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
		}
		if (close(fd) < 0)
			log_v(2, "leader probe: close: %s", strerror(errno));
	}
	freeaddrinfo(ai);
	return ok;
}

static void probe_all(struct leaders *l)
{
	pthread_mutex_lock(&l->lock);
	size_t n = l->ncurrent;
	struct backend **v = n ? malloc(n * sizeof *v) : NULL;
	if (v)
		memcpy(v, l->current, n * sizeof *v);
	pthread_mutex_unlock(&l->lock);
	for (size_t i = 0; v && i < n; i++) {
		bool up = tcp_answers(v[i]->url);
		if (atomic_exchange(&v[i]->healthy, up) != up) {
			log_info("leader hub %s: %s", v[i]->url,
				 up ? "answers: the pool-scope resources come from it"
				    : "does not answer");
			if (up)
				atomic_fetch_add(&l->generation, 1);
		}
	}
	free(v);
}

static void *prober(void *arg)
{
	struct leaders *l = arg;
	pthread_mutex_lock(&l->lock);
	while (!l->stop) {
		struct timespec deadline;
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += LEADERS_PROBE_INTERVAL_S;
		while (!l->stop && !l->probe_now && -clock_ms_since(&deadline) > 0)
			pthread_cond_timedwait(&l->wake, &l->lock, &deadline);
		if (l->stop)
			break;
		l->probe_now = false;
		l->probing = true;
		pthread_mutex_unlock(&l->lock);
		probe_all(l);
		pthread_mutex_lock(&l->lock);
		l->probing = false;
		l->rounds++;
		pthread_cond_broadcast(&l->probed);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int leaders_start(struct leaders *l)
{
	if (pthread_create(&l->thread, NULL, prober, l) != 0)
		return -1;
	l->thread_started = true;
	return 0;
}

void leaders_free(struct leaders *l)
{
	if (!l)
		return;
	if (l->thread_started) {
		pthread_mutex_lock(&l->lock);
		l->stop = true;
		pthread_cond_signal(&l->wake);
		pthread_mutex_unlock(&l->lock);
		pthread_join(l->thread, NULL);
	}
	for (size_t i = 0; i < l->nall; i++) {
		free(l->all[i]->url);
		free(l->all[i]);
	}
	free(l->all);
	free(l->current);
	pthread_cond_destroy(&l->wake);
	pthread_cond_destroy(&l->probed);
	pthread_mutex_destroy(&l->lock);
	free(l);
}
