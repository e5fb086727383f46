/*
 * patch.h - applying a PATCH to an object, for the offline answers: the
 * kubelet's node-status and lease updates must be applied to the cached
 * object while the cloud is away.
 *
 *   application/merge-patch+json            RFC 7386 JSON merge patch
 *   application/strategic-merge-patch+json  applied as a merge patch, with
 *                                           strategic directives ($patch,
 *                                           $setElementOrder/..., $retainKeys,
 *                                           $deleteFromPrimitiveList/...)
 *                                           removed, and lists of objects that
 *                                           carry a merge key merged by it
 *   application/json-patch+json             RFC 6902 JSON patch
 *   application/apply-patch+yaml            not supported (server-side apply)
 */
#ifndef YURTHUB_KUBE_PATCH_H
#define YURTHUB_KUBE_PATCH_H

#include <stddef.h>

#include "util/buf.h"

enum patch_type {
	PATCH_MERGE,
	PATCH_STRATEGIC,
	PATCH_JSON,
	PATCH_UNSUPPORTED,
};

/* From a Content-Type header value (parameters ignored). */
enum patch_type patch_type_of(const char *content_type);

/* Apply patch to the JSON object doc; the result (one JSON object, compact)
 * is appended to out.  0, or -1 with *err (malloc'ed, one line): malformed
 * document or patch, a failed JSON-patch "test", a path that does not exist. */
int patch_apply(enum patch_type type, const char *doc, size_t doc_len, const char *patch,
		size_t patch_len, struct buf *out, char **err);

#endif
