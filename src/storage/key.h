/*
 * key.h - turning (component, group, version, resource, namespace, name) into
 * the keys each backend lays out, and refusing names that must never reach a
 * file system or an etcd key.
 *
 * Disk layout (YurtHub's "enhancement mode"):
 *     <component>/<resource>.<version>.<group or "core">/[<namespace>/]<name>
 * and YurtHub's legacy layout, where the resource directory is the bare
 * resource name.  The etcd layout is kube-apiserver's, see key_etcd_path().
 */
#ifndef YURTHUB_STORAGE_KEY_H
#define YURTHUB_STORAGE_KEY_H

#include <stdbool.h>
#include <stddef.h>

#include "storage/store.h"

#define KEY_NAME_MAX	  253 /* longest object name or namespace accepted */
#define KEY_COMPONENT_MAX 128

enum key_layout { KEY_LAYOUT_ENHANCED, KEY_LAYOUT_LEGACY };

/* One path segment from the network: non-empty, not "." or "..", no '/',
 * no NUL or control bytes, at most `max` bytes, and not YurtHub's backup
 * prefix "tmp_". */
bool key_segment_ok(const char *s, size_t max);
/* A component (User-Agent product) usable as a top-level cache directory:
 * a safe segment of [A-Za-z0-9._+:@-] that is not "version" or "apis" and
 * does not start with '.' or '_' (those names belong to the hub). */
bool key_component_ok(const char *s);
/* resource, version, group: the characters Kubernetes allows in them. */
bool key_resource_ok(const char *s);
bool key_version_ok(const char *s);
bool key_group_ok(const char *s); /* "" (core) allowed */

/* "<resource>.<version>.<group|core>" or "<resource>"; malloc'ed, NULL on
 * ENOMEM or invalid parts. */
char *key_resource_dir(enum key_layout layout, const char *resource, const char *version,
		       const char *group);
/* Parse "<resource>.<version>.<group...>" (or a bare legacy "<resource>") back;
 * returns 0 and malloc'ed parts (group "" for core), or -1. */
int key_parse_resource_dir(const char *dir, char **resource, char **version, char **group);

/* Build a disk key; validates every part. */
enum store_err key_build_disk(enum key_layout layout, const struct store_key_info *info,
			      struct store_key *out);

/* Cluster info file name for a URL path: "/version" -> "version", "/apis" ->
 * "apis", anything else -> the path with '/' turned into '_' ("/apis/g/v1" ->
 * "_apis_g_v1").  NULL for a path that is not a plain discovery-like path. */
char *key_cluster_info_name(const char *url_path);

/* kube-apiserver's resource path in etcd: the special prefixes of its
 * default storage factory (nodes -> "minions", services -> "services/specs",
 * endpoints -> "services/endpoints", replicationcontrollers -> "controllers",
 * ingresses -> "ingress", podsecuritypolicies -> "podsecuritypolicy"), the
 * bare resource for built-in groups, "<group>/<resource>" for the others
 * (custom resources).  malloc'ed; NULL for an invalid resource or group. */
char *key_etcd_resource_path(const char *group, const char *resource);
/* An etcd key: <prefix>/<resource path>/[<namespace>/]<name>; a root key
 * (no name) is the collection's prefix and ends in '/'. */
enum store_err key_build_etcd(const char *prefix, const struct store_key_info *info,
			      struct store_key *out);

#endif
