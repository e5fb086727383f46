/*
 * certmgr.h - keeping one certificate of the hub valid: the client
 * certificate it shows the API server, or the serving certificate of its
 * secure port.  What client-go's certificate manager does for YurtHub, as
 * one thread that knows nothing of HTTP: how a certificate is obtained is
 * the issuer's business (a table of functions; csrclient.h provides the
 * Kubernetes CSR one), where it is kept is the file store's (certstore.h).
 *
 * certmgr_start loads the store (on_loaded says what it found); then the
 * thread:
 *   - asks for a certificate at once when there is none, when it has
 *     expired, or when it does not carry what the template asks (CN, every
 *     O, DNS and IP SAN; extras are fine) - the template is asked for again
 *     every second, since the serving certificate's IPs can change;
 *   - otherwise waits until a point drawn uniformly between 70% and 90% of
 *     the certificate's lifetime (so that a fleet does not renew at once),
 *     and then asks;
 *   - each request: a new ECDSA P-256 key, a CSR, the issuer; the answer is
 *     checked (the key is its key, it has not expired), written to the
 *     store, made current, and on_rotated is called;
 *   - after a failure waits 2 s, 4 s, 8 s, 16 s, then every 32 s (each
 *     plus up to 10% at random), as client-go does.
 * When the template cannot be known yet (the serving certificate wants the
 * cluster IP of the kubernetes Service), nothing is requested and the
 * current certificate, if any, is kept.  When the signer issues a
 * certificate that still does not carry the template (it dropped a SAN),
 * that is logged once and not asked for again until the template changes:
 * asking again would only bring the same answer, in a tight loop.
 */
#ifndef YURTHUB_IDENTITY_CERTMGR_H
#define YURTHUB_IDENTITY_CERTMGR_H

#include <stdbool.h>
#include <stddef.h>

#include "identity/x509.h"
#include "util/buf.h"

/* Who signs: SQLite-VFS style, a table of functions and their context. */
struct certmgr_issuer {
	/* Have csr_pem (PEM "CERTIFICATE REQUEST") signed.  0 with *cert_pem
	 * (malloc'ed PEM: the certificate, maybe followed by its chain), or -1
	 * with *err (malloc'ed, or NULL).  May block for as long as issuance
	 * takes; runs in the manager's thread. */
	int (*issue)(void *ctx, const char *csr_pem, char **cert_pem, char **err);
	/* Make an issue() in progress, and every later one, return -1 soon.
	 * Called once, by certmgr_stop, from another thread.  May be NULL:
	 * then certmgr_stop waits for a request in progress to end. */
	void (*cancel)(void *ctx);
	void *ctx;
};

struct certmgr_config {
	const char *name;	  /* for the log: "client", "server" */
	const char *dir, *prefix; /* the store: <root>/pki, "yurthub" */
	/* The template wanted now, into *out (zeroed; the manager frees it):
	 * 0; or -1 when it cannot be known yet, with *err (malloc'ed) saying
	 * why, or NULL.  Called in the manager's thread about every second. */
	int (*get_template)(void *ctx, struct x509_template *out, char **err);
	void *template_ctx;
	struct certmgr_issuer issuer;
	/* A new certificate is stored and current: pem[0..len) is what the
	 * store holds (certificate(s) then key).  In the manager's thread;
	 * must not call certmgr_stop.  May be NULL. */
	void (*on_rotated)(void *ctx, const char *pem, size_t len, const struct x509_info *info);
	/* The pair the store held at start, valid or expired (info says):
	 * called by certmgr_start before the thread starts, so that what is on
	 * disk is in use before any request.  May be NULL.  Both with
	 * rotated_ctx. */
	void (*on_loaded)(void *ctx, const char *pem, size_t len, const struct x509_info *info);
	void *rotated_ctx;
	/* 0 for client-go's figures; tests make them short */
	unsigned template_poll_ms; /* 1000 */
	unsigned backoff_first_ms; /* 2000 */
	unsigned backoff_max_ms;   /* 32000 */
};

struct certmgr_stats {
	unsigned long requests;	 /* issue() calls made */
	unsigned long failures;	 /* attempts that failed, at any step */
	unsigned long rotations; /* certificates stored and made current */
	unsigned consecutive_failures;
};

struct certmgr;

/* Copy what cfg points at (strings included) and start the thread.  NULL
 * with *err when an argument is missing or no thread starts. */
struct certmgr *certmgr_start(const struct certmgr_config *cfg, char **err);
/* The current certificate and key (the store file's bytes) into out,
 * replacing what it held: true; false, out emptied, when there is none or
 * it has expired.  Any thread. */
bool certmgr_current(struct certmgr *m, struct buf *out);
/* A current, unexpired certificate exists.  Any thread. */
bool certmgr_ready(struct certmgr *m);
/* Its expiry (seconds since the epoch), 0 when there is none. */
long long certmgr_not_after(struct certmgr *m);
void certmgr_get_stats(struct certmgr *m, struct certmgr_stats *out);
/* Look at the template now rather than within the second (the caller knows
 * it changed).  Any thread. */
void certmgr_recheck(struct certmgr *m);
/* Stop: a wait is cut short, a request in progress cancelled through the
 * issuer; joins the thread and frees.  NULL is fine.  Not from callbacks. */
void certmgr_stop(struct certmgr *m);

#endif
