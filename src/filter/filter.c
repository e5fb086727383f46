/*
 * filter.c - running the filters: which resource a response is, the filters
 * in enum order on one parsed object (filter_apply), the quick look at an
 * object's bytes that lets the proxy skip parsing (filter_wants), and the
 * helpers the filters share (filter_internal.h).  The filters themselves
 * are in services.c, topology.c, kubesvc.c, configmaps.c and pods.c.
 */
#include "filter/filter_internal.h"

#include <string.h>

#define RES_BIT(r) (1u << (r))

struct filter_entry {
	unsigned resources; /* RES_BITs of the resources it acts on */
	filter_apply_fn apply;
	filter_wants_fn wants;
};

static const struct filter_entry FILTERS[FILTER_COUNT] = {
    [FILTER_DISCARDCLOUDSERVICE] = {RES_BIT(RES_SERVICES), filter_discardcloudservice,
				    filter_discardcloudservice_wants},
    [FILTER_NODEPORTISOLATION] = {RES_BIT(RES_SERVICES), filter_nodeportisolation,
				  filter_nodeportisolation_wants},
    [FILTER_MASTERSERVICE] = {RES_BIT(RES_SERVICES), filter_masterservice,
			      filter_masterservice_wants},
    [FILTER_SERVICETOPOLOGY] = {RES_BIT(RES_SLICES_V1) | RES_BIT(RES_SLICES_V1BETA1) |
				    RES_BIT(RES_ENDPOINTS),
				filter_servicetopology, filter_servicetopology_wants},
    [FILTER_FORWARDKUBESVCTRAFFIC] = {RES_BIT(RES_SLICES_V1), filter_forwardkubesvctraffic,
				      filter_forwardkubesvctraffic_wants},
    [FILTER_INCLUSTERCONFIG] = {RES_BIT(RES_CONFIGMAPS), filter_inclusterconfig,
				filter_inclusterconfig_wants},
    [FILTER_SERVICEENVUPDATER] = {RES_BIT(RES_PODS), filter_serviceenvupdater,
				  filter_serviceenvupdater_wants},
};

/* The kind an object of each resource names, when it names one. */
static const char *const KIND[] = {
    [RES_SERVICES] = "Service",	       [RES_ENDPOINTS] = "Endpoints",
    [RES_CONFIGMAPS] = "ConfigMap",    [RES_PODS] = "Pod",
    [RES_SLICES_V1] = "EndpointSlice", [RES_SLICES_V1BETA1] = "EndpointSlice",
};

static bool str_is(const char *s, const char *lit)
{
	return s && strcmp(s, lit) == 0;
}

static enum filter_res resource_of(const struct filter_target *t)
{
	const char *group = t && t->group ? t->group : "";

	if (!t || !t->resource)
		return RES_OTHER;
	if (!*group) {
		if (str_is(t->resource, "services"))
			return RES_SERVICES;
		if (str_is(t->resource, "endpoints"))
			return RES_ENDPOINTS;
		if (str_is(t->resource, "configmaps"))
			return RES_CONFIGMAPS;
		if (str_is(t->resource, "pods"))
			return RES_PODS;
		return RES_OTHER;
	}
	if (!str_is(group, "discovery.k8s.io") || !str_is(t->resource, "endpointslices"))
		return RES_OTHER;
	if (str_is(t->version, "v1"))
		return RES_SLICES_V1;
	if (str_is(t->version, "v1beta1"))
		return RES_SLICES_V1BETA1;
	return RES_OTHER;
}

/* List items name no kind; an object that names another one (a Table, a
 * PartialObjectMetadata, a Status) is not what the filters are for. */
static bool kind_fits(const json_t *obj, enum filter_res res)
{
	json_t *kind = fj_string(obj, "kind");

	return !kind || fj_is(kind, KIND[res]);
}

enum filter_result filter_apply(filter_mask mask, const struct filter_env *env,
				const struct filter_target *t, json_t *obj)
{
	return filter_apply_by(mask, env, t, obj, NULL);
}

enum filter_result filter_apply_by(filter_mask mask, const struct filter_env *env,
				   const struct filter_target *t, json_t *obj, enum filter_id *by)
{
	enum filter_res res = resource_of(t);
	enum filter_result out = FILTER_UNCHANGED;

	if (res == RES_OTHER || !env || !json_is_object(obj) || !kind_fits(obj, res))
		return FILTER_UNCHANGED;
	for (int id = 0; id < FILTER_COUNT; id++) {
		enum filter_result r;

		if (!(mask & FILTER_BIT(id)) || !(FILTERS[id].resources & RES_BIT(res)))
			continue;
		r = FILTERS[id].apply(env, res, obj);
		if (r == FILTER_DROP || r == FILTER_UNPARSABLE) {
			if (by)
				*by = (enum filter_id)id;
			return r;
		}
		if (r == FILTER_CHANGED)
			out = FILTER_CHANGED;
	}
	return out;
}

enum filter_id filter_first_wanting(filter_mask mask, const struct filter_env *env,
				    const struct filter_target *t, const struct stream_object *meta)
{
	enum filter_res res = resource_of(t);

	if (res == RES_OTHER || !env || !(mask & FILTER_ALL))
		return FILTER_COUNT;
	if (meta && meta->kind && *meta->kind && strcmp(meta->kind, KIND[res]) != 0)
		return FILTER_COUNT; /* kind_fits() says no */
	for (int id = 0; id < FILTER_COUNT; id++) {
		if (!(mask & FILTER_BIT(id)) || !(FILTERS[id].resources & RES_BIT(res)))
			continue;
		if (!meta || FILTERS[id].wants(env, res, meta))
			return (enum filter_id)id;
	}
	return FILTER_COUNT;
}

bool filter_wants(filter_mask mask, const struct filter_env *env, const struct filter_target *t,
		  const struct stream_object *meta)
{
	if (!meta) /* nothing to look at: parse it */
		return resource_of(t) != RES_OTHER && env && (mask & FILTER_ALL);
	return filter_first_wanting(mask, env, t, meta) != FILTER_COUNT;
}

bool filter_env_in_pool(const struct filter_env *env, const char *node)
{
	size_t lo = 0, hi;

	if (!env || !env->pool_nodes || !node)
		return false;
	hi = env->npool_nodes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(env->pool_nodes[mid], node);

		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* ---- env ---- */

const char *filter_hub_host(const struct filter_env *env)
{
	if (!env->hub_host || !*env->hub_host)
		return NULL;
	return !env->hub_serving || env->hub_serving(env->hub_serving_ctx) ? env->hub_host : NULL;
}

long filter_hub_port(const struct filter_env *env)
{
	const char *p = env->hub_port;
	long port = 0;

	if (!p || !*p)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		port = port * 10 + (*p - '0');
		if (port > 65535)
			return -1;
	}
	return port ? port : -1;
}

/* ---- jansson ---- */

static json_t *member(const json_t *parent, const char *key)
{
	return json_is_object(parent) ? json_object_get(parent, key) : NULL;
}

json_t *fj_object(const json_t *parent, const char *key)
{
	json_t *v = member(parent, key);

	return json_is_object(v) ? v : NULL;
}

json_t *fj_array(const json_t *parent, const char *key)
{
	json_t *v = member(parent, key);

	return json_is_array(v) ? v : NULL;
}

json_t *fj_string(const json_t *parent, const char *key)
{
	json_t *v = member(parent, key);

	return json_is_string(v) ? v : NULL;
}

bool fj_is(const json_t *v, const char *lit)
{
	size_t n = strlen(lit);

	return json_is_string(v) && json_string_length(v) == n &&
	       memcmp(json_string_value(v), lit, n) == 0;
}

bool fj_named(const json_t *obj, const char *ns, const char *name)
{
	json_t *meta = fj_object(obj, "metadata");

	return fj_is(fj_string(meta, "namespace"), ns) && fj_is(fj_string(meta, "name"), name);
}

json_t *fj_annotation(const json_t *obj, const char *key)
{
	return fj_string(fj_object(fj_object(obj, "metadata"), "annotations"), key);
}

json_t *fj_label(const json_t *obj, const char *key)
{
	return fj_string(fj_object(fj_object(obj, "metadata"), "labels"), key);
}

bool fj_bad(const json_t *parent, const char *key, json_type type)
{
	json_t *v = member(parent, key);

	return v && !json_is_null(v) && json_typeof(v) != type;
}

bool fj_bad_items(const json_t *array, json_type type)
{
	size_t i;
	json_t *v;

	json_array_foreach(array, i, v)
	{
		if (json_typeof(v) != type)
			return true;
	}
	return false;
}

const char *fj_cstr(const json_t *v)
{
	const char *s = json_string_value(v);

	return s && strlen(s) == json_string_length(v) ? s : NULL;
}

int fj_set_string(json_t *parent, const char *key, const char *value)
{
	if (fj_is(member(parent, key), value))
		return 0;
	return json_object_set_new(parent, key, json_string(value)) == 0 ? 1 : -1;
}

int fj_set_integer(json_t *parent, const char *key, json_int_t value)
{
	json_t *v = member(parent, key);

	if (json_is_integer(v) && json_integer_value(v) == value)
		return 0;
	return json_object_set_new(parent, key, json_integer(value)) == 0 ? 1 : -1;
}

/* ---- the quick look ---- */

static bool marker_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '/' || c == '_' || c == '-';
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Is some character a marker may hold written as an escape?  The API
 * server escapes only <, > and & (and control characters), so in practice
 * this finds nothing and the markers decide. */
static bool escapes_marker_chars(const char *p, const char *end)
{
	while ((p = memchr(p, '\\', (size_t)(end - p))) && end - p >= 2) {
		if (p[1] == '/')
			return true;
		if (p[1] == 'u' && end - p >= 6 && p[2] == '0' && p[3] == '0') {
			int hi = hex_digit(p[4]), lo = hex_digit(p[5]);

			if (hi >= 0 && lo >= 0 && marker_char((unsigned char)(hi << 4 | lo)))
				return true;
		}
		p += 2; /* past the escape's first two characters, "\\" included */
	}
	return false;
}

bool filter_bytes_may_hold(const struct stream_object *meta, const char *marker)
{
	if (!meta->data)
		return true;
	if (memmem(meta->data, meta->len, marker, strlen(marker)))
		return true;
	return escapes_marker_chars(meta->data, meta->data + meta->len);
}

bool filter_meta_named(const struct stream_object *meta, const char *ns, const char *name)
{
	return str_is(meta->namespace, ns) && str_is(meta->name, name);
}
