/*
 * select.c - which filters run for a request: the filters' names, YurtHub's
 * default table (component x resource x verb), the flags that turn filters
 * off and the components the yurt-hub-cfg configmap adds (filter.h,
 * docs/filters.md).  The proxy asks filter_select() once per request and
 * gets a mask; the filters themselves live in the other files of filter/.
 */
#include "filter/filter.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"

static const char *const NAMES[FILTER_COUNT] = {
    [FILTER_DISCARDCLOUDSERVICE] = "discardcloudservice",
    [FILTER_NODEPORTISOLATION] = "nodeportisolation",
    [FILTER_MASTERSERVICE] = "masterservice",
    [FILTER_SERVICETOPOLOGY] = "servicetopology",
    [FILTER_FORWARDKUBESVCTRAFFIC] = "forwardkubesvctraffic",
    [FILTER_INCLUSTERCONFIG] = "inclusterconfig",
    [FILTER_SERVICEENVUPDATER] = "serviceenvupdater",
};

/* What YurtHub does not run in cloud mode: a hub on a cloud node talks to
 * the cloud's services directly. */
#define CLOUD_MODE_OFF                                                                             \
	(FILTER_BIT(FILTER_DISCARDCLOUDSERVICE) | FILTER_BIT(FILTER_FORWARDKUBESVCTRAFFIC) |       \
	 FILTER_BIT(FILTER_SERVICEENVUPDATER))

/* ---- the default table ---- */

struct rule {
	const char *resource;
	const char *verbs[5]; /* NULL-terminated */
};

struct defaults {
	const char *components[4]; /* NULL-terminated */
	struct rule rules[3];	   /* up to the first without a resource */
};

static const struct defaults DEFAULTS[FILTER_COUNT] = {
    [FILTER_DISCARDCLOUDSERVICE] = {{"kube-proxy"}, {{"services", {"list", "watch"}}}},
    [FILTER_NODEPORTISOLATION] = {{"kube-proxy"}, {{"services", {"list", "watch"}}}},
    [FILTER_MASTERSERVICE] = {{"kubelet"}, {{"services", {"list", "watch"}}}},
    [FILTER_SERVICETOPOLOGY] = {{"kube-proxy", "coredns", "nginx-ingress-controller"},
				{{"endpoints", {"list", "watch"}},
				 {"endpointslices", {"list", "watch"}}}},
    [FILTER_FORWARDKUBESVCTRAFFIC] = {{"kube-proxy"}, {{"endpointslices", {"list", "watch"}}}},
    [FILTER_INCLUSTERCONFIG] = {{"kubelet"}, {{"configmaps", {"get", "list", "watch"}}}},
    [FILTER_SERVICEENVUPDATER] = {{"kubelet"}, {{"pods", {"list", "watch", "get", "patch"}}}},
};

const char *filter_name(enum filter_id id)
{
	return (unsigned)id < FILTER_COUNT ? NAMES[id] : NULL;
}

int filter_by_name(const char *name)
{
	for (int id = 0; name && id < FILTER_COUNT; id++)
		if (strcmp(NAMES[id], name) == 0)
			return id;
	return -1;
}

/* A piece of text without its leading and trailing white space (Go's
 * strings.TrimSpace, for ASCII). */
struct span {
	const char *s;
	size_t n;
};

static struct span trimmed(const char *s, size_t n)
{
	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	return (struct span){s, n};
}

static bool span_is(struct span sp, const char *lit)
{
	return sp.n == strlen(lit) && memcmp(sp.s, lit, sp.n) == 0;
}

static bool span_is_nocase(struct span sp, const char *lit)
{
	return sp.n == strlen(lit) && strncasecmp(sp.s, lit, sp.n) == 0;
}

static bool rule_covers(const struct defaults *d, struct span verb, struct span resource)
{
	for (size_t r = 0; r < sizeof(d->rules) / sizeof(d->rules[0]) && d->rules[r].resource;
	     r++) {
		if (!span_is(resource, d->rules[r].resource))
			continue;
		for (const char *const *v = d->rules[r].verbs; *v; v++)
			if (span_is(verb, *v))
				return true;
	}
	return false;
}

/* ---- which filters a request gets ---- */

/* The hub's own informers and the multiplexer's upstream list/watch get the
 * cloud's objects as they are: the filters' inputs must not be filtered. */
static bool hub_own(struct span comp, const char *node_name)
{
	static const char mux[] = "multiplexer-proxy-";
	size_t mlen = sizeof(mux) - 1;

	if (span_is_nocase(comp, "yurthub"))
		return true;
	return node_name && comp.n > mlen && strncasecmp(comp.s, mux, mlen) == 0 &&
	       span_is_nocase((struct span){comp.s + mlen, comp.n - mlen}, node_name);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The extras are lower-case and sorted (filter_config_set_extras): a binary
 * search, ignoring case as the defaults' comparison does. */
static bool in_extras(char *const *extra, size_t n, struct span comp)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strncasecmp(extra[mid], comp.s, comp.n);

		if (c == 0)
			c = extra[mid][comp.n] ? 1 : 0;
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static bool component_listed(const struct filter_config *cfg, int id, struct span comp)
{
	for (const char *const *c = DEFAULTS[id].components; *c; c++)
		if (span_is_nocase(comp, *c))
			return true;
	return in_extras(cfg->extra[id], cfg->nextra[id], comp);
}

/* any_component: as if the configmap named the component for every filter. */
static filter_mask select_mask(const struct filter_config *cfg, const char *node_name,
			       const char *component, const char *verb, const char *resource,
			       bool any_component)
{
	struct span comp, v, res;
	filter_mask mask = 0;

	if (!cfg || !component || !verb || !resource)
		return 0;
	comp = trimmed(component, strlen(component));
	v = trimmed(verb, strlen(verb));
	res = trimmed(resource, strlen(resource));
	if (!comp.n || hub_own(comp, node_name))
		return 0;
	for (int id = 0; id < FILTER_COUNT; id++) {
		if (!(cfg->enabled & FILTER_BIT(id)) || !rule_covers(&DEFAULTS[id], v, res))
			continue;
		if (any_component || component_listed(cfg, id, comp))
			mask |= FILTER_BIT(id);
	}
	return mask;
}

filter_mask filter_select(const struct filter_config *cfg, const char *node_name,
			  const char *component, const char *verb, const char *resource)
{
	return select_mask(cfg, node_name, component, verb, resource, false);
}

filter_mask filter_select_possible(const struct filter_config *cfg, const char *node_name,
				   const char *component, const char *verb, const char *resource)
{
	return select_mask(cfg, node_name, component, verb, resource, true);
}

/* ---- the flags ---- */

/* The filter a --disabled-resource-filters entry names: an id, FILTER_COUNT
 * for "*" (all), -1 for nothing to disable, -2 for an unknown name.
 * hostnetworkpropagation was a YurtHub filter until 2024: a node's flags
 * that still disable it keep working, with nothing to disable. */
static int disabled_entry(const char *name, struct span *sp)
{
	*sp = trimmed(name ? name : "", name ? strlen(name) : 0);
	if (!sp->n || span_is(*sp, "hostnetworkpropagation"))
		return -1;
	if (span_is(*sp, "*"))
		return FILTER_COUNT;
	for (int id = 0; id < FILTER_COUNT; id++)
		if (span_is(*sp, NAMES[id]))
			return id;
	return -2;
}

int filter_config_check_names(const char *const *names, size_t n, char **err)
{
	for (size_t i = 0; i < n; i++) {
		struct span sp;
		struct buf msg = BUF_INIT;

		if (disabled_entry(names[i], &sp) != -2)
			continue;
		buf_append_str(&msg, "unknown filter \"");
		buf_append(&msg, sp.s, sp.n);
		buf_append_str(&msg, "\": the filters are");
		for (int id = 0; id < FILTER_COUNT; id++)
			buf_printf(&msg, "%s %s", id ? "," : "", NAMES[id]);
		buf_append_str(&msg, "; * disables all");
		if (err)
			*err = buf_steal(&msg);
		buf_free(&msg);
		return -1;
	}
	return 0;
}

int filter_config_init(struct filter_config *cfg, bool enable, const char *const *disabled,
		       size_t ndisabled, bool cloud_mode)
{
	filter_mask off = 0;

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < ndisabled; i++) {
		struct span sp;
		int id = disabled_entry(disabled[i], &sp);

		if (id == -2) {
			errno = EINVAL;
			return -1;
		}
		if (id == FILTER_COUNT)
			off = FILTER_ALL;
		else if (id >= 0)
			off |= FILTER_BIT(id);
	}
	/* YurtHub appends the cloud-mode names to the disabled list, after which
	 * a lone "*" no longer means all; here "*" means all whatever the mode. */
	if (cloud_mode)
		off |= CLOUD_MODE_OFF;
	cfg->enabled = enable ? FILTER_ALL & ~off : 0;
	return 0;
}

/* ---- the configmap's components ---- */

static void free_list(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

/* Appends the components of a comma-separated value, trimmed and
 * lower-cased, empty ones skipped.  0 or -1 (ENOMEM). */
static int add_components(char ***list, size_t *n, const char *value)
{
	const char *p = value;

	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		struct span sp = trimmed(p, len);

		if (sp.n) {
			char **grown = realloc(*list, (*n + 1) * sizeof(**list));
			char *c = grown ? strndup(sp.s, sp.n) : NULL;

			if (grown)
				*list = grown;
			if (!c)
				return -1;
			for (char *q = c; *q; q++)
				*q = (char)tolower((unsigned char)*q);
			(*list)[(*n)++] = c;
		}
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* Sorted and without repeats, for in_extras()'s binary search: a
 * configmap may name one component many times. */
static void sort_unique(char **list, size_t *n)
{
	size_t out = 0;

	if (!*n)
		return;
	qsort(list, *n, sizeof(*list), cmp_str);
	for (size_t i = 0; i < *n; i++) {
		if (out && strcmp(list[out - 1], list[i]) == 0)
			free(list[i]);
		else
			list[out++] = list[i];
	}
	*n = out;
}

int filter_config_set_extras(struct filter_config *cfg, const char *const *keys,
			     const char *const *values, size_t n)
{
	char **extra[FILTER_COUNT] = {0};
	size_t nextra[FILTER_COUNT] = {0};

	for (size_t i = 0; i < n; i++) {
		int id = keys[i] ? filter_by_name(keys[i]) : -1;

		if (id < 0 || !values[i])
			continue;
		if (add_components(&extra[id], &nextra[id], values[i]) < 0) {
			for (int f = 0; f < FILTER_COUNT; f++)
				free_list(extra[f], nextra[f]);
			errno = ENOMEM;
			return -1;
		}
	}
	for (int id = 0; id < FILTER_COUNT; id++) {
		sort_unique(extra[id], &nextra[id]);
		free_list(cfg->extra[id], cfg->nextra[id]);
		cfg->extra[id] = extra[id];
		cfg->nextra[id] = nextra[id];
	}
	return 0;
}

void filter_config_free(struct filter_config *cfg)
{
	if (!cfg)
		return;
	for (int id = 0; id < FILTER_COUNT; id++)
		free_list(cfg->extra[id], cfg->nextra[id]);
	memset(cfg, 0, sizeof(*cfg));
	/* enabled is 0 too: a freed configuration selects nothing */
}
