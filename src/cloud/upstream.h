/*
 * upstream.h - the cloud's API servers as the hub reaches them: their URLs,
 * the hub's identity towards them (client certificate, CA, or token, from a
 * kubeconfig or flags), and libcurl handles set up with both.  A client
 * certificate and key read from files follow the files: kubelet rotates its
 * certificate, and the hub picks up the new pair within seconds.
 *
 * All handles share one connection cache, DNS cache and TLS session cache
 * (a CURLSH), so that keep-alive connections to the cloud are reused across
 * client connections.
 *
 * cloud/ is the one place that knows the backends: this file (who they are,
 * how to reach them, which one to use) and health.c (whether they answer).
 * The proxy, the offline-Event outbox and the health prober all use it; it
 * uses nothing above it.
 */
#ifndef YURTHUB_CLOUD_UPSTREAM_H
#define YURTHUB_CLOUD_UPSTREAM_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "config.h"
#include "util/buf.h"
#include "util/fsutil.h"

struct backend {
	char *url;   /* "https://host:port", no trailing slash */
	int index;   /* in upstream's backends; -1 for a leader hub */
	bool leader; /* a pool's leader hub (leaders.h), not the cloud */
	atomic_int healthy;
	/* health state, owned by the health checker */
	int successes, failures;
};

struct upstream {
	struct backend *backends;
	size_t n;
	enum lb_mode lb_mode;
	atomic_uint rr_next;

	/* identity */
	struct buf ca_pem, cert_pem, key_pem;
	bool insecure;
	char *tls_server_name;
	char *token_file;
	pthread_mutex_t token_lock;
	char *token; /* current bearer token, NULL for none */
	long token_read_at;
	/* The client certificate and key, when they came from files (NULL:
	 * inline kubeconfig data, or none), are re-read when the files change:
	 * kubelet rotates its certificate and the old one expires.  cert_lock
	 * guards cert_pem, key_pem and the fields below; every handle copies
	 * the pair under it. */
	pthread_mutex_t cert_lock;
	char *cert_file, *key_file;
	struct file_stamp cert_seen, key_seen; /* the files as last examined */
	long cert_checked_at;
	/* Without a client certificate the hub cannot speak for the node
	 * (token and kubelet-certificate bootstrap): until it has a valid one,
	 * the cloud counts as unreachable, and the cache answers. */
	atomic_bool needs_client_cert;
	atomic_llong cert_not_after; /* of cert_pem, seconds since the epoch; 0 none */
	/* bumped when ca_pem changes: an answer over a handle set up before
	 * was judged with the old trust (cloud/health.c) */
	atomic_uint ca_generation;

	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	pthread_key_t handles_key; /* the handles a connection thread reuses */
	bool handles_key_made;
};

/* From --server-addr (or the kubeconfig's server) and --kubeconfig or the
 * explicit identity flags.  0, or -1 with *err. */
int upstream_init(struct upstream *u, const struct config *cfg, char **err);
void upstream_free(struct upstream *u);

/* A handle set up for a request to b: TLS identity, timeouts, the shared
 * caches.  with_client_cert false leaves the hub's certificate out (the
 * request carries the client's own Authorization).  NULL on ENOMEM. */
CURL *upstream_easy(struct upstream *u, const struct backend *b, bool with_client_cert);
/* The proxy's handles: a multi and an easy handle of the calling thread,
 * the easy one set up as upstream_easy() does.  A client connection's thread
 * reuses them request after request (no new socketpair, no new handle), and
 * they die with the thread.  0 or -1. */
int upstream_take(struct upstream *u, const struct backend *b, bool with_client_cert, CURLM **multi,
		  CURL **easy);
/* Hand them back after the transfer (removed from the multi here). */
void upstream_give_back(struct upstream *u, CURLM *multi, CURL *easy);

/* "Authorization: Bearer <token>" for the hub's own identity, or NULL when
 * it has none (malloc'ed).  Token files are re-read every minute. */
char *upstream_auth_header(struct upstream *u);

/* Look at the client certificate files now (the hub does so by itself, at
 * most every few seconds, when it sets up a handle) and swap in a changed
 * pair if the certificate and the key parse and match.  1 swapped, 0 nothing
 * new (or no files), -1 a changed pair was refused: a warning was logged
 * and the current pair stays.  Each change is judged, and warned about,
 * once. */
int upstream_recheck_client_cert(struct upstream *u);

/* Set h up as upstream_easy() sets up a new handle (CA, client
 * certificate), for callers that run their own requests (the CSR client). */
void upstream_prepare_easy(struct upstream *u, CURL *h, bool with_client_cert);
/* Trust pem (the cluster CA found by bootstrap) from now on.  0 or -1. */
int upstream_set_ca(struct upstream *u, const char *pem, size_t len);
/* Changes whenever the trusted CA does; a handle set up before a change
 * still trusts the old one. */
unsigned upstream_ca_generation(struct upstream *u);
/* Speak with this certificate and key (one PEM, certificate(s) then key)
 * from now on; the files it was read from are the caller's to follow.
 * 0 or -1 (ENOMEM, the current pair kept). */
int upstream_set_client_pair(struct upstream *u, const char *pem, size_t len);
/* Whether the hub must have a client certificate to reach the cloud. */
void upstream_require_client_cert(struct upstream *u, bool required);
/* It must, and has none that is valid now: upstream_pick() gives nothing
 * and upstream_any_healthy() is false, so that requests are answered from
 * the cache instead of being sent anonymous or with an expired identity. */
bool upstream_identity_pending(struct upstream *u);

/* One request of the hub's own to the cloud (an offline Event sent late,
 * the node's autonomy condition, the service-account keys), with its
 * identity, on a handle of its own; the body of the answer is dropped
 * unless body_out asks for it. */
struct upstream_send_req {
	const char *method;	  /* NULL: POST; "GET" sends no body */
	const char *uri;	  /* "/api/v1/namespaces/x/events" */
	const char *content_type; /* NULL: none */
	const char *body;
	size_t body_len;
	const char *user_agent;
	long timeout_s;
	/* optional: each header line of the answer (libcurl's HEADERFUNCTION) */
	size_t (*on_header)(char *line, size_t size, size_t n, void *ctx);
	void *header_ctx;
	/* optional: the answer's body, appended; one longer than body_max
	 * bytes is cut off and the request fails (0) */
	struct buf *body_out;
	size_t body_max;
};
/* The answer's status code, or 0 when none came (no healthy backend, no
 * connection, out of memory). */
long upstream_send(struct upstream *u, const struct upstream_send_req *r);

/* The next healthy backend by --lb-mode, or NULL when none is healthy.
 * Backends whose bit is set in `skip` (bit i: backend i) are passed over. */
struct backend *upstream_pick(struct upstream *u, uint64_t skip);
bool upstream_any_healthy(struct upstream *u);

#endif
