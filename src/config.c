/*
 * config.c - flags, defaults and validation, see config.h.
 *
 * One table describes every flag: its type, where it lands in struct config,
 * its default and its help text.  --help and the man page are printed from
 * the same table, so they cannot drift from what the parser accepts.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "filter/filter.h"
#include "netif/dummy.h"
#include "util/buf.h"

enum flag_type { F_STR, F_INT, F_BOOL, F_LIST, F_DURATION, F_IGNORED, F_IGNORED_BOOL };

struct flag {
	const char *name;
	enum flag_type type;
	size_t offset;
	const char *def; /* default as text, for help */
	const char *help;
};

#define OFF(field) offsetof(struct config, field)

static const struct flag flags[] = {
    {"server-addr", F_LIST, OFF(server_addr), "",
     "API server URLs of the cloud, comma-separated (http:// or https://). Required."},
    {"node-name", F_STR, OFF(node_name), "", "Name of this node. Required."},
    {"lb-mode", F_STR, OFF(lb_mode_name), "rr",
     "How to spread requests over healthy servers: rr (round robin) or priority (first healthy in "
     "--server-addr order)."},
    {"bind-address", F_STR, OFF(bind_address), "127.0.0.1",
     "Address of the hub's own endpoints (/v1/healthz, /v1/readyz, /metrics)."},
    {"serve-port", F_INT, OFF(serve_port), "10267", "Port of the hub's own endpoints."},
    {"bind-proxy-address", F_STR, OFF(bind_proxy_address), "127.0.0.1",
     "Address the proxy listens on. Plain HTTP is meant for loopback; binding elsewhere is logged "
     "as a warning."},
    {"proxy-port", F_INT, OFF(proxy_port), "10261", "Plain HTTP proxy port."},
    {"proxy-secure-port", F_INT, OFF(proxy_secure_port), "10268",
     "HTTPS proxy port; clients must present a certificate signed by --client-ca-file. 0 turns it "
     "off."},
    {"client-ca-file", F_STR, OFF(client_ca_file), "",
     "CA bundle that signs the certificates of clients of the secure port."},
    {"tls-cert-file", F_STR, OFF(tls_cert_file), "",
     "Server certificate of the secure port (PEM)."},
    {"tls-private-key-file", F_STR, OFF(tls_private_key_file), "",
     "Private key of --tls-cert-file (PEM)."},
    {"disk-cache-path", F_STR, OFF(disk_cache_path), "/etc/kubernetes/cache/",
     "Cache directory of the disk store (YurtHub's layout)."},
    {"storage", F_STR, OFF(storage_name), "disk",
     "Storage backend: disk, or etcd (a pool's shared etcd, see --etcd-servers)."},
    {"etcd-servers", F_LIST, OFF(etcd_servers), "",
     "etcd client URLs, comma-separated (with --storage=etcd)."},
    {"etcd-prefix", F_STR, OFF(etcd_prefix), "/registry",
     "Key prefix in etcd, as kube-apiserver's --etcd-prefix."},
    {"etcd-cafile", F_STR, OFF(etcd_cafile), "", "CA bundle of the etcd servers."},
    {"etcd-certfile", F_STR, OFF(etcd_certfile), "", "Client certificate for etcd."},
    {"etcd-keyfile", F_STR, OFF(etcd_keyfile), "", "Client key for etcd."},
    {"kubeconfig", F_STR, OFF(kubeconfig), "",
     "kubeconfig with the hub's identity towards the cloud (client certificate and key, CA, or "
     "token)."},
    {"client-cert-file", F_STR, OFF(client_cert_file), "",
     "Client certificate towards the cloud (instead of --kubeconfig)."},
    {"client-key-file", F_STR, OFF(client_key_file), "", "Client key towards the cloud."},
    {"ca-file", F_STR, OFF(ca_file), "", "CA bundle of the cloud's API servers."},
    {"token-file", F_STR, OFF(token_file), "", "Bearer token towards the cloud."},
    {"cache-agents", F_LIST, OFF(cache_agents), "",
     "Components to cache besides kubelet, kube-proxy, flanneld, coredns, raven-agent-ds, "
     "yurttunnel-agent and yurthub; * caches every component."},
    {"working-mode", F_STR, OFF(working_mode_name), "edge",
     "edge: proxy, filter and cache, and answer from the cache while the cloud is unreachable. "
     "cloud: proxy and filter only - no cache, no offline answers - and the filters "
     "discardcloudservice, forwardkubesvctraffic and serviceenvupdater off. (YurtHub's local "
     "mode is not supported and refused.)"},
    {"enable-resource-filter", F_BOOL, OFF(enable_resource_filter), "true",
     "Rewrite what the cloud answers node components with OpenYurt's response filters "
     "(docs/filters.md); false: pass every answer unchanged."},
    {"disabled-resource-filters", F_LIST, OFF(disabled_resource_filters), "",
     "Filters not to run, comma-separated (masterservice, servicetopology, discardcloudservice, "
     "nodeportisolation, inclusterconfig, forwardkubesvctraffic, serviceenvupdater); * turns "
     "every filter off."},
    {"nodepool-name", F_STR, OFF(nodepool_name), "",
     "Pool of this node, for the servicetopology and nodeportisolation filters; empty: the "
     "node's apps.openyurt.io/nodepool label."},
    {"enable-node-pool", F_BOOL, OFF(enable_node_pool), "true",
     "servicetopology's pool topology (openyurt.io/nodepool, kubernetes.io/zone) keeps the "
     "endpoints of the nodes in this node's NodePool (apps.openyurt.io/v1beta2 status.nodes)."},
    {"enable-pool-service-topology", F_BOOL, OFF(enable_pool_service_topology), "false",
     "Take the pool's nodes from its NodeBuckets (apps.openyurt.io/v1alpha1, label "
     "openyurt.io/pool-name) instead of the NodePool."},
    {"namespace", F_STR, OFF(namespace), "kube-system",
     "Namespace of the hub's configmap yurt-hub-cfg (filters' extra components, cache agents)."},
    {"enable-dummy-if", F_BOOL, OFF(enable_dummy_if), "true",
     "Make the dummy interface --dummy-if-name holding --dummy-if-ip (needs CAP_NET_ADMIN; "
     "without it the hub warns and goes on without the interface), keep it (checked every 60 s) "
     "and delete it at stop; both proxy ports listen on --dummy-if-ip too, and the filters point "
     "in-cluster clients at --dummy-if-ip and --proxy-secure-port. false: no interface, and the "
     "filters point at --bind-proxy-address."},
    {"dummy-if-name", F_STR, OFF(dummy_if_name), "hub-dummy0",
     "Name of the dummy interface: 1 to 15 characters, no '/', ':' or white space. A link of "
     "that name that is not a dummy is never used nor deleted."},
    {"dummy-if-ip", F_STR, OFF(dummy_if_ip), "",
     "The hub's address for in-cluster clients: in 169.254.0.0/16, outside 169.254.31.0/24 and "
     "not 169.254.1.1, or an IPv6 address; empty: 169.254.2.1 (fd00::2:1 when --bind-address is "
     "IPv6)."},
    {"bootstrap-mode", F_STR, OFF(bootstrap_mode_name), "token",
     "How the hub gets its client certificate (docs/install.md). token: by CSR, authenticated "
     "with a bootstrap token from --bootstrap-file or --join-token, rotated by the hub; without "
     "either, the identity flags above are used as given. kubeletcertificate: kubelet's "
     "certificate (/var/lib/kubelet/pki/kubelet-client-current.pem, CA "
     "/etc/kubernetes/pki/ca.crt, or --client-cert-file, --client-key-file and --ca-file), "
     "followed as kubelet rotates it."},
    {"bootstrap-file", F_STR, OFF(bootstrap_file), "",
     "kubeconfig with a bootstrap token and the cluster CA (as yurtadm join writes it), for "
     "--bootstrap-mode=token."},
    {"join-token", F_STR, OFF(join_token), "",
     "Bootstrap token (abcdef.0123456789abcdef): the hub finds the cluster CA by kubeadm's "
     "token discovery and writes <root-dir>/bootstrap-hub.conf."},
    {"discovery-token-ca-cert-hash", F_LIST, OFF(discovery_ca_hashes), "",
     "Pins of the cluster CA for token discovery, sha256:<hex of the public key's SHA-256>, "
     "comma-separated; the CA must match one."},
    {"discovery-token-unsafe-skip-ca-verification", F_BOOL, OFF(discovery_unsafe_skip), "false",
     "Accept the CA found by token discovery without a pin (the token's signature still "
     "vouches for it)."},
    {"root-dir", F_STR, OFF(root_dir), "/var/lib/yurthub",
     "Directory of the hub's identity: bootstrap-hub.conf, yurthub.conf, pki/ (certificates "
     "and keys)."},
    {"hub-cert-organizations", F_LIST, OFF(hub_cert_organizations), "",
     "Organizations added to the hub's client certificate besides openyurt:yurthub and "
     "system:nodes, comma-separated."},
    {"node-ip", F_STR, OFF(node_ip), "",
     "This node's IP address, added to the secure port's certificate."},
    {"pool-scope-resources", F_LIST, OFF(pool_scope_resources),
     "/v1/services,discovery.k8s.io/v1/endpointslices",
     "Resources (group/version/resource, an empty group for core, comma-separated) whose "
     "lists and watches the node's components share: one upstream list and watch each, "
     "served from memory (docs/sharing.md). Replaces the default (YurtHub adds to it); "
     "empty turns sharing off. The pool's leader-hub-<pool> configmap replaces it in turn."},
    {"multiplexer-port", F_INT, OFF(multiplexer_port), "10269",
     "Port on which a pool's leader hub serves the pool-scope resources to the other hubs of "
     "its pool, over TLS, to clients with a node certificate of the cluster CA; 0: never."},
    {"heartbeat-interval-seconds", F_INT, OFF(heartbeat_interval_seconds), "10",
     "Seconds between health probes of each server."},
    {"heartbeat-timeout-seconds", F_INT, OFF(heartbeat_timeout_seconds), "2",
     "Timeout of one health probe."},
    {"heartbeat-failed-retry", F_INT, OFF(heartbeat_failed_retry), "3",
     "Failed probes after which a server is unhealthy."},
    {"heartbeat-healthy-threshold", F_INT, OFF(heartbeat_healthy_threshold), "2",
     "Successful probes after which a server is healthy again."},
    {"min-request-timeout", F_DURATION, OFF(min_request_timeout), "1800s",
     "Offline watches without timeoutSeconds last a random time between this and twice this; "
     "at least 1s."},
    {"max-requests-in-flight", F_INT, OFF(max_requests_in_flight), "250",
     "Requests served at once, watches and other long-running requests (exec, attach, logs, "
     "port-forward, proxy) not counted; more are answered 429 TooManyRequests with "
     "Retry-After: 1, as kube-apiserver does."},
    {"v", F_INT, OFF(verbosity), "0",
     "Log verbosity: 0 errors, warnings and lifecycle lines (start, ready, an upstream's "
     "health changing, stop), 1 events, 2 details, 4 every request and debug."},
    {"log-format", F_STR, OFF(log_format), "text",
     "Log format: text or json (one JSON object per line)."},
    {"help", F_BOOL, OFF(help), "false", "Print this help and exit."},
    {"version", F_BOOL, OFF(version), "false", "Print the version and exit."},
    /* YurtHub flags without a meaning here: accepted so that its manifests work. */
    {"kubelet-health-grace-period", F_IGNORED, 0, "", NULL},
    {"gc-frequency", F_IGNORED, 0, "", NULL},
    {"enable-iptables", F_IGNORED_BOOL, 0, "", NULL},
    {"profiling", F_IGNORED_BOOL, 0, "", NULL},
    {"host-control-plane-address", F_IGNORED, 0, "", NULL},
    /* the older YurtHub's pool coordinator and its leader election */
    {"enable-coordinator", F_IGNORED_BOOL, 0, "", NULL},
    {"coordinator-server-addr", F_IGNORED, 0, "", NULL},
    {"coordinator-storage-addr", F_IGNORED, 0, "", NULL},
    {"coordinator-storage-prefix", F_IGNORED, 0, "", NULL},
    {"leader-elect", F_IGNORED_BOOL, 0, "", NULL},
    {"leader-elect-lease-duration", F_IGNORED, 0, "", NULL},
    {"leader-elect-renew-deadline", F_IGNORED, 0, "", NULL},
    {"leader-elect-retry-period", F_IGNORED, 0, "", NULL},
    {"leader-elect-resource-lock", F_IGNORED, 0, "", NULL},
    {"leader-elect-resource-name", F_IGNORED, 0, "", NULL},
    {"leader-elect-resource-namespace", F_IGNORED, 0, "", NULL},
    /* klog's flags, which YurtHub's manifests may carry (-v is ours) */
    {"logtostderr", F_IGNORED_BOOL, 0, "", NULL},
    {"alsologtostderr", F_IGNORED_BOOL, 0, "", NULL},
    {"log-dir", F_IGNORED, 0, "", NULL},
    {"log-file", F_IGNORED, 0, "", NULL},
    {"log-file-max-size", F_IGNORED, 0, "", NULL},
    {"log_dir", F_IGNORED, 0, "", NULL},
    {"log_file", F_IGNORED, 0, "", NULL},
    {"log_file_max_size", F_IGNORED, 0, "", NULL},
    {"add_dir_header", F_IGNORED_BOOL, 0, "", NULL},
    {"skip_headers", F_IGNORED_BOOL, 0, "", NULL},
    {"skip_log_headers", F_IGNORED_BOOL, 0, "", NULL},
    {"one_output", F_IGNORED_BOOL, 0, "", NULL},
    {"stderrthreshold", F_IGNORED, 0, "", NULL},
    {"vmodule", F_IGNORED, 0, "", NULL},
};

#define NFLAGS (sizeof flags / sizeof flags[0])

void strlist_free(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int strlist_add(struct strlist *l, const char *s, size_t len)
{
	char **v = realloc(l->v, (l->n + 1) * sizeof *v);
	if (!v)
		return -1;
	l->v = v;
	if (!(l->v[l->n] = strndup(s, len)))
		return -1;
	l->n++;
	return 0;
}

int strlist_split(struct strlist *l, const char *csv)
{
	strlist_free(l);
	while (csv && *csv) {
		const char *comma = strchr(csv, ',');
		size_t n = comma ? (size_t)(comma - csv) : strlen(csv);
		/* trim blanks around each element */
		const char *s = csv;
		while (n && (*s == ' ' || *s == '\t'))
			s++, n--;
		while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (n && strlist_add(l, s, n) < 0)
			return -1;
		csv = comma ? comma + 1 : NULL;
	}
	return 0;
}

static bool gvr_part_ok(const char *s, size_t n, bool may_be_empty)
{
	if (!n)
		return may_be_empty;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '-')
			return false;
	return true;
}

bool config_gvr_ok(const char *gvr)
{
	const char *s1 = strchr(gvr, '/');
	const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
	return s2 && !strchr(s2 + 1, '/') && gvr_part_ok(gvr, (size_t)(s1 - gvr), true) &&
	       gvr_part_ok(s1 + 1, (size_t)(s2 - s1 - 1), false) &&
	       gvr_part_ok(s2 + 1, strlen(s2 + 1), false);
}

bool strlist_has(const struct strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return true;
	return false;
}

long config_parse_duration(const char *s)
{
	if (!s || *s < '0' || *s > '9')
		return -1; /* no sign, no blank: as Go's time.ParseDuration */
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!errno && *end == '\0' && v >= 0)
		return v; /* plain seconds */
	long total = 0;
	const char *p = s;
	while (*p) {
		if (*p < '0' || *p > '9')
			return -1;
		errno = 0;
		v = strtol(p, &end, 10);
		if (errno || end == p)
			return -1;
		long mult;
		switch (*end) {
		case 'h':
			mult = 3600;
			break;
		case 'm':
			mult = 60;
			break;
		case 's':
			mult = 1;
			break;
		default:
			return -1;
		}
		if (v > (LONG_MAX - total) / mult)
			return -1;
		total += v * mult;
		p = end + 1;
	}
	return total;
}

static char **str_field(struct config *c, size_t off)
{
	return (char **)((char *)c + off);
}

static int set_str(char **dst, const char *v)
{
	char *s = strdup(v);
	if (!s)
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

void config_init(struct config *c)
{
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag *f = &flags[i];
		switch (f->type) {
		case F_STR:
			set_str(str_field(c, f->offset), f->def);
			break;
		case F_INT:
			*(int *)((char *)c + f->offset) = atoi(f->def);
			break;
		case F_DURATION:
			*(int *)((char *)c + f->offset) = (int)config_parse_duration(f->def);
			break;
		case F_BOOL:
			*(bool *)((char *)c + f->offset) = !strcmp(f->def, "true");
			break;
		case F_LIST:
			if (strlist_split((struct strlist *)((char *)c + f->offset), f->def) < 0)
				c->init_failed = true;
			break;
		default:
			break;
		}
	}
}

void config_free(struct config *c)
{
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag *f = &flags[i];
		if (f->type == F_STR)
			free(*str_field(c, f->offset));
		else if (f->type == F_LIST)
			strlist_free((struct strlist *)((char *)c + f->offset));
	}
	strlist_free(&c->ignored);
	memset(c, 0, sizeof *c);
}

static char *msg(const char *fmt, const char *a, const char *b)
{
	struct buf m = BUF_INIT;
	if (buf_printf(&m, fmt, a, b ? b : "") < 0)
		return NULL;
	return buf_steal(&m);
}

static const struct flag *find_flag(const char *name, size_t len)
{
	for (size_t i = 0; i < NFLAGS; i++)
		if (strlen(flags[i].name) == len && !strncmp(flags[i].name, name, len))
			return &flags[i];
	return NULL;
}

static int parse_bool(const char *v, bool *out)
{
	/* Go's strconv.ParseBool, which YurtHub's flags use. */
	static const char *yes[] = {"1", "t", "T", "TRUE", "true", "True"};
	static const char *no[] = {"0", "f", "F", "FALSE", "false", "False"};
	for (size_t i = 0; i < 6; i++) {
		if (!strcmp(v, yes[i]))
			return *out = true, 0;
		if (!strcmp(v, no[i]))
			return *out = false, 0;
	}
	return -1;
}

static int set_flag(struct config *c, const struct flag *f, const char *v, char **err)
{
	void *dst = (char *)c + f->offset;
	switch (f->type) {
	case F_STR:
		if (set_str(dst, v) < 0)
			goto nomem;
		return 0;
	case F_LIST:
		if (strlist_split(dst, v) < 0)
			goto nomem;
		return 0;
	case F_INT: {
		char *end;
		errno = 0;
		long n = strtol(v, &end, 10);
		bool starts_ok =
		    (*v >= '0' && *v <= '9') || (*v == '-' && v[1] >= '0' && v[1] <= '9');
		if (!starts_ok || *end || errno || n < INT_MIN || n > INT_MAX) {
			*err =
			    msg("invalid value \"%s\" for flag --%s: not an integer", v, f->name);
			return -1;
		}
		*(int *)dst = (int)n;
		return 0;
	}
	case F_DURATION: {
		long n = config_parse_duration(v);
		if (n < 0 || n > INT_MAX) {
			*err = msg(
			    "invalid value \"%s\" for flag --%s: not a duration (e.g. 1800s, 30m)",
			    v, f->name);
			return -1;
		}
		*(int *)dst = (int)n;
		return 0;
	}
	case F_BOOL:
	case F_IGNORED_BOOL: {
		bool b;
		if (parse_bool(v, &b) < 0) {
			*err = msg("invalid value \"%s\" for flag --%s: not a boolean", v, f->name);
			return -1;
		}
		if (f->type == F_BOOL)
			*(bool *)dst = b;
		else if (strlist_add(&c->ignored, f->name, strlen(f->name)) < 0)
			goto nomem;
		return 0;
	}
	case F_IGNORED:
		if (strlist_add(&c->ignored, f->name, strlen(f->name)) < 0)
			goto nomem;
		return 0;
	}
nomem:
	*err = strdup("out of memory");
	return -1;
}

int config_parse(struct config *c, int argc, char **argv, char **err)
{
	*err = NULL;
	for (int i = 0; i < argc; i++) {
		const char *arg = argv[i];
		if (arg[0] != '-' || !arg[1]) {
			*err = msg("unexpected argument \"%s\"%s", arg, NULL);
			return -1;
		}
		const char *name = arg + 1 + (arg[1] == '-');
		const char *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct flag *f = find_flag(name, len);
		if (!f) {
			*err = msg("unknown flag: %s%s", arg, NULL);
			return -1;
		}
		const char *value = eq ? eq + 1 : NULL;
		bool is_bool = f->type == F_BOOL || f->type == F_IGNORED_BOOL;
		if (!value && is_bool)
			value = "true";
		if (!value) {
			if (i + 1 >= argc) {
				*err = msg("flag needs an argument: --%s%s", f->name, NULL);
				return -1;
			}
			value = argv[++i];
		}
		if (set_flag(c, f, value, err) < 0)
			return -1;
	}
	return 0;
}

static bool port_ok(int p)
{
	return p >= 0 && p <= 65535;
}

static bool url_ok(const char *u)
{
	const char *rest = !strncmp(u, "http://", 7)	? u + 7
			   : !strncmp(u, "https://", 8) ? u + 8
							: NULL;
	return rest && *rest && *rest != '/';
}

/* host, host:port, [v6] or [v6]:port, and nothing else */
static bool bare_host_port(const char *u)
{
	const char *p = u;
	if (*p == '[') {
		p = strchr(u, ']');
		if (!p || p == u + 1 ||
		    strspn(u + 1, "0123456789abcdefABCDEF:.") != (size_t)(p - u - 1))
			return false;
		p++;
	} else {
		size_t n =
		    strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
		if (!n)
			return false;
		p += n;
	}
	if (*p == ':') {
		size_t d = strspn(++p, "0123456789");
		if (!d)
			return false;
		p += d;
	}
	return !*p;
}

/* "10.0.0.1:6443" is https://10.0.0.1:6443, as YurtHub reads it; anything
 * else without a scheme stays as written and is refused. */
static int scheme_default(char **url)
{
	if (!bare_host_port(*url))
		return 0;
	struct buf b = BUF_INIT;
	if (buf_printf(&b, "https://%s", *url) < 0)
		return -1;
	free(*url);
	*url = buf_steal(&b);
	return 0;
}

/* "https://user:pass@host": the URL is logged and is a metrics label, so a
 * password in it would leak; identity belongs in --kubeconfig/--token-file. */
static bool url_has_userinfo(const char *u)
{
	const char *host = strstr(u, "://");
	host = host ? host + 3 : u;
	size_t authority = strcspn(host, "/?#");
	return memchr(host, '@', authority) != NULL;
}

static int check_readable(const char *flag, const char *path, char **err)
{
	if (!path || !*path)
		return 0;
	struct stat st;
	const char *why = NULL;
	if (stat(path, &st) < 0 || access(path, R_OK) < 0)
		why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	if (!why)
		return 0;
	struct buf m = BUF_INIT;
	if (buf_printf(&m, "invalid value \"%s\" for flag --%s: %s", path, flag, why) == 0)
		*err = buf_steal(&m);
	return -1;
}

/* --dummy-if-ip as YurtHub checks it: a link-local IPv4 address outside
 * what other node agents take (169.254.31.0/24, 169.254.1.1), or IPv6. */
static bool dummy_ip_ok(const char *ip)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET6, ip, &a6) == 1)
		return true;
	if (inet_pton(AF_INET, ip, &a4) != 1)
		return false;
	uint32_t a = ntohl(a4.s_addr);
	return (a >> 16) == 0xA9FE && (a >> 8) != 0xA9FE1F && a != 0xA9FE0101;
}

static int validate_modes(struct config *c, char **err)
{
	if (!strcmp(c->working_mode_name, "edge"))
		c->working_mode = MODE_EDGE;
	else if (!strcmp(c->working_mode_name, "cloud"))
		c->working_mode = MODE_CLOUD;
	else if (!strcmp(c->working_mode_name, "local"))
		return *err = strdup("invalid value \"local\" for flag --working-mode: local mode "
				     "(iptables balancing to tenant API servers) is not supported "
				     "by this hub; want edge or cloud"),
		       -1;
	else
		return *err = msg("invalid value \"%s\" for flag --working-mode: want edge or "
				  "cloud",
				  c->working_mode_name, NULL),
		       -1;
	char *why = NULL;
	if (filter_config_check_names((const char *const *)c->disabled_resource_filters.v,
				      c->disabled_resource_filters.n, &why) < 0) {
		*err = msg("invalid value for flag --disabled-resource-filters: %s%s",
			   why ? why : "out of memory", NULL);
		free(why);
		return -1;
	}
	if (!*c->dummy_if_ip &&
	    set_str(&c->dummy_if_ip, strchr(c->bind_address, ':') ? "fd00::2:1" : "169.254.2.1") <
		0)
		return *err = strdup("out of memory"), -1;
	if (!dummy_ip_ok(c->dummy_if_ip))
		return *err = msg("invalid value \"%s\" for flag --dummy-if-ip: want an IPv4 "
				  "address in 169.254.0.0/16, outside 169.254.31.0/24 and not "
				  "169.254.1.1, or an IPv6 address%s",
				  c->dummy_if_ip, NULL),
		       -1;
	/* as Linux checks it: refused here rather than warned about at start */
	if (!dummy_name_ok(c->dummy_if_name))
		return *err = msg("invalid value \"%s\" for flag --dummy-if-name: want 1 to 15 "
				  "characters, no '/', ':' or white space, not . or ..%s",
				  c->dummy_if_name, NULL),
		       -1;
	if (!*c->namespace)
		return *err = strdup("invalid value for flag --namespace: empty"), -1;
	return 0;
}

static bool pin_ok(const char *p)
{
	if (strncasecmp(p, "sha256:", 7) || strlen(p + 7) != 64)
		return false;
	return strspn(p + 7, "0123456789abcdefABCDEF") == 64;
}

static bool ip_ok(const char *s)
{
	unsigned char a[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

static int kubelet_default(char **field, const char *path)
{
	return **field ? 0 : set_str(field, path);
}

/* --bootstrap-mode and what goes with it (docs/install.md). */
static int validate_bootstrap(struct config *c, char **err)
{
	bool explicit_id = *c->kubeconfig || *c->client_cert_file || *c->token_file;
	if (!strcmp(c->bootstrap_mode_name, "token")) {
		c->bootstrap_mode =
		    *c->join_token || *c->bootstrap_file ? BOOTSTRAP_TOKEN : BOOTSTRAP_NONE;
	} else if (!strcmp(c->bootstrap_mode_name, "kubeletcertificate")) {
		c->bootstrap_mode = BOOTSTRAP_KUBELET;
	} else {
		return *err = msg("invalid value \"%s\" for flag --bootstrap-mode: want token or "
				  "kubeletcertificate",
				  c->bootstrap_mode_name, NULL),
		       -1;
	}
	for (size_t i = 0; i < c->discovery_ca_hashes.n; i++)
		if (!pin_ok(c->discovery_ca_hashes.v[i]))
			return *err = msg(
				   "invalid value \"%s\" for flag "
				   "--discovery-token-ca-cert-hash: want sha256:<64 hex digits>",
				   c->discovery_ca_hashes.v[i], NULL),
			       -1;
	if (*c->node_ip && !ip_ok(c->node_ip))
		return *err = msg("invalid value \"%s\" for flag --node-ip: not an IP address%s",
				  c->node_ip, NULL),
		       -1;
	if (c->bootstrap_mode == BOOTSTRAP_TOKEN) {
		if (explicit_id)
			return *err =
				   strdup("--join-token and --bootstrap-file give the hub its own "
					  "certificate: do not give --kubeconfig, "
					  "--client-cert-file or --token-file with them"),
			       -1;
		if (*c->join_token && !*c->bootstrap_file && !c->discovery_ca_hashes.n &&
		    !c->discovery_unsafe_skip)
			return *err = strdup("--join-token needs --discovery-token-ca-cert-hash to "
					     "check the cluster CA with (or "
					     "--discovery-token-unsafe-skip-ca-verification)"),
			       -1;
		if (!*c->root_dir)
			return *err = strdup("invalid value for flag --root-dir: empty"), -1;
	}
	if (c->bootstrap_mode == BOOTSTRAP_KUBELET) {
		if (*c->kubeconfig || *c->token_file)
			return *err =
				   strdup("--bootstrap-mode=kubeletcertificate uses kubelet's "
					  "certificate: do not give --kubeconfig or --token-file"),
			       -1;
		if (kubelet_default(&c->client_cert_file, KUBELET_CLIENT_PEM) < 0 ||
		    kubelet_default(&c->client_key_file, KUBELET_CLIENT_PEM) < 0 ||
		    kubelet_default(&c->ca_file, KUBELET_CA_FILE) < 0)
			return *err = strdup("out of memory"), -1;
		c->client_cert_may_wait = true;
	}
	return 0;
}

int config_validate(struct config *c, char **err)
{
	*err = NULL;
	if (c->init_failed)
		return *err = strdup("out of memory"), -1;
	if (c->server_addr.n == 0)
		return *err = strdup("flag --server-addr is required"), -1;
	for (size_t i = 0; i < c->server_addr.n; i++)
		if (scheme_default(&c->server_addr.v[i]) < 0)
			return *err = strdup("out of memory"), -1;
		else if (url_has_userinfo(c->server_addr.v[i]))
			return *err = strdup("invalid value for flag --server-addr: credentials in "
					     "a URL are not accepted (they would be logged); use "
					     "--kubeconfig or --token-file"),
			       -1;
		else if (!url_ok(c->server_addr.v[i]))
			return *err = msg("invalid value \"%s\" for flag --server-addr: want "
					  "http://host[:port] or https://host[:port]",
					  c->server_addr.v[i], NULL),
			       -1;
	if (!c->node_name || !*c->node_name)
		return *err = strdup("flag --node-name is required"), -1;
	if (!strcmp(c->lb_mode_name, "rr"))
		c->lb_mode = LB_RR;
	else if (!strcmp(c->lb_mode_name, "priority"))
		c->lb_mode = LB_PRIORITY;
	else
		return *err = msg("invalid value \"%s\" for flag --lb-mode: want rr or priority",
				  c->lb_mode_name, NULL),
		       -1;
	if (!strcmp(c->storage_name, "disk"))
		c->storage = STORAGE_DISK;
	else if (!strcmp(c->storage_name, "etcd"))
		c->storage = STORAGE_ETCD;
	else
		return *err = msg("invalid value \"%s\" for flag --storage: want disk or etcd",
				  c->storage_name, NULL),
		       -1;
	if (c->storage == STORAGE_ETCD && c->etcd_servers.n == 0)
		return *err = strdup("flag --etcd-servers is required with --storage=etcd"), -1;
	for (size_t i = 0; i < c->etcd_servers.n; i++)
		if (!url_ok(c->etcd_servers.v[i]))
			return *err = msg("invalid value \"%s\" for flag --etcd-servers: want "
					  "http(s)://host:port",
					  c->etcd_servers.v[i], NULL),
			       -1;
	if (c->etcd_prefix[0] != '/')
		return *err = msg("invalid value \"%s\" for flag --etcd-prefix: must start with /",
				  c->etcd_prefix, NULL),
		       -1;
	const struct {
		const char *name;
		int v;
	} ports[] = {{"serve-port", c->serve_port},
		     {"proxy-port", c->proxy_port},
		     {"proxy-secure-port", c->proxy_secure_port},
		     {"multiplexer-port", c->multiplexer_port}};
	for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++)
		if (!port_ok(ports[i].v))
			return *err = msg("invalid value for flag --%s: port out of range%s",
					  ports[i].name, NULL),
			       -1;
	const struct {
		const char *name;
		int v, min;
	} ranges[] = {{"heartbeat-interval-seconds", c->heartbeat_interval_seconds, 1},
		      {"heartbeat-timeout-seconds", c->heartbeat_timeout_seconds, 1},
		      {"heartbeat-failed-retry", c->heartbeat_failed_retry, 1},
		      {"heartbeat-healthy-threshold", c->heartbeat_healthy_threshold, 1},
		      {"max-requests-in-flight", c->max_requests_in_flight, 1},
		      {"v", c->verbosity, 0}};
	for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
		if (ranges[i].v < ranges[i].min)
			return *err = msg("invalid value for flag --%s: must be at least %s",
					  ranges[i].name, ranges[i].min ? "1" : "0"),
			       -1;
	/* Offline watches without timeoutSeconds last [min, 2 min) and online
	 * ones are cut at 2 min + 15 s: 0 would end every offline watch at once
	 * and cut every online one after 15 s.  kube-apiserver reads 0 as "no
	 * timeout", the Go YurtHub's offline watch as "end now"; neither is what
	 * an operator can want from a node proxy, so 0 is refused. */
	if (c->min_request_timeout < 1)
		return *err = strdup("invalid value for flag --min-request-timeout: must be at "
				     "least 1s (0 would end every offline watch at once)"),
		       -1;
	for (size_t i = 0; i < c->pool_scope_resources.n; i++)
		if (!config_gvr_ok(c->pool_scope_resources.v[i]))
			return *err =
				   msg("invalid value \"%s\" for flag --pool-scope-resources: want "
				       "group/version/resource (an empty group for core: "
				       "/v1/services)",
				       c->pool_scope_resources.v[i], NULL),
			       -1;
	if (validate_modes(c, err) < 0 || validate_bootstrap(c, err) < 0)
		return -1;
	if (strcmp(c->log_format, "text") && strcmp(c->log_format, "json"))
		return *err = msg("invalid value \"%s\" for flag --log-format: want text or json",
				  c->log_format, NULL),
		       -1;
	const struct {
		const char *name, *path;
	} files[] = {{"kubeconfig", c->kubeconfig},
		     /* kubelet may not have its certificate yet: the hub waits */
		     {"client-cert-file", c->client_cert_may_wait ? "" : c->client_cert_file},
		     {"client-key-file", c->client_cert_may_wait ? "" : c->client_key_file},
		     {"ca-file", c->ca_file},
		     {"token-file", c->token_file},
		     {"client-ca-file", c->client_ca_file},
		     {"tls-cert-file", c->tls_cert_file},
		     {"tls-private-key-file", c->tls_private_key_file},
		     {"etcd-cafile", c->etcd_cafile},
		     {"etcd-certfile", c->etcd_certfile},
		     {"etcd-keyfile", c->etcd_keyfile}};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		if (check_readable(files[i].name, files[i].path, err) < 0)
			return -1;
	if (!*c->client_cert_file != !*c->client_key_file)
		return *err = strdup("flags --client-cert-file and --client-key-file go together"),
		       -1;
	if (!*c->tls_cert_file != !*c->tls_private_key_file)
		return *err =
			   strdup("flags --tls-cert-file and --tls-private-key-file go together"),
		       -1;
	return 0;
}

static const char *type_word(enum flag_type t)
{
	switch (t) {
	case F_STR:
		return "string";
	case F_INT:
		return "int";
	case F_LIST:
		return "strings";
	case F_DURATION:
		return "duration";
	default:
		return "";
	}
}

void config_print_help(FILE *out)
{
	fprintf(
	    out,
	    "Usage: yurthub --server-addr=URL[,URL...] --node-name=NAME [flags]\n"
	    "       yurthub cache ls|get|verify|recover DIR ...   (see yurthub cache --help)\n\n"
	    "A node-local Kubernetes API proxy and cache that keeps the node's components\n"
	    "working while the cloud is unreachable. Drop-in for OpenYurt's YurtHub.\n\n"
	    "Flags:\n");
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag *f = &flags[i];
		if (!f->help)
			continue;
		fprintf(out, "  --%s %s\n      %s", f->name, type_word(f->type), f->help);
		if (f->def && *f->def && (f->type != F_BOOL || !strcmp(f->def, "true")))
			fprintf(out, " (default %s)", f->def);
		fputc('\n', out);
	}
	fprintf(out, "\nAccepted for compatibility with YurtHub's manifests, without effect:\n ");
	for (size_t i = 0; i < NFLAGS; i++)
		if (!flags[i].help)
			fprintf(out, " --%s", flags[i].name);
	fputc('\n', out);
}

void config_print_man_options(FILE *out)
{
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag *f = &flags[i];
		if (!f->help)
			continue;
		fputs(".TP\n.BR \\-\\-", out);
		for (const char *p = f->name; *p; p++) {
			if (*p == '-')
				fputs("\\-", out);
			else
				fputc(*p, out);
		}
		fprintf(out, " \" %s\"\n", type_word(f->type));
		for (const char *p = f->help; *p; p++) {
			if (*p == '-' || *p == '\\')
				fputc('\\', out);
			fputc(*p, out);
		}
		if (f->def && *f->def && (f->type != F_BOOL || !strcmp(f->def, "true")))
			fprintf(out, " Default: %s.", f->def);
		fputc('\n', out);
	}
}

void config_print_man_compat(FILE *out)
{
	size_t last = NFLAGS;
	for (size_t i = 0; i < NFLAGS; i++)
		if (!flags[i].help)
			last = i;
	for (size_t i = 0; i < NFLAGS; i++) {
		if (flags[i].help)
			continue;
		fputs(".BR \\-\\-", out);
		for (const char *p = flags[i].name; *p; p++) {
			if (*p == '-')
				fputc('\\', out);
			fputc(*p, out);
		}
		fputs(i == last ? " .\n" : " ,\n", out);
	}
}
