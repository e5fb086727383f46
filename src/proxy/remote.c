/*
 * remote.c - one request to the cloud, streamed back, see remote.h.
 *
 * Runs entirely in the connection's thread: remote_proxy() drives libcurl
 * (a private multi handle over the shared connection cache) until the
 * response headers are in, then hands libmicrohttpd a response whose content
 * reader drives libcurl on until the next bytes are there.
 */
#include "proxy/remote.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "cache/manager.h"
#include "cluster/cluster.h"
#include "filter/rewrite.h"
#include "http/limits.h"
#include "cloud/leaders.h"
#include "http/response.h"
#include "kube/framing.h"
#include "proxy/multiplexer.h"
#include "proxy/local.h"
#include "proxy/proxy.h"
#include "proxy/watch_follow.h"
#include "util/clock.h"
#include "util/log.h"

#define READ_BLOCK	(64u << 10)
#define POLL_MS		500
#define POLL_ANSWER_MS	50
#define REQUEST_SECONDS 75 /* non-long-running: kube-apiserver's 60 s, plus margin */

struct header {
	char *name, *value;
};

struct remote {
	struct proxy *p;
	struct backend *b;
	CURL *easy;
	CURLM *multi;
	struct curl_slist *req_headers;
	const char *body; /* the request's; curl reads it while it uploads */
	size_t body_len;
	struct buf owned_body; /* the request's body once this answer streams */

	unsigned int status;
	bool headers_done, done, paused, long_running, is_watch, counted_watch;
	bool suspected;	    /* its silence was reported to the health checker */
	bool gave_up_sick;  /* ended because its backend was called unhealthy */
	struct timespec t0; /* when it was sent */
	bool framing_ready;
	struct framing framing; /* of a watch: do the bytes so far end an event? */
	bool headers_too_large;
	size_t header_bytes;
	CURLcode result;
	struct header *hdrs;
	size_t nhdrs;

	struct buf pending;
	size_t pending_off;
	struct cache_tee *tee;
	filter_mask filters; /* chosen for the request (cluster/cluster.h) */
	struct rewrite *rw;  /* the body filtered on its way, see start_filtering() */
	bool rw_gunzips;     /* ... from gzip: the client gets it plain */
	/* the cloud's side is over, but gzip it sent still waits for the
	 * client to make room (rewrite_backlog): then it ends with this */
	bool upstream_over;
	CURLcode upstream_result;

	int client_fd;
	struct timespec deadline; /* tv_sec 0: none */
	/* the multiplexer's upstream sent to the cloud while it is a follower:
	 * ends when a leader answers again (leaders_generation moved on) */
	bool until_leader;
	unsigned long leader_gen;
	/* a filtered watch whose filters read what may change (the topology,
	 * the secure port serving): follows it (proxy/watch_follow.h) */
	struct watch_follow *wf;
};

/* ---- libcurl callbacks ---- */

static char *trim_dup(const char *s, size_t n)
{
	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		n--;
	return strndup(s, n);
}

static void clear_headers(struct remote *r)
{
	for (size_t i = 0; i < r->nhdrs; i++) {
		free(r->hdrs[i].name);
		free(r->hdrs[i].value);
	}
	free(r->hdrs);
	r->hdrs = NULL;
	r->nhdrs = 0;
	r->header_bytes = 0;
}

static size_t on_header(char *line, size_t size, size_t n, void *p)
{
	struct remote *r = p;
	size_t len = size * n;
	if (len >= 5 && !strncmp(line, "HTTP/", 5)) {
		clear_headers(r); /* a new response (after 100 Continue) */
		return len;
	}
	r->header_bytes += len;
	if (r->header_bytes > LIMIT_UPSTREAM_HEADERS) {
		r->headers_too_large = true;
		return 0;
	}
	if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) {
		long code = 0;
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200 || code == 101) {
			r->status = (unsigned int)code;
			r->headers_done = true;
		}
		return len;
	}
	const char *colon = memchr(line, ':', len);
	if (!colon)
		return len;
	struct header *v = realloc(r->hdrs, (r->nhdrs + 1) * sizeof *v);
	if (!v)
		return 0;
	r->hdrs = v;
	v[r->nhdrs].name = trim_dup(line, (size_t)(colon - line));
	v[r->nhdrs].value = trim_dup(colon + 1, len - (size_t)(colon - line) - 1);
	if (!v[r->nhdrs].name || !v[r->nhdrs].value) {
		free(v[r->nhdrs].name);
		free(v[r->nhdrs].value);
		return 0;
	}
	r->nhdrs++;
	return len;
}

static const char *find_header(const struct remote *r, const char *name)
{
	for (size_t i = 0; i < r->nhdrs; i++)
		if (!strcasecmp(r->hdrs[i].name, name))
			return r->hdrs[i].value;
	return NULL;
}

/* Where the watch events end in what was passed on (kube/framing.h). */
static void track_framing(struct remote *r, const char *data, size_t len)
{
	if (!r->is_watch)
		return;
	if (!r->framing_ready) { /* the headers are all in by the first byte */
		framing_init(&r->framing, find_header(r, "Content-Type"));
		r->framing_ready = true;
	}
	framing_feed(&r->framing, data, len);
}

/* Bytes for the client.  The cache is fed the cloud's bytes, not these
 * (see on_body): what it stores is filtered on the way out, online and
 * offline alike (docs/filters.md). */
static int pass_on(void *p, const char *data, size_t len)
{
	struct remote *r = p;
	if (buf_append(&r->pending, data, len) < 0)
		return -1;
	if (!r->rw)
		cache_tee_feed(r->tee, data, len);
	track_framing(r, data, len);
	return 0;
}

/* What the client may still be given before it reads (the filters'
 * inflating waits for this). */
static size_t room_for_client(void *p)
{
	const struct remote *r = p;
	size_t held = r->pending.len - r->pending_off;
	return held < LIMIT_PENDING ? LIMIT_PENDING - held : 0;
}

static size_t on_body(char *data, size_t size, size_t n, void *p)
{
	struct remote *r = p;
	size_t len = size * n;
	if (r->pending.len - r->pending_off >= LIMIT_PENDING || (r->rw && rewrite_backlog(r->rw))) {
		r->paused = true;
		return CURL_WRITEFUNC_PAUSE; /* the client is slower: let TCP push back */
	}
	if (r->rw)
		cache_tee_feed(r->tee, data, len); /* the cloud's object, unfiltered */
	if (r->rw ? rewrite_feed(r->rw, data, len) < 0 : pass_on(r, data, len) < 0) {
		if (r->rw)
			log_warn("proxy: %s: the answer cannot be filtered: %s", r->b->url,
				 rewrite_error(r->rw));
		return 0; /* curl ends the transfer: the client's answer is cut */
	}
	atomic_fetch_add(&r->p->metrics->proxied_bytes, len);
	return len;
}

/* ---- driving libcurl ---- */

static bool past(const struct timespec *t)
{
	if (!t->tv_sec)
		return false;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* Has the client closed its side?  Only meaningful while it waits. */
static bool client_gone(struct remote *r)
{
	if (r->client_fd < 0)
		return false;
	char c;
	ssize_t n = recv(r->client_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		return true;
	if (n > 0)
		r->client_fd = -1; /* pipelined bytes (or TLS): stop looking */
	return false;
}

/* The filtered body's end: what the rewriter still holds goes out (a
 * single object goes out only now).  A body that was not whole or not what
 * it should be breaks off the client's answer instead. */
static CURLcode finish_filtering(struct remote *r, CURLcode result)
{
	if (!r->rw || result != CURLE_OK)
		return result;
	if (rewrite_finish(r->rw) == 0)
		return CURLE_OK;
	log_warn("proxy: %s: the answer cannot be filtered: %s", r->b->url, rewrite_error(r->rw));
	return CURLE_WRITE_ERROR;
}

static void finish(struct remote *r, CURLcode result)
{
	if (r->done)
		return;
	r->done = true;
	r->result = finish_filtering(r, result);
	/* The cache hears the end before the client gets the last bytes, so that
	 * a paginated list's next page finds its session parked.  An object a
	 * filter dropped is stored too: the store holds the cloud's objects, and
	 * an offline get of it is filtered, and dropped, again. */
	cache_tee_end(r->tee, r->result == CURLE_OK);
	r->tee = NULL;
}

static void abort_with(struct remote *r, const char *why)
{
	log_v(1, "proxy: %s ends: %s", r->b->url, why);
	finish(r, CURLE_ABORTED_BY_CALLBACK);
}

/* The transfer is over: the answer ends, once the gzip that waits for the
 * client's pace (if any) is through the filters. */
static void upstream_ended(struct remote *r, CURLcode result)
{
	if (result == CURLE_OK && r->rw && rewrite_backlog(r->rw)) {
		r->upstream_over = true;
		r->upstream_result = result;
		return;
	}
	finish(r, result);
}

/* More of the gzip that waits, as far as the client has room. */
static void resume_filtering(struct remote *r)
{
	if (rewrite_resume(r->rw) == 0)
		return;
	log_warn("proxy: %s: the answer cannot be filtered: %s", r->b->url, rewrite_error(r->rw));
	finish(r, CURLE_WRITE_ERROR);
}

static bool have_data(const struct remote *r)
{
	return r->pending.len > r->pending_off;
}

/* A request without an answer for a while may be on a dead link: the
 * health checker probes at once, and once it calls the backend unhealthy
 * the request is given up, and its client is answered from the cache
 * (remote_proxy).  Once the answer streams, only a long-running one (a
 * watch) ends when its backend is called unhealthy: the bytes of a list
 * still coming say the link works, whatever a probe found. */
static bool backend_gone(struct remote *r, bool want_headers)
{
	if (want_headers && !r->suspected && !r->b->leader &&
	    clock_ms_since(&r->t0) >= health_suspect_ms(r->p->health)) {
		r->suspected = true;
		health_suspect(r->p->health, r->b);
	}
	return (want_headers || r->long_running) && !atomic_load(&r->b->healthy);
}

/* When what a filtered watch's filters read changes, it sends, between two
 * events, what that changes for its client: its objects are read back
 * from the store, which holds every event it carried (proxy/watch_follow.h,
 * docs/filters.md).  When it cannot (not cached, ...), it ends there with a
 * 410 Expired ERROR event, after which a client-go reflector lists again,
 * filtered as the hub now knows.  true when that event was written. */
static bool follow_inputs(struct remote *r)
{
	if (!r->wf || (r->rw && rewrite_backlog(r->rw)) || !framing_between_events(&r->framing))
		return false;
	if (watch_follow_step(r->wf, cache_tee_settled(r->tee)) != WATCH_FOLLOW_CANNOT)
		return false;
	/* not through pass_on: the cache keeps no ERROR event */
	size_t n = strlen(watch_follow_expired);
	if (buf_append(&r->pending, watch_follow_expired, n) < 0)
		return false;
	track_framing(r, watch_follow_expired, n);
	return true;
}

/* Drive the transfer until headers (want_headers) or body bytes are there,
 * or it is over. */
static void pump(struct remote *r, bool want_headers)
{
	while (!r->done && !(want_headers ? r->headers_done : have_data(r))) {
		if (atomic_load(&r->p->stopping)) {
			abort_with(r, "the hub is stopping");
			break;
		}
		if (backend_gone(r, want_headers)) {
			r->gave_up_sick = true;
			abort_with(r, "the upstream is unhealthy");
			break;
		}
		if (r->until_leader && leaders_generation(r->p->leaders) != r->leader_gen) {
			abort_with(r, "the pool's leader hub answers again");
			break;
		}
		if (past(&r->deadline)) {
			abort_with(r, "deadline");
			break;
		}
		if (follow_inputs(r)) {
			abort_with(r, "what the filters read changed: the client lists again");
			break;
		}
		if (have_data(r) && !want_headers)
			break; /* what the change meant for the client */
		/* what came and waits goes first; curl is paused meanwhile */
		if (r->rw && rewrite_backlog(r->rw)) {
			resume_filtering(r);
			continue;
		}
		if (r->upstream_over) {
			finish(r, r->upstream_result);
			break;
		}
		if (r->paused && r->pending.len - r->pending_off < LIMIT_PENDING / 2) {
			r->paused = false;
			curl_easy_pause(r->easy, CURLPAUSE_CONT);
		}
		int running = 0;
		if (curl_multi_perform(r->multi, &running) != CURLM_OK) {
			finish(r, CURLE_FAILED_INIT);
			break;
		}
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(r->multi, &left)))
			if (msg->msg == CURLMSG_DONE)
				upstream_ended(r, msg->data.result);
		if (r->done || (want_headers ? r->headers_done : have_data(r)))
			break;
		if (r->upstream_over)
			continue; /* the backlog, then the end: nothing to wait for */
		struct curl_waitfd extra = {r->client_fd, CURL_WAIT_POLLIN, 0};
		/* waiting for an answer, the health checker's verdict is looked
		 * at often: the client is answered from the cache at once */
		curl_multi_poll(r->multi, r->client_fd >= 0 ? &extra : NULL,
				r->client_fd >= 0 ? 1 : 0, want_headers ? POLL_ANSWER_MS : POLL_MS,
				NULL);
		if (extra.revents && client_gone(r))
			abort_with(r, "the client went away");
	}
}

/* ---- the response handed to libmicrohttpd ---- */

static void remote_free(struct remote *r)
{
	if (!r)
		return;
	if (r->tee)
		cache_tee_end(r->tee, false);
	upstream_give_back(r->p->up, r->multi, r->easy);
	if (r->counted_watch)
		atomic_fetch_sub(&r->p->metrics->open_watches, 1);
	watch_follow_free(r->wf);
	if (r->rw) {
		unsigned long changed, dropped;
		rewrite_counts(r->rw, &changed, &dropped);
		atomic_fetch_add(&r->p->metrics->filter_changed, changed);
		atomic_fetch_add(&r->p->metrics->filter_dropped, dropped);
		rewrite_free(r->rw);
	}
	curl_slist_free_all(r->req_headers);
	clear_headers(r);
	buf_free(&r->pending);
	buf_free(&r->owned_body);
	free(r);
}

static ssize_t read_body(void *cls, char *out, size_t max)
{
	struct remote *r = cls;
	if (!have_data(r))
		pump(r, false);
	if (have_data(r)) {
		size_t n = r->pending.len - r->pending_off;
		if (n > max)
			n = max;
		memcpy(out, r->pending.data + r->pending_off, n);
		r->pending_off += n;
		if (r->pending_off == r->pending.len) {
			buf_reset(&r->pending);
			r->pending_off = 0;
		}
		return (ssize_t)n;
	}
	if (r->result == CURLE_OK)
		return REPLY_END;
	/* A watch that ends between two events - the hub ended it (the cloud
	 * is unhealthy, the hub stops, its deadline), or the cloud's side broke
	 * there - ends with a final chunk: the client sees "watch closed" and
	 * re-watches, as from kube-apiserver.  Anything else, and a watch cut
	 * inside an event, is broken off, so that a client cannot take what it
	 * got for complete. */
	if (r->is_watch && framing_between_events(&r->framing)) {
		log_v(1, "proxy: %s: watch ended between events (%s): closed cleanly", r->b->url,
		      curl_easy_strerror(r->result));
		return REPLY_END;
	}
	log_v(1, "proxy: %s: stream ended early: %s", r->b->url, curl_easy_strerror(r->result));
	return REPLY_ABORT;
}

static void free_body(void *cls)
{
	remote_free(cls);
}

static bool hop_by_hop(const char *name)
{
	static const char *const names[] = {"connection",
					    "keep-alive",
					    "proxy-connection",
					    "transfer-encoding",
					    "te",
					    "trailer",
					    "upgrade",
					    "content-length",
					    "proxy-authenticate",
					    "proxy-authorization"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

static struct reply *make_reply(struct remote *r)
{
	uint64_t size = REPLY_SIZE_UNKNOWN;
	const char *cl = find_header(r, "Content-Length");
	const char *te = find_header(r, "Transfer-Encoding");
	if (cl && !te) {
		char *end;
		unsigned long long v = strtoull(cl, &end, 10);
		if (*cl && !*end)
			size = v;
	}
	if (r->status == 204 || r->status == 304)
		size = 0;
	if (r->rw) /* a list or watch streams; a whole object is all there */
		size = r->done && r->result == CURLE_OK ? r->pending.len - r->pending_off
							: REPLY_SIZE_UNKNOWN;
	struct reply *reply = reply_stream(size, READ_BLOCK, read_body, r, free_body);
	if (!reply)
		return NULL;
	for (size_t i = 0; i < r->nhdrs; i++)
		if (!hop_by_hop(r->hdrs[i].name) &&
		    !(r->rw_gunzips && !strcasecmp(r->hdrs[i].name, "Content-Encoding")))
			reply_header(reply, r->hdrs[i].name, r->hdrs[i].value);
	return reply;
}

/* ---- setting the request up ---- */

struct header_copy {
	struct curl_slist *list;
	bool has_auth, failed;
	const char *accept_override;
};

static int copy_header(void *cls, const char *key, const char *value)
{
	struct header_copy *hc = cls;
	if (hop_by_hop(key) || !strcasecmp(key, "Host") || !strcasecmp(key, "Expect"))
		return 0;
	if (hc->accept_override && !strcasecmp(key, "Accept"))
		return 0;
	if (!strcasecmp(key, "Authorization"))
		hc->has_auth = true;
	struct buf line = BUF_INIT;
	if (buf_printf(&line, "%s: %s", key, value) < 0) {
		hc->failed = true;
		return -1;
	}
	struct curl_slist *l = curl_slist_append(hc->list, line.data);
	buf_free(&line);
	if (!l) {
		hc->failed = true;
		return -1;
	}
	hc->list = l;
	return 0;
}

static void set_deadline(struct remote *r, const struct request_info *ri, int min_timeout)
{
	long seconds;
	if (ri->verb == VERB_WATCH)
		/* as YurtHub: the client's timeout plus a margin to notice a
		 * cloud that stopped talking without closing */
		seconds = (ri->timeout_seconds >= 0 ? ri->timeout_seconds : 2L * min_timeout) + 15;
	else if (r->long_running)
		seconds = 0;
	else
		seconds = REQUEST_SECONDS;
	if (!seconds)
		return;
	clock_gettime(CLOCK_MONOTONIC, &r->deadline);
	r->deadline.tv_sec += seconds;
}

static int setup(struct remote *r, struct request *req, enum cache_mode *mode)
{
	struct proxy *p = r->p;
	const struct request_info *ri = &req->ri;
	struct header_copy hc = {NULL, false, false, NULL};
	if ((*mode != CACHE_NONE && *mode != CACHE_DISCOVERY) || r->filters) {
		hc.accept_override = cache_accept_for(request_header(req, "Accept"));
		if (!hc.accept_override) {
			/* the client wants what we cannot read */
			if (r->filters)
				log_v(1, "proxy: %s %s: not filtered: the client takes no JSON",
				      req->component, req->raw_uri);
			*mode = CACHE_NONE;
			r->filters = 0;
		}
	}
	request_each_header(req, copy_header, &hc);
	if (hc.failed)
		goto nomem;
	if (hc.accept_override &&
	    !(hc.list = curl_slist_append(hc.list, "Accept: application/json")))
		goto nomem;
	if (!(hc.list = curl_slist_append(hc.list, "Expect:")))
		goto nomem;
	if (!hc.has_auth) {
		char *auth = upstream_auth_header(p->up);
		if (auth) {
			struct curl_slist *l = curl_slist_append(hc.list, auth);
			free(auth);
			if (!l)
				goto nomem;
			hc.list = l;
		}
	}
	r->req_headers = hc.list;
	/* A client that brings its own credentials is the client, not the node. */
	struct buf url = BUF_INIT;
	if (upstream_take(p->up, r->b, !hc.has_auth, &r->multi, &r->easy) < 0 ||
	    buf_printf(&url, "%s%s", r->b->url, req->raw_uri) < 0) {
		buf_free(&url);
		return -1;
	}
	CURL *e = r->easy;
	curl_easy_setopt(e, CURLOPT_URL, url.data);
	buf_free(&url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->req_headers);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)READ_BLOCK);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	const char *m = ri->method;
	if (!strcmp(m, "HEAD")) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (r->body_len || strcmp(m, "GET")) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body ? r->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		if (strcmp(m, "POST"))
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
	}
	r->long_running = request_is_long_running(ri);
	r->is_watch = ri->verb == VERB_WATCH;
	set_deadline(r, ri, p->min_request_timeout);
	r->client_fd = request_client_fd(req);
	return curl_multi_add_handle(r->multi, e) == CURLM_OK ? 0 : -1;
nomem:
	curl_slist_free_all(hc.list);
	return -1;
}

static bool unreachable(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

/* May a request that failed this way go to another backend?  Only when it
 * surely never reached the first one, or when repeating it is harmless. */
static bool retryable(CURLcode cc, const struct request_info *ri)
{
	if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
	    cc == CURLE_SSL_CONNECT_ERROR)
		return true;
	return !strcmp(ri->method, "GET") || !strcmp(ri->method, "HEAD");
}

/* One attempt against backend b: REMOTE_ANSWERED with r ready to stream (not
 * queued yet), or the failure (r freed). */
static enum remote_outcome attempt(struct proxy *p, struct request *req, enum cache_mode *mode,
				   filter_mask filters, struct backend *b, struct remote **out,
				   bool *may_retry)
{
	*out = NULL;
	*may_retry = false;
	struct remote *r = calloc(1, sizeof *r);
	if (!r)
		return REMOTE_ERROR;
	r->p = p;
	r->b = b;
	r->client_fd = -1;
	r->filters = filters;
	/* borrowed while attempts last; taken over (not copied) by the one
	 * that answers, see remote_proxy() */
	r->body = req->body.data;
	r->body_len = req->body.len;
	if (setup(r, req, mode) < 0) {
		remote_free(r);
		return REMOTE_ERROR;
	}
	clock_gettime(CLOCK_MONOTONIC, &r->t0);
	pump(r, true);
	if (r->headers_done) {
		*out = r;
		return REMOTE_ANSWERED;
	}
	CURLcode cc = r->done ? r->result : CURLE_OPERATION_TIMEDOUT;
	if (r->gave_up_sick) {
		/* no answer, and the health checker calls the link dead: the
		 * cache answers (another backend, if one is healthy, only for
		 * what may be sent twice) */
		log_v(1, "proxy: %s %s: no answer, and the upstream is unhealthy", b->url,
		      req->raw_uri);
		*may_retry = retryable(CURLE_OPERATION_TIMEDOUT, &req->ri);
		remote_free(r);
		return REMOTE_UNREACHABLE;
	}
	log_v(1, "proxy: %s %s: %s%s", b->url, req->raw_uri, curl_easy_strerror(cc),
	      r->headers_too_large ? " (response headers over 32 KiB)" : "");
	enum remote_outcome outcome = REMOTE_ERROR;
	if (unreachable(cc)) {
		if (b->leader)
			leaders_report_failure(p->leaders, b);
		else
			health_report_failure(p->health, b);
		outcome = REMOTE_UNREACHABLE;
		*may_retry = retryable(cc, &req->ri);
	} else if (cc != CURLE_ABORTED_BY_CALLBACK) {
		/* it answered, but not HTTP we can pass on: too many headers
		 * (ours or curl's limit), a malformed status line, ... */
		outcome = REMOTE_BAD_ANSWER;
	}
	remote_free(r);
	return outcome;
}

/* ---- filtering ---- */

static bool is_json(const char *content_type)
{
	if (!content_type)
		return false;
	size_t n = strcspn(content_type, "; ");
	/* a Table or partial metadata (";as=...") is not the objects themselves */
	return n == 16 && !strncasecmp(content_type, "application/json", 16) &&
	       !strstr(content_type, "as=");
}

static enum rewrite_shape shape_of(const struct request_info *ri)
{
	if (ri->verb == VERB_WATCH)
		return REWRITE_WATCH;
	return ri->verb == VERB_LIST ? REWRITE_LIST : REWRITE_OBJECT;
}

/* Sets r->rw up when the answer is one the filters chosen for the request
 * can read (2xx JSON, plain or gzip); else it passes as it came.  -1: out
 * of memory (the answer must not pass unfiltered). */
static int start_filtering(struct remote *r, const struct request *req)
{
	const struct request_info *ri = &req->ri;
	if (!r->filters || r->status < 200 || r->status > 206)
		return 0;
	const char *ct = find_header(r, "Content-Type");
	const char *ce = find_header(r, "Content-Encoding");
	bool gz = ce && !strcasecmp(ce, "gzip");
	if (!is_json(ct) || (ce && !gz && strcasecmp(ce, "identity"))) {
		log_v(1, "proxy: %s: not filtered: the answer is %s%s%s", r->b->url,
		      ct ? ct : "without a Content-Type", ce ? ", " : "", ce ? ce : "");
		return 0;
	}
	struct filter_target t = {ri->api_group, ri->api_version, ri->resource};
	r->rw = rewrite_new(shape_of(ri), gz, r->filters, &t, cluster_env_ref(r->p->cluster),
			    pass_on, r);
	if (!r->rw)
		return -1;
	rewrite_set_room(r->rw, room_for_client);
	r->rw_gunzips = gz;
	int err = 0;
	if (r->is_watch)
		r->wf = watch_follow_new(r->p, req, r->rw, r->filters, req->component,
					 local_wants_initial_events(ri), &err);
	return err;
}

/* The bytes that came with the headers, to the cache (the cloud's bytes,
 * filtered or not) and through the filters (which need all of them). */
static int first_bytes(struct remote *r)
{
	if (!have_data(r))
		return 0;
	cache_tee_feed(r->tee, r->pending.data + r->pending_off, r->pending.len - r->pending_off);
	if (!r->rw)
		return 0;
	struct buf raw = r->pending;
	size_t off = r->pending_off;
	r->pending = (struct buf)BUF_INIT;
	r->pending_off = 0;
	int rc = rewrite_feed(r->rw, raw.data + off, raw.len - off);
	buf_free(&raw);
	if (rc < 0)
		log_warn("proxy: %s: the answer cannot be filtered: %s", r->b->url,
			 rewrite_error(r->rw));
	return rc;
}

/* A filtered single object is read whole before it is answered: a filter
 * may drop it (404, as a list would leave it out).  1 when answered here. */
static int answer_object(struct remote *r, struct request *req, enum remote_outcome *out)
{
	if (!r->rw || shape_of(&req->ri) != REWRITE_OBJECT)
		return 0;
	while (!r->done)
		pump(r, false);
	if (r->result != CURLE_OK) {
		*out = REMOTE_BAD_ANSWER;
		remote_free(r);
		return 1;
	}
	if (!rewrite_dropped(r->rw))
		return 0;
	struct buf msg = BUF_INIT, details = BUF_INIT;
	buf_printf(&msg, "%s \"%s\" not found", req->ri.resource, req->ri.name);
	buf_append_str(&details, "{\"name\":");
	buf_append_json_str(&details, req->ri.name, strlen(req->ri.name));
	buf_append_str(&details, ",\"kind\":");
	buf_append_json_str(&details, req->ri.resource, strlen(req->ri.resource));
	buf_append_str(&details, "}");
	*out = reply_status(req, 404, "NotFound", buf_cstr(&msg), buf_cstr(&details)) == 0
		   ? REMOTE_ANSWERED
		   : REMOTE_CLOSE;
	buf_free(&msg);
	buf_free(&details);
	remote_free(r);
	return 1;
}

enum remote_outcome remote_proxy(struct proxy *p, struct request *req, enum cache_mode mode)
{
	uint64_t tried = 0;
	struct remote *r = NULL;
	enum remote_outcome out = REMOTE_NO_BACKEND;
	filter_mask filters =
	    p->cluster ? cluster_filters_for(p->cluster, req->component,
					     request_info_verb(&req->ri), req->ri.resource)
		       : 0;
	/* A follower's multiplexer lists and watches from its pool's leader
	 * first, then from the cloud (docs/sharing.md). */
	bool follower = p->leaders && multiplexer_is_upstream(p->mux, req);
	struct backend *leader =
	    follower && !upstream_identity_pending(p->up) ? leaders_pick(p->leaders) : NULL;
	bool may_retry = false;
	if (leader)
		out = attempt(p, req, &mode, filters, leader, &r, &may_retry);
	unsigned long gen = leaders_generation(p->leaders);
	for (struct backend *b; (!leader || (out == REMOTE_UNREACHABLE && may_retry)) &&
				(b = upstream_pick(p->up, tried));) {
		leader = NULL;
		out = attempt(p, req, &mode, filters, b, &r, &may_retry);
		if (out != REMOTE_UNREACHABLE || !may_retry)
			break;
		if (b->index < 64)
			tried |= 1ULL << b->index;
	}
	if (out == REMOTE_ANSWERED && follower && !r->b->leader && req->ri.verb == VERB_WATCH) {
		r->until_leader = true;
		r->leader_gen = gen;
	}
	if (out != REMOTE_ANSWERED)
		return out;
	/* The answer may outlive the request; curl may still be sending the
	 * body (a server may answer before reading it all).  Same bytes, new
	 * owner: r->body stays valid. */
	r->owned_body = req->body;
	req->body = (struct buf)BUF_INIT;
	if (start_filtering(r, req) < 0) {
		remote_free(r);
		return REMOTE_ERROR;
	}
	/* the cache takes the cloud's body as it came, gzip or not */
	r->tee = cache_tee_new(p->cache, mode, req->component, &req->ri, (int)r->status,
			       find_header(r, "Content-Type"), find_header(r, "Content-Encoding"));
	if (first_bytes(r) < 0) {
		remote_free(r);
		return REMOTE_BAD_ANSWER;
	}
	if (r->done) { /* it ended with the headers: the filters' end, the cache's */
		r->done = false;
		upstream_ended(r, r->result);
	}
	if (answer_object(r, req, &out))
		return out;
	if (req->ri.verb == VERB_WATCH && !req->hub_own) {
		r->counted_watch = true;
		atomic_fetch_add(&p->metrics->open_watches, 1);
	}
	unsigned int status = r->status;
	/* from here on the reply owns r (make_reply frees it on failure) */
	return reply_send(req, status, make_reply(r)) == 0 ? REMOTE_ANSWERED : REMOTE_CLOSE;
}
