/*
 * kinds.h - which Kind a resource holds ("pods" -> "Pod"), for the answers
 * the hub builds itself offline: list kinds ("PodList") and the kind and
 * apiVersion that watch events and gets must carry, while objects cached
 * from lists lack them.
 *
 * Built-in resources come from a table; others (CRDs) from the discovery
 * documents the hub cached (APIResourceList: resources[].name/kind).
 */
#ifndef YURTHUB_KUBE_KINDS_H
#define YURTHUB_KUBE_KINDS_H

#include <stddef.h>

/* The kind of a built-in resource of group ("" for core), or NULL. */
const char *kinds_builtin(const char *group, const char *resource);

/* The kind of `resource` in an APIResourceList document (the JSON of
 * /api/v1 or /apis/<group>/<version>): malloc'ed, or NULL when the document
 * does not list it (or is not an APIResourceList). */
char *kinds_from_discovery(const char *json, size_t len, const char *resource);

#endif
