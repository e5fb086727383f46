/*
 * fuzz_request.c - what a client sends the proxy port: the request line
 * (method and raw URI, src/kube/requestinfo.c) and the headers the hub reads
 * (User-Agent, Accept, Content-Type), then what the hub derives from them:
 * the cache mode, the names checked before they become paths, the cluster
 * info file of a discovery path, the canonical selectors of a list.
 *
 * Input: method NUL raw-URI NUL User-Agent NUL Accept NUL Content-Type; a
 * missing field is absent (method "GET" when there is no NUL at all).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cacheable.h"
#include "fuzz_common.h"
#include "kube/patch.h"
#include "kube/requestinfo.h"
#include "kube/selector.h"
#include "storage/key.h"

static struct cache_agents agents;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct config cfg;
	memset(&cfg, 0, sizeof cfg);
	if (cache_agents_init(&agents, &cfg) < 0)
		abort();
	return 0;
}

/* Every string field is set after a successful parse. */
static void check_fields(const struct request_info *ri)
{
	const char *const f[] = {ri->method,
				 ri->path,
				 ri->api_prefix,
				 ri->api_group,
				 ri->api_version,
				 ri->namespace,
				 ri->resource,
				 ri->subresource,
				 ri->name,
				 ri->label_selector,
				 ri->field_selector,
				 ri->resource_version,
				 ri->resource_version_match,
				 ri->continue_token,
				 ri->as_table_hint};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		FZ_CHECK(f[i] != NULL);
	FZ_CHECK(ri->limit >= 0 && ri->timeout_seconds >= -1);
	/* clamped when read: deadlines computed from them cannot overflow */
	FZ_CHECK(ri->limit <= REQUEST_LIMIT_MAX && ri->timeout_seconds <= REQUEST_TIMEOUT_MAX &&
		 ri->timeout_seconds != 0);
	FZ_CHECK(request_info_verb(ri) != NULL);
	FZ_CHECK(!ri->is_resource || !strcmp(ri->api_prefix, "api") ||
		 !strcmp(ri->api_prefix, "apis"));
}

/* Canonical text parses back to itself. */
static void check_selector(enum selector_kind kind, const char *text)
{
	char *canon = NULL, *again = NULL, *err = NULL;
	if (selector_canonicalize(kind, text, &canon, &err) == 0) {
		FZ_CHECK(selector_canonicalize(kind, canon, &again, &err) == 0);
		FZ_CHECK(strcmp(canon, again) == 0);
	}
	free(canon);
	free(again);
	free(err);
}

/* What the hub does with a parsed request before it touches the store. */
static void derive(const struct request_info *ri, const char *ua)
{
	char *component = cache_component(ua);
	FZ_CHECK(component != NULL);
	enum cache_mode mode = cache_mode_for(&agents, component, ri);
	if (mode == CACHE_DISCOVERY)
		free(key_cluster_info_name(ri->path));
	key_component_ok(component);
	if (*ri->namespace)
		key_segment_ok(ri->namespace, KEY_NAME_MAX);
	if (*ri->name)
		key_segment_ok(ri->name, KEY_NAME_MAX);
	free(key_resource_dir(KEY_LAYOUT_ENHANCED, ri->resource, ri->api_version, ri->api_group));
	if (mode == CACHE_LIST || mode == CACHE_WATCH) {
		check_selector(SELECTOR_LABEL, ri->label_selector);
		check_selector(SELECTOR_FIELD, ri->field_selector);
	}
	free(component);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *f[5] = {0};
	size_t n[5] = {0}, k = 0;
	while (k < 5 && fz_field(&data, &size, &f[k], &n[k]))
		k++;
	char *method = k > 1 ? fz_strndup(f[0], n[0]) : fz_strndup((const uint8_t *)"GET", 3);
	char *uri = k > 1 ? fz_strndup(f[1], n[1]) : fz_strndup(f[0], n[0]);
	char *ua = k > 2 ? fz_strndup(f[2], n[2]) : NULL;
	char *accept = k > 3 ? fz_strndup(f[3], n[3]) : NULL;
	char *ctype = k > 4 ? fz_strndup(f[4], n[4]) : NULL;

	struct request_info ri;
	char *err = NULL;
	if (request_info_parse(method, uri, &ri, &err) == 0) {
		FZ_CHECK(err == NULL);
		check_fields(&ri);
		derive(&ri, ua);
		request_info_free(&ri);
	} else {
		FZ_CHECK(err != NULL && !strchr(err, '\n'));
	}
	const char *a = cache_accept_for(accept);
	FZ_CHECK(!a || !strcmp(a, "application/json"));
	patch_type_of(ctype);
	free(err);
	free(method);
	free(uri);
	free(ua);
	free(accept);
	free(ctype);
	return 0;
}
