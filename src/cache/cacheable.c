/* cacheable.c - the caching rules, see cacheable.h. */
#include "cache/cacheable.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"

static const char *const default_agents[] = {
    "kubelet",	      "kube-proxy",	  "flanneld",	       "coredns",
    "raven-agent-ds", "yurttunnel-agent", "yurt-tunnel-agent", "yurthub",
};

/* Objects of these are answers to one request, not state a node needs. */
static const char *const never_cached[] = {
    "certificatesigningrequests", "subjectaccessreviews",    "selfsubjectaccessreviews",
    "localsubjectaccessreviews",  "selfsubjectrulesreviews", "tokenreviews",
    "selfsubjectreviews",
};

static char *lower_dup(const char *name)
{
	char *lower = strdup(name);
	if (lower)
		for (char *c = lower; *c; c++)
			*c = (char)tolower((unsigned char)*c);
	return lower;
}

int cache_agents_init(struct cache_agents *a, const struct config *cfg)
{
	memset(a, 0, sizeof *a);
	if (pthread_rwlock_init(&a->lock, NULL) != 0)
		return -1;
	a->lock_ready = true;
	size_t n = sizeof default_agents / sizeof default_agents[0];
	a->names.v = calloc(n + 1 + cfg->cache_agents.n, sizeof *a->names.v);
	if (!a->names.v)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!(a->names.v[a->names.n++] = strdup(default_agents[i])))
			return -1;
	/* The multiplexer's upstream list+watch (proxy/multiplexer.h): cached
	 * so that local clients are served from it after an offline reboot. */
	if (!(a->names.v[a->names.n] = cache_mux_component(cfg->node_name)))
		return -1;
	a->names.n++;
	for (size_t i = 0; i < cfg->cache_agents.n; i++) {
		const char *name = cfg->cache_agents.v[i];
		if (!strcmp(name, "*")) {
			a->all = true;
			continue;
		}
		if (!(a->names.v[a->names.n] = lower_dup(name)))
			return -1;
		a->names.n++;
	}
	return 0;
}

void cache_agents_free(struct cache_agents *a)
{
	strlist_free(&a->names);
	strlist_free(&a->extra);
	if (a->lock_ready)
		pthread_rwlock_destroy(&a->lock);
	a->lock_ready = false;
}

bool cache_agents_has(struct cache_agents *a, const char *component)
{
	if (!component || !*component)
		return false;
	if (a->all || strlist_has(&a->names, component))
		return true;
	pthread_rwlock_rdlock(&a->lock);
	bool has = a->extra_all || strlist_has(&a->extra, component);
	pthread_rwlock_unlock(&a->lock);
	return has;
}

int cache_agents_set_extra(struct cache_agents *a, const char *const *names, size_t n)
{
	struct strlist extra = {NULL, 0};
	bool all = false;
	if (n && !(extra.v = calloc(n, sizeof *extra.v)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(names[i], "*")) {
			all = true;
		} else if (!(extra.v[extra.n] = lower_dup(names[i]))) {
			strlist_free(&extra);
			return -1;
		} else {
			extra.n++;
		}
	}
	pthread_rwlock_wrlock(&a->lock);
	struct strlist old = a->extra;
	a->extra = extra;
	a->extra_all = all;
	pthread_rwlock_unlock(&a->lock);
	strlist_free(&old);
	return 0;
}

char *cache_mux_component(const char *node_name)
{
	char *mux = str_printf("multiplexer-proxy-%s", node_name ? node_name : "");
	char *lower = mux ? lower_dup(mux) : NULL;
	free(mux);
	return lower;
}

char *cache_component(const char *ua)
{
	if (!ua)
		ua = "";
	size_t n = strcspn(ua, "/");
	char *c = strndup(ua, n);
	if (!c)
		return NULL;
	for (char *p = c; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return c;
}

static bool is_discovery(const struct request_info *ri)
{
	const char *p = ri->path;
	if (!strcmp(p, "/version") || !strcmp(p, "/api") || !strcmp(p, "/api/v1") ||
	    !strcmp(p, "/apis"))
		return true;
	/* OpenAPI v3, which kubectl reads to validate what it applies */
	if (!strcmp(p, "/openapi/v3") || !strncmp(p, "/openapi/v3/", 12))
		return true;
	/* /apis/<group>/<version> */
	if (strncmp(p, "/apis/", 6))
		return false;
	const char *g = p + 6, *slash = strchr(g, '/');
	return slash && slash > g && slash[1] && !strchr(slash + 1, '/');
}

enum cache_mode cache_mode_for(struct cache_agents *a, const char *component,
			       const struct request_info *ri)
{
	if (!ri->is_resource) {
		bool get = !strcmp(ri->method, "GET");
		return get && is_discovery(ri) ? CACHE_DISCOVERY : CACHE_NONE;
	}
	if (!cache_agents_has(a, component))
		return CACHE_NONE;
	if (*ri->subresource && strcmp(ri->subresource, "status"))
		return CACHE_NONE;
	for (size_t i = 0; i < sizeof never_cached / sizeof never_cached[0]; i++)
		if (!strcmp(ri->resource, never_cached[i]))
			return CACHE_NONE;
	switch (ri->verb) {
	case VERB_GET:
	case VERB_CREATE:
	case VERB_UPDATE:
	case VERB_PATCH:
		return CACHE_OBJECT;
	case VERB_LIST:
		return CACHE_LIST;
	case VERB_WATCH:
		return CACHE_WATCH;
	default:
		return CACHE_NONE;
	}
}

/* One media range of an Accept header: "type/subtype;params". */
static bool range_is(const char *r, size_t n, const char *type)
{
	size_t tl = strlen(type);
	return n >= tl && !strncasecmp(r, type, tl) && (n == tl || r[tl] == ';' || r[tl] == ' ');
}

const char *cache_accept_for(const char *accept)
{
	if (!accept || !*accept)
		return "application/json"; /* the server's default is JSON anyway */
	bool json_ok = false;
	for (const char *r = accept; *r;) {
		while (*r == ' ' || *r == ',')
			r++;
		size_t n = strcspn(r, ",");
		if (!n)
			break;
		const char *params = memchr(r, ';', n);
		bool as_table = false, as_other = false;
		for (const char *p = params; p && p + 3 <= r + n; p++) {
			if (strncmp(p, "as=", 3) || (p[-1] != ';' && p[-1] != ' '))
				continue;
			if (p + 8 <= r + n && !strncmp(p + 3, "Table", 5))
				as_table = true;
			else
				as_other = true;
		}
		/* Partial object metadata is not the object: such a request is
		 * passed through as it came.  A Table is a way to print the
		 * object; a client that also takes plain JSON (kubectl does)
		 * prints that as well. */
		if (as_other)
			return NULL;
		if (!as_table && (range_is(r, n, "application/json") || range_is(r, n, "*/*") ||
				  range_is(r, n, "application/*")))
			json_ok = true;
		r += n;
	}
	return json_ok ? "application/json" : NULL;
}
