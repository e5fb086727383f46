/*
 * meta.h - what the hub needs to know of one Kubernetes object: its
 * metadata, read straight from the JSON bytes.
 *
 * kube_meta_parse() validates the whole document (it must be one JSON object)
 * and picks top-level kind/apiVersion and metadata.{name,namespace,
 * resourceVersion,uid}.  It never copies the object.
 */
#ifndef YURTHUB_KUBE_META_H
#define YURTHUB_KUBE_META_H

#include <stddef.h>
#include <stdint.h>

struct kube_meta {
	char *kind, *api_version;     /* NULL when absent */
	char *name, *namespace, *uid; /* NULL when absent */
	char *resource_version;	      /* NULL when absent */
	uint64_t rv;		      /* parsed resource_version, 0 if absent/unparsable */
	int has_metadata;	      /* a "metadata" object was present */
	/* name or namespace held "\u0000": its C string is cut there and would
	 * name another object, so it must not become a key */
	int nul_in_name;
};

/* 0 on success; -1 when the bytes are not exactly one JSON object (then *m is
 * left empty).  Free with kube_meta_free in both cases. */
int kube_meta_parse(const char *json, size_t len, struct kube_meta *m);
/* Only metadata.resourceVersion, stopping as soon as it is seen: for hot paths
 * that already trust the document.  0 and *rv set (0 when absent), -1 on
 * malformed JSON before the field. */
int kube_meta_rv(const char *json, size_t len, uint64_t *rv);
void kube_meta_free(struct kube_meta *m);

/* Kubernetes resourceVersions are opaque strings; in practice etcd revisions.
 * Parses a decimal uint64; returns 0 and sets *out, or -1 (then *out = 0). */
int kube_rv_parse(const char *s, size_t len, uint64_t *out);

#endif
