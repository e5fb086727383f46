/*
 * hub.c - starting and stopping the parts of the hub, see hub.h.
 *
 * Order of start: the store (recovery) first, so that a node that boots
 * offline is served as soon as the server listens and the filters' view of
 * the cluster is loaded from the cache (milliseconds; /v1/readyz and
 * "yurthub ready" wait for that view, online or offline); then the cloud side (identity, health),
 * the cache workers, the dummy interface, the server (which listens on the interface's address
 * too). Signals: SIGTERM and SIGINT are blocked in every thread and taken by the main thread with
 * sigwait(), so that no handler runs inside library code.
 */
#include "hub.h"

#include <curl/curl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/autonomy.h"
#include "cache/behind.h"
#include "cache/local_changes.h"
#include "cache/cacheable.h"
#include "cluster/cluster.h"
#include "proxy/multiplexer.h"
#include "cache/manager.h"
#include "cloud/health.h"
#include "cloud/upstream.h"
#include "housekeeping.h"
#include "hub_identity.h"
#include "hub_pool.h"
#include "identity/sakeys.h"
#include "http/limits.h"
#include "http/response.h"
#include "metrics/metrics.h"
#include "netif/keeper.h"
#include "proxy/outbox.h"
#include "proxy/proxy.h"
#include "server/server.h"
#include "storage/disk.h"
#include "storage/etcd.h"
#include "util/clock.h"
#include "util/log.h"
#include "version.h"

#define CACHE_WORKERS 2
/* At most this long after the start, the multiplexer waits for the pool's
 * configmap before it starts an upstream (it is read within a round trip
 * online, and answered at once offline). */
#define MUX_HOLD_FOR_POOL_MS 5000

struct hub {
	const struct config *cfg;
	struct store *store;
	struct upstream upstream;
	struct health *health;
	struct cache_agents agents;
	struct cache_manager *cache;
	struct local_changes *changes; /* the hub's own offline edits */
	struct views_behind *behind;   /* views a lost write left behind (cache/behind.h) */
	struct outbox *outbox;	       /* offline Events, sent when the cloud is back */
	struct sa_keys *sa_keys;       /* to check bearer tokens offline */
	struct metrics metrics;
	struct proxy proxy;
	struct request_gate gate; /* --max-requests-in-flight, the body budget */
	struct server *server;
	struct housekeeping *housekeeping; /* object count; etcd tombstones, strays */
	struct cluster *cluster;	   /* what the response filters know */
	struct netif_keeper *netif;	   /* the dummy interface; NULL without it */
	struct hub_identity identity;	   /* certificates: bootstrap, rotation */
	struct hub_pool pool;		   /* the pool's leader hub */
	char *proxy_url, *hub_port;	   /* the cluster's settings */
	atomic_bool ready;		   /* the store has recovered */
	/* what the filters last found of the secure port, for logging each
	 * change once: -1 not asked yet, 0 not serving, 1 serving */
	atomic_int hub_port_seen;
	/* the autonomy condition last reported to the cloud (housekeeping's
	 * thread only) */
	int reported_autonomy; /* -1 never, 0, 1 */
	char reported_why[256];
	time_t reported_at, autonomy_since;
};

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

static struct store *open_store(const struct config *cfg)
{
	char *err = NULL;
	struct store *s;
	if (cfg->storage == STORAGE_ETCD) {
		struct etcd_store_config ec = {(const char *const *)cfg->etcd_servers.v,
					       cfg->etcd_servers.n,
					       nonempty(cfg->etcd_cafile),
					       nonempty(cfg->etcd_certfile),
					       nonempty(cfg->etcd_keyfile),
					       cfg->etcd_prefix,
					       cfg->node_name,
					       0};
		s = etcd_store_open(&ec, &err);
	} else {
		struct disk_recovery_report rep;
		s = disk_store_open(cfg->disk_cache_path, 0, &rep, &err);
	}
	if (!s) {
		log_error("%s", err ? err : "cannot open the cache");
		free(err);
	}
	return s;
}

static void join_list(struct buf *b, const struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		buf_printf(b, "%s%s", i ? "," : "", l->v[i]);
}

/* One line that says what this hub is and where it listens and stores
 * (never a credential: file names at most).  The ports as server_start()
 * opens them: 0 (or the secure port without its files) is "off". */
static void log_startup(const struct config *cfg)
{
	struct buf ups = BUF_INIT, storage = BUF_INIT, proxy = BUF_INIT, secure = BUF_INIT;
	join_list(&ups, &cfg->server_addr);
	if (cfg->storage == STORAGE_ETCD) {
		buf_printf(&storage, "etcd, etcd servers ");
		join_list(&storage, &cfg->etcd_servers);
		buf_printf(&storage, ", etcd prefix %s, local state in %s", cfg->etcd_prefix,
			   cfg->disk_cache_path);
	} else {
		buf_printf(&storage, "disk, cache path %s", cfg->disk_cache_path);
	}
	if (cfg->proxy_port)
		buf_printf(&proxy, "%s:%d", cfg->bind_proxy_address, cfg->proxy_port);
	else
		buf_append_str(&proxy, "off");
	if (cfg->proxy_secure_port && ((*cfg->tls_cert_file && *cfg->client_ca_file) ||
				       cfg->bootstrap_mode != BOOTSTRAP_NONE))
		buf_printf(&secure, "%s:%d", cfg->bind_proxy_address, cfg->proxy_secure_port);
	else
		buf_append_str(&secure, "off");
	log_msg('I', 0,
		"yurthub %s starting: node %s, storage %s, upstreams %s (lb %s), proxy %s, "
		"secure proxy %s, serve %s:%d, log -v %d %s",
		YURTHUB_VERSION, cfg->node_name, buf_cstr(&storage), buf_cstr(&ups),
		cfg->lb_mode_name, buf_cstr(&proxy), buf_cstr(&secure), cfg->bind_address,
		cfg->serve_port, cfg->verbosity, cfg->log_format);
	for (size_t i = 0; i < cfg->ignored.n; i++)
		log_info("flag --%s is accepted for compatibility with YurtHub and has no effect",
			 cfg->ignored.v[i]);
	buf_free(&ups);
	buf_free(&storage);
	buf_free(&proxy);
	buf_free(&secure);
}

/* ---- the serve port: /v1/healthz, /v1/readyz, /metrics ---- */

static bool mux_shares(void *ctx, const char *group, const char *version, const char *resource)
{
	return multiplexer_shares(ctx, group, version, resource);
}

/* Judge the node's autonomy now (cache/autonomy.h), for the gauge and
 * /v1/readyz?verbose. */
static bool judge_autonomy(struct hub *h, char *why, size_t whylen)
{
	char *mux = h->proxy.mux ? cache_mux_component(h->cfg->node_name) : NULL;
	struct autonomy_inputs in = {.store = h->store,
				     .cache = h->cache,
				     .node_name = h->cfg->node_name,
				     .mux_component = mux,
				     .is_shared = mux ? mux_shares : NULL,
				     .ctx = h->proxy.mux};
	bool ok = autonomy_check(&in, why, whylen);
	free(mux);
	atomic_store(&h->metrics.autonomy_ready, ok ? 1 : 0);
	return ok;
}

/* The node's condition AutonomyState (OpenYurt's name for it), sent as a
 * strategic merge patch of its status while the cloud is reachable: when
 * the verdict changes, and every AUTONOMY_REPORT_S as a heartbeat. */
#define AUTONOMY_REPORT_S 300

static void utc_time(char *out, size_t n, time_t t)
{
	struct tm tm;
	if (!gmtime_r(&t, &tm) || !strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, n, "1970-01-01T00:00:00Z");
}

static void report_autonomy(void *ctx)
{
	struct hub *h = ctx;
	char why[256];
	bool ok = judge_autonomy(h, why, sizeof why);
	if (!upstream_any_healthy(&h->upstream))
		return;
	time_t now = time(NULL);
	bool changed = h->reported_autonomy != (ok ? 1 : 0) || strcmp(why, h->reported_why);
	if (!changed && now - h->reported_at < AUTONOMY_REPORT_S)
		return;
	if (h->reported_autonomy != (ok ? 1 : 0) || !h->autonomy_since)
		h->autonomy_since = now;
	char hb[32], since[32];
	utc_time(hb, sizeof hb, now);
	utc_time(since, sizeof since, h->autonomy_since);
	struct buf body = BUF_INIT, uri = BUF_INIT;
	int rc = buf_printf(&body,
			    "{\"status\":{\"conditions\":[{\"type\":\"AutonomyState\","
			    "\"status\":\"%s\",\"reason\":\"%s\",\"message\":",
			    ok ? "True" : "False", ok ? "AutonomyReady" : "AutonomyNotReady");
	rc = rc ? rc
		: buf_append_json_str(
		      &body, ok ? "what the node needs to run on its own is cached" : why,
		      strlen(ok ? "what the node needs to run on its own is cached" : why));
	rc = rc ? rc
		: buf_printf(&body,
			     ",\"lastHeartbeatTime\":\"%s\",\"lastTransitionTime\":\"%s\"}]}}", hb,
			     since);
	rc = rc ? rc : buf_printf(&uri, "/api/v1/nodes/%s/status", h->cfg->node_name);
	long code = 0;
	if (rc == 0) {
		struct upstream_send_req req = {.method = "PATCH",
						.uri = uri.data,
						.content_type =
						    "application/strategic-merge-patch+json",
						.body = body.data,
						.body_len = body.len,
						.user_agent = "yurthub/" YURTHUB_VERSION,
						.timeout_s = 10};
		code = upstream_send(&h->upstream, &req);
	}
	if (code >= 200 && code < 300) {
		log_v(1, "autonomy: reported to the cloud: %s%s%s", ok ? "ready" : "not ready",
		      ok ? "" : ": ", ok ? "" : why);
		h->reported_autonomy = ok ? 1 : 0;
		snprintf(h->reported_why, sizeof h->reported_why, "%s", why);
		h->reported_at = now;
	} else {
		log_v(1, "autonomy: the node's condition not reported (HTTP %ld); again in 10 s",
		      code);
	}
	buf_free(&body);
	buf_free(&uri);
}

/* The housekeeping thread's chore every 10 s: the node's autonomy to the
 * cloud, and the service-account keys when they are due. */
static void hub_chores(void *ctx)
{
	struct hub *h = ctx;
	report_autonomy(h);
	sa_keys_refresh(h->sa_keys);
}

/* The etcd store's NOSPACE alarm, for the gauge and /v1/readyz?verbose;
 * false for the disk store. */
static bool judge_store_space(struct hub *h, struct etcd_nospace *out)
{
	memset(out, 0, sizeof *out);
	if (h->cfg->storage != STORAGE_ETCD)
		return false;
	etcd_store_nospace(h->store, out);
	atomic_store(&h->metrics.store_nospace, out->now ? 1 : 0);
	atomic_store(&h->metrics.store_nospace_refused, (int64_t)out->refused);
	return true;
}

/* /v1/readyz?verbose: each check on a line, as kube-apiserver's, and the
 * autonomy verdict, which does not make the hub unready. */
static int readyz_verbose(struct hub *h, struct request *req, int code, const char *failed)
{
	char why[256];
	bool autonomous = judge_autonomy(h, why, sizeof why);
	struct buf b = BUF_INIT;
	int rc = buf_printf(&b, "%s\n[%c]autonomy %s%s\n",
			    failed ? failed : "[+]store ok\n[+]identity ok\n[+]filters ok",
			    autonomous ? '+' : '-',
			    autonomous ? "ok" : "not ready: ", autonomous ? "" : why);
	/* like autonomy, said without making the hub unready: the filters
	 * leave the kubernetes Service alone meanwhile */
	if (rc == 0 && h->cluster && server_secure_serving(h->server))
		rc = buf_printf(&b, "[+]hub-address ok\n");
	else if (rc == 0 && h->cluster)
		rc = buf_printf(&b,
				"[-]hub-address not serving: %s; default/kubernetes and its "
				"EndpointSlice are passed as the cloud sent them\n",
				h->cfg->proxy_secure_port
				    ? "the secure port has no serving certificate"
				    : "--proxy-secure-port=0");
	/* a full etcd does not make the hub unready either: it proxies, and
	 * answers offline from what is cached; it only caches nothing new */
	struct etcd_nospace ns;
	if (rc == 0 && judge_store_space(h, &ns) && ns.now)
		rc = buf_printf(
		    &b,
		    "[-]store-space etcd is out of space (NOSPACE alarm) for %lld s, %lu "
		    "writes refused: nothing new is cached; compact and defrag etcd or "
		    "raise its --quota-backend-bytes, then `etcdctl alarm disarm`\n",
		    (long long)((clock_now_ms() - ns.since_ms) / 1000), ns.refused);
	else if (rc == 0 && h->cfg->storage == STORAGE_ETCD)
		rc = buf_printf(&b, "[+]store-space ok\n");
	rc = rc ? rc : buf_printf(&b, "readyz check %s\n", code == 200 ? "passed" : "failed");
	if (rc < 0) {
		buf_free(&b);
		return -1;
	}
	size_t len = b.len;
	return reply_bytes(req, code, buf_steal(&b), len, "text/plain; charset=utf-8");
}

static int hub_endpoint(void *ctx, struct request *req)
{
	struct hub *h = ctx;
	const char *path = req->raw_uri;
	size_t n = strcspn(path, "?");
	if (n == 11 && !strncmp(path, "/v1/healthz", n))
		return reply_text(req, 200, "OK");
	if (n == 9 && !strncmp(path, "/v1/token", n))
		return hub_identity_token_endpoint(&h->identity, req);
	if (n == 10 && !strncmp(path, "/v1/readyz", n)) {
		bool verbose = strstr(path + n, "verbose") != NULL;
		const char *why = hub_identity_not_ready(&h->identity);
		const char *failed = NULL;
		if (!atomic_load(&h->ready))
			failed = "[-]store: not ready";
		else if (why) /* nothing to answer with yet, online or not */
			failed = why;
		/* the start-up rule: online or offline, not before the filters'
		 * view is listed from the cloud or loaded from the cache */
		struct buf filters = BUF_INIT;
		if (!failed && h->cluster && !cluster_synced(h->cluster)) {
			if (buf_append_str(&filters, "[-]filters: the filters' view of the cluster "
						     "is not synced; missing: ") < 0 ||
			    cluster_describe_missing(h->cluster, &filters) < 0) {
				buf_free(&filters);
				return -1;
			}
			failed = buf_cstr(&filters);
		}
		int rc;
		if (verbose && atomic_load(&h->ready))
			rc = readyz_verbose(h, req, failed ? 503 : 200, failed);
		else if (!atomic_load(&h->ready))
			rc = reply_text(req, 503, "the store is not ready");
		else
			rc = failed ? reply_text(req, 503, failed) : reply_text(req, 200, "OK");
		buf_free(&filters);
		return rc;
	}
	if (n == 8 && !strncmp(path, "/metrics", n)) {
		if (atomic_load(&h->ready)) {
			char why[256];
			struct etcd_nospace ns;
			judge_autonomy(h, why, sizeof why);
			judge_store_space(h, &ns);
		}
		struct buf b = BUF_INIT;
		if (metrics_render(&h->metrics, &b) < 0) {
			buf_free(&b);
			return -1;
		}
		size_t len = b.len;
		return reply_bytes(req, 200, buf_steal(&b), len,
				   "text/plain; version=0.0.4; charset=utf-8");
	}
	return reply_text(req, 404, "404 page not found\n");
}

/* yurt-hub-cfg's cache_agents, from the cluster's informer. */
static void set_cache_agents(void *ctx, const char *const *names, size_t n)
{
	struct hub *h = ctx;
	if (cache_agents_set_extra(&h->agents, names, n) < 0)
		log_error("out of memory: the configmap's cache agents are not applied");
}

/* Where the hub's own informers read: its plain proxy port, on loopback
 * when it listens on every address.  NULL when that port is off. */
static char *own_proxy_url(const struct config *cfg)
{
	if (!cfg->proxy_port)
		return NULL;
	const char *host = cfg->bind_proxy_address;
	if (!strcmp(host, "0.0.0.0") || !*host)
		host = "127.0.0.1";
	else if (!strcmp(host, "::"))
		host = "::1";
	bool v6 = strchr(host, ':') != NULL;
	return str_printf("http://%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", cfg->proxy_port);
}

/* The store refused a write: the multiplexer's upstream lists again. */
static void store_refused(void *ctx, const char *component, const char *path)
{
	multiplexer_store_failed(ctx, component, path);
}

/* Whether the hub's own relists can reach the cloud (cache/behind.h). */
static bool cloud_reachable(void *ctx)
{
	return upstream_any_healthy(ctx);
}

/* The informers' epoch: the cloud's health changed (informer.h). */
static unsigned long cloud_epoch(void *ctx)
{
	return health_generation(ctx);
}

static void leader_hub_changed(void *ctx, const struct leader_hub *lh, bool known)
{
	struct hub *h = ctx;
	hub_pool_apply(&h->pool, lh, known);
}

/* The address masterservice, forwardkubesvctraffic and serviceenvupdater
 * give pods is the secure port's: they rewrite only while it serves
 * (docs/filters.md).  Asked by request threads, which exist only once
 * server_start() has set h->server. */
static bool hub_port_serving(void *ctx)
{
	struct hub *h = ctx;
	bool serving = server_secure_serving(h->server);
	int was = atomic_load(&h->hub_port_seen);
	if (was == (int)serving) /* the common case: no write to a shared line */
		return serving;
	was = atomic_exchange(&h->hub_port_seen, serving);
	if (was == (int)serving) /* another thread said it */
		return serving;
	/* a port the operator turned off is a choice, said once at -v 1; a
	 * port that should serve and does not is worth a warning */
	if (!serving && !h->cfg->proxy_secure_port)
		log_v(1,
		      "filters: there is no secure port (--proxy-secure-port=0): "
		      "default/kubernetes, its EndpointSlice and pods' KUBERNETES_SERVICE_HOST go "
		      "to node components as the cloud sent them");
	else if (!serving)
		log_warn("filters: the secure port does not serve (no serving certificate yet): "
			 "default/kubernetes, its EndpointSlice and pods' KUBERNETES_SERVICE_HOST "
			 "go to node components as the cloud sent them");
	else if (was == 0)
		log_msg('I', 0,
			"filters: the secure port %d serves: default/kubernetes and its "
			"EndpointSlice point pods at the hub from now on",
			h->cfg->proxy_secure_port);
	return serving;
}

/* The filters' view is in: the hub is ready (when its identity is). */
static void cluster_synced_now(void *ctx)
{
	(void)ctx;
	log_msg('I', 0, "yurthub ready");
}

static int start_cluster(struct hub *h)
{
	const struct config *cfg = h->cfg;
	h->hub_port = str_printf("%d", cfg->proxy_secure_port);
	if ((cfg->proxy_port && !h->proxy_url) || !h->hub_port)
		return -1;
	struct cluster_settings s = {
	    .proxy_url = h->proxy_url,
	    .user_agent = "yurthub/" YURTHUB_VERSION,
	    .node_name = cfg->node_name,
	    .pool_name = cfg->nodepool_name,
	    .namespace = cfg->namespace,
	    .hub_host = cfg->enable_dummy_if ? cfg->dummy_if_ip : cfg->bind_proxy_address,
	    .hub_port = h->hub_port,
	    .hub_serving = hub_port_serving,
	    .enable_node_pool = cfg->enable_node_pool,
	    .pool_service_topology = cfg->enable_pool_service_topology,
	    .filters_on = cfg->enable_resource_filter,
	    .disabled = (const char *const *)cfg->disabled_resource_filters.v,
	    .ndisabled = cfg->disabled_resource_filters.n,
	    .cloud_mode = cfg->working_mode == MODE_CLOUD,
	    .on_cache_agents = set_cache_agents,
	    .on_leader_hub = h->proxy.mux ? leader_hub_changed : NULL,
	    .pool_members = h->proxy.mux && cfg->multiplexer_port,
	    .on_synced = cluster_synced_now,
	    .ctx = h,
	    .epoch = cloud_epoch,
	    .epoch_ctx = h->health,
	};
	return (h->cluster = cluster_new(&s)) ? 0 : -1;
}

/* The multiplexer (proxy/multiplexer.h) for --pool-scope-resources (none
 * is fine: the pool's configmap may name some); edge mode only: in cloud mode there is no cache to
 * serve its upstream from offline, and clients go to the cloud as before. */
static int start_multiplexer(struct hub *h)
{
	if (h->cfg->working_mode == MODE_CLOUD || !h->proxy_url)
		return 0;
	const struct strlist *set = &h->cfg->pool_scope_resources;
	h->proxy.mux =
	    multiplexer_new(h->proxy_url, h->cfg->node_name, (const char *const *)set->v, set->n);
	if (!h->proxy.mux)
		return -1;
	multiplexer_set_cloud(h->proxy.mux, &h->upstream, cloud_epoch, h->health);
	if (h->cache)
		cache_manager_on_failure(h->cache, store_refused, h->proxy.mux);
	/* the pool's leader-hub configmap is read first (hub_pool_apply) */
	multiplexer_hold(h->proxy.mux, MUX_HOLD_FOR_POOL_MS);
	return 0;
}

/* ---- the dummy interface (docs/install.md) ---- */

/* Make the dummy interface (--enable-dummy-if) and return its address, on
 * which both proxy ports then listen too; NULL without it - not asked for,
 * or not possible, which keeper.c has warned about - so that nothing
 * listens there. */
static const char *start_dummy_if(struct hub *h)
{
	if (!h->cfg->enable_dummy_if)
		return NULL;
	h->netif = netif_keeper_start(h->cfg->dummy_if_name, h->cfg->dummy_if_ip);
	return h->netif ? h->cfg->dummy_if_ip : NULL;
}

/* The store and what writes it; none in cloud mode. */
static int start_store(struct hub *h)
{
	if (h->cfg->working_mode == MODE_CLOUD)
		return 0;
	if (!(h->store = open_store(h->cfg)))
		return -1;
	if (!(h->housekeeping =
		  housekeeping_start(h->store, &h->metrics, h->cfg->storage == STORAGE_ETCD)))
		return -1;
	h->reported_autonomy = -1;
	if (!(h->cache = cache_manager_new(h->store, &h->metrics, CACHE_WORKERS)) ||
	    !(h->changes = local_changes_open(h->store)))
		return -1;
	cache_manager_set_local_changes(h->cache, h->changes);
	struct buf dir = BUF_INIT;
	if (buf_printf(&dir, "%s/_internal/yurthub-c/views-behind", h->cfg->disk_cache_path) < 0 ||
	    !(h->behind = views_behind_open(dir.data, &h->metrics))) {
		buf_free(&dir);
		return -1;
	}
	buf_reset(&dir);
	cache_manager_set_views_behind(h->cache, h->behind);
	if (buf_printf(&dir, "%s/_internal/yurthub-c/outbox", h->cfg->disk_cache_path) < 0)
		return -1;
	h->outbox = outbox_open(dir.data, &h->upstream, &h->metrics, OUTBOX_MAX_DEFAULT);
	buf_free(&dir);
	if (!(h->sa_keys = sa_keys_new(h->store, &h->upstream)))
		return -1;
	return h->outbox && outbox_start(h->outbox) == 0 ? 0 : -1;
}

static int start(struct hub *h)
{
	char *err = NULL;
	if (upstream_init(&h->upstream, h->cfg, &err) < 0) {
		log_error("%s", err ? err : "cannot set up the upstream");
		free(err);
		return -1;
	}
	h->proxy_url = own_proxy_url(h->cfg);
	if ((h->cfg->proxy_port && !h->proxy_url) ||
	    hub_identity_start(&h->identity, h->cfg, &h->upstream, h->proxy_url) < 0)
		return -1;
	if (cache_agents_init(&h->agents, h->cfg) < 0 ||
	    !(h->health = health_new(&h->upstream, h->cfg, &h->metrics)))
		return -1;
	if (start_store(h) < 0)
		return -1;
	atomic_store(&h->ready, true);
	/* before it starts: a CA or certificate that comes meanwhile must wake
	 * its first probe (health.c, wait_first_identity) */
	hub_identity_health(&h->identity, h->health);
	if (health_start(h->health) < 0)
		return -1;
	struct proxy *p = &h->proxy;
	p->up = &h->upstream;
	p->health = h->health;
	p->cache = h->cache;
	p->store = h->store;
	p->changes = h->changes;
	p->node_name = h->cfg->node_name;
	p->agents = &h->agents;
	p->outbox = h->outbox;
	p->sa_keys = h->sa_keys;
	if (start_multiplexer(h) < 0 || hub_pool_start(&h->pool, h->cfg, p->mux) < 0)
		return -1;
	if (h->housekeeping) /* the node's autonomy, to the cloud */
		housekeeping_every(h->housekeeping, hub_chores, h);
	p->leaders = h->pool.leaders;
	if (start_cluster(h) < 0)
		return -1;
	p->cluster = h->cluster;
	p->cloud_mode = h->cfg->working_mode == MODE_CLOUD;
	p->metrics = &h->metrics;
	p->min_request_timeout = h->cfg->min_request_timeout;
	if (proxy_init(p) < 0)
		return -1;
	h->metrics.max_in_flight = h->cfg->max_requests_in_flight;
	h->gate.m = &h->metrics;
	struct server_routes routes = {.proxy = proxy_handle,
				       .proxy_ctx = &h->proxy,
				       .peer = proxy_handle_peer,
				       .peer_admit = proxy_admit_peer,
				       .hub = hub_endpoint,
				       .hub_ctx = h,
				       .metrics = &h->metrics,
				       .gate = &h->gate};
	if (server_start(h->cfg, &routes, start_dummy_if(h), h->identity.client_ca, &h->server) < 0)
		return -1;
	h->pool.server = h->server; /* before the informers: it may lead */
	hub_identity_listening(&h->identity, h->server);
	/* the informers, and the relists of views behind the cloud, go
	 * through the proxy port, open from here on */
	if (h->behind && h->proxy_url &&
	    views_behind_start(h->behind, h->proxy_url, cloud_reachable, &h->upstream) < 0)
		return -1;
	return cluster_run(h->cluster);
}

static void stop(struct hub *h)
{
	/* first: its autonomy chore reads the multiplexer and the store */
	housekeeping_stop(h->housekeeping);
	h->housekeeping = NULL;
	views_behind_stop(h->behind); /* its relist goes through the proxy */
	proxy_stop(&h->proxy);
	cache_manager_stop(h->cache);	 /* a list being decoded is dropped, not finished */
	multiplexer_close(h->proxy.mux); /* its watchers end, its upstreams stop */
	server_quiesce(h->server);
	proxy_end_upgrades(&h->proxy); /* before libmicrohttpd stops */
	/* its certificate threads still run, and may start the secure port */
	hub_identity_unlisten(&h->identity);
	server_stop(h->server);		/* joins every connection thread */
	netif_keeper_stop(h->netif);	/* once nothing listens on it */
	cluster_free(h->cluster);	/* its informers' requests ended with the server */
	multiplexer_free(h->proxy.mux); /* no reader left */
	hub_pool_stop(&h->pool);
	free(h->proxy_url);
	free(h->hub_port);
	proxy_free(&h->proxy);
	outbox_close(h->outbox);
	hub_identity_stop(&h->identity); /* its hooks use the health checker */
	health_free(h->health);
	cache_manager_free(h->cache); /* finishes the objects and events queued */
	views_behind_free(h->behind); /* the workers that marked views are gone */
	housekeeping_stop(h->housekeeping);
	local_changes_free(h->changes); /* the manager that used it is gone */
	sa_keys_free(h->sa_keys);	/* no connection and no chore left */
	store_close(h->store);
	upstream_free(&h->upstream);
	cache_agents_free(&h->agents);
	metrics_free(&h->metrics);
}

int hub_run(const struct config *cfg)
{
	struct hub h;
	memset(&h, 0, sizeof h);
	h.cfg = cfg;
	atomic_init(&h.hub_port_seen, -1);
	/* One malloc arena per thread would keep each connection's freed
	 * memory apart: a few shared arenas keep the footprint small. */
	mallopt(M_ARENA_MAX, 2);
	log_set_verbosity(cfg->verbosity);
	log_set_format(strcmp(cfg->log_format, "json") ? LOG_TEXT : LOG_JSON);
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK || metrics_init(&h.metrics) < 0) {
		log_error("cannot initialise libcurl");
		return 1;
	}
	log_startup(cfg);
	int status = 0;
	if (start(&h) < 0) {
		status = 1;
	} else {
		/* "yurthub ready" comes when the filters' view is in
		 * (cluster_synced_now) */
		int sig = 0;
		sigwait(&sigs, &sig);
		log_msg('I', 0, "yurthub stopping (signal %d)", sig);
	}
	stop(&h);
	curl_global_cleanup();
	return status;
}
