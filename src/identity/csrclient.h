/*
 * csrclient.h - getting a certificate signed by the cluster: the
 * Kubernetes CertificateSigningRequest API (certificates.k8s.io/v1) over
 * libcurl.  This is the issuer the hub plugs into certmgr.h.
 *
 * One issue:
 *   POST /apis/certificates.k8s.io/v1/certificatesigningrequests
 *        {"metadata":{"generateName":"csr-"},"spec":{"request":<base64 PEM>,
 *         "signerName":..., "usages":[...], "expirationSeconds"?:...}}
 *   then wait for the object the server named: a watch with
 *   fieldSelector=metadata.name=<name> from the resourceVersion it
 *   answered with (a GET before each new watch, so that nothing is missed
 *   in between), or - when the server refuses watches - a GET every
 *   poll_ms; until status.certificate is set (done), a Denied or Failed
 *   condition appears (an error with its reason and message), the object
 *   is deleted, the time is up (15 min by default), or it is stopped.
 * The server approves or not: who approves is not this file's concern
 * (yurt-manager does for YurtHub's CSRs).
 *
 * Who the hub is towards the server (the bootstrap token for the first
 * certificate, the current certificate afterwards) and how the server is
 * trusted (the cluster CA) are the caller's: a setup callback applies them
 * to every libcurl handle.  libcurl must have been initialised
 * (curl_global_init).  One issue at a time per client; csrclient_cancel
 * may be called from any thread.
 */
#ifndef YURTHUB_IDENTITY_CSRCLIENT_H
#define YURTHUB_IDENTITY_CSRCLIENT_H

#include <curl/curl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "identity/certmgr.h"

/* YurtHub's two kinds of certificate (its spec, sections 2.3 and 2.4). */
#define CSR_SIGNER_CLIENT  "kubernetes.io/kube-apiserver-client"
#define CSR_SIGNER_SERVING "kubernetes.io/kubelet-serving"
extern const char
    *const csr_usages_client[3]; /* digital signature, key encipherment, client auth */
extern const char *const csr_usages_serving[3]; /* ... server auth */

#define CSRCLIENT_TIMEOUT_MS_DEFAULT (15u * 60u * 1000u)
#define CSRCLIENT_POLL_MS_DEFAULT    1000u

struct csrclient_config {
	const char *server; /* "https://10.0.0.1:6443" */
	/* Make h speak as the hub to the server: CA, client certificate, or a
	 * header such as "Authorization: Bearer <token>" appended to
	 * *headers.  Called for every request, so that a rotated identity is
	 * used by the next one.  0, or -1 with *err (malloc'ed). */
	int (*setup)(void *ctx, CURL *h, struct curl_slist **headers, char **err);
	void *setup_ctx;
	const char *signer_name;
	const char *const *usages;
	size_t n_usages;
	long expiration_seconds; /* spec.expirationSeconds; 0: not sent */
	unsigned timeout_ms;	 /* 0: 15 min */
	unsigned poll_ms;	 /* 0: 1 s; also the pause after an error */
	const atomic_bool *stop; /* may be NULL; seen within 200 ms */
	const char *user_agent;	 /* NULL: "yurthub" */
};

struct csrclient;

/* The strings and the usages are copied.  NULL with *err when server,
 * signer or usages are missing, or out of memory. */
struct csrclient *csrclient_new(const struct csrclient_config *cfg, char **err);
/* Submit csr_pem (PEM "CERTIFICATE REQUEST") and wait for the certificate:
 * 0 with *cert_pem (malloc'ed PEM, as the signer gave it), or -1 with *err
 * (malloc'ed: what failed, with the server's message when there is one). */
int csrclient_issue(struct csrclient *c, const char *csr_pem, char **cert_pem, char **err);
/* Make an issue in progress, and every later one, return -1 at once. */
void csrclient_cancel(struct csrclient *c);
/* The client as certmgr's issuer (issue and cancel above). */
struct certmgr_issuer csrclient_issuer(struct csrclient *c);
/* After the last issue has returned. */
void csrclient_free(struct csrclient *c);

#endif
