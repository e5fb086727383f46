/*
 * tls.c - the secure port's swappable certificate, see tls.h.
 */
#include "server/tls.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"

#define MAX_CHAIN     8
#define KEEP_OLD_SECS 3600

struct pair {
	gnutls_pcert_st certs[MAX_CHAIN];
	unsigned int n;
	gnutls_privkey_t key;
	time_t replaced_at; /* 0 while current */
	struct pair *older;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pair *newest;

void tls_serving_init(void)
{
	tls_serving_free();
}

static void pair_free(struct pair *p)
{
	for (unsigned int i = 0; i < p->n; i++)
		gnutls_pcert_deinit(&p->certs[i]);
	if (p->key)
		gnutls_privkey_deinit(p->key);
	free(p);
}

static int fail(char **err, const char *what, int rc)
{
	*err = str_printf("%s: %s", what, gnutls_strerror(rc));
	return -1;
}

static int pair_load(struct pair *p, const char *cert, size_t cert_len, const char *key,
		     size_t key_len, char **err)
{
	gnutls_datum_t c = {(unsigned char *)cert, (unsigned int)cert_len};
	gnutls_datum_t k = {(unsigned char *)key, (unsigned int)key_len};
	p->n = MAX_CHAIN;
	int rc = gnutls_pcert_list_import_x509_raw(p->certs, &p->n, &c, GNUTLS_X509_FMT_PEM, 0);
	if (rc < 0) {
		p->n = 0;
		return fail(err, "the serving certificate does not parse", rc);
	}
	if ((rc = gnutls_privkey_init(&p->key)) < 0 ||
	    (rc = gnutls_privkey_import_x509_raw(p->key, &k, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0)
		return fail(err, "the serving key does not parse", rc);
	/* the key must be the leaf's: else every handshake would fail */
	gnutls_pubkey_t pub = p->certs[0].pubkey;
	unsigned char sig_data[] = "yurthub";
	gnutls_datum_t data = {sig_data, sizeof sig_data}, sig = {NULL, 0};
	int algo = gnutls_pubkey_get_pk_algorithm(pub, NULL);
	gnutls_sign_algorithm_t sa = gnutls_pk_to_sign(algo, GNUTLS_DIG_SHA256);
	rc = gnutls_privkey_sign_data2(p->key, sa, 0, &data, &sig);
	if (rc >= 0)
		rc = gnutls_pubkey_verify_data2(pub, sa, 0, &data, &sig);
	gnutls_free(sig.data);
	return rc < 0 ? fail(err, "the serving key is not the certificate's", rc) : 0;
}

int tls_serving_set(const char *cert, size_t cert_len, const char *key, size_t key_len, char **err)
{
	*err = NULL;
	struct pair *p = calloc(1, sizeof *p);
	if (!p)
		return *err = strdup("out of memory"), -1;
	if (pair_load(p, cert, cert_len, key, key_len, err) < 0) {
		pair_free(p);
		return -1;
	}
	time_t now = time(NULL);
	pthread_mutex_lock(&lock);
	if (newest)
		newest->replaced_at = now;
	p->older = newest;
	newest = p;
	/* drop pairs replaced long ago: no handshake takes an hour */
	for (struct pair **pp = &p->older; *pp;) {
		struct pair *o = *pp;
		if (o->replaced_at && now - o->replaced_at > KEEP_OLD_SECS) {
			*pp = o->older;
			pair_free(o);
		} else {
			pp = &o->older;
		}
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

bool tls_serving_ready(void)
{
	pthread_mutex_lock(&lock);
	bool ready = newest != NULL;
	pthread_mutex_unlock(&lock);
	return ready;
}

void tls_serving_free(void)
{
	pthread_mutex_lock(&lock);
	struct pair *p = newest;
	newest = NULL;
	pthread_mutex_unlock(&lock);
	while (p) {
		struct pair *o = p->older;
		pair_free(p);
		p = o;
	}
}

int tls_serving_retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
			 const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
			 gnutls_pcert_st **pcert, unsigned int *pcert_length,
			 gnutls_privkey_t *pkey)
{
	(void)s, (void)req_ca_dn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
	pthread_mutex_lock(&lock);
	struct pair *p = newest;
	if (p) {
		*pcert = p->certs;
		*pcert_length = p->n;
		*pkey = p->key;
	}
	pthread_mutex_unlock(&lock);
	return p ? 0 : -1; /* no certificate yet: the handshake fails */
}
