/*
 * tls.h - the secure port's certificate, swappable while it serves.
 *
 * The serving certificate is rotated by the hub (identity.h) and must be
 * picked up without a restart: libmicrohttpd asks GnuTLS for the
 * certificate at each handshake through a retrieve callback
 * (MHD_OPTION_HTTPS_CERT_CALLBACK), and the callback hands out the newest
 * pair set here.  A handshake in progress may still use the previous
 * pair, so superseded pairs are freed only an hour after they were
 * replaced (and at the end).
 *
 * GnuTLS's callback carries no context pointer: the pairs are one
 * process-wide object, set up with tls_serving_init().
 */
#ifndef YURTHUB_SERVER_TLS_H
#define YURTHUB_SERVER_TLS_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>

void tls_serving_init(void);
/* Serve with this certificate (chain) and key from the next handshake on:
 * cert and key PEM (the same buffer when one PEM holds both).  0, or -1
 * with *err (malloc'ed) and the current pair kept. */
int tls_serving_set(const char *cert, size_t cert_len, const char *key, size_t key_len, char **err);
bool tls_serving_ready(void);
/* Free every pair (at the end, once no daemon serves). */
void tls_serving_free(void);

/* The retrieve callback for MHD_OPTION_HTTPS_CERT_CALLBACK. */
int tls_serving_retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
			 const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
			 gnutls_pcert_st **pcert, unsigned int *pcert_length,
			 gnutls_privkey_t *pkey);

#endif
