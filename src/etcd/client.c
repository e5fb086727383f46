/*
 * client.c - etcd v3 over the gRPC-JSON gateway on libcurl, see client.h.
 * Requests are built by hand (keys and values are base64, which needs no
 * JSON escaping); answers are parsed with jansson and checked field by field,
 * so that a hostile or broken gateway gives ETCD_PROTOCOL, never a crash.
 * A small locked pool of easy handles keeps connections alive across calls.
 */
#include "etcd/client.h"
#include "etcd/client_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/base64.h"
#include "util/clock.h"
#include "util/log.h"

#define DEFAULT_TIMEOUT_MS	   5000L
#define DEFAULT_CONNECT_TIMEOUT_MS 1000L
#define MAX_RESPONSE		   ((size_t)256 << 20)
#define MAX_WATCH_LINE		   ((size_t)64 << 20)
#define POOL_MAX		   32
/* etcd's raft request header and the txn's own framing, from above */
#define WIRE_FIXED 64

/* at most one NOSPACE line a minute */
#define NOSPACE_LOG_MS 60000

struct etcd_client {
	char **endpoints; /* without a trailing '/' */
	size_t n;
	atomic_size_t current; /* the endpoint that answered last */
	char *ca_file, *cert_file, *key_file;
	long timeout_ms, connect_timeout_ms;
	struct curl_slist *headers;
	pthread_mutex_t lock; /* guards idle, nospace */
	struct etcd_nospace nospace;
	unsigned long nospace_unlogged; /* refused since the last line */
	int64_t nospace_logged_ms;	/* 0: no line this spell */
	CURL *idle[POOL_MAX];
	size_t nidle;
	bool curl_ready;
};

/* ---- errors ---- */

static _Thread_local char last_error[1024];

static enum etcd_err fail(enum etcd_err e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sets the thread's message (control characters masked: it goes to logs). */
static enum etcd_err fail(enum etcd_err e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
	for (char *p = last_error; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return e;
}

const char *etcd_last_error(void)
{
	return last_error;
}

const char *etcd_strerror(enum etcd_err e)
{
	switch (e) {
	case ETCD_OK:
		return "ok";
	case ETCD_UNAVAILABLE:
		return "etcd unavailable";
	case ETCD_TOO_MANY_OPS:
		return "too many operations in txn";
	case ETCD_TOO_LARGE:
		return "request too large";
	case ETCD_NOSPACE:
		return "etcd is out of space (NOSPACE alarm)";
	case ETCD_COMPACTED:
		return "revision compacted";
	case ETCD_PROTOCOL:
		return "malformed answer from etcd";
	case ETCD_ERROR:
		return "etcd error";
	case ETCD_NOMEM:
		return "out of memory";
	}
	return "unknown etcd error";
}

static enum etcd_err nomem(void)
{
	return fail(ETCD_NOMEM, "out of memory");
}

/* ---- client ---- */

static bool has_scheme(const char *ep)
{
	return (strncmp(ep, "http://", 7) == 0 && ep[7]) ||
	       (strncmp(ep, "https://", 8) == 0 && ep[8]);
}

static char *check_file(const char *flag, const char *path)
{
	if (!path || !*path || access(path, R_OK) == 0)
		return NULL;
	return str_printf("cannot read --%s %s", flag, path);
}

/* A message for a configuration that cannot work, or NULL. */
static char *check_config(const struct etcd_config *cfg, bool *bad)
{
	*bad = true;
	if (!cfg || cfg->nendpoints == 0 || !cfg->endpoints)
		return str_printf("no etcd endpoints");
	for (size_t i = 0; i < cfg->nendpoints; i++)
		if (!cfg->endpoints[i] || !has_scheme(cfg->endpoints[i]))
			return str_printf(
			    "etcd endpoint %s: want http://host:port or https://host:port",
			    cfg->endpoints[i] ? cfg->endpoints[i] : "(null)");
	if (cfg->timeout_ms < 0 || cfg->connect_timeout_ms < 0)
		return str_printf("negative etcd timeout");
	char *m = check_file("etcd-cafile", cfg->ca_file);
	if (!m)
		m = check_file("etcd-certfile", cfg->cert_file);
	if (!m)
		m = check_file("etcd-keyfile", cfg->key_file);
	*bad = m != NULL;
	return m;
}

static int copy_opt(const char *s, char **out)
{
	*out = NULL;
	if (!s || !*s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -1;
}

static int copy_endpoints(struct etcd_client *c, const struct etcd_config *cfg)
{
	c->endpoints = calloc(cfg->nendpoints, sizeof *c->endpoints);
	if (!c->endpoints)
		return -1;
	c->n = cfg->nendpoints;
	for (size_t i = 0; i < c->n; i++) {
		char *ep = strdup(cfg->endpoints[i]);
		if (!ep)
			return -1;
		size_t len = strlen(ep);
		while (len > 0 && ep[len - 1] == '/')
			ep[--len] = '\0';
		c->endpoints[i] = ep;
	}
	return 0;
}

static int make_headers(struct etcd_client *c)
{
	static const char *const lines[] = {"Content-Type: application/json",
					    "Accept: application/json", "Expect:"};
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		struct curl_slist *l = curl_slist_append(c->headers, lines[i]);
		if (!l)
			return -1;
		c->headers = l;
	}
	return 0;
}

static int init_client(struct etcd_client *c, const struct etcd_config *cfg)
{
	c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
	c->connect_timeout_ms =
	    cfg->connect_timeout_ms ? cfg->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	atomic_init(&c->current, 0);
	if (copy_endpoints(c, cfg) < 0 || copy_opt(cfg->ca_file, &c->ca_file) < 0 ||
	    copy_opt(cfg->cert_file, &c->cert_file) < 0 ||
	    copy_opt(cfg->key_file, &c->key_file) < 0 || make_headers(c) < 0)
		return -1;
	return 0;
}

struct etcd_client *etcd_client_new(const struct etcd_config *cfg, char **err)
{
	char *dummy = NULL;
	if (!err)
		err = &dummy;
	bool bad;
	*err = check_config(cfg, &bad);
	if (bad) {
		free(dummy);
		return NULL;
	}
	struct etcd_client *c = calloc(1, sizeof *c);
	if (!c || pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		*err = str_printf("out of memory");
		return NULL;
	}
	c->curl_ready = curl_global_init(CURL_GLOBAL_ALL) == CURLE_OK;
	if (!c->curl_ready || init_client(c, cfg) < 0) {
		etcd_client_free(c);
		*err = str_printf("cannot set up the etcd client: out of memory");
		return NULL;
	}
	return c;
}

void etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nidle; i++)
		curl_easy_cleanup(c->idle[i]);
	for (size_t i = 0; c->endpoints && i < c->n; i++)
		free(c->endpoints[i]);
	free(c->endpoints);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	curl_slist_free_all(c->headers);
	pthread_mutex_destroy(&c->lock);
	if (c->curl_ready)
		curl_global_cleanup();
	free(c);
}

/* ---- handle pool ---- */

static CURL *pool_take(struct etcd_client *c)
{
	CURL *h = NULL;
	pthread_mutex_lock(&c->lock);
	if (c->nidle > 0)
		h = c->idle[--c->nidle];
	pthread_mutex_unlock(&c->lock);
	return h ? h : curl_easy_init();
}

static void pool_put(struct etcd_client *c, CURL *h)
{
	pthread_mutex_lock(&c->lock);
	if (c->nidle < POOL_MAX) {
		c->idle[c->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (h)
		curl_easy_cleanup(h);
}

/* ---- one HTTP exchange ---- */

/* One try of one call on one endpoint. */
struct attempt {
	struct etcd_client *c;
	CURL *h;
	size_t ep;
	const char *path;
	const struct buf *req;
	bool idempotent; /* may be sent again after it went out */
	bool retry;	 /* out: the next endpoint may be tried */
	char errbuf[CURL_ERROR_SIZE];
};

static const char *ep_name(const struct attempt *a)
{
	return a->c->endpoints[a->ep];
}

static void setup(struct attempt *a, const char *url, curl_write_callback fn, void *ud)
{
	CURL *h = a->h;
	struct etcd_client *c = a->c;
	curl_easy_reset(h);
	a->errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->errbuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "yurthub-etcd");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, buf_cstr(a->req));
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)a->req->len);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fn);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, ud);
	if (c->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->cert_file)
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
	if (c->key_file)
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
}

/* No connection, so the request did not go out. */
static bool connect_failed(CURLcode rc)
{
	return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	       rc == CURLE_COULDNT_RESOLVE_PROXY || rc == CURLE_SSL_CONNECT_ERROR ||
	       rc == CURLE_PEER_FAILED_VERIFICATION;
}

/* No HTTP answer.  A request that went out is only sent again when it is
 * idempotent: a txn may have been applied before the connection failed. */
static enum etcd_err transport_error(struct attempt *a, CURLcode rc)
{
	long sent = 0;
	curl_easy_getinfo(a->h, CURLINFO_REQUEST_SIZE, &sent);
	const char *why = a->errbuf[0] ? a->errbuf : curl_easy_strerror(rc);
	if (rc == CURLE_OUT_OF_MEMORY)
		return nomem();
	a->retry = a->idempotent || sent == 0 || connect_failed(rc);
	if (!a->retry)
		return fail(ETCD_UNAVAILABLE,
			    "etcd %s%s: %s, after the request was sent: it may have been applied",
			    ep_name(a), a->path, why);
	return fail(ETCD_UNAVAILABLE, "etcd %s%s: %s", ep_name(a), a->path, why);
}

/* ---- the NOSPACE alarm (client.h, struct etcd_nospace) ---- */

static void nospace_refused(struct etcd_client *c)
{
	int64_t now = clock_now_ms();
	pthread_mutex_lock(&c->lock);
	struct etcd_nospace *n = &c->nospace;
	n->refused++;
	c->nospace_unlogged++;
	if (!n->now) {
		n->now = true;
		n->since_ms = now;
	}
	bool first = !c->nospace_logged_ms;
	bool say = first || now - c->nospace_logged_ms >= NOSPACE_LOG_MS;
	unsigned long count = c->nospace_unlogged;
	if (say) {
		c->nospace_logged_ms = now;
		c->nospace_unlogged = 0;
	}
	pthread_mutex_unlock(&c->lock);
	if (say)
		log_warn(
		    "etcd is out of space (NOSPACE alarm: its database reached "
		    "--quota-backend-bytes): it refuses every write (%lu refused %s); "
		    "the hub answers from what is cached, and new data is not cached. To free "
		    "space: `etcdctl compact <current revision>`, then `etcdctl defrag` on each "
		    "member, or raise etcd's --quota-backend-bytes; then `etcdctl alarm disarm` "
		    "(docs/etcd-store.md). Said once a minute",
		    count, first ? "so far" : "since the last line");
}

/* A write with a put succeeded: the alarm is over. */
static void nospace_write_ok(struct etcd_client *c)
{
	pthread_mutex_lock(&c->lock);
	bool was = c->nospace.now;
	unsigned long refused = c->nospace.refused;
	int64_t since = c->nospace.since_ms;
	c->nospace.now = false;
	c->nospace.since_ms = 0;
	c->nospace_logged_ms = 0;
	c->nospace_unlogged = 0;
	pthread_mutex_unlock(&c->lock);
	if (was)
		log_info("etcd takes writes again after %lld s out of space (%lu writes refused "
			 "since the start)",
			 (long long)((clock_now_ms() - since) / 1000), refused);
}

void etcd_client_nospace(struct etcd_client *c, struct etcd_nospace *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->nospace;
	pthread_mutex_unlock(&c->lock);
}

static enum etcd_err classify(long status, json_int_t code, const char *msg)
{
	if (code == 14)
		return ETCD_UNAVAILABLE;
	if (strstr(msg, "too many operations in txn request"))
		return ETCD_TOO_MANY_OPS;
	if (strstr(msg, "database space exceeded")) /* before the 429 below: the gateway's too */
		return ETCD_NOSPACE;
	if (strstr(msg, "request is too large") || status == 429)
		return ETCD_TOO_LARGE;
	if (code == 11 && strstr(msg, "compacted"))
		return ETCD_COMPACTED;
	return ETCD_ERROR;
}

/* An HTTP status other than 200: etcd's {"error","message","code"}, or a
 * proxy's page (5xx: as good as no answer). */
static enum etcd_err http_error(struct attempt *a, long status, const struct buf *body)
{
	json_t *j = json_loadb(buf_cstr(body), body->len, 0, NULL);
	json_t *code = json_object_get(j, "code");
	const char *msg = json_string_value(json_object_get(j, "message"));
	if (!msg)
		msg = json_string_value(json_object_get(j, "error"));
	if (!json_is_integer(code) || !msg) {
		json_decref(j);
		if (status < 500)
			return fail(ETCD_PROTOCOL, "etcd %s%s: HTTP %ld with no etcd error",
				    ep_name(a), a->path, status);
		a->retry = a->idempotent;
		return fail(ETCD_UNAVAILABLE, "etcd %s%s: HTTP %ld%s", ep_name(a), a->path, status,
			    a->retry ? ""
				     : " after the request was sent: it may have been applied");
	}
	enum etcd_err e = classify(status, json_integer_value(code), msg);
	if (e == ETCD_NOSPACE)
		nospace_refused(a->c);
	a->retry = e == ETCD_UNAVAILABLE && a->idempotent;
	fail(e, "etcd %s%s: %s (code %" JSON_INTEGER_FORMAT ", HTTP %ld)%s", ep_name(a), a->path,
	     msg, json_integer_value(code), status,
	     e == ETCD_UNAVAILABLE && !a->idempotent ? "; it may have been applied" : "");
	json_decref(j);
	return e;
}

static enum etcd_err parse_object(const struct attempt *a, const char *p, size_t len, json_t **out)
{
	json_error_t je;
	json_t *j = json_loadb(p, len, 0, &je);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		return fail(ETCD_PROTOCOL, "etcd %s%s: the answer is not a JSON object: %s",
			    ep_name(a), a->path, j ? "other JSON" : je.text);
	}
	*out = j;
	return ETCD_OK;
}

/* The body of an answer, bounded. */
struct sink {
	struct buf body;
	bool overflow, nomem;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t len = size * n;
	if (len > MAX_RESPONSE - s->body.len) {
		s->overflow = true;
		return 0;
	}
	if (buf_append(&s->body, p, len) < 0) {
		s->nomem = true;
		return 0;
	}
	return len;
}

static enum etcd_err attempt_call(struct attempt *a, json_t **out)
{
	struct sink s = {BUF_INIT, false, false};
	struct buf url = BUF_INIT;
	if (buf_printf(&url, "%s%s", ep_name(a), a->path) < 0)
		return nomem();
	setup(a, url.data, on_body, &s);
	curl_easy_setopt(a->h, CURLOPT_TIMEOUT_MS, a->c->timeout_ms);
	CURLcode rc = curl_easy_perform(a->h);
	long status = 0;
	curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &status);
	enum etcd_err e;
	if (s.nomem)
		e = nomem();
	else if (s.overflow)
		e = fail(ETCD_PROTOCOL, "etcd %s%s: answer larger than %zu MiB", ep_name(a),
			 a->path, MAX_RESPONSE >> 20);
	else if (rc != CURLE_OK)
		e = transport_error(a, rc);
	else if (status == 200)
		e = parse_object(a, buf_cstr(&s.body), s.body.len, out);
	else
		e = http_error(a, status, &s.body);
	buf_free(&url);
	buf_free(&s.body);
	return e;
}

typedef enum etcd_err (*attempt_fn)(struct attempt *a, void *arg);

static enum etcd_err attempt_call_fn(struct attempt *a, void *arg)
{
	return attempt_call(a, arg);
}

/* Try the endpoints in turn from the one that answered last, as long as
 * the failure allows another try. */
static enum etcd_err failover(struct etcd_client *c, struct attempt *a, attempt_fn fn, void *arg)
{
	size_t start = atomic_load(&c->current);
	enum etcd_err e = ETCD_UNAVAILABLE;
	for (size_t i = 0; i < c->n; i++) {
		a->ep = (start + i) % c->n;
		a->retry = false;
		e = fn(a, arg);
		if (e != ETCD_UNAVAILABLE || !a->retry || i + 1 == c->n)
			break;
		log_v(2, "%s; trying the next etcd endpoint", etcd_last_error());
	}
	size_t next = e == ETCD_UNAVAILABLE ? (a->ep + 1) % c->n : a->ep;
	if (next != start)
		atomic_store(&c->current, next);
	return e;
}

static enum etcd_err run(struct etcd_client *c, const char *path, const struct buf *req,
			 bool idempotent, attempt_fn fn, void *arg)
{
	struct attempt a = {.c = c, .path = path, .req = req, .idempotent = idempotent};
	a.h = pool_take(c);
	if (!a.h)
		return fail(ETCD_NOMEM, "cannot make a curl handle");
	enum etcd_err e = failover(c, &a, fn, arg);
	pool_put(c, a.h);
	return e;
}

/* POST req to path; the answer's JSON object in *out. */
static enum etcd_err call(struct etcd_client *c, const char *path, const struct buf *req,
			  bool idempotent, json_t **out)
{
	*out = NULL;
	return run(c, path, req, idempotent, attempt_call_fn, out);
}

/* ---- reading answers ---- */

static enum etcd_err bad_field(const char *name, const char *what)
{
	return fail(ETCD_PROTOCOL, "etcd answer: field %s is not %s", name, what);
}

static int parse_dec(const char *s, size_t len, bool sign, int64_t *out)
{
	if (len == 0 || len > 20 || strlen(s) != len ||
	    !(s[0] == '-' ? sign : s[0] >= '0' && s[0] <= '9'))
		return -1;
	char *end;
	errno = 0;
	if (sign) {
		long long v = strtoll(s, &end, 10);
		*out = (int64_t)v;
	} else {
		unsigned long long v = strtoull(s, &end, 10);
		*out = (int64_t)v; /* a uint64 member id, kept as its bits */
	}
	return errno || end != s + len ? -1 : 0;
}

/* An int64 (a JSON string, or a number): absent is 0.  unsigned: a uint64
 * kept as its bits. */
static enum etcd_err get_num(json_t *o, const char *name, bool is_signed, int64_t *out)
{
	json_t *v = json_object_get(o, name);
	*out = 0;
	if (!v)
		return ETCD_OK;
	if (json_is_integer(v) && (is_signed || json_integer_value(v) >= 0)) {
		*out = (int64_t)json_integer_value(v);
		return ETCD_OK;
	}
	if (json_is_string(v) &&
	    parse_dec(json_string_value(v), json_string_length(v), is_signed, out) == 0)
		return ETCD_OK;
	return bad_field(name, "an integer");
}

static enum etcd_err get_i64(json_t *o, const char *name, int64_t *out)
{
	return get_num(o, name, true, out);
}

static enum etcd_err get_bool(json_t *o, const char *name, bool *out)
{
	json_t *v = json_object_get(o, name);
	*out = false;
	if (!v)
		return ETCD_OK;
	if (!json_is_boolean(v))
		return bad_field(name, "a boolean");
	*out = json_is_true(v);
	return ETCD_OK;
}

/* Base64 bytes, decoded into a NUL-terminated copy; absent is "". */
static enum etcd_err get_bytes(json_t *o, const char *name, char **out, size_t *len)
{
	json_t *v = json_object_get(o, name);
	struct buf b = BUF_INIT;
	*out = NULL;
	*len = 0;
	if (v && !json_is_string(v))
		return bad_field(name, "a string");
	size_t tlen = v ? json_string_length(v) : 0;
	/* reserved in full: decoding fails only on bad input */
	if (buf_reserve(&b, tlen / 4 * 3 + 3) < 0)
		return nomem();
	b.data[0] = '\0';
	if (v && base64_decode(json_string_value(v), tlen, &b) < 0) {
		buf_free(&b);
		return bad_field(name, "base64");
	}
	*len = b.len;
	*out = buf_steal(&b);
	return ETCD_OK;
}

static enum etcd_err header_revision(json_t *o, int64_t *rev)
{
	json_t *h = json_object_get(o, "header");
	*rev = 0;
	if (!h)
		return ETCD_OK;
	if (!json_is_object(h))
		return bad_field("header", "an object");
	return get_i64(h, "revision", rev);
}

static void kv_free(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof *kv);
}

static enum etcd_err decode_kv(json_t *o, struct etcd_kv *kv)
{
	memset(kv, 0, sizeof *kv);
	if (!json_is_object(o))
		return bad_field("kv", "an object");
	if (!json_is_string(json_object_get(o, "key")))
		return bad_field("kv.key", "a string");
	enum etcd_err e = get_bytes(o, "key", &kv->key, &kv->key_len);
	if (!e)
		e = get_bytes(o, "value", &kv->value, &kv->value_len);
	if (!e)
		e = get_i64(o, "create_revision", &kv->create_revision);
	if (!e)
		e = get_i64(o, "mod_revision", &kv->mod_revision);
	if (!e)
		e = get_i64(o, "version", &kv->version);
	if (e)
		kv_free(kv);
	return e;
}

static enum etcd_err decode_kvs(json_t *arr, struct etcd_range_result *r)
{
	if (!arr)
		return ETCD_OK;
	if (!json_is_array(arr))
		return bad_field("kvs", "an array");
	size_t n = json_array_size(arr);
	if (n == 0)
		return ETCD_OK;
	r->kvs = calloc(n, sizeof *r->kvs);
	if (!r->kvs)
		return nomem();
	for (; r->n < n; r->n++) {
		enum etcd_err e = decode_kv(json_array_get(arr, r->n), &r->kvs[r->n]);
		if (e)
			return e;
	}
	return ETCD_OK;
}

void etcd_range_result_free(struct etcd_range_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		kv_free(&r->kvs[i]);
	free(r->kvs);
	memset(r, 0, sizeof *r);
}

/* A RangeResponse; count, when absent, is the number of kvs. */
static enum etcd_err decode_range(json_t *o, struct etcd_range_result *r)
{
	memset(r, 0, sizeof *r);
	if (!json_is_object(o))
		return bad_field("response_range", "an object");
	enum etcd_err e = decode_kvs(json_object_get(o, "kvs"), r);
	if (!e)
		e = get_bool(o, "more", &r->more);
	if (!e)
		e = get_i64(o, "count", &r->count);
	if (!e)
		e = header_revision(o, &r->revision);
	if (!e && !json_object_get(o, "count"))
		r->count = (int64_t)r->n;
	if (e)
		etcd_range_result_free(r);
	return e;
}

/* ---- building requests ---- */

static bool bytes_ok(const char *p, size_t len)
{
	return p || len == 0;
}

/* "name":"base64" */
static int add_b64(struct buf *b, const char *name, const char *data, size_t len)
{
	if (buf_printf(b, "\"%s\":\"", name) < 0 || base64_encode(data ? data : "", len, b) < 0)
		return -1;
	return buf_append_char(b, '"');
}

/* ,"range_end":... when there is one; length 0 is "\0": every key >= key. */
static int add_range_end(struct buf *b, const char *re, size_t len)
{
	if (!re)
		return 0;
	if (len == 0)
		return buf_append_str(b, ",\"range_end\":\"AA==\"");
	if (buf_append_char(b, ',') < 0)
		return -1;
	return add_b64(b, "range_end", re, len);
}

static int add_i64(struct buf *b, const char *name, int64_t v)
{
	return buf_printf(b, ",\"%s\":\"%" PRId64 "\"", name, v);
}

static int build_range(struct buf *b, const char *key, size_t key_len,
		       const struct etcd_range_opts *o)
{
	if (buf_append_char(b, '{') < 0 || add_b64(b, "key", key, key_len) < 0)
		return -1;
	if (o && (add_range_end(b, o->range_end, o->range_end_len) < 0 ||
		  (o->limit > 0 && add_i64(b, "limit", o->limit) < 0) ||
		  (o->revision > 0 && add_i64(b, "revision", o->revision) < 0) ||
		  (o->keys_only && buf_append_str(b, ",\"keys_only\":true") < 0) ||
		  (o->count_only && buf_append_str(b, ",\"count_only\":true") < 0)))
		return -1;
	return buf_append_char(b, '}');
}

static const char *const cmp_targets[] = {"VERSION", "CREATE", "MOD", "VALUE"};
static const char *const cmp_results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
static const char *const cmp_fields[] = {"version", "create_revision", "mod_revision"};
static const char *const op_names[] = {"request_put", "request_delete_range", "request_range"};

static int add_compare(struct buf *b, const struct etcd_compare *cmp)
{
	if (buf_printf(b, "{\"target\":\"%s\",\"result\":\"%s\",", cmp_targets[cmp->target],
		       cmp_results[cmp->result]) < 0 ||
	    add_b64(b, "key", cmp->key, cmp->key_len) < 0 ||
	    add_range_end(b, cmp->range_end, cmp->range_end_len) < 0)
		return -1;
	if (cmp->target == ETCD_CMP_VALUE) {
		if (buf_append_char(b, ',') < 0 ||
		    add_b64(b, "value", cmp->value, cmp->value_len) < 0)
			return -1;
	} else if (add_i64(b, cmp_fields[cmp->target], cmp->number) < 0) {
		return -1;
	}
	return buf_append_char(b, '}');
}

static int add_op(struct buf *b, const struct etcd_op *op)
{
	if (buf_printf(b, "{\"%s\":{", op_names[op->kind]) < 0 ||
	    add_b64(b, "key", op->key, op->key_len) < 0)
		return -1;
	if (op->kind == ETCD_OP_PUT) {
		if (buf_append_char(b, ',') < 0 ||
		    add_b64(b, "value", op->value, op->value_len) < 0)
			return -1;
	} else if (add_range_end(b, op->range_end, op->range_end_len) < 0) {
		return -1;
	}
	return buf_append_str(b, "}}");
}

static int add_ops(struct buf *b, const char *name, const struct etcd_op *ops, size_t n)
{
	if (buf_printf(b, ",\"%s\":[", name) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if ((i > 0 && buf_append_char(b, ',') < 0) || add_op(b, &ops[i]) < 0)
			return -1;
	return buf_append_char(b, ']');
}

static int build_txn(struct buf *b, const struct etcd_txn *t)
{
	if (buf_append_str(b, "{\"compare\":[") < 0)
		return -1;
	for (size_t i = 0; i < t->ncompare; i++)
		if ((i > 0 && buf_append_char(b, ',') < 0) || add_compare(b, &t->compare[i]) < 0)
			return -1;
	if (buf_append_char(b, ']') < 0 || add_ops(b, "success", t->success, t->nsuccess) < 0 ||
	    add_ops(b, "failure", t->failure, t->nfailure) < 0)
		return -1;
	return buf_append_char(b, '}');
}

static bool op_ok(const struct etcd_op *op)
{
	return (unsigned)op->kind <= ETCD_OP_RANGE && bytes_ok(op->key, op->key_len) &&
	       bytes_ok(op->value, op->value_len) && bytes_ok(op->range_end, op->range_end_len);
}

static bool compare_ok(const struct etcd_compare *cmp)
{
	return (unsigned)cmp->target <= ETCD_CMP_VALUE &&
	       (unsigned)cmp->result <= ETCD_CMP_NOT_EQUAL && bytes_ok(cmp->key, cmp->key_len) &&
	       bytes_ok(cmp->value, cmp->value_len) && bytes_ok(cmp->range_end, cmp->range_end_len);
}

static bool ops_ok(const struct etcd_op *ops, size_t n)
{
	if (n > 0 && !ops)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!op_ok(&ops[i]))
			return false;
	return true;
}

static bool txn_ok(const struct etcd_txn *t)
{
	if (!t || (t->ncompare > 0 && !t->compare))
		return false;
	for (size_t i = 0; i < t->ncompare; i++)
		if (!compare_ok(&t->compare[i]))
			return false;
	return ops_ok(t->success, t->nsuccess) && ops_ok(t->failure, t->nfailure);
}

/* ---- range ---- */

enum etcd_err etcd_range(struct etcd_client *c, const char *key, size_t key_len,
			 const struct etcd_range_opts *opts, struct etcd_range_result *out)
{
	memset(out, 0, sizeof *out);
	if (!c || !bytes_ok(key, key_len) ||
	    (opts && !bytes_ok(opts->range_end, opts->range_end_len)))
		return fail(ETCD_ERROR, "etcd range: invalid argument");
	struct buf req = BUF_INIT;
	json_t *j = NULL;
	enum etcd_err e = build_range(&req, key, key_len, opts) < 0
			      ? nomem()
			      : call(c, "/v3/kv/range", &req, true, &j);
	if (!e)
		e = decode_range(j, out);
	json_decref(j);
	buf_free(&req);
	return e;
}

int etcd_prefix_end(const char *prefix, size_t len, struct buf *out)
{
	const unsigned char *p = (const unsigned char *)prefix;
	size_t n = len;
	while (n > 0 && p[n - 1] == 0xff)
		n--;
	if (n == 0)
		return buf_append_char(out, '\0');
	size_t at = out->len;
	unsigned char last = (unsigned char)(p[n - 1] + 1);
	if (buf_append(out, prefix, n) < 0)
		return -1;
	out->data[at + n - 1] = (char)last;
	return 0;
}

/* ---- txn ---- */

void etcd_txn_result_free(struct etcd_txn_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nranges; i++)
		etcd_range_result_free(&r->ranges[i]);
	free(r->ranges);
	memset(r, 0, sizeof *r);
}

static size_t count_ranges(const struct etcd_op *ops, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += ops[i].kind == ETCD_OP_RANGE;
	return k;
}

/* The range answers of the branch that ran, in order. */
static enum etcd_err decode_responses(json_t *resps, size_t want, struct etcd_txn_result *out)
{
	if (resps && !json_is_array(resps))
		return bad_field("responses", "an array");
	if (want > 0 && !(out->ranges = calloc(want, sizeof *out->ranges)))
		return nomem();
	size_t i;
	json_t *r;
	json_array_foreach(resps, i, r)
	{
		if (!json_is_object(r))
			return bad_field("responses[]", "an object");
		json_t *rr = json_object_get(r, "response_range");
		if (!rr)
			continue;
		if (out->nranges == want)
			return fail(ETCD_PROTOCOL,
				    "etcd answer: more range results than RANGE ops");
		enum etcd_err e = decode_range(rr, &out->ranges[out->nranges]);
		if (e)
			return e;
		out->nranges++;
	}
	if (out->nranges != want)
		return fail(ETCD_PROTOCOL, "etcd answer: %zu range results for %zu RANGE ops",
			    out->nranges, want);
	return ETCD_OK;
}

static enum etcd_err decode_txn(json_t *j, const struct etcd_txn *t, struct etcd_txn_result *out)
{
	enum etcd_err e = get_bool(j, "succeeded", &out->succeeded);
	if (!e)
		e = header_revision(j, &out->revision);
	if (e)
		return e;
	size_t want = out->succeeded ? count_ranges(t->success, t->nsuccess)
				     : count_ranges(t->failure, t->nfailure);
	return decode_responses(json_object_get(j, "responses"), want, out);
}

/* etcd refuses a txn with a put in either branch under NOSPACE. */
static bool txn_puts(const struct etcd_txn *t)
{
	for (size_t i = 0; i < t->nsuccess; i++)
		if (t->success[i].kind == ETCD_OP_PUT)
			return true;
	for (size_t i = 0; i < t->nfailure; i++)
		if (t->failure[i].kind == ETCD_OP_PUT)
			return true;
	return false;
}

enum etcd_err etcd_txn(struct etcd_client *c, const struct etcd_txn *t, struct etcd_txn_result *out)
{
	memset(out, 0, sizeof *out);
	if (!c || !txn_ok(t))
		return fail(ETCD_ERROR, "etcd txn: invalid argument");
	struct buf req = BUF_INIT;
	json_t *j = NULL;
	enum etcd_err e = build_txn(&req, t) < 0 ? nomem() : call(c, "/v3/kv/txn", &req, false, &j);
	if (!e)
		e = decode_txn(j, t, out);
	if (!e && txn_puts(t))
		nospace_write_ok(c);
	if (e)
		etcd_txn_result_free(out);
	json_decref(j);
	buf_free(&req);
	return e;
}

static size_t varint_len(size_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* A length-delimited field: tag (up to 2 bytes), length, bytes. */
static size_t field_len(size_t len)
{
	return 2 + varint_len(len) + len;
}

static size_t op_wire_size(const struct etcd_op *op)
{
	size_t inner = field_len(op->key_len) + 16; /* + flags, lease, limits */
	if (op->kind == ETCD_OP_PUT)
		inner += field_len(op->value_len);
	else if (op->range_end)
		inner += field_len(op->range_end_len ? op->range_end_len : 1);
	return field_len(field_len(inner)); /* request_x in RequestOp in TxnRequest */
}

static size_t compare_wire_size(const struct etcd_compare *cmp)
{
	size_t inner = 8 + field_len(cmp->key_len); /* + target, result */
	if (cmp->range_end)
		inner += field_len(cmp->range_end_len ? cmp->range_end_len : 1);
	inner += cmp->target == ETCD_CMP_VALUE ? field_len(cmp->value_len) : 12;
	return field_len(inner);
}

size_t etcd_txn_wire_size(const struct etcd_txn *t)
{
	size_t n = WIRE_FIXED;
	for (size_t i = 0; i < t->ncompare; i++)
		n += compare_wire_size(&t->compare[i]);
	for (size_t i = 0; i < t->nsuccess; i++)
		n += op_wire_size(&t->success[i]);
	for (size_t i = 0; i < t->nfailure; i++)
		n += op_wire_size(&t->failure[i]);
	return n + varint_len(n) + 2;
}

/* ---- delete, status ---- */

enum etcd_err etcd_delete_range(struct etcd_client *c, const char *key, size_t key_len,
				const char *range_end, size_t range_end_len, int64_t *deleted)
{
	if (deleted)
		*deleted = 0;
	if (!c || !bytes_ok(key, key_len) || !bytes_ok(range_end, range_end_len))
		return fail(ETCD_ERROR, "etcd deleterange: invalid argument");
	struct buf req = BUF_INIT;
	json_t *j = NULL;
	enum etcd_err e = ETCD_OK;
	if (buf_append_char(&req, '{') < 0 || add_b64(&req, "key", key, key_len) < 0 ||
	    add_range_end(&req, range_end, range_end_len) < 0 || buf_append_char(&req, '}') < 0)
		e = nomem();
	if (!e)
		e = call(c, "/v3/kv/deleterange", &req, false, &j);
	int64_t n = 0;
	if (!e)
		e = get_i64(j, "deleted", &n);
	if (!e && deleted)
		*deleted = n;
	json_decref(j);
	buf_free(&req);
	return e;
}

static enum etcd_err decode_status(json_t *j, struct etcd_status *out)
{
	json_t *v = json_object_get(j, "version");
	if (v && !json_is_string(v))
		return bad_field("version", "a string");
	snprintf(out->version, sizeof out->version, "%s", v ? json_string_value(v) : "");
	enum etcd_err e = get_i64(j, "dbSize", &out->db_size);
	if (!e)
		e = header_revision(j, &out->revision);
	if (!e)
		e = get_num(j, "leader", false, &out->leader);
	return e;
}

enum etcd_err etcd_status(struct etcd_client *c, struct etcd_status *out)
{
	memset(out, 0, sizeof *out);
	if (!c)
		return fail(ETCD_ERROR, "etcd status: invalid argument");
	struct buf req = BUF_INIT;
	json_t *j = NULL;
	enum etcd_err e = buf_append_str(&req, "{}") < 0
			      ? nomem()
			      : call(c, "/v3/maintenance/status", &req, true, &j);
	if (!e)
		e = decode_status(j, out);
	json_decref(j);
	buf_free(&req);
	return e;
}

/* ---- watch ---- */

struct watch {
	CURL *h;
	etcd_watch_fn fn;
	void *ctx;
	const volatile bool *stop;
	long status;	 /* of the answer, once it started */
	struct buf data; /* a partial line; or, not 200, the whole body */
	size_t scanned;	 /* bytes of data known to hold no newline */
	bool done;
	enum etcd_err result;
};

static bool stopped(const struct watch *w)
{
	return w->stop && *w->stop;
}

static void watch_end(struct watch *w, enum etcd_err e)
{
	w->done = true;
	w->result = e;
}

static void events_free(struct etcd_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++)
		kv_free(&ev[i].kv);
	free(ev);
}

static enum etcd_err decode_event(json_t *o, struct etcd_event *ev)
{
	if (!json_is_object(o))
		return bad_field("events[]", "an object");
	json_t *type = json_object_get(o, "type");
	const char *t = type ? json_string_value(type) : "PUT";
	if (!t || (strcmp(t, "PUT") != 0 && strcmp(t, "DELETE") != 0))
		return bad_field("events[].type", "PUT or DELETE");
	ev->is_delete = strcmp(t, "DELETE") == 0;
	return decode_kv(json_object_get(o, "kv"), &ev->kv);
}

static void watch_events(struct watch *w, json_t *arr, int64_t rev)
{
	size_t n = json_array_size(arr);
	if (n == 0)
		return; /* created, or a progress notification */
	struct etcd_event *ev = calloc(n, sizeof *ev);
	if (!ev) {
		watch_end(w, nomem());
		return;
	}
	for (size_t i = 0; i < n; i++) {
		enum etcd_err e = decode_event(json_array_get(arr, i), &ev[i]);
		if (e) {
			events_free(ev, n);
			watch_end(w, e);
			return;
		}
	}
	if (stopped(w) || w->fn(w->ctx, ev, n, rev) != 0)
		watch_end(w, ETCD_OK);
	events_free(ev, n);
}

static void watch_canceled(struct watch *w, json_t *res, int64_t compact)
{
	if (compact > 0) {
		watch_end(w,
			  fail(ETCD_COMPACTED,
			       "etcd watch: required revision has been compacted (at %" PRId64 ")",
			       compact));
		return;
	}
	const char *why = json_string_value(json_object_get(res, "cancel_reason"));
	watch_end(w, fail(ETCD_ERROR, "etcd watch canceled: %s", why ? why : "no reason given"));
}

static void watch_result(struct watch *w, json_t *res)
{
	bool canceled;
	int64_t rev, compact;
	json_t *evs = json_object_get(res, "events");
	enum etcd_err e = get_bool(res, "canceled", &canceled);
	if (!e)
		e = get_i64(res, "compact_revision", &compact);
	if (!e)
		e = header_revision(res, &rev);
	if (!e && evs && !json_is_array(evs))
		e = bad_field("events", "an array");
	if (e)
		watch_end(w, e);
	else if (canceled)
		watch_canceled(w, res, compact);
	else
		watch_events(w, evs, rev);
}

/* {"error":{"grpc_code":N,"message":...}}: the stream failed. */
static void watch_stream_error(struct watch *w, json_t *err)
{
	const char *msg = json_string_value(json_object_get(err, "message"));
	json_t *code = json_object_get(err, "grpc_code");
	enum etcd_err e = classify(200, json_integer_value(code), msg ? msg : "");
	watch_end(w, fail(e, "etcd watch: %s", msg ? msg : "stream error"));
}

static bool blank(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != ' ' && p[i] != '\r' && p[i] != '\t')
			return false;
	return true;
}

static void watch_line(struct watch *w, const char *p, size_t len)
{
	if (blank(p, len))
		return;
	json_error_t je;
	json_t *j = json_loadb(p, len, 0, &je);
	json_t *res = json_object_get(j, "result");
	json_t *err = json_object_get(j, "error");
	if (!j)
		watch_end(w, fail(ETCD_PROTOCOL, "etcd watch: a message is not JSON: %s", je.text));
	else if (json_is_object(res))
		watch_result(w, res);
	else if (json_is_object(err))
		watch_stream_error(w, err);
	else
		watch_end(w, fail(ETCD_PROTOCOL, "etcd watch: a message has no result"));
	json_decref(j);
}

/* Handle the complete lines in w->data and keep the partial one. */
static void watch_lines(struct watch *w)
{
	size_t start = 0;
	while (!w->done) {
		char *nl = memchr(w->data.data + w->scanned, '\n', w->data.len - w->scanned);
		if (!nl)
			break;
		size_t end = (size_t)(nl - w->data.data);
		watch_line(w, w->data.data + start, end - start);
		start = w->scanned = end + 1;
	}
	if (w->done)
		return;
	memmove(w->data.data, w->data.data + start, w->data.len - start);
	w->data.len -= start;
	w->data.data[w->data.len] = '\0';
	w->scanned = w->data.len;
}

static size_t on_watch_data(char *p, size_t size, size_t n, void *ud)
{
	struct watch *w = ud;
	size_t len = size * n;
	if (!w->status)
		curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->status);
	size_t limit = w->status == 200 ? MAX_WATCH_LINE : MAX_RESPONSE;
	if (len > limit - w->data.len)
		watch_end(w, fail(ETCD_PROTOCOL, "etcd watch: a message larger than %zu MiB",
				  limit >> 20));
	else if (buf_append(&w->data, p, len) < 0)
		watch_end(w, nomem());
	else if (w->status == 200)
		watch_lines(w);
	if (stopped(w) && !w->done)
		watch_end(w, ETCD_OK);
	return w->done ? 0 : len;
}

static int on_watch_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	return stopped(ud) ? 1 : 0;
}

/* The stream of a 200 answer ended (rc: how). */
static enum etcd_err watch_ended(struct attempt *a, struct watch *w, CURLcode rc)
{
	if (rc == CURLE_OK && w->data.len > 0)
		watch_line(w, w->data.data, w->data.len);
	if (w->done)
		return w->result;
	if (rc == CURLE_OK)
		return fail(ETCD_UNAVAILABLE, "etcd %s: the watch stream ended", ep_name(a));
	const char *why = a->errbuf[0] ? a->errbuf : curl_easy_strerror(rc);
	return fail(ETCD_UNAVAILABLE, "etcd %s: the watch stream failed: %s", ep_name(a), why);
}

static enum etcd_err attempt_watch(struct attempt *a, void *arg)
{
	struct watch *w = arg;
	struct buf url = BUF_INIT;
	if (buf_printf(&url, "%s%s", ep_name(a), a->path) < 0)
		return nomem();
	w->h = a->h;
	w->done = false;
	w->status = 0;
	w->scanned = 0;
	buf_reset(&w->data);
	setup(a, url.data, on_watch_data, w);
	curl_easy_setopt(a->h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(a->h, CURLOPT_XFERINFOFUNCTION, on_watch_progress);
	curl_easy_setopt(a->h, CURLOPT_XFERINFODATA, w);
	CURLcode rc = curl_easy_perform(a->h);
	buf_free(&url);
	if (w->done)
		return w->result;
	if (stopped(w))
		return ETCD_OK;
	if (rc != CURLE_OK && w->status == 0)
		return transport_error(a, rc);
	if (w->status != 200)
		return http_error(a, w->status, &w->data);
	return watch_ended(a, w, rc);
}

enum etcd_err etcd_watch(struct etcd_client *c, const char *key, size_t key_len,
			 const char *range_end, size_t range_end_len, int64_t start_revision,
			 etcd_watch_fn fn, void *ctx, const volatile bool *stop)
{
	if (!c || !fn || !bytes_ok(key, key_len) || !bytes_ok(range_end, range_end_len))
		return fail(ETCD_ERROR, "etcd watch: invalid argument");
	struct buf req = BUF_INIT;
	if (buf_append_str(&req, "{\"create_request\":{") < 0 ||
	    add_b64(&req, "key", key, key_len) < 0 ||
	    add_range_end(&req, range_end, range_end_len) < 0 ||
	    (start_revision > 0 && add_i64(&req, "start_revision", start_revision) < 0) ||
	    buf_append_str(&req, ",\"prev_kv\":false}}") < 0) {
		buf_free(&req);
		return nomem();
	}
	struct watch w = {.fn = fn, .ctx = ctx, .stop = stop, .data = BUF_INIT};
	enum etcd_err e =
	    stopped(&w) ? ETCD_OK : run(c, "/v3/watch", &req, true, attempt_watch, &w);
	buf_free(&w.data);
	buf_free(&req);
	return e;
}

/* ---- the decoders without a connection (client_internal.h) ---- */

static enum etcd_err parse_body(const char *p, size_t len, json_t **out)
{
	char *eps[] = {(char *)"(no endpoint)"};
	struct etcd_client c = {.endpoints = eps, .n = 1, .lock = PTHREAD_MUTEX_INITIALIZER};
	struct attempt a = {.c = &c, .path = ""};
	*out = NULL;
	return parse_object(&a, p, len, out);
}

enum etcd_err etcd_parse_range_json(const char *p, size_t len, struct etcd_range_result *out)
{
	json_t *j;
	memset(out, 0, sizeof *out);
	enum etcd_err e = parse_body(p, len, &j);
	if (!e)
		e = decode_range(j, out);
	json_decref(j);
	return e;
}

enum etcd_err etcd_parse_txn_json(const char *p, size_t len, const struct etcd_txn *t,
				  struct etcd_txn_result *out)
{
	json_t *j;
	memset(out, 0, sizeof *out);
	enum etcd_err e = parse_body(p, len, &j);
	if (!e)
		e = decode_txn(j, t, out);
	if (e)
		etcd_txn_result_free(out);
	json_decref(j);
	return e;
}

enum etcd_err etcd_parse_deleterange_json(const char *p, size_t len, int64_t *deleted)
{
	json_t *j;
	*deleted = 0;
	enum etcd_err e = parse_body(p, len, &j);
	if (!e)
		e = get_i64(j, "deleted", deleted);
	json_decref(j);
	return e;
}

enum etcd_err etcd_parse_status_json(const char *p, size_t len, struct etcd_status *out)
{
	json_t *j;
	memset(out, 0, sizeof *out);
	enum etcd_err e = parse_body(p, len, &j);
	if (!e)
		e = decode_status(j, out);
	json_decref(j);
	return e;
}

enum etcd_err etcd_parse_error_json(long status, bool idempotent, const char *p, size_t len,
				    bool *retry)
{
	char *eps[] = {(char *)"(no endpoint)"};
	struct etcd_client c = {.endpoints = eps, .n = 1, .lock = PTHREAD_MUTEX_INITIALIZER};
	struct attempt a = {.c = &c, .path = "", .idempotent = idempotent};
	struct buf body = BUF_INIT;
	if (buf_append(&body, p, len) < 0)
		return nomem();
	enum etcd_err e = http_error(&a, status, &body);
	buf_free(&body);
	*retry = a.retry;
	return e;
}

/* As attempt_watch and watch_ended do once the answer is known to be 200. */
enum etcd_err etcd_parse_watch_stream(const char *const *chunks, const size_t *lens, size_t n,
				      etcd_watch_fn fn, void *ctx)
{
	struct watch w = {.fn = fn, .ctx = ctx, .status = 200, .data = BUF_INIT};
	for (size_t i = 0; i < n && !w.done; i++)
		on_watch_data((char *)chunks[i], 1, lens[i], &w);
	if (!w.done && w.data.len > 0)
		watch_line(&w, w.data.data, w.data.len);
	buf_free(&w.data);
	if (w.done)
		return w.result;
	return fail(ETCD_UNAVAILABLE, "etcd: the watch stream ended");
}
