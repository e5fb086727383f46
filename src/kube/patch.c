/*
 * patch.c - PATCH bodies applied to cached objects, see patch.h.
 *
 * Documents are parsed with jansson (int64 exact, key order kept) and
 * written back by our own compact writer (reals in their shortest exact
 * form).  Inputs nesting deeper than PATCH_MAX_DEPTH are refused before
 * parsing, and no operation may build a deeper result, so every recursion
 * here and in jansson stays bounded.
 *
 * Merge patch: RFC 7386 exactly; the document and the result must be
 * JSON objects.
 *
 * JSON patch: RFC 6902 with RFC 6901 pointers.  Operations are numbered
 * from 0 in messages ("op[2]").  Numbers compare by value in "test".
 * Duplicate member names in the patch are refused (RFC 6902 A.13).
 *
 * Strategic merge patch: a merge patch, except for these directives:
 *   "$patch":"delete"   in a map: the map is removed from its parent (the
 *                       API server leaves {}); at the top, the result is {};
 *                       in a list element: elements with its merge key go
 *   "$patch":"replace"  in a map: the map replaces the original one;
 *                       in a list element: the other elements are the list
 *   "$deleteFromPrimitiveList/<f>": its values are removed from list <f>
 *   "$setElementOrder/<f>", "$retainKeys": ignored (order is: original
 *                       elements first, new ones appended)
 * Other "$..." keys are plain keys, as in Kubernetes.  Values new to the
 * document are merged into nothing, so their nulls and directives go.
 *
 * Which lists merge is a table of field names, NOT the OpenAPI schema:
 *   conditions, addresses(*)                    by "type"
 *   containers, initContainers, ephemeralContainers, env, volumes,
 *   imagePullSecrets, containerStatuses, initContainerStatuses,
 *   ephemeralContainerStatuses, resourceClaims, resourceClaimStatuses,
 *   volumesAttached                             by "name"
 *   volumeMounts                                by "mountPath"
 *   volumeDevices                               by "devicePath"
 *   ports(*)                                    by "containerPort", else "port"
 *   taints                                      by "key"
 *   ownerReferences                             by "uid"
 *   podIPs, hostIPs                             by "ip"
 *   readinessGates                              by "conditionType"
 *   finalizers, podCIDRs                        set union of primitives
 * (*) only when an element carries the key: node addresses and container
 * ports merge, endpoint addresses are replaced.  Every other list (images,
 * tolerations, volumesInUse, ...) is replaced.  A field name means the same
 * wherever it appears (namespace spec.finalizers is merged too).
 */
#include "kube/patch.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PATCH_MAX_DEPTH 512
#define ERR_QUOTE_MAX	200

/* ---- errors ---- */

static void set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The first error wins; control bytes become '?' to keep it one line. */
static void set_err(char **err, const char *fmt, ...)
{
	if (!err || *err)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	for (char *p = s; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	*err = s;
}

static int oom(char **err)
{
	set_err(err, "patch: out of memory");
	return -1;
}

/* s as a JSON string literal, cut after ERR_QUOTE_MAX bytes. */
static void quote(struct buf *b, const char *s, size_t len)
{
	bool cut = len > ERR_QUOTE_MAX;
	buf_append_json_str(b, s, cut ? ERR_QUOTE_MAX : len);
	if (cut)
		buf_append_str(b, "...");
}

/* ---- parsing and writing ---- */

/* Whether the text opens more than PATCH_MAX_DEPTH arrays/objects at once. */
static bool too_deep(const char *s, size_t len)
{
	size_t depth = 0;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			if (++depth > PATCH_MAX_DEPTH)
				return true;
		} else if ((c == '}' || c == ']') && depth > 0) {
			depth--;
		}
	}
	return false;
}

static json_t *load(const char *what, const char *s, size_t len, size_t flags, char **err)
{
	if (!s) {
		s = "";
		len = 0;
	}
	if (too_deep(s, len)) {
		set_err(err, "%s nests deeper than %d levels", what, PATCH_MAX_DEPTH);
		return NULL;
	}
	json_error_t e;
	json_t *v = json_loadb(s, len, flags | JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	if (!v)
		set_err(err, "malformed %s: %s at line %d column %d", what, e.text, e.line,
			e.column);
	return v;
}

static int dump(struct buf *b, const json_t *v);

/* The shortest %g form that reads back exactly, marked as a real. */
static int dump_real(struct buf *b, double d)
{
	char s[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(s, sizeof s, "%.*g", prec, d);
		if (strtod(s, NULL) == d)
			break;
	}
	if (!strpbrk(s, ".eEni"))
		strcat(s, ".0");
	return buf_append_str(b, s);
}

static int dump_object(struct buf *b, const json_t *v)
{
	const char *key;
	size_t klen;
	json_t *val;
	bool first = true;
	if (buf_append_char(b, '{') < 0)
		return -1;
	json_object_keylen_foreach((json_t *)v, key, klen, val)
	{
		if ((!first && buf_append_char(b, ',') < 0) ||
		    buf_append_json_str(b, key, klen) < 0 || buf_append_char(b, ':') < 0 ||
		    dump(b, val) < 0)
			return -1;
		first = false;
	}
	return buf_append_char(b, '}');
}

static int dump_array(struct buf *b, const json_t *v)
{
	if (buf_append_char(b, '[') < 0)
		return -1;
	for (size_t i = 0; i < json_array_size(v); i++)
		if ((i && buf_append_char(b, ',') < 0) || dump(b, json_array_get(v, i)) < 0)
			return -1;
	return buf_append_char(b, ']');
}

static int dump(struct buf *b, const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return dump_object(b, v);
	case JSON_ARRAY:
		return dump_array(b, v);
	case JSON_STRING:
		return buf_append_json_str(b, json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		return buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	case JSON_REAL:
		return dump_real(b, json_real_value(v));
	case JSON_TRUE:
		return buf_append_str(b, "true");
	case JSON_FALSE:
		return buf_append_str(b, "false");
	default:
		return buf_append_str(b, "null");
	}
}

/* ---- values ---- */

/* Nesting of v: 0 for a scalar, 1 for a flat array or object. */
static size_t depth_of(const json_t *v)
{
	size_t max = 0;
	if (json_is_object(v)) {
		const char *key;
		json_t *val;
		json_object_foreach((json_t *)v, key, val)
		{
			size_t d = depth_of(val);
			max = d > max ? d : max;
		}
		return max + 1;
	}
	if (json_is_array(v)) {
		for (size_t i = 0; i < json_array_size(v); i++) {
			size_t d = depth_of(json_array_get(v, i));
			max = d > max ? d : max;
		}
		return max + 1;
	}
	return 0;
}

static bool equal(const json_t *a, const json_t *b);

static bool equal_object(const json_t *a, const json_t *b)
{
	const char *key;
	size_t klen;
	json_t *val;
	if (json_object_size(a) != json_object_size(b))
		return false;
	json_object_keylen_foreach((json_t *)a, key, klen, val)
	{
		const json_t *other = json_object_getn(b, key, klen);
		if (!other || !equal(val, other))
			return false;
	}
	return true;
}

/* Deep equality; numbers compare by value (1 equals 1.0). */
static bool equal(const json_t *a, const json_t *b)
{
	if (json_is_number(a) && json_is_number(b)) {
		if (json_is_integer(a) && json_is_integer(b))
			return json_integer_value(a) == json_integer_value(b);
		return json_number_value(a) == json_number_value(b);
	}
	if (json_typeof(a) != json_typeof(b))
		return false;
	switch (json_typeof(a)) {
	case JSON_OBJECT:
		return equal_object(a, b);
	case JSON_ARRAY:
		if (json_array_size(a) != json_array_size(b))
			return false;
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!equal(json_array_get(a, i), json_array_get(b, i)))
				return false;
		return true;
	case JSON_STRING:
		return json_string_length(a) == json_string_length(b) &&
		       memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) ==
			   0;
	default:
		return true;
	}
}

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- RFC 7386 merge patch ---- */

/* Merge patch into target (a reference this takes; may be NULL). */
static json_t *merge_7386(json_t *target, json_t *patch)
{
	if (!json_is_object(patch)) {
		json_decref(target);
		return json_incref(patch);
	}
	if (!json_is_object(target)) {
		json_decref(target);
		if (!(target = json_object()))
			return NULL;
	}
	const char *key;
	size_t klen;
	json_t *val;
	json_object_keylen_foreach(patch, key, klen, val)
	{
		if (json_is_null(val)) {
			json_object_deln(target, key, klen);
			continue;
		}
		json_t *cur = json_incref(json_object_getn(target, key, klen));
		json_t *merged = merge_7386(cur, val);
		if (!merged || json_object_setn_new(target, key, klen, merged) < 0) {
			json_decref(target);
			return NULL;
		}
	}
	return target;
}

static json_t *apply_merge(json_t *doc, json_t *patch, char **err)
{
	json_t *res = merge_7386(doc, patch);
	if (!res)
		oom(err);
	return res;
}

/* ---- strategic merge patch ---- */

enum list_kind { LIST_REPLACE, LIST_SET, LIST_KEYED };

static const struct {
	const char *field, *key;
} merge_keys[] = {
    {"conditions", "type"},
    {"containers", "name"},
    {"initContainers", "name"},
    {"ephemeralContainers", "name"},
    {"env", "name"},
    {"volumes", "name"},
    {"volumeMounts", "mountPath"},
    {"volumeDevices", "devicePath"},
    {"taints", "key"},
    {"imagePullSecrets", "name"},
    {"ownerReferences", "uid"},
    {"containerStatuses", "name"},
    {"initContainerStatuses", "name"},
    {"ephemeralContainerStatuses", "name"},
    {"podIPs", "ip"},
    {"hostIPs", "ip"},
    {"readinessGates", "conditionType"},
    {"resourceClaims", "name"},
    {"resourceClaimStatuses", "name"},
    {"volumesAttached", "name"},
};

static const char *const set_lists[] = {"finalizers", "podCIDRs"};

/* Whether an object element of either list has member key. */
static bool lists_have(const json_t *a, const json_t *b, const char *key)
{
	for (size_t i = 0; i < json_array_size(a); i++)
		if (json_object_get(json_array_get(a, i), key))
			return true;
	for (size_t i = 0; i < json_array_size(b); i++)
		if (json_object_get(json_array_get(b, i), key))
			return true;
	return false;
}

static enum list_kind list_kind_of(const char *field, const json_t *orig, const json_t *patch,
				   const char **key)
{
	*key = NULL;
	if (!field)
		return LIST_REPLACE;
	for (size_t i = 0; i < sizeof merge_keys / sizeof merge_keys[0]; i++)
		if (strcmp(field, merge_keys[i].field) == 0) {
			*key = merge_keys[i].key;
			return LIST_KEYED;
		}
	for (size_t i = 0; i < sizeof set_lists / sizeof set_lists[0]; i++)
		if (strcmp(field, set_lists[i]) == 0)
			return LIST_SET;
	if (strcmp(field, "addresses") == 0 && lists_have(orig, patch, "type"))
		*key = "type";
	else if (strcmp(field, "ports") == 0 && lists_have(orig, patch, "containerPort"))
		*key = "containerPort";
	else if (strcmp(field, "ports") == 0 && lists_have(orig, patch, "port"))
		*key = "port";
	return *key ? LIST_KEYED : LIST_REPLACE;
}

static int smp_map(json_t *orig, json_t *patch, char **err);
static int smp_value(json_t *cur, json_t *pv, const char *field, json_t **res, char **err);

/* The "$patch" directive of a list element or map: NULL if none. */
static const char *directive(const json_t *v)
{
	const json_t *d = json_object_get(v, "$patch");
	if (!d)
		return NULL;
	const char *s = json_string_value(d);
	return s ? s : "";
}

static bool is_directive_key(const char *key)
{
	return strcmp(key, "$patch") == 0 || strcmp(key, "$retainKeys") == 0 ||
	       has_prefix(key, "$setElementOrder/") || has_prefix(key, "$deleteFromPrimitiveList/");
}

/* A key naming v in a hash (a json object): its compact JSON. */
static int key_of(const json_t *v, struct buf *b)
{
	buf_reset(b);
	return dump(b, v) < 0 ? -1 : 0;
}

/* A list element without directives (NULL result: it is to be dropped). */
static int strip_elem(json_t *e, json_t **res, char **err)
{
	if (json_is_null(e)) {
		*res = json_incref(e);
		return 0;
	}
	return smp_value(NULL, e, NULL, res, err);
}

/* The patch list without its directive elements, stripped. */
static json_t *list_replace(json_t *patch, bool skip_directives, char **err)
{
	json_t *out = json_array();
	if (!out) {
		oom(err);
		return NULL;
	}
	for (size_t i = 0; i < json_array_size(patch); i++) {
		json_t *e = json_array_get(patch, i), *r;
		if (skip_directives && directive(e))
			continue;
		if (strip_elem(e, &r, err) < 0)
			goto fail;
		if (r && json_array_append_new(out, r) < 0) {
			oom(err);
			goto fail;
		}
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

static bool wants_replace(const json_t *patch)
{
	for (size_t i = 0; i < json_array_size(patch); i++) {
		const char *d = directive(json_array_get(patch, i));
		if (d && strcmp(d, "replace") == 0)
			return true;
	}
	return false;
}

/* Append each value of src not yet in the set to out. */
static int set_add_all(json_t *out, json_t *set, const json_t *src, struct buf *kb)
{
	for (size_t i = 0; i < json_array_size(src); i++) {
		json_t *e = json_array_get(src, i);
		if (key_of(e, kb) < 0)
			return -1;
		if (json_object_getn(set, kb->data, kb->len))
			continue;
		if (json_object_setn_new_nocheck(set, kb->data, kb->len, json_true()) < 0 ||
		    json_array_append(out, e) < 0)
			return -1;
	}
	return 0;
}

/* Set union: the original's values, then the patch's new ones. */
static json_t *list_union(json_t *orig, json_t *patch, char **err)
{
	struct buf kb = BUF_INIT;
	json_t *out = json_array(), *set = json_object();
	if (!out || !set || set_add_all(out, set, orig, &kb) < 0 ||
	    set_add_all(out, set, patch, &kb) < 0) {
		json_decref(out);
		out = NULL;
		oom(err);
	}
	json_decref(set);
	buf_free(&kb);
	return out;
}

/* Merging a keyed list: the elements, which are dead, and merge key -> [indices]. */
struct keyed {
	json_t *elems, *index;
	bool *dead;
	const char *field, *key;
	struct buf kb;
};

static int keyed_index(struct keyed *k, size_t i, char **err)
{
	const json_t *kv = json_object_get(json_array_get(k->elems, i), k->key);
	if (!kv)
		return 0;
	if (key_of(kv, &k->kb) < 0)
		return oom(err);
	json_t *slot = json_object_getn(k->index, k->kb.data, k->kb.len);
	if (!slot) {
		slot = json_array();
		if (!slot ||
		    json_object_setn_new_nocheck(k->index, k->kb.data, k->kb.len, slot) < 0)
			return oom(err);
	}
	return json_array_append_new(slot, json_integer((json_int_t)i)) < 0 ? oom(err) : 0;
}

/* *slot: the indices of the elements whose merge key equals pe's, or NULL. */
static int keyed_find(struct keyed *k, const json_t *pe, json_t **slot, char **err)
{
	const json_t *kv = json_object_get(pe, k->key);
	*slot = NULL;
	if (!kv) {
		set_err(err, "strategic merge patch: an element of \"%.*s\" lacks merge key \"%s\"",
			ERR_QUOTE_MAX, k->field, k->key);
		return -1;
	}
	if (key_of(kv, &k->kb) < 0)
		return oom(err);
	*slot = json_object_getn(k->index, k->kb.data, k->kb.len);
	return 0;
}

static int keyed_delete(struct keyed *k, const json_t *pe, char **err)
{
	json_t *slot;
	if (keyed_find(k, pe, &slot, err) < 0)
		return -1;
	for (size_t j = 0; j < json_array_size(slot); j++)
		k->dead[json_integer_value(json_array_get(slot, j))] = true;
	return slot ? json_array_clear(slot) : 0;
}

/* Merge pe into the first live element with its key, or append it. */
static int keyed_merge(struct keyed *k, json_t *pe, char **err)
{
	json_t *slot;
	if (keyed_find(k, pe, &slot, err) < 0)
		return -1;
	for (size_t j = 0; j < json_array_size(slot); j++) {
		size_t i = (size_t)json_integer_value(json_array_get(slot, j));
		if (!k->dead[i])
			return smp_map(json_array_get(k->elems, i), pe, err);
	}
	json_t *r;
	if (smp_value(NULL, pe, NULL, &r, err) < 0)
		return -1;
	if (!r)
		return 0;
	if (json_array_append_new(k->elems, r) < 0)
		return oom(err);
	return keyed_index(k, json_array_size(k->elems) - 1, err);
}

static int keyed_apply(struct keyed *k, json_t *pe, char **err)
{
	if (!json_is_object(pe)) {
		set_err(err, "strategic merge patch: list \"%s\" holds a non-object", k->field);
		return -1;
	}
	const char *d = directive(pe);
	if (!d)
		return keyed_merge(k, pe, err);
	if (strcmp(d, "delete") == 0)
		return keyed_delete(k, pe, err);
	set_err(err, "strategic merge patch: unknown $patch directive in list \"%s\"", k->field);
	return -1;
}

static json_t *keyed_result(struct keyed *k, char **err)
{
	json_t *out = json_array();
	for (size_t i = 0; out && i < json_array_size(k->elems); i++)
		if (!k->dead[i] && json_array_append(out, json_array_get(k->elems, i)) < 0) {
			json_decref(out);
			out = NULL;
		}
	if (!out)
		oom(err);
	return out;
}

static json_t *list_keyed(const char *field, const char *key, json_t *orig, json_t *patch,
			  char **err)
{
	struct keyed k = {.field = field, .key = key, .kb = BUF_INIT};
	size_t n = json_array_size(orig) + json_array_size(patch);
	json_t *out = NULL;
	k.elems = orig ? json_copy(orig) : json_array();
	k.index = json_object();
	k.dead = calloc(n ? n : 1, sizeof *k.dead);
	if (!k.elems || !k.index || !k.dead) {
		oom(err);
		goto done;
	}
	for (size_t i = 0; i < json_array_size(k.elems); i++)
		if (keyed_index(&k, i, err) < 0)
			goto done;
	for (size_t i = 0; i < json_array_size(patch); i++)
		if (keyed_apply(&k, json_array_get(patch, i), err) < 0)
			goto done;
	out = keyed_result(&k, err);
done:
	json_decref(k.elems);
	json_decref(k.index);
	free(k.dead);
	buf_free(&k.kb);
	return out;
}

/* The list field `field` (orig may be NULL) with the patch list applied. */
static json_t *smp_list(const char *field, json_t *orig, json_t *patch, char **err)
{
	const char *key;
	enum list_kind kind = list_kind_of(field, orig, patch, &key);
	if (wants_replace(patch))
		return list_replace(patch, true, err);
	if (kind == LIST_SET)
		return list_union(orig, patch, err);
	if (kind == LIST_KEYED)
		return list_keyed(field, key, orig, patch, err);
	return list_replace(patch, false, err);
}

/* pv applied to cur (borrowed, may be NULL): *res is a new reference, or
 * NULL when the key is to be deleted. */
static int smp_value(json_t *cur, json_t *pv, const char *field, json_t **res, char **err)
{
	*res = NULL;
	if (json_is_null(pv))
		return 0;
	if (json_is_array(pv)) {
		*res = smp_list(field, json_is_array(cur) ? cur : NULL, pv, err);
		return *res ? 0 : -1;
	}
	if (!json_is_object(pv)) {
		*res = json_incref(pv);
		return 0;
	}
	const char *d = directive(pv);
	if (d && strcmp(d, "delete") == 0)
		return 0;
	if (d && strcmp(d, "replace") != 0) {
		set_err(err, "strategic merge patch: unknown $patch directive");
		return -1;
	}
	json_t *target = json_is_object(cur) && !d ? json_incref(cur) : json_object();
	if (!target)
		return oom(err);
	if (smp_map(target, pv, err) < 0) {
		json_decref(target);
		return -1;
	}
	*res = target;
	return 0;
}

/* "$deleteFromPrimitiveList/<field>": drop the values from orig's list. */
static int delete_from_list(json_t *orig, const char *field, json_t *values, char **err)
{
	json_t *list = json_object_get(orig, field);
	if (!json_is_array(values)) {
		set_err(err, "strategic merge patch: $deleteFromPrimitiveList/%.*s is not a list",
			ERR_QUOTE_MAX, field);
		return -1;
	}
	if (!json_is_array(list))
		return 0;
	struct buf kb = BUF_INIT;
	json_t *set = json_object(), *drop = json_array(), *kept = json_array();
	int rc = set && drop && kept && set_add_all(drop, set, values, &kb) == 0 ? 0 : -1;
	for (size_t i = 0; rc == 0 && i < json_array_size(list); i++) {
		json_t *e = json_array_get(list, i);
		rc = key_of(e, &kb);
		if (rc == 0 && !json_object_getn(set, kb.data, kb.len))
			rc = json_array_append(kept, e);
	}
	if (rc == 0)
		rc = json_object_set(orig, field, kept);
	json_decref(set);
	json_decref(drop);
	json_decref(kept);
	buf_free(&kb);
	return rc < 0 ? oom(err) : 0;
}

static int smp_key(json_t *orig, const char *key, size_t klen, json_t *pv, char **err)
{
	json_t *cur = json_object_getn(orig, key, klen), *res;
	if (smp_value(cur, pv, key, &res, err) < 0)
		return -1;
	if (!res) {
		json_object_deln(orig, key, klen);
		return 0;
	}
	if (res == cur) {
		json_decref(res);
		return 0;
	}
	return json_object_setn_new(orig, key, klen, res) < 0 ? oom(err) : 0;
}

/* Merge the map patch into the map orig, in place. */
static int smp_map(json_t *orig, json_t *patch, char **err)
{
	static const char del[] = "$deleteFromPrimitiveList/";
	const char *key;
	size_t klen;
	json_t *pv;
	json_object_keylen_foreach(patch, key, klen, pv)
	{
		if (has_prefix(key, del) && delete_from_list(orig, key + strlen(del), pv, err) < 0)
			return -1;
	}
	json_object_keylen_foreach(patch, key, klen, pv)
	{
		if (!is_directive_key(key) && smp_key(orig, key, klen, pv, err) < 0)
			return -1;
	}
	return 0;
}

static json_t *apply_strategic(json_t *doc, json_t *patch, char **err)
{
	if (!json_is_object(patch)) {
		set_err(err, "strategic merge patch: the patch is not a JSON object");
		json_decref(doc);
		return NULL;
	}
	json_t *res;
	int rc = smp_value(doc, patch, NULL, &res, err);
	json_decref(doc);
	if (rc < 0)
		return NULL;
	if (!res && !(res = json_object()))
		oom(err);
	return res;
}

/* ---- RFC 6901 pointers ---- */

struct ptr {
	char *mem;  /* unescaped tokens, each NUL-terminated */
	char **tok; /* n tokens */
	size_t *len;
	size_t n;
};

static void ptr_free(struct ptr *p)
{
	free(p->mem);
	free(p->tok);
	free(p->len);
}

/* One token of s (escaped, len bytes) into dst; -1 on a bad "~" escape. */
static int ptr_token(const char *s, size_t len, char *dst, size_t *out_len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] != '~') {
			dst[n++] = s[i];
			continue;
		}
		if (i + 1 == len || (s[i + 1] != '0' && s[i + 1] != '1'))
			return -1;
		dst[n++] = s[++i] == '0' ? '~' : '/';
	}
	dst[n] = '\0';
	*out_len = n;
	return 0;
}

/* 0, -1 for a malformed pointer, -2 when out of memory. */
static int ptr_parse(const json_t *path, struct ptr *p)
{
	const char *s = json_string_value(path);
	size_t len = json_string_length(path), n = 0;
	memset(p, 0, sizeof *p);
	if (len && s[0] != '/')
		return -1;
	if (memchr(s, '\0', len))
		return -1;
	for (size_t i = 0; i < len; i++)
		n += s[i] == '/';
	p->mem = malloc(len + 1);
	p->tok = calloc(n ? n : 1, sizeof *p->tok);
	p->len = calloc(n ? n : 1, sizeof *p->len);
	if (!p->mem || !p->tok || !p->len)
		return -2;
	char *dst = p->mem;
	for (size_t i = 0; i < len; p->n++) {
		const char *start = s + i + 1, *end = memchr(start, '/', len - i - 1);
		size_t tl = end ? (size_t)(end - start) : len - i - 1;
		p->tok[p->n] = dst;
		if (ptr_token(start, tl, dst, &p->len[p->n]) < 0)
			return -1;
		dst += p->len[p->n] + 1;
		i += tl + 1;
	}
	return 0;
}

/* An array index token: "0" or digits without a leading zero, < limit. */
static bool ptr_index(const char *t, size_t tl, size_t limit, size_t *out)
{
	size_t v = 0;
	if (tl == 0 || (tl > 1 && t[0] == '0'))
		return false;
	for (size_t i = 0; i < tl; i++) {
		if (t[i] < '0' || t[i] > '9' || v > (SIZE_MAX - 9) / 10)
			return false;
		v = v * 10 + (size_t)(t[i] - '0');
	}
	*out = v;
	return v < limit;
}

/* The value at the first `upto` tokens of p (borrowed), or NULL. */
static json_t *ptr_get(json_t *doc, const struct ptr *p, size_t upto)
{
	json_t *cur = doc;
	size_t i;
	for (size_t t = 0; cur && t < upto; t++) {
		if (json_is_object(cur))
			cur = json_object_getn(cur, p->tok[t], p->len[t]);
		else if (json_is_array(cur) &&
			 ptr_index(p->tok[t], p->len[t], json_array_size(cur), &i))
			cur = json_array_get(cur, i);
		else
			cur = NULL;
	}
	return cur;
}

/* ---- RFC 6902 JSON patch ---- */

enum jp_status { JP_OK, JP_MISSING, JP_FAILED, JP_NOMEM };

struct jp_op {
	size_t idx;
	const char *name;
	json_t *op;
	struct ptr path;
};

/* Put v (a reference this takes) at p: add, or replace an existing value. */
static enum jp_status jp_put(json_t **doc, const struct ptr *p, json_t *v, bool replace)
{
	if (p->n == 0) {
		json_decref(*doc);
		*doc = v;
		return JP_OK;
	}
	json_t *parent = ptr_get(*doc, p, p->n - 1);
	const char *t = p->tok[p->n - 1];
	size_t tl = p->len[p->n - 1], i, size = json_array_size(parent);
	if (json_is_object(parent) && (!replace || json_object_getn(parent, t, tl)))
		return json_object_setn_new(parent, t, tl, v) < 0 ? JP_NOMEM : JP_OK;
	if (json_is_array(parent) && !replace && tl == 1 && t[0] == '-')
		return json_array_append_new(parent, v) < 0 ? JP_NOMEM : JP_OK;
	if (json_is_array(parent) && ptr_index(t, tl, size + !replace, &i)) {
		int rc = replace ? json_array_set_new(parent, i, v)
				 : json_array_insert_new(parent, i, v);
		return rc < 0 ? JP_NOMEM : JP_OK;
	}
	json_decref(v);
	return JP_MISSING;
}

static enum jp_status jp_remove(json_t *doc, const struct ptr *p)
{
	if (p->n == 0)
		return JP_MISSING;
	json_t *parent = ptr_get(doc, p, p->n - 1);
	const char *t = p->tok[p->n - 1];
	size_t tl = p->len[p->n - 1], i;
	if (json_is_object(parent))
		return json_object_deln(parent, t, tl) < 0 ? JP_MISSING : JP_OK;
	if (json_is_array(parent) && ptr_index(t, tl, json_array_size(parent), &i))
		return json_array_remove(parent, i) < 0 ? JP_NOMEM : JP_OK;
	return JP_MISSING;
}

static void jp_err(char **err, const struct jp_op *o, const char *member, const char *what)
{
	struct buf b = BUF_INIT;
	const json_t *s = json_object_get(o->op, member);
	buf_printf(&b, "json patch op[%zu] (%s): %s ", o->idx, o->name, member);
	quote(&b, json_string_value(s), json_string_length(s));
	buf_printf(&b, " %s", what);
	set_err(err, "%s", buf_cstr(&b));
	buf_free(&b);
}

/* A member that must be a JSON pointer, parsed into p. */
static int jp_pointer(const struct jp_op *o, const char *member, struct ptr *p, char **err)
{
	const json_t *s = json_object_get(o->op, member);
	if (!json_is_string(s)) {
		set_err(err, "json patch op[%zu] (%s): \"%s\" missing or not a string", o->idx,
			o->name, member);
		memset(p, 0, sizeof *p);
		return -1;
	}
	int rc = ptr_parse(s, p);
	if (rc == -2)
		return oom(err);
	if (rc < 0)
		jp_err(err, o, member, "is not a JSON pointer");
	return rc;
}

static int jp_status_err(enum jp_status st, const struct jp_op *o, const char *member, char **err)
{
	if (st == JP_OK)
		return 0;
	if (st == JP_NOMEM)
		return oom(err);
	jp_err(err, o, member, st == JP_FAILED ? "test failed" : "does not exist");
	return -1;
}

/* Place v (a reference this takes) at the op's path, within the depth limit. */
static int jp_place(json_t **doc, struct jp_op *o, json_t *v, bool replace, char **err)
{
	if (!v)
		return oom(err);
	if (o->path.n + depth_of(v) > PATCH_MAX_DEPTH) {
		json_decref(v);
		jp_err(err, o, "path", "would nest deeper than the limit");
		return -1;
	}
	return jp_status_err(jp_put(doc, &o->path, v, replace), o, "path", err);
}

static const json_t *jp_value(const struct jp_op *o, char **err)
{
	const json_t *v = json_object_get(o->op, "value");
	if (!v)
		set_err(err, "json patch op[%zu] (%s): \"value\" missing", o->idx, o->name);
	return v;
}

/* 1 when "from" equals "path", 2 when it is a proper prefix (a value
 * cannot move into itself), else 0. */
static int jp_from_in_path(const struct jp_op *o)
{
	const json_t *from = json_object_get(o->op, "from"), *path = json_object_get(o->op, "path");
	size_t fl = json_string_length(from), pl = json_string_length(path);
	if (pl < fl || memcmp(json_string_value(path), json_string_value(from), fl) != 0)
		return 0;
	if (pl == fl)
		return 1;
	return json_string_value(path)[fl] == '/' ? 2 : 0;
}

static int jp_from(json_t **doc, struct jp_op *o, bool move, char **err)
{
	struct ptr from;
	int rc = jp_pointer(o, "from", &from, err);
	json_t *v = rc == 0 ? ptr_get(*doc, &from, from.n) : NULL;
	if (rc == 0 && !v)
		rc = jp_status_err(JP_MISSING, o, "from", err);
	int rel = rc == 0 && move ? jp_from_in_path(o) : 0;
	if (rel == 2) {
		jp_err(err, o, "from", "is a parent of the path");
		rc = -1;
	}
	if (rc == 0 && rel == 0) {
		v = move ? json_incref(v) : json_deep_copy(v);
		if (move && jp_remove(*doc, &from) != JP_OK) {
			json_decref(v);
			v = NULL;
		}
		rc = jp_place(doc, o, v, false, err);
	}
	ptr_free(&from);
	return rc;
}

static int jp_run(json_t **doc, struct jp_op *o, char **err)
{
	const char *n = o->name;
	const json_t *v;
	if (strcmp(n, "add") == 0 || strcmp(n, "replace") == 0) {
		if (!(v = jp_value(o, err)))
			return -1;
		return jp_place(doc, o, json_deep_copy(v), n[0] == 'r', err);
	}
	if (strcmp(n, "remove") == 0)
		return jp_status_err(jp_remove(*doc, &o->path), o, "path", err);
	if (strcmp(n, "move") == 0 || strcmp(n, "copy") == 0)
		return jp_from(doc, o, n[0] == 'm', err);
	if (!(v = jp_value(o, err)))
		return -1;
	json_t *cur = ptr_get(*doc, &o->path, o->path.n);
	if (!cur)
		return jp_status_err(JP_MISSING, o, "path", err);
	return jp_status_err(equal(cur, v) ? JP_OK : JP_FAILED, o, "path", err);
}

static int jp_one(json_t **doc, size_t idx, json_t *op, char **err)
{
	static const char *const known[] = {"add", "remove", "replace", "move", "copy", "test"};
	struct jp_op o = {
	    .idx = idx, .op = op, .name = json_string_value(json_object_get(op, "op"))};
	if (!json_is_object(op) || !o.name) {
		set_err(err, "json patch op[%zu]: not an object with a string \"op\"", idx);
		return -1;
	}
	bool ok = false;
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		ok |= strcmp(o.name, known[i]) == 0;
	if (!ok) {
		struct buf b = BUF_INIT;
		quote(&b, o.name, json_string_length(json_object_get(op, "op")));
		set_err(err, "json patch op[%zu]: unknown op %s", idx, buf_cstr(&b));
		buf_free(&b);
		return -1;
	}
	int rc = jp_pointer(&o, "path", &o.path, err);
	if (rc == 0)
		rc = jp_run(doc, &o, err);
	ptr_free(&o.path);
	return rc;
}

static json_t *apply_json(json_t *doc, json_t *patch, char **err)
{
	if (!json_is_array(patch)) {
		set_err(err, "json patch: the patch is not a JSON array");
		json_decref(doc);
		return NULL;
	}
	for (size_t i = 0; i < json_array_size(patch); i++)
		if (jp_one(&doc, i, json_array_get(patch, i), err) < 0) {
			json_decref(doc);
			return NULL;
		}
	return doc;
}

/* ---- entry points ---- */

enum patch_type patch_type_of(const char *content_type)
{
	static const struct {
		const char *name;
		enum patch_type type;
	} types[] = {
	    {"application/merge-patch+json", PATCH_MERGE},
	    {"application/strategic-merge-patch+json", PATCH_STRATEGIC},
	    {"application/json-patch+json", PATCH_JSON},
	};
	if (!content_type)
		return PATCH_UNSUPPORTED;
	const char *s = content_type + strspn(content_type, " \t");
	size_t len = strcspn(s, ";");
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strlen(types[i].name) == len && strncasecmp(s, types[i].name, len) == 0)
			return types[i].type;
	return PATCH_UNSUPPORTED;
}

static json_t *apply(enum patch_type type, json_t *doc, json_t *patch, char **err)
{
	switch (type) {
	case PATCH_MERGE:
		return apply_merge(doc, patch, err);
	case PATCH_STRATEGIC:
		return apply_strategic(doc, patch, err);
	case PATCH_JSON:
		return apply_json(doc, patch, err);
	default:
		json_decref(doc);
		set_err(err, "unsupported patch type");
		return NULL;
	}
}

/* The patched document (an object), or NULL with *msg. */
static json_t *load_and_apply(enum patch_type type, const char *doc, size_t doc_len,
			      const char *patch, size_t patch_len, char **msg)
{
	size_t flags = type == PATCH_JSON ? JSON_REJECT_DUPLICATES : 0;
	json_t *d = load("document", doc, doc_len, 0, msg), *p = NULL, *res = NULL;
	if (d && !json_is_object(d))
		set_err(msg, "the document is not a JSON object");
	else if (d && (p = load("patch", patch, patch_len, flags, msg)))
		res = apply(type, json_incref(d), p, msg);
	json_decref(p);
	json_decref(d);
	if (res && !json_is_object(res)) {
		set_err(msg, "the patched document is not a JSON object");
		json_decref(res);
		res = NULL;
	}
	return res;
}

int patch_apply(enum patch_type type, const char *doc, size_t doc_len, const char *patch,
		size_t patch_len, struct buf *out, char **err)
{
	char *msg = NULL;
	json_t *res = NULL;
	if (err)
		*err = NULL;
	if (!out) {
		set_err(err, "patch: no output buffer");
		return -1;
	}
	if (type != PATCH_MERGE && type != PATCH_STRATEGIC && type != PATCH_JSON)
		set_err(&msg, "unsupported patch type");
	else
		res = load_and_apply(type, doc, doc_len, patch, patch_len, &msg);
	size_t mark = out->len;
	int rc = res && dump(out, res) == 0 ? 0 : -1;
	if (res && rc < 0)
		oom(&msg);
	json_decref(res);
	if (rc == 0)
		return 0;
	if (out->data) {
		out->len = mark;
		out->data[mark] = '\0';
	}
	if (!msg)
		msg = strdup("patch failed");
	if (err)
		*err = msg;
	else
		free(msg);
	return -1;
}
