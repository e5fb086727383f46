/*
 * upgrade.c - protocol upgrades passed through to the cloud, see upgrade.h.
 *
 * libcurl makes the connection to the backend - TCP, and TLS with the hub's
 * identity, exactly as for proxied requests - and hands it over
 * (CURLOPT_CONNECT_ONLY); the hub then writes the client's request on it
 * and reads the answer's head itself, since libcurl does not pass HTTP
 * upgrades through.  The connection's thread does all of that; the relay of
 * an upgraded connection runs in a thread of its own, because for TLS
 * clients libmicrohttpd relays between TLS and the socket it hands over
 * only once the connection's thread is back.
 */
#include "proxy/upgrade.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "http/limits.h"
#include "http/response.h"
#include "proxy/proxy.h"
#include "util/log.h"

#define ANSWER_SECONDS	60	     /* for the cloud's answer head, as kube's request timeout */
#define ANSWER_BODY_MAX (1u << 20)   /* a refusal's body (a Status) */
#define RELAY_BLOCK	(16u << 10)  /* read at a time, each way */
#define RELAY_STACK	(256u << 10) /* as the connection threads' */
#define POLL_MS		500

/* One upgrade: the cloud's connection, then the relay.  Owned by the
 * connection's thread until the 101 is out, then by the relay thread. */
struct upgrade {
	struct proxy *p;
	struct backend *b;
	CURL *easy;
	curl_socket_t sock;
	struct buf in; /* from the cloud: the answer head, then what follows */
	size_t in_off; /* where what follows the head starts */
	struct upgraded *client;
	struct buf to_cloud; /* bytes on their way, each direction */
	size_t to_cloud_off;
	struct buf to_client;
	size_t to_client_off;
	bool client_eof, cloud_eof, cloud_shut;
	unsigned long long up_bytes, down_bytes;
};

/* What the cloud's answer head says. */
struct head {
	int status;
	struct {
		char *name, *value;
	} h[64];
	size_t n;
};

static void head_free(struct head *hd)
{
	for (size_t i = 0; i < hd->n; i++) {
		free(hd->h[i].name);
		free(hd->h[i].value);
	}
	hd->n = 0;
}

static const char *head_get(const struct head *hd, const char *name)
{
	for (size_t i = 0; i < hd->n; i++)
		if (!strcasecmp(hd->h[i].name, name))
			return hd->h[i].value;
	return NULL;
}

static void upgrade_free(void *cls)
{
	struct upgrade *u = cls;
	if (!u)
		return;
	upgraded_close(u->client);
	if (u->easy)
		curl_easy_cleanup(u->easy);
	buf_free(&u->in);
	buf_free(&u->to_cloud);
	buf_free(&u->to_client);
	free(u);
}

/* ---- talking to the cloud before the switch ---- */

static bool past(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* Wait until the cloud's socket is ready for events (POLLIN/POLLOUT), the
 * deadline passes or the hub stops; 0 or -1. */
static int wait_cloud(struct upgrade *u, short events, const struct timespec *deadline)
{
	for (;;) {
		if (past(deadline) || atomic_load(&u->p->stopping))
			return -1;
		struct pollfd pfd = {u->sock, events, 0};
		int n = poll(&pfd, 1, POLL_MS);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

static int send_all(struct upgrade *u, const char *data, size_t len,
		    const struct timespec *deadline)
{
	while (len) {
		size_t sent = 0;
		CURLcode cc = curl_easy_send(u->easy, data, len, &sent);
		if (cc == CURLE_AGAIN) {
			if (wait_cloud(u, POLLOUT, deadline) < 0)
				return -1;
			continue;
		}
		if (cc != CURLE_OK)
			return -1;
		data += sent;
		len -= sent;
	}
	return 0;
}

/* More bytes from the cloud into u->in: 1, 0 at its end, -1 on error or
 * timeout.  At most `room` bytes. */
static int recv_some(struct upgrade *u, size_t room, const struct timespec *deadline)
{
	if (buf_reserve(&u->in, room) < 0)
		return -1;
	for (;;) {
		size_t n = 0;
		CURLcode cc = curl_easy_recv(u->easy, u->in.data + u->in.len, room, &n);
		if (cc == CURLE_OK) {
			u->in.len += n;
			u->in.data[u->in.len] = '\0';
			return n ? 1 : 0;
		}
		if (cc != CURLE_AGAIN || wait_cloud(u, POLLIN, deadline) < 0)
			return -1;
	}
}

static int connect_cloud(struct upgrade *u, bool with_client_cert)
{
	if (!(u->easy = upstream_easy(u->p->up, u->b, with_client_cert)))
		return -1;
	struct buf url = BUF_INIT;
	if (buf_printf(&url, "%s/", u->b->url) < 0)
		return -1;
	curl_easy_setopt(u->easy, CURLOPT_URL, url.data);
	buf_free(&url);
	curl_easy_setopt(u->easy, CURLOPT_CONNECT_ONLY, 1L);
	/* a connection of its own: a connect-only one is never handed to another
	 * transfer, and it closes with the handle */
	curl_easy_setopt(u->easy, CURLOPT_FRESH_CONNECT, 1L);
	CURLcode cc = curl_easy_perform(u->easy);
	if (cc != CURLE_OK) {
		log_v(1, "upgrade: %s: %s", u->b->url, curl_easy_strerror(cc));
		return -1;
	}
	return curl_easy_getinfo(u->easy, CURLINFO_ACTIVESOCKET, &u->sock) == CURLE_OK &&
		       u->sock != CURL_SOCKET_BAD
		   ? 0
		   : -1;
}

/* ---- the request, as the client sent it ---- */

struct request_head {
	struct buf *out;
	bool has_auth;
};

static bool left_out(const char *name)
{
	/* the hub frames the body itself; the rest is about the hop to the hub */
	static const char *const names[] = {
	    "host",	  "content-length",   "transfer-encoding",   "expect",
	    "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
	    "te",	  "trailer"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

static int add_header(void *ctx, const char *name, const char *value)
{
	struct request_head *rh = ctx;
	if (left_out(name))
		return 0;
	if (!strcasecmp(name, "Authorization"))
		rh->has_auth = true;
	return buf_printf(rh->out, "%s: %s\r\n", name, value);
}

/* The authority of a backend URL: "https://10.0.0.1:6443" -> "10.0.0.1:6443". */
static const char *authority(const char *url)
{
	const char *p = strstr(url, "://");
	return p ? p + 3 : url;
}

static int request_head(struct upgrade *u, struct request *req, struct buf *out, bool *has_auth)
{
	struct request_head rh = {out, false};
	int rc = buf_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\n", req->ri.method, req->raw_uri,
			    authority(u->b->url));
	if (rc == 0 && request_each_header(req, add_header, &rh) < 0)
		rc = -1;
	if (rc == 0 && !rh.has_auth) {
		char *auth = upstream_auth_header(u->p->up);
		if (auth)
			rc = buf_printf(out, "%s\r\n", auth);
		free(auth);
	}
	if (rc == 0 && (req->body.len || strcmp(req->ri.method, "GET")))
		rc = buf_printf(out, "Content-Length: %zu\r\n", req->body.len);
	*has_auth = rh.has_auth;
	return rc ? rc : buf_append_str(out, "\r\n");
}

/* ---- the cloud's answer head ---- */

static char *trimmed(const char *s, size_t n)
{
	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	return strndup(s, n);
}

/* Parse the head in u->in[0..end); 0, or -1 for what is not HTTP/1.1. */
static int parse_head(const char *text, size_t end, struct head *hd)
{
	const char *line = text, *stop = text + end;
	const char *eol = memmem(line, (size_t)(stop - line), "\r\n", 2);
	if (!eol || eol - line < 12 || strncmp(line, "HTTP/1.", 7) || line[8] != ' ' ||
	    (eol - line > 12 && line[12] != ' '))
		return -1;
	hd->status = 0;
	for (int i = 9; i < 12; i++) {
		if (line[i] < '0' || line[i] > '9')
			return -1;
		hd->status = hd->status * 10 + (line[i] - '0');
	}
	for (line = eol + 2; line < stop; line = eol + 2) {
		eol = memmem(line, (size_t)(stop - line), "\r\n", 2);
		if (!eol || eol == line)
			break;
		const char *colon = memchr(line, ':', (size_t)(eol - line));
		if (!colon || colon == line || *line == ' ' || *line == '\t' ||
		    hd->n == sizeof hd->h / sizeof hd->h[0])
			return -1;
		hd->h[hd->n].name = strndup(line, (size_t)(colon - line));
		hd->h[hd->n].value = trimmed(colon + 1, (size_t)(eol - colon - 1));
		if (!hd->h[hd->n].name || !hd->h[hd->n].value) {
			free(hd->h[hd->n].name);
			free(hd->h[hd->n].value);
			return -1;
		}
		hd->n++;
	}
	return 0;
}

/* Read the answer's head; 0 with it parsed (u->in_off after it), -1. */
static int read_head(struct upgrade *u, struct head *hd, const struct timespec *deadline)
{
	for (;;) {
		const char *end = u->in.len ? memmem(u->in.data, u->in.len, "\r\n\r\n", 4) : NULL;
		if (end) {
			u->in_off = (size_t)(end - u->in.data) + 4;
			return parse_head(u->in.data, u->in_off - 2, hd);
		}
		if (u->in.len >= LIMIT_UPSTREAM_HEADERS ||
		    recv_some(u, LIMIT_UPSTREAM_HEADERS - u->in.len, deadline) <= 0)
			return -1;
	}
}

/* ---- an answer other than 101: passed on as it came ---- */

/* u->in has at least n bytes after u->in_off (reading more): 0, or -1 when
 * the cloud's answer ends first or is too large. */
static int need(struct upgrade *u, size_t n, const struct timespec *deadline)
{
	if (n > ANSWER_BODY_MAX + RELAY_BLOCK) /* a body, with its chunk framing */
		return -1;
	while (u->in.len - u->in_off < n)
		if (recv_some(u, RELAY_BLOCK, deadline) <= 0)
			return -1;
	return 0;
}

static int dechunk(struct upgrade *u, struct buf *body, const struct timespec *deadline)
{
	for (;;) {
		const char *p = u->in.data + u->in_off, *eol;
		while (!(eol = memmem(p, u->in.len - u->in_off, "\r\n", 2))) {
			if (need(u, u->in.len - u->in_off + 1, deadline) < 0)
				return -1;
			p = u->in.data + u->in_off;
		}
		char *end;
		unsigned long size = strtoul(p, &end, 16);
		if (end == p || size > ANSWER_BODY_MAX - body->len)
			return -1;
		u->in_off += (size_t)(eol - p) + 2;
		if (size == 0)
			return 0; /* trailers are not passed on */
		if (need(u, size + 2, deadline) < 0 ||
		    buf_append(body, u->in.data + u->in_off, size) < 0)
			return -1;
		u->in_off += size + 2;
	}
}

static int answer_body(struct upgrade *u, const struct head *hd, struct buf *body,
		       const struct timespec *deadline)
{
	const char *te = head_get(hd, "Transfer-Encoding");
	const char *cl = head_get(hd, "Content-Length");
	if (te && strcasecmp(te, "chunked"))
		return -1;
	if (te)
		return dechunk(u, body, deadline);
	if (cl) {
		char *end;
		unsigned long long n = strtoull(cl, &end, 10);
		if (!*cl || *end || n > ANSWER_BODY_MAX || need(u, (size_t)n, deadline) < 0)
			return -1;
		return buf_append(body, u->in.data + u->in_off, (size_t)n);
	}
	int rc; /* no length: the body ends with the connection */
	while ((rc = recv_some(u, RELAY_BLOCK, deadline)) > 0)
		if (u->in.len - u->in_off > ANSWER_BODY_MAX)
			return -1;
	return rc < 0 ? -1 : buf_append(body, u->in.data + u->in_off, u->in.len - u->in_off);
}

static bool hop_by_hop(const char *name)
{
	static const char *const names[] = {
	    "connection", "keep-alive", "transfer-encoding", "te",
	    "trailer",	  "upgrade",	"content-length",    "proxy-connection"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

static enum remote_outcome pass_on(struct upgrade *u, struct request *req, const struct head *hd,
				   const struct timespec *deadline)
{
	struct buf body = BUF_INIT;
	if (hd->status < 200 || answer_body(u, hd, &body, deadline) < 0) {
		buf_free(&body);
		return REMOTE_BAD_ANSWER;
	}
	size_t len = body.len;
	char *data = len ? buf_steal(&body) : strdup("");
	struct reply *r = data ? reply_buffer(data, len, NULL) : NULL;
	for (size_t i = 0; r && i < hd->n; i++)
		if (!hop_by_hop(hd->h[i].name))
			reply_header(r, hd->h[i].name, hd->h[i].value);
	return reply_send(req, (unsigned int)hd->status, r) == 0 ? REMOTE_ANSWERED : REMOTE_CLOSE;
}

/* ---- the relay, once both sides switched ---- */

static bool have(const struct buf *b, size_t off)
{
	return b->len > off;
}

/* Each step moves what it can without blocking: 1 when it did, 0 when it
 * could not, -1 when its side failed. */
static int from_client(struct upgrade *u)
{
	if (u->client_eof || have(&u->to_cloud, u->to_cloud_off))
		return 0;
	buf_reset(&u->to_cloud);
	u->to_cloud_off = 0;
	if (buf_reserve(&u->to_cloud, RELAY_BLOCK) < 0)
		return -1;
	ssize_t n = recv(u->client->fd, u->to_cloud.data, RELAY_BLOCK, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	if (n == 0)
		u->client_eof = true;
	u->to_cloud.len = (size_t)n;
	u->up_bytes += (size_t)n;
	return 1;
}

static int to_cloud(struct upgrade *u)
{
	if (!have(&u->to_cloud, u->to_cloud_off))
		return 0;
	size_t sent = 0;
	CURLcode cc = curl_easy_send(u->easy, u->to_cloud.data + u->to_cloud_off,
				     u->to_cloud.len - u->to_cloud_off, &sent);
	if (cc == CURLE_AGAIN)
		return 0;
	if (cc != CURLE_OK)
		return -1;
	u->to_cloud_off += sent;
	return sent > 0;
}

static int from_cloud(struct upgrade *u)
{
	if (u->cloud_eof || have(&u->to_client, u->to_client_off))
		return 0;
	buf_reset(&u->to_client);
	u->to_client_off = 0;
	if (buf_reserve(&u->to_client, RELAY_BLOCK) < 0)
		return -1;
	size_t n = 0;
	CURLcode cc = curl_easy_recv(u->easy, u->to_client.data, RELAY_BLOCK, &n);
	if (cc == CURLE_AGAIN)
		return 0;
	if (cc != CURLE_OK)
		return -1;
	if (n == 0)
		u->cloud_eof = true;
	u->to_client.len = n;
	u->down_bytes += n;
	return 1;
}

static int to_client(struct upgrade *u)
{
	if (!have(&u->to_client, u->to_client_off))
		return 0;
	ssize_t n = send(u->client->fd, u->to_client.data + u->to_client_off,
			 u->to_client.len - u->to_client_off, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	u->to_client_off += (size_t)n;
	return n > 0;
}

/* Wait for either side, or POLL_MS: only what can move is asked for. */
static void relay_wait(struct upgrade *u)
{
	struct pollfd pfd[2] = {{u->client->fd, 0, 0}, {u->sock, 0, 0}};
	if (!u->client_eof && !have(&u->to_cloud, u->to_cloud_off))
		pfd[0].events |= POLLIN;
	if (have(&u->to_client, u->to_client_off))
		pfd[0].events |= POLLOUT;
	if (!u->cloud_eof && !have(&u->to_client, u->to_client_off))
		pfd[1].events |= POLLIN;
	if (have(&u->to_cloud, u->to_cloud_off))
		pfd[1].events |= POLLOUT;
	for (int i = 0; i < 2; i++)
		if (!pfd[i].events)
			pfd[i].fd = -1; /* a hung-up side we do not need must not wake us */
	if (poll(pfd, 2, POLL_MS) < 0 && errno != EINTR)
		log_v(1, "upgrade: poll: %s", strerror(errno));
}

/* Relay until a side ends or fails; why it ended. */
static const char *relay(struct upgrade *u)
{
	for (;;) {
		if (atomic_load(&u->p->stopping))
			return "the hub is stopping";
		if (!atomic_load(&u->b->healthy))
			return "the upstream is unhealthy";
		int a = from_client(u), b = to_cloud(u), c = from_cloud(u), d = to_client(u);
		if (a < 0 || d < 0)
			return "the client's side failed";
		if (b < 0 || c < 0)
			return "the cloud's side failed";
		if (u->client_eof && !have(&u->to_cloud, u->to_cloud_off) && !u->cloud_shut) {
			/* the client is done sending: tell the cloud, read on */
			shutdown(u->sock, SHUT_WR);
			u->cloud_shut = true;
		}
		if (u->cloud_eof && !have(&u->to_client, u->to_client_off))
			return "the cloud closed";
		if (!(a || b || c || d))
			relay_wait(u);
	}
}

static void relay_done(struct proxy *p)
{
	pthread_mutex_lock(&p->relay_lock);
	p->relays--;
	pthread_cond_broadcast(&p->relay_cv);
	pthread_mutex_unlock(&p->relay_lock);
}

static void *relay_main(void *arg)
{
	struct upgrade *u = arg;
	struct proxy *p = u->p;
	const char *why = relay(u);
	log_v(1, "upgrade: %s: relay ended (%s), %llu bytes up, %llu down", u->b->url, why,
	      u->up_bytes, u->down_bytes);
	upgrade_free(u); /* closes both sides */
	relay_done(p);
	return NULL;
}

/* The 101 is out and the client's socket is ours (the connection's thread,
 * which must not block here). */
static void on_switched(void *cls, struct upgraded *client)
{
	struct upgrade *u = cls;
	struct proxy *p = u->p;
	u->client = client;
	if (client->extra_len && buf_append(&u->to_cloud, client->extra, client->extra_len) < 0) {
		upgrade_free(u);
		return;
	}
	pthread_mutex_lock(&p->relay_lock);
	bool open = !p->relays_closed;
	if (open)
		p->relays++;
	pthread_mutex_unlock(&p->relay_lock);
	pthread_attr_t attr;
	pthread_t t;
	bool started = false;
	if (open && pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, RELAY_STACK);
		started = pthread_create(&t, &attr, relay_main, u) == 0;
		pthread_attr_destroy(&attr);
	}
	if (started)
		return;
	log_warn("upgrade: %s: no relay (%s); the connection is closed", u->b->url,
		 open ? "no thread" : "the hub is stopping");
	upgrade_free(u);
	if (open)
		relay_done(p);
}

/* Answer 101; u is the answer's from here on, whatever happens. */
static enum remote_outcome switch_protocols(struct upgrade *u, struct request *req,
					    const struct head *hd)
{
	/* what came after the head is the cloud's first bytes of the new protocol */
	if (buf_append(&u->to_client, u->in.data + u->in_off, u->in.len - u->in_off) < 0) {
		upgrade_free(u);
		return REMOTE_ERROR;
	}
	buf_free(&u->in);
	struct reply *r = reply_upgrade(req, on_switched, u, upgrade_free);
	/* libmicrohttpd writes "Connection: Upgrade" itself */
	for (size_t i = 0; r && i < hd->n; i++)
		if (strcasecmp(hd->h[i].name, "Connection") &&
		    strcasecmp(hd->h[i].name, "Content-Length") &&
		    strcasecmp(hd->h[i].name, "Transfer-Encoding"))
			reply_header(r, hd->h[i].name, hd->h[i].value);
	return reply_send(req, 101, r) == 0 ? REMOTE_ANSWERED : REMOTE_CLOSE;
}

/* ---- one upgrade ---- */

/* Connect to b, send the request, read the answer's head. */
static enum remote_outcome exchange(struct upgrade *u, struct request *req, struct head *hd,
				    const struct timespec *deadline)
{
	struct buf head = BUF_INIT;
	bool has_auth = false;
	if (request_head(u, req, &head, &has_auth) < 0) {
		buf_free(&head);
		return REMOTE_ERROR;
	}
	/* a client that brings its own credentials is the client, not the node */
	if (connect_cloud(u, !has_auth) < 0) {
		buf_free(&head);
		health_report_failure(u->p->health, u->b);
		return REMOTE_UNREACHABLE;
	}
	int rc = send_all(u, head.data, head.len, deadline);
	buf_free(&head);
	if (rc == 0 && req->body.len)
		rc = send_all(u, req->body.data, req->body.len, deadline);
	if (rc < 0 || read_head(u, hd, deadline) < 0) {
		log_v(1, "upgrade: %s %s: no answer that can be passed on", u->b->url,
		      req->raw_uri);
		return REMOTE_BAD_ANSWER;
	}
	return REMOTE_ANSWERED;
}

/* One attempt against backend b. */
static enum remote_outcome attempt(struct proxy *p, struct request *req, struct backend *b)
{
	struct upgrade *u = calloc(1, sizeof *u);
	if (!u)
		return REMOTE_ERROR;
	u->p = p;
	u->b = b;
	u->sock = CURL_SOCKET_BAD;
	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += ANSWER_SECONDS;
	struct head hd = {0};
	enum remote_outcome out = exchange(u, req, &hd, &deadline);
	if (out == REMOTE_ANSWERED && hd.status == 101) {
		out = switch_protocols(u, req, &hd);
		u = NULL;
	} else if (out == REMOTE_ANSWERED) {
		out = pass_on(u, req, &hd, &deadline);
	}
	head_free(&hd);
	upgrade_free(u);
	return out;
}

enum remote_outcome upgrade_proxy(struct proxy *p, struct request *req)
{
	if (atomic_load(&p->stopping))
		return REMOTE_NO_BACKEND;
	/* nothing was sent when a backend cannot be reached: the next may be */
	uint64_t tried = 0;
	enum remote_outcome out = REMOTE_NO_BACKEND;
	for (struct backend *b; (b = upstream_pick(p->up, tried));) {
		out = attempt(p, req, b);
		if (out != REMOTE_UNREACHABLE)
			break;
		if (b->index < 64)
			tried |= 1ULL << b->index;
	}
	return out;
}
