/*
 * filter_internal.h - what the files of filter/ share and nothing outside
 * includes: the resources the filters act on, one entry point pair per
 * filter (the change on a parsed object, the quick look at the bytes), and
 * the small jansson and byte helpers they use (filter.c).
 */
#ifndef YURTHUB_FILTER_FILTER_INTERNAL_H
#define YURTHUB_FILTER_FILTER_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "filter/filter.h"

/* The resources some filter acts on (struct filter_target reduced). */
enum filter_res {
	RES_OTHER,
	RES_SERVICES,	    /* core */
	RES_ENDPOINTS,	    /* core */
	RES_CONFIGMAPS,	    /* core */
	RES_PODS,	    /* core */
	RES_SLICES_V1,	    /* discovery.k8s.io/v1 endpointslices */
	RES_SLICES_V1BETA1, /* discovery.k8s.io/v1beta1 endpointslices */
};

/* One filter: change obj (of resource res, its kind checked) or drop it. */
typedef enum filter_result (*filter_apply_fn)(const struct filter_env *env, enum filter_res res,
					      json_t *obj);
/* false only when the apply function would surely leave the object as it is. */
typedef bool (*filter_wants_fn)(const struct filter_env *env, enum filter_res res,
				const struct stream_object *meta);

/* services.c */
enum filter_result filter_discardcloudservice(const struct filter_env *env, enum filter_res res,
					      json_t *svc);
bool filter_discardcloudservice_wants(const struct filter_env *env, enum filter_res res,
				      const struct stream_object *meta);
enum filter_result filter_nodeportisolation(const struct filter_env *env, enum filter_res res,
					    json_t *svc);
bool filter_nodeportisolation_wants(const struct filter_env *env, enum filter_res res,
				    const struct stream_object *meta);
enum filter_result filter_masterservice(const struct filter_env *env, enum filter_res res,
					json_t *svc);
bool filter_masterservice_wants(const struct filter_env *env, enum filter_res res,
				const struct stream_object *meta);
/* topology.c */
enum filter_result filter_servicetopology(const struct filter_env *env, enum filter_res res,
					  json_t *obj);
bool filter_servicetopology_wants(const struct filter_env *env, enum filter_res res,
				  const struct stream_object *meta);
/* kubesvc.c */
enum filter_result filter_forwardkubesvctraffic(const struct filter_env *env, enum filter_res res,
						json_t *slice);
bool filter_forwardkubesvctraffic_wants(const struct filter_env *env, enum filter_res res,
					const struct stream_object *meta);
/* configmaps.c */
enum filter_result filter_inclusterconfig(const struct filter_env *env, enum filter_res res,
					  json_t *cm);
bool filter_inclusterconfig_wants(const struct filter_env *env, enum filter_res res,
				  const struct stream_object *meta);
/* pods.c */
enum filter_result filter_serviceenvupdater(const struct filter_env *env, enum filter_res res,
					    json_t *pod);
bool filter_serviceenvupdater_wants(const struct filter_env *env, enum filter_res res,
				    const struct stream_object *meta);

/* ---- jansson helpers (filter.c) ---- */

/* parent[key] when parent is an object and the member is an object, an
 * array, a string; else NULL. */
json_t *fj_object(const json_t *parent, const char *key);
json_t *fj_array(const json_t *parent, const char *key);
json_t *fj_string(const json_t *parent, const char *key);
/* Is v a string equal to lit, byte for byte (a "\u0000" inside does not
 * make it equal to its prefix)? */
bool fj_is(const json_t *v, const char *lit);
/* obj's metadata.namespace and metadata.name are ns and name. */
bool fj_named(const json_t *obj, const char *ns, const char *name);
/* metadata.annotations[key] / metadata.labels[key], as a string; NULL when
 * absent or not a string. */
json_t *fj_annotation(const json_t *obj, const char *key);
json_t *fj_label(const json_t *obj, const char *key);
/* Is parent[key] there (and not null) but not of type (JSON_OBJECT,
 * JSON_ARRAY, JSON_STRING)?  A filter that finds a field it reads so
 * answers FILTER_UNPARSABLE rather than guess.  false when parent is not an
 * object (its own check said so). */
bool fj_bad(const json_t *parent, const char *key, json_type type);
/* Is some element of array (when it is one) not of type? */
bool fj_bad_items(const json_t *array, json_type type);
/* The C string of a JSON string that holds no NUL, else NULL. */
const char *fj_cstr(const json_t *v);
/* parent[key] = value (a string / an integer) unless it is that already:
 * 1 changed, 0 already so, -1 out of memory. */
int fj_set_string(json_t *parent, const char *key, const char *value);
int fj_set_integer(json_t *parent, const char *key, json_int_t value);

/* ---- env helpers (filter.c) ---- */

/* The hub's host, NULL when not set or while its port does not serve
 * (env->hub_serving): the filters that write it do nothing. */
const char *filter_hub_host(const struct filter_env *env);
/* The hub's port as a number, -1 when unset or not in 1..65535. */
long filter_hub_port(const struct filter_env *env);

/* ---- the quick look (filter.c) ---- */

/* Might meta's bytes hold marker?  A marker is ASCII letters, digits and
 * . / _ - only; true also when the bytes write such a character as an
 * escape ("\u0061", "\/"), which memmem cannot see through. */
bool filter_bytes_may_hold(const struct stream_object *meta, const char *marker);
/* What the decoder picked: namespace and name equal. */
bool filter_meta_named(const struct stream_object *meta, const char *ns, const char *name);

#endif
