/*
 * client_ca.c - the client CA, reloaded while the ports serve; see
 * client_ca.h.
 */
#include "server/client_ca.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/tls.h"
#include "util/buf.h"
#include "util/fsutil.h"
#include "util/log.h"

#define CA_FILE_MAX (1u << 20)

/* One CA as loaded: the credentials the sessions accepted with it use. */
struct client_ca_gen {
	atomic_uint refs; /* the client_ca's while current, one per connection */
	gnutls_certificate_credentials_t cred;
};

struct client_ca {
	pthread_mutex_t lock; /* everything below */
	char *path;
	struct file_stamp seen; /* the file as last looked at */
	bool looked;
	struct client_ca_gen *cur; /* NULL until a CA parsed */
};

static void gen_unref(struct client_ca_gen *g)
{
	if (!g || atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	gnutls_certificate_free_credentials(g->cred);
	free(g);
}

/* Credentials trusting the CA certificates of pem and serving tls.h's
 * certificate.  NULL with *err (static) when pem holds no CA. */
static struct client_ca_gen *gen_new(const struct buf *pem, const char **err)
{
	struct client_ca_gen *g = calloc(1, sizeof *g);
	if (!g || gnutls_certificate_allocate_credentials(&g->cred) < 0) {
		free(g);
		*err = "out of memory";
		return NULL;
	}
	atomic_init(&g->refs, 1);
	gnutls_certificate_set_retrieve_function2(g->cred, tls_serving_retrieve);
	gnutls_datum_t d = {(unsigned char *)pem->data, (unsigned int)pem->len};
	int n = gnutls_certificate_set_x509_trust_mem(g->cred, &d, GNUTLS_X509_FMT_PEM);
	if (n <= 0) {
		/* 0: no certificate at all (an empty or truncated file) */
		*err = n < 0 ? gnutls_strerror(n) : "no PEM certificate in it";
		gen_unref(g);
		return NULL;
	}
	return g;
}

struct client_ca *client_ca_new(const char *path)
{
	struct client_ca *ca = calloc(1, sizeof *ca);
	if (!ca)
		return NULL;
	if (!(ca->path = strdup(path)) || pthread_mutex_init(&ca->lock, NULL) != 0) {
		free(ca->path);
		free(ca);
		return NULL;
	}
	return ca;
}

/* Under ca->lock. */
static int check_locked(struct client_ca *ca)
{
	struct file_stamp now;
	fs_stamp(ca->path, &now);
	if (ca->looked && fs_stamp_eq(&now, &ca->seen))
		return ca->cur ? 0 : now.ok ? -EINVAL : -ENOENT;
	ca->looked = true;
	ca->seen = now;
	struct buf pem = BUF_INIT;
	int rc = now.ok ? fs_read_operator_file(ca->path, &pem, CA_FILE_MAX) : -ENOENT;
	const char *why = NULL;
	struct client_ca_gen *g = NULL;
	if (rc == 0 && !(g = gen_new(&pem, &why)))
		rc = -EINVAL;
	buf_free(&pem);
	if (g) {
		if (ca->cur)
			log_msg('I', 0, "client CA reloaded from %s: new connections use it",
				ca->path);
		gen_unref(ca->cur);
		ca->cur = g;
		return 0;
	}
	if (rc == -ENOENT && !ca->cur)
		return rc; /* bootstrap has not written it yet */
	const char *what = rc == -EINVAL ? why : strerror(-rc);
	if (ca->cur)
		log_error("the client CA %s changed but cannot be used (%s): the previous CA is "
			  "kept",
			  ca->path, what);
	else
		log_error("cannot read the client CA %s: %s", ca->path, what);
	return ca->cur ? 0 : rc;
}

int client_ca_check(struct client_ca *ca)
{
	pthread_mutex_lock(&ca->lock);
	int rc = check_locked(ca);
	pthread_mutex_unlock(&ca->lock);
	return rc;
}

struct client_ca_gen *client_ca_attach(struct client_ca *ca, gnutls_session_t session)
{
	pthread_mutex_lock(&ca->lock);
	(void)check_locked(ca);
	struct client_ca_gen *g = ca->cur;
	if (g)
		atomic_fetch_add(&g->refs, 1);
	pthread_mutex_unlock(&ca->lock);
	if (!g)
		return NULL;
	if (gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, g->cred) < 0) {
		gen_unref(g);
		return NULL;
	}
	gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUEST);
	return g;
}

void client_ca_release(struct client_ca_gen *g)
{
	gen_unref(g);
}

void client_ca_free(struct client_ca *ca)
{
	if (!ca)
		return;
	gen_unref(ca->cur);
	pthread_mutex_destroy(&ca->lock);
	free(ca->path);
	free(ca);
}
