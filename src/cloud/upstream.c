/*
 * upstream.c - backends, identity and curl handles, see upstream.h.
 * balancer: upstream_pick() is the whole of load balancing (rr or priority
 * over the backends the health checker calls healthy).
 */
#include "cloud/upstream.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kube/kubeconfig.h"
#include "util/fsutil.h"
#include "util/log.h"

#define TOKEN_REREAD_SECONDS 60
/* How often the client certificate files are stat'ed.  kubelet rotates its
 * certificate well before the old one expires (at 70-90% of its life), so a
 * few seconds' delay is harmless; a stat is cheap. */
#define CERT_RECHECK_SECONDS 10

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access a, void *p)
{
	(void)h;
	(void)a;
	struct upstream *u = p;
	pthread_mutex_lock(&u->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *p)
{
	(void)h;
	struct upstream *u = p;
	pthread_mutex_unlock(&u->share_locks[data]);
}

static int read_pem(const char *path, struct buf *out, char **err, const char *flag)
{
	int rc = fs_read_operator_file(path, out, 1 << 20);
	if (rc < 0) {
		struct buf m = BUF_INIT;
		if (buf_printf(&m, "cannot read --%s %s: %s", flag, path, strerror(-rc)) == 0)
			*err = buf_steal(&m);
		return -1;
	}
	return 0;
}

struct handles {
	CURLM *multi;
	CURL *easy;
};

static void handles_free(void *p)
{
	struct handles *h = p;
	if (h->easy)
		curl_easy_cleanup(h->easy);
	if (h->multi)
		curl_multi_cleanup(h->multi);
	free(h);
}

static long now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec;
}

static int load_token_file(struct upstream *u)
{
	struct buf b = BUF_INIT;
	int rc = fs_read_operator_file(u->token_file, &b, 64 << 10);
	if (rc < 0) {
		log_warn("cannot read token file %s: %s", u->token_file, strerror(-rc));
		buf_free(&b);
		return -1;
	}
	while (b.len &&
	       (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r' || b.data[b.len - 1] == ' '))
		b.data[--b.len] = '\0';
	free(u->token);
	u->token = b.len ? buf_steal(&b) : NULL;
	buf_free(&b);
	u->token_read_at = now_seconds();
	return 0;
}

static int copy_buf(struct buf *dst, const struct buf *src)
{
	buf_reset(dst);
	return src->len ? buf_append(dst, src->data, src->len) : 0;
}

/* *slot = a copy of path (NULL clears it); 0 or -1 (ENOMEM). */
static int set_path(char **slot, const char *path)
{
	char *p = path ? strdup(path) : NULL;
	if (path && !p)
		return -1;
	free(*slot);
	*slot = p;
	return 0;
}

/* Key material must not linger in freed memory (a kubelet-style file holds
 * the key beside the certificate, so the certificate buffer may too). */
static void buf_wipe_free(struct buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	buf_free(b);
}

static bool buf_eq(const struct buf *a, const struct buf *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* Do cert and key parse as PEM and belong together?  GnuTLS (already linked
 * for the secure port) checks both when loading them into a credential, the
 * way curl's TLS library will when it next connects.  0 or a GnuTLS error. */
static int check_pem_pair(const struct buf *cert, const struct buf *key)
{
	gnutls_certificate_credentials_t cred;
	int rc = gnutls_certificate_allocate_credentials(&cred);
	if (rc < 0)
		return rc;
	gnutls_datum_t c = {(unsigned char *)cert->data, (unsigned int)cert->len};
	gnutls_datum_t k = {(unsigned char *)key->data, (unsigned int)key->len};
	rc = gnutls_certificate_set_x509_key_mem2(cred, &c, &k, GNUTLS_X509_FMT_PEM, NULL, 0);
	gnutls_certificate_free_credentials(cred);
	return rc < 0 ? rc : 0;
}

/* The expiry of the first certificate of pem (seconds since the epoch),
 * 0 when there is none. */
static long long pem_not_after(const struct buf *pem)
{
	gnutls_x509_crt_t crt;
	if (!pem->len || gnutls_x509_crt_init(&crt) < 0)
		return 0;
	gnutls_datum_t d = {(unsigned char *)pem->data, (unsigned int)pem->len};
	long long t = 0;
	if (gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM) >= 0)
		t = (long long)gnutls_x509_crt_get_expiration_time(crt);
	gnutls_x509_crt_deinit(crt);
	return t > 0 ? t : 0;
}

/* Re-read one side of the pair into out: the file when it came from one,
 * else the current bytes.  0, or -1 with the reason logged. */
static int reread_side(const char *path, const struct buf *current, struct buf *out,
		       const char *what)
{
	if (!path)
		return copy_buf(out, current);
	int rc = fs_read_operator_file(path, out, 1 << 20);
	if (rc < 0)
		log_warn("cannot re-read the client %s %s: %s; keeping the current pair", what,
			 path, strerror(-rc));
	return rc < 0 ? -1 : 0;
}

/* See upstream_recheck_client_cert(); with cert_lock held. */
static int recheck_locked(struct upstream *u)
{
	u->cert_checked_at = now_seconds();
	struct file_stamp cs, ks;
	fs_stamp(u->cert_file, &cs);
	fs_stamp(u->key_file, &ks);
	if (fs_stamp_eq(&cs, &u->cert_seen) && fs_stamp_eq(&ks, &u->key_seen))
		return 0;
	/* This change is judged now, whatever the verdict, so that a broken
	 * rotation is warned about once, not every few seconds.  The stamps
	 * come before the reads: a file replaced in between is seen as
	 * changed again next time, and re-read then. */
	u->cert_seen = cs;
	u->key_seen = ks;
	struct buf cert = BUF_INIT, key = BUF_INIT;
	int rc = -1;
	if (reread_side(u->cert_file, &u->cert_pem, &cert, "certificate") < 0 ||
	    reread_side(u->key_file, &u->key_pem, &key, "key") < 0) {
		rc = -1; /* warned there */
	} else if (buf_eq(&cert, &u->cert_pem) && buf_eq(&key, &u->key_pem)) {
		rc = 0; /* touched, or re-pointed at the same bytes */
	} else {
		int grc = check_pem_pair(&cert, &key);
		if (grc < 0) {
			/* The two files of a pair may be replaced one after the
			 * other; the second change is judged on its own. */
			const char *c = u->cert_file ? u->cert_file : "(inline)";
			const char *k = u->key_file ? u->key_file : "(inline)";
			if (!strcmp(c, k))
				log_warn("the client certificate and key in %s changed but are not "
					 "usable (%s); keeping the current pair",
					 c, gnutls_strerror(grc));
			else
				log_warn("the client certificate %s and key %s changed but are not "
					 "usable (%s); keeping the current pair",
					 c, k, gnutls_strerror(grc));
		} else {
			buf_wipe_free(&u->cert_pem);
			buf_wipe_free(&u->key_pem);
			u->cert_pem = cert;
			u->key_pem = key;
			atomic_store(&u->cert_not_after, pem_not_after(&u->cert_pem));
			cert = (struct buf)BUF_INIT;
			key = (struct buf)BUF_INIT;
			log_msg('I', 0, "client certificate reloaded from %s",
				u->cert_file ? u->cert_file : u->key_file);
			rc = 1;
		}
	}
	buf_wipe_free(&cert);
	buf_wipe_free(&key);
	return rc;
}

int upstream_recheck_client_cert(struct upstream *u)
{
	if (!u->cert_file && !u->key_file)
		return 0;
	pthread_mutex_lock(&u->cert_lock);
	int rc = recheck_locked(u);
	pthread_mutex_unlock(&u->cert_lock);
	return rc;
}

static int identity_from_kubeconfig(struct upstream *u, const struct config *cfg,
				    struct kubeconfig *kc, char **err)
{
	if (kubeconfig_load(cfg->kubeconfig, kc, err) < 0)
		return -1;
	if (kc->ca_file && read_pem(kc->ca_file, &u->ca_pem, err, "kubeconfig CA") < 0)
		return -1;
	if (kc->ca_data.len && copy_buf(&u->ca_pem, &kc->ca_data) < 0)
		return -1;
	if (kc->client_cert_file && (read_pem(kc->client_cert_file, &u->cert_pem, err,
					      "kubeconfig client certificate") < 0 ||
				     set_path(&u->cert_file, kc->client_cert_file) < 0))
		return -1;
	if (kc->client_cert_data.len && (copy_buf(&u->cert_pem, &kc->client_cert_data) < 0 ||
					 set_path(&u->cert_file, NULL) < 0))
		return -1;
	if (kc->client_key_file &&
	    (read_pem(kc->client_key_file, &u->key_pem, err, "kubeconfig client key") < 0 ||
	     set_path(&u->key_file, kc->client_key_file) < 0))
		return -1;
	if (kc->client_key_data.len &&
	    (copy_buf(&u->key_pem, &kc->client_key_data) < 0 || set_path(&u->key_file, NULL) < 0))
		return -1;
	u->insecure = kc->insecure_skip_tls_verify;
	if (kc->tls_server_name)
		u->tls_server_name = strdup(kc->tls_server_name);
	if (kc->token)
		u->token = strdup(kc->token);
	if (kc->token_file)
		u->token_file = strdup(kc->token_file);
	return 0;
}

/* kubelet's certificate may not be there yet when the hub starts (kubelet
 * bootstraps it): then the hub waits for the file, as offline. */
static int read_client_file(struct upstream *u, const struct config *cfg, const char *path,
			    struct buf *out, char **slot, const char *flag, char **err)
{
	if (!*path)
		return 0;
	if (set_path(slot, path) < 0)
		return -1;
	if (read_pem(path, out, err, flag) == 0)
		return 0;
	if (!cfg->client_cert_may_wait)
		return -1;
	log_warn("%s; the hub waits for it and answers from its cache meanwhile", *err);
	free(*err);
	*err = NULL;
	buf_reset(out);
	(void)u;
	return 0;
}

static int identity_from_flags(struct upstream *u, const struct config *cfg, char **err)
{
	if (*cfg->ca_file && read_pem(cfg->ca_file, &u->ca_pem, err, "ca-file") < 0)
		return -1;
	if (read_client_file(u, cfg, cfg->client_cert_file, &u->cert_pem, &u->cert_file,
			     "client-cert-file", err) < 0 ||
	    read_client_file(u, cfg, cfg->client_key_file, &u->key_pem, &u->key_file,
			     "client-key-file", err) < 0)
		return -1;
	if (*cfg->token_file) {
		free(u->token_file);
		u->token_file = strdup(cfg->token_file);
	}
	return 0;
}

static int add_backend(struct upstream *u, const char *url)
{
	struct backend *v = realloc(u->backends, (u->n + 1) * sizeof *v);
	if (!v)
		return -1;
	u->backends = v;
	struct backend *b = &v[u->n];
	memset(b, 0, sizeof *b);
	size_t len = strlen(url);
	while (len && url[len - 1] == '/')
		len--;
	if (!(b->url = strndup(url, len)))
		return -1;
	b->index = (int)u->n;
	u->n++;
	return 0;
}

int upstream_init(struct upstream *u, const struct config *cfg, char **err)
{
	memset(u, 0, sizeof *u);
	*err = NULL;
	u->lb_mode = cfg->lb_mode;
	pthread_mutex_init(&u->token_lock, NULL);
	pthread_mutex_init(&u->cert_lock, NULL);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&u->share_locks[i], NULL);
	struct kubeconfig kc = {0};
	int rc = 0;
	if (*cfg->kubeconfig)
		rc = identity_from_kubeconfig(u, cfg, &kc, err);
	/* Explicit flags win over what the kubeconfig says. */
	if (rc == 0)
		rc = identity_from_flags(u, cfg, err);
	for (size_t i = 0; rc == 0 && i < cfg->server_addr.n; i++)
		rc = add_backend(u, cfg->server_addr.v[i]);
	if (rc == 0 && u->n == 0 && kc.server)
		rc = add_backend(u, kc.server);
	kubeconfig_free(&kc);
	if (rc == 0 && u->n == 0) {
		*err = strdup("no API server: give --server-addr or a kubeconfig with a server");
		rc = -1;
	}
	if (rc == 0 && u->token_file)
		load_token_file(u);
	atomic_store(&u->cert_not_after, pem_not_after(&u->cert_pem));
	atomic_store(&u->needs_client_cert, cfg->client_cert_may_wait);
	/* The stamps stay empty: the first check, a few seconds from now,
	 * re-reads the files once and finds the same bytes, or a certificate
	 * rotated while the hub was starting. */
	u->cert_checked_at = now_seconds();
	if (rc == 0 && !(u->share = curl_share_init()))
		rc = -1;
	if (rc == 0 && pthread_key_create(&u->handles_key, handles_free) != 0)
		rc = -1;
	if (rc == 0)
		u->handles_key_made = true;
	if (rc == 0) {
		curl_share_setopt(u->share, CURLSHOPT_LOCKFUNC, share_lock);
		curl_share_setopt(u->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
		curl_share_setopt(u->share, CURLSHOPT_USERDATA, u);
		curl_share_setopt(u->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
		curl_share_setopt(u->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
		curl_share_setopt(u->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	}
	if (rc < 0 && !*err)
		*err = strdup("out of memory");
	return rc;
}

void upstream_free(struct upstream *u)
{
	if (u->handles_key_made) {
		/* the calling thread's own handles; other threads' went with them */
		struct handles *h = pthread_getspecific(u->handles_key);
		if (h)
			handles_free(h);
		pthread_key_delete(u->handles_key);
	}
	if (u->share)
		curl_share_cleanup(u->share);
	for (size_t i = 0; i < u->n; i++)
		free(u->backends[i].url);
	free(u->backends);
	buf_free(&u->ca_pem);
	buf_wipe_free(&u->cert_pem);
	buf_wipe_free(&u->key_pem);
	free(u->cert_file);
	free(u->key_file);
	free(u->tls_server_name);
	free(u->token_file);
	free(u->token);
	pthread_mutex_destroy(&u->token_lock);
	pthread_mutex_destroy(&u->cert_lock);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&u->share_locks[i]);
	memset(u, 0, sizeof *u);
}

static void set_blob(CURL *e, CURLoption opt, const struct buf *b)
{
	struct curl_blob blob = {b->data, b->len, CURL_BLOB_COPY};
	curl_easy_setopt(e, opt, &blob);
}

static void configure(struct upstream *u, CURL *e, bool with_client_cert)
{
	curl_easy_setopt(e, CURLOPT_SHARE, u->share);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	if (u->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	/* Every handle gets the pair current at this moment: new ones here,
	 * and the reused ones of upstream_take() too, which are reset and set
	 * up again for each request.  The blobs are copied (CURL_BLOB_COPY),
	 * so the pair may be swapped once the lock is released.
	 * After a swap, new transfers do not ride the old identity: curl
	 * matches the client certificate blob when it picks a cached
	 * connection or TLS session from the share.  Connections opened with
	 * the old certificate stay in use by handles that still carry it, and
	 * in the cache until they close (idle, or the server hangs up); that
	 * is acceptable, as the old certificate stays valid for a while after
	 * kubelet rotates. */
	pthread_mutex_lock(&u->cert_lock);
	if (u->ca_pem.len)
		set_blob(e, CURLOPT_CAINFO_BLOB, &u->ca_pem);
	if ((u->cert_file || u->key_file) &&
	    now_seconds() - u->cert_checked_at >= CERT_RECHECK_SECONDS)
		recheck_locked(u);
	if (with_client_cert && u->cert_pem.len && u->key_pem.len) {
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		set_blob(e, CURLOPT_SSLCERT_BLOB, &u->cert_pem);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
		set_blob(e, CURLOPT_SSLKEY_BLOB, &u->key_pem);
	}
	pthread_mutex_unlock(&u->cert_lock);
}

void upstream_prepare_easy(struct upstream *u, CURL *e, bool with_client_cert)
{
	configure(u, e, with_client_cert);
}

int upstream_set_ca(struct upstream *u, const char *pem, size_t len)
{
	struct buf ca = BUF_INIT;
	if (buf_append(&ca, pem, len) < 0)
		return -1;
	pthread_mutex_lock(&u->cert_lock);
	buf_free(&u->ca_pem);
	u->ca_pem = ca;
	/* under the lock that configure() reads ca_pem with: a handle with the
	 * new CA never goes with the old generation */
	atomic_fetch_add(&u->ca_generation, 1);
	pthread_mutex_unlock(&u->cert_lock);
	return 0;
}

unsigned upstream_ca_generation(struct upstream *u)
{
	return atomic_load(&u->ca_generation);
}

int upstream_set_client_pair(struct upstream *u, const char *pem, size_t len)
{
	struct buf cert = BUF_INIT, key = BUF_INIT;
	if (buf_append(&cert, pem, len) < 0 || buf_append(&key, pem, len) < 0) {
		buf_wipe_free(&cert);
		buf_wipe_free(&key);
		return -1;
	}
	pthread_mutex_lock(&u->cert_lock);
	buf_wipe_free(&u->cert_pem);
	buf_wipe_free(&u->key_pem);
	u->cert_pem = cert; /* curl takes the certificate and the key blocks */
	u->key_pem = key;   /* each from the one PEM */
	free(u->cert_file);
	free(u->key_file);
	u->cert_file = u->key_file = NULL; /* the caller follows the files */
	atomic_store(&u->cert_not_after, pem_not_after(&u->cert_pem));
	pthread_mutex_unlock(&u->cert_lock);
	return 0;
}

void upstream_require_client_cert(struct upstream *u, bool required)
{
	atomic_store(&u->needs_client_cert, required);
}

bool upstream_identity_pending(struct upstream *u)
{
	if (!atomic_load(&u->needs_client_cert))
		return false;
	long long t = atomic_load(&u->cert_not_after);
	if (t && t > (long long)time(NULL))
		return false;
	/* kubelet's files: a new pair may be there; looked at once a second */
	pthread_mutex_lock(&u->cert_lock);
	if ((u->cert_file || u->key_file) && now_seconds() != u->cert_checked_at)
		recheck_locked(u);
	pthread_mutex_unlock(&u->cert_lock);
	t = atomic_load(&u->cert_not_after);
	return t == 0 || t <= (long long)time(NULL);
}

CURL *upstream_easy(struct upstream *u, const struct backend *b, bool with_client_cert)
{
	(void)b;
	CURL *e = curl_easy_init();
	if (e)
		configure(u, e, with_client_cert);
	return e;
}

/* Connections of the shared cache are counted against each multi handle's
 * limit: keep it above the number of connections the hub may hold. */
#define MAX_CACHED_CONNECTIONS 256L

int upstream_take(struct upstream *u, const struct backend *b, bool with_client_cert, CURLM **multi,
		  CURL **easy)
{
	(void)b;
	struct handles *h = pthread_getspecific(u->handles_key);
	if (!h) {
		h = calloc(1, sizeof *h);
		if (!h || pthread_setspecific(u->handles_key, h) != 0) {
			free(h);
			return -1;
		}
	}
	*multi = h->multi ? h->multi : curl_multi_init();
	*easy = h->easy ? h->easy : curl_easy_init();
	h->multi = h->easy = NULL;
	if (!*multi || !*easy) {
		if (*multi)
			curl_multi_cleanup(*multi);
		if (*easy)
			curl_easy_cleanup(*easy);
		return -1;
	}
	curl_multi_setopt(*multi, CURLMOPT_MAXCONNECTS, MAX_CACHED_CONNECTIONS);
	curl_easy_reset(*easy);
	configure(u, *easy, with_client_cert);
	return 0;
}

void upstream_give_back(struct upstream *u, CURLM *multi, CURL *easy)
{
	if (easy && multi)
		curl_multi_remove_handle(multi, easy);
	struct handles *h = pthread_getspecific(u->handles_key);
	if (h && !h->multi && !h->easy) {
		h->multi = multi;
		h->easy = easy;
		return;
	}
	if (easy)
		curl_easy_cleanup(easy);
	if (multi)
		curl_multi_cleanup(multi);
}

char *upstream_auth_header(struct upstream *u)
{
	pthread_mutex_lock(&u->token_lock);
	if (u->token_file && now_seconds() - u->token_read_at >= TOKEN_REREAD_SECONDS)
		load_token_file(u);
	char *h = NULL;
	if (u->token) {
		struct buf b = BUF_INIT;
		if (buf_printf(&b, "Authorization: Bearer %s", u->token) == 0)
			h = buf_steal(&b);
	}
	pthread_mutex_unlock(&u->token_lock);
	return h;
}

static bool usable(const struct backend *b, uint64_t skip)
{
	return atomic_load(&b->healthy) && !(b->index < 64 && (skip >> b->index) & 1);
}

struct backend *upstream_pick(struct upstream *u, uint64_t skip)
{
	if (upstream_identity_pending(u))
		return NULL;
	if (u->lb_mode == LB_PRIORITY) {
		for (size_t i = 0; i < u->n; i++)
			if (usable(&u->backends[i], skip))
				return &u->backends[i];
		return NULL;
	}
	unsigned start = atomic_fetch_add(&u->rr_next, 1);
	for (size_t k = 0; k < u->n; k++) {
		struct backend *b = &u->backends[(start + k) % u->n];
		if (usable(b, skip))
			return b;
	}
	return NULL;
}

/* Some server answers its health probes, whatever the hub's identity. */
static bool any_backend_up(struct upstream *u)
{
	for (size_t i = 0; i < u->n; i++)
		if (atomic_load(&u->backends[i].healthy))
			return true;
	return false;
}

bool upstream_any_healthy(struct upstream *u)
{
	/* without its identity the hub can ask the cloud nothing yet */
	return !upstream_identity_pending(u) && any_backend_up(u);
}

static size_t drop_body(char *p, size_t sz, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return sz * n;
}

struct body_sink {
	struct buf *out;
	size_t max;
};

static size_t keep_body(char *p, size_t sz, size_t n, void *ctx)
{
	struct body_sink *k = ctx;
	size_t len = sz * n;
	if (len > k->max - k->out->len || buf_append(k->out, p, len) < 0)
		return 0; /* libcurl fails the transfer */
	return len;
}

long upstream_send(struct upstream *u, const struct upstream_send_req *r)
{
	struct backend *b = upstream_pick(u, 0);
	long code = 0;
	CURL *e = b ? upstream_easy(u, b, true) : NULL;
	struct buf url = BUF_INIT, ctype = BUF_INIT;
	struct curl_slist *h = NULL;
	char *auth = e ? upstream_auth_header(u) : NULL;
	bool ok =
	    e && buf_printf(&url, "%s%s", b->url, r->uri) == 0 &&
	    (!r->content_type || buf_printf(&ctype, "Content-Type: %s", r->content_type) == 0);
	ok = ok && (h = curl_slist_append(NULL, r->content_type ? ctype.data
								: "Accept: "
								  "application/json")) != NULL;
	ok = ok && curl_slist_append(h, "Expect:") != NULL;
	ok = ok && (!auth || curl_slist_append(h, auth) != NULL);
	if (ok) {
		curl_easy_setopt(e, CURLOPT_URL, url.data);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		if (r->method && !strcmp(r->method, "GET")) {
			curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
		} else {
			if (r->method)
				curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		}
		struct body_sink sink = {r->body_out, r->body_max};
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, r->body_out ? keep_body : drop_body);
		if (r->body_out)
			curl_easy_setopt(e, CURLOPT_WRITEDATA, &sink);
		if (r->on_header) {
			curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, r->on_header);
			curl_easy_setopt(e, CURLOPT_HEADERDATA, r->header_ctx);
		}
		curl_easy_setopt(e, CURLOPT_TIMEOUT, r->timeout_s);
		curl_easy_setopt(e, CURLOPT_USERAGENT, r->user_agent);
		if (curl_easy_perform(e) == CURLE_OK)
			curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	}
	free(auth);
	curl_slist_free_all(h);
	buf_free(&url);
	buf_free(&ctype);
	if (e)
		curl_easy_cleanup(e);
	return code;
}
