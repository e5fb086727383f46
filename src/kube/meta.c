/*
 * meta.c - reads an object's identity (kind, apiVersion, metadata name,
 * namespace, uid, resourceVersion) with one streaming yajl pass, so that the
 * cache can index objects without building a JSON tree for each of them.
 */
#include "kube/meta.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

/* Which picked field, if any, the next value at the current depth belongs to. */
enum meta_slot {
	SLOT_NONE,
	SLOT_KIND,
	SLOT_API_VERSION,
	SLOT_METADATA, /* only meaningful at depth 1: the top-level "metadata" key */
	SLOT_NAME,
	SLOT_NAMESPACE,
	SLOT_UID,
	SLOT_RESOURCE_VERSION,
};

struct meta_parse {
	struct kube_meta *meta; /* NULL in rv-only mode */
	uint64_t *rv_out;	/* set in rv-only mode */
	size_t depth;		/* open containers; the top-level object is depth 1 */
	enum meta_slot slot;	/* picked field named by the latest key at depth 1 or 2 */
	bool in_metadata;	/* the depth-2 container is the top-level metadata object */
	bool rv_found;		/* rv-only mode: canceled because the field was seen */
	bool nul_name, nul_ns;	/* the latest name / namespace held a NUL */
};

static bool key_is(const unsigned char *key, size_t len, const char *want)
{
	size_t want_len = strlen(want);

	return len == want_len && memcmp(key, want, len) == 0;
}

static enum meta_slot top_level_slot(const unsigned char *key, size_t len)
{
	if (key_is(key, len, "kind"))
		return SLOT_KIND;
	if (key_is(key, len, "apiVersion"))
		return SLOT_API_VERSION;
	if (key_is(key, len, "metadata"))
		return SLOT_METADATA;
	return SLOT_NONE;
}

static enum meta_slot metadata_slot(const unsigned char *key, size_t len)
{
	if (key_is(key, len, "name"))
		return SLOT_NAME;
	if (key_is(key, len, "namespace"))
		return SLOT_NAMESPACE;
	if (key_is(key, len, "uid"))
		return SLOT_UID;
	if (key_is(key, len, "resourceVersion"))
		return SLOT_RESOURCE_VERSION;
	return SLOT_NONE;
}

static char **slot_field(struct kube_meta *m, enum meta_slot slot)
{
	switch (slot) {
	case SLOT_KIND:
		return &m->kind;
	case SLOT_API_VERSION:
		return &m->api_version;
	case SLOT_NAME:
		return &m->name;
	case SLOT_NAMESPACE:
		return &m->namespace;
	case SLOT_UID:
		return &m->uid;
	case SLOT_RESOURCE_VERSION:
		return &m->resource_version;
	default:
		return NULL;
	}
}

/* Callbacks return this: a value at depth 0 that is not an object cancels
 * the parse, as the document is then not one Kubernetes object. */
static int inside_top_object(const struct meta_parse *p)
{
	return p->depth > 0;
}

static int on_scalar(void *ctx)
{
	struct meta_parse *p = ctx;

	p->slot = SLOT_NONE;
	return inside_top_object(p);
}

static int on_boolean(void *ctx, int value)
{
	(void)value;
	return on_scalar(ctx);
}

static int on_number(void *ctx, const char *text, size_t len)
{
	(void)text;
	(void)len;
	return on_scalar(ctx);
}

/* Strings may hold "\u0000", so copy by length rather than with strndup. */
static int store_string(char **field, const unsigned char *s, size_t len)
{
	char *copy = malloc(len + 1);

	if (!copy)
		return 0;
	memcpy(copy, s, len);
	copy[len] = '\0';
	free(*field); /* a duplicate key: the last one wins, as in encoding/json */
	*field = copy;
	return 1;
}

static int on_string_rv_only(struct meta_parse *p, enum meta_slot slot, const unsigned char *s,
			     size_t len)
{
	if (slot != SLOT_RESOURCE_VERSION)
		return 1;
	kube_rv_parse((const char *)s, len, p->rv_out);
	p->rv_found = true;
	return 0; /* stop: the caller asked for nothing else */
}

static int on_string(void *ctx, const unsigned char *s, size_t len)
{
	struct meta_parse *p = ctx;
	enum meta_slot slot = p->slot;

	if (!inside_top_object(p))
		return 0;
	p->slot = SLOT_NONE;
	if (slot == SLOT_NONE || slot == SLOT_METADATA)
		return 1;
	if (!p->meta)
		return on_string_rv_only(p, slot, s, len);
	/* Parsed here, by its length, as kube_meta_rv and the stream decoders
	 * do: "1\u0000" is no revision at all, not revision 1. */
	if (slot == SLOT_RESOURCE_VERSION)
		kube_rv_parse((const char *)s, len, &p->meta->rv);
	if (slot == SLOT_NAME)
		p->nul_name = memchr(s, '\0', len) != NULL;
	if (slot == SLOT_NAMESPACE)
		p->nul_ns = memchr(s, '\0', len) != NULL;
	return store_string(slot_field(p->meta, slot), s, len);
}

static int on_map_key(void *ctx, const unsigned char *key, size_t len)
{
	struct meta_parse *p = ctx;

	if (p->depth == 1)
		p->slot = top_level_slot(key, len);
	else if (p->depth == 2 && p->in_metadata)
		p->slot = metadata_slot(key, len);
	else
		p->slot = SLOT_NONE;
	return 1;
}

static int on_start_map(void *ctx)
{
	struct meta_parse *p = ctx;

	if (p->depth == 1 && p->slot == SLOT_METADATA) {
		p->in_metadata = true;
		if (p->meta)
			p->meta->has_metadata = 1;
	}
	p->slot = SLOT_NONE;
	p->depth++;
	return 1;
}

static int on_start_array(void *ctx)
{
	struct meta_parse *p = ctx;

	if (!inside_top_object(p))
		return 0;
	p->slot = SLOT_NONE;
	p->depth++;
	return 1;
}

static int on_end_container(void *ctx)
{
	struct meta_parse *p = ctx;

	p->depth--;
	p->slot = SLOT_NONE;
	if (p->depth < 2)
		p->in_metadata = false;
	return 1;
}

static const yajl_callbacks meta_callbacks = {
    .yajl_null = on_scalar,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_container,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_container,
};

/* Runs the parse; true when the whole input is one well-formed JSON object
 * (anything else at the top was canceled by inside_top_object), or when
 * rv-only mode stopped early on the field it wanted. */
static bool run_parse(struct meta_parse *p, const char *json, size_t len)
{
	yajl_handle h = yajl_alloc(&meta_callbacks, NULL, p);
	yajl_status st;

	if (!h)
		return false;
	st = yajl_parse(h, (const unsigned char *)json, len);
	if (st == yajl_status_ok)
		st = yajl_complete_parse(h);
	yajl_free(h);
	if (st == yajl_status_client_canceled)
		return p->rv_found;
	return st == yajl_status_ok;
}

void kube_meta_free(struct kube_meta *m)
{
	if (!m)
		return;
	free(m->kind);
	free(m->api_version);
	free(m->name);
	free(m->namespace);
	free(m->uid);
	free(m->resource_version);
	memset(m, 0, sizeof(*m));
}

int kube_meta_parse(const char *json, size_t len, struct kube_meta *m)
{
	struct meta_parse p = {.meta = m};

	memset(m, 0, sizeof(*m));
	if (!json || !run_parse(&p, json, len)) {
		kube_meta_free(m);
		return -1;
	}
	m->nul_in_name = p.nul_name || p.nul_ns;
	return 0;
}

int kube_meta_rv(const char *json, size_t len, uint64_t *rv)
{
	struct meta_parse p = {.rv_out = rv};

	*rv = 0;
	if (!json || !run_parse(&p, json, len)) {
		*rv = 0;
		return -1;
	}
	return 0;
}

int kube_rv_parse(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	*out = 0;
	if (!s || len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned digit = (unsigned char)s[i] - '0';

		if (digit > 9)
			return -1;
		if (v > (UINT64_MAX - digit) / 10)
			return -1;
		v = v * 10 + digit;
	}
	*out = v;
	return 0;
}
