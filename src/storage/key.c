/*
 * key.c - key layouts and name validation, see key.h.
 *
 * Every string that becomes part of a path passes through here first: names
 * come from the network and must never walk out of the cache directory.
 */
#include "storage/key.h"

#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

bool key_segment_ok(const char *s, size_t max)
{
	if (!s || !*s)
		return false;
	size_t n = strlen(s);
	if (n > max || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	if (!strncmp(s, "tmp_", 4))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '/' || c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

static bool chars_in(const char *s, const char *extra)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool alnum =
		    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && !strchr(extra, c))
			return false;
	}
	return true;
}

bool key_component_ok(const char *s)
{
	if (!key_segment_ok(s, KEY_COMPONENT_MAX))
		return false;
	if (s[0] == '.' || s[0] == '_' || !strcmp(s, "version") || !strcmp(s, "apis"))
		return false;
	return chars_in(s, "._+:@-");
}

bool key_resource_ok(const char *s)
{
	/* Resources are DNS labels (CRD plurals too); no dots, so that the
	 * resource directory "<r>.<v>.<g>" splits back unambiguously. */
	return s && *s && strlen(s) <= 63 && chars_in(s, "-");
}

bool key_version_ok(const char *s)
{
	return s && *s && strlen(s) <= 63 && chars_in(s, "-");
}

bool key_group_ok(const char *s)
{
	if (!s || !*s)
		return true;
	return strlen(s) <= 253 && chars_in(s, ".-") && strcmp(s, "core") != 0 && s[0] != '.' &&
	       !strstr(s, "..");
}

char *key_resource_dir(enum key_layout layout, const char *resource, const char *version,
		       const char *group)
{
	if (!key_resource_ok(resource))
		return NULL;
	struct buf b = BUF_INIT;
	if (layout == KEY_LAYOUT_LEGACY) {
		if (buf_append_str(&b, resource) < 0)
			return NULL;
		return buf_steal(&b);
	}
	if (!key_version_ok(version) || !key_group_ok(group))
		return NULL;
	if (buf_printf(&b, "%s.%s.%s", resource, version, group && *group ? group : "core") < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

int key_parse_resource_dir(const char *dir, char **resource, char **version, char **group)
{
	*resource = *version = *group = NULL;
	const char *d1 = strchr(dir, '.');
	const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	if ((d1 && !d2) || (d2 && !d2[1]))
		return -1; /* "pods.v1" or "pods.v1.": the core group is spelled "core" */
	if (!d1) {
		*resource = strdup(dir);
		*version = strdup("");
		*group = strdup("");
	} else {
		*resource = strndup(dir, (size_t)(d1 - dir));
		*version = strndup(d1 + 1, (size_t)(d2 - d1 - 1));
		*group = strdup(strcmp(d2 + 1, "core") ? d2 + 1 : "");
	}
	if (!*resource || !*version || !*group || !key_resource_ok(*resource) ||
	    (d1 && (!key_version_ok(*version) || !key_group_ok(*group)))) {
		free(*resource);
		free(*version);
		free(*group);
		*resource = *version = *group = NULL;
		return -1;
	}
	return 0;
}

void store_key_free(struct store_key *k)
{
	if (!k)
		return;
	free(k->path);
	free(k->component);
	free(k->group);
	free(k->version);
	free(k->resource);
	free(k->namespace);
	free(k->name);
	memset(k, 0, sizeof *k);
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static enum store_err key_fill_info(const struct store_key_info *info, struct store_key *out,
				    const char *ns)
{
	out->component = dup_or_empty(info->component);
	out->group = dup_or_empty(info->group);
	out->version = dup_or_empty(info->version);
	out->resource = dup_or_empty(info->resource);
	out->namespace = dup_or_empty(ns);
	out->name = dup_or_empty(info->name);
	if (!out->component || !out->group || !out->version || !out->resource || !out->namespace ||
	    !out->name) {
		store_key_free(out);
		return STORE_NOMEM;
	}
	out->is_root = !info->name || !*info->name;
	return STORE_OK;
}

enum store_err key_build_disk(enum key_layout layout, const struct store_key_info *info,
			      struct store_key *out)
{
	memset(out, 0, sizeof *out);
	if (!info->component || !*info->component || !info->resource || !*info->resource)
		return STORE_EMPTY_KEY;
	if (!key_component_ok(info->component))
		return STORE_BAD_KEY;
	/* YurtHub ignores the namespace of the namespaces resource itself. */
	const char *ns = info->namespace && *info->namespace ? info->namespace : NULL;
	if (!strcmp(info->resource, "namespaces"))
		ns = NULL;
	if (ns && !key_segment_ok(ns, KEY_NAME_MAX))
		return STORE_BAD_KEY;
	if (info->name && *info->name && !key_segment_ok(info->name, KEY_NAME_MAX))
		return STORE_BAD_KEY;
	if (layout == KEY_LAYOUT_ENHANCED && (!info->version || !*info->version))
		return STORE_EMPTY_KEY;
	char *resdir = key_resource_dir(layout, info->resource, info->version, info->group);
	if (!resdir)
		return STORE_BAD_KEY;
	struct buf p = BUF_INIT;
	int r = buf_printf(&p, "%s/%s", info->component, resdir);
	if (r == 0 && ns)
		r = buf_printf(&p, "/%s", ns);
	if (r == 0 && info->name && *info->name)
		r = buf_printf(&p, "/%s", info->name);
	free(resdir);
	if (r < 0) {
		buf_free(&p);
		return STORE_NOMEM;
	}
	enum store_err e = key_fill_info(info, out, ns);
	if (e != STORE_OK) {
		buf_free(&p);
		return e;
	}
	out->path = buf_steal(&p);
	return STORE_OK;
}

char *key_cluster_info_name(const char *url_path)
{
	if (!url_path || url_path[0] != '/' || strlen(url_path) > 512)
		return NULL;
	if (!strcmp(url_path, "/version"))
		return strdup("version");
	if (!strcmp(url_path, "/apis"))
		return strdup("apis");
	/* Segments of [A-Za-z0-9.-], none empty, none "." or "..". */
	const char *seg = url_path + 1;
	for (;;) {
		const char *end = strchr(seg, '/');
		size_t n = end ? (size_t)(end - seg) : strlen(seg);
		if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && !strncmp(seg, "..", 2)))
			return NULL;
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)seg[i];
			bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
				  (c >= '0' && c <= '9') || c == '.' || c == '-';
			if (!ok)
				return NULL;
		}
		if (!end)
			break;
		seg = end + 1;
	}
	if (strlen(url_path) > 255)
		return NULL; /* it becomes one file name */
	char *name = strdup(url_path);
	if (!name)
		return NULL;
	for (char *c = name; *c; c++)
		if (*c == '/')
			*c = '_';
	return name;
}

/* ---- etcd: kube-apiserver's layout ---- */

/* Groups whose resources kube-apiserver stores without the group in the key. */
static const char *const builtin_groups[] = {
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "extensions",
    "networking.k8s.io",
    "storage.k8s.io",
    "rbac.authorization.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "node.k8s.io",
    "scheduling.k8s.io",
    "certificates.k8s.io",
    "admissionregistration.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
    "internal.apiserver.k8s.io",
    "storagemigration.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
};

static const struct {
	const char *group, *resource, *path;
} special_paths[] = {
    {"", "replicationcontrollers", "controllers"},
    {"", "endpoints", "services/endpoints"},
    {"", "nodes", "minions"},
    {"", "services", "services/specs"},
    {"extensions", "ingresses", "ingress"},
    {"networking.k8s.io", "ingresses", "ingress"},
    {"extensions", "podsecuritypolicies", "podsecuritypolicy"},
    {"policy", "podsecuritypolicies", "podsecuritypolicy"},
};

char *key_etcd_resource_path(const char *group, const char *resource)
{
	if (!group)
		group = "";
	if (!key_resource_ok(resource) || !key_group_ok(group))
		return NULL;
	for (size_t i = 0; i < sizeof special_paths / sizeof special_paths[0]; i++)
		if (!strcmp(group, special_paths[i].group) &&
		    !strcmp(resource, special_paths[i].resource))
			return strdup(special_paths[i].path);
	for (size_t i = 0; i < sizeof builtin_groups / sizeof builtin_groups[0]; i++)
		if (!strcmp(group, builtin_groups[i]))
			return strdup(resource);
	struct buf b = BUF_INIT;
	if (buf_printf(&b, "%s/%s", group, resource) < 0)
		return NULL;
	return buf_steal(&b);
}

enum store_err key_build_etcd(const char *prefix, const struct store_key_info *info,
			      struct store_key *out)
{
	memset(out, 0, sizeof *out);
	if (!info->component || !*info->component || !info->resource || !*info->resource)
		return STORE_EMPTY_KEY;
	if (!key_component_ok(info->component))
		return STORE_BAD_KEY;
	const char *ns = info->namespace && *info->namespace ? info->namespace : NULL;
	if (!strcmp(info->resource, "namespaces"))
		ns = NULL;
	if (ns && !key_segment_ok(ns, KEY_NAME_MAX))
		return STORE_BAD_KEY;
	bool root = !info->name || !*info->name;
	if (!root && !key_segment_ok(info->name, KEY_NAME_MAX))
		return STORE_BAD_KEY;
	if (!info->version || !*info->version)
		return STORE_EMPTY_KEY;
	if (!key_version_ok(info->version))
		return STORE_BAD_KEY;
	char *res = key_etcd_resource_path(info->group, info->resource);
	if (!res)
		return STORE_BAD_KEY;
	struct buf p = BUF_INIT;
	int r = buf_printf(&p, "%s/%s/", prefix, res);
	if (r == 0 && ns)
		r = buf_printf(&p, "%s/", ns);
	if (r == 0 && !root) {
		p.data[--p.len] = '\0'; /* an object key has no trailing '/' */
		r = buf_printf(&p, "/%s", info->name);
	}
	free(res);
	if (r < 0) {
		buf_free(&p);
		return STORE_NOMEM;
	}
	enum store_err e = key_fill_info(info, out, ns);
	if (e != STORE_OK) {
		buf_free(&p);
		return e;
	}
	out->path = buf_steal(&p);
	return STORE_OK;
}
