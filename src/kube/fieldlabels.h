/*
 * fieldlabels.h - the fields a client may select on, per resource, as
 * kube-apiserver decides it (its field label conversion functions): the
 * hub answers offline with the same 400 the API server gives online for a
 * field it cannot select on.
 */
#ifndef YURTHUB_KUBE_FIELDLABELS_H
#define YURTHUB_KUBE_FIELDLABELS_H

#include "kube/selector.h"

/* Does kube-apiserver accept every field of the field selector fields for
 * the resource of group ("" for core)?  0, or -1 with *why (malloc'ed; NULL
 * on ENOMEM) set to the API server's message.  Core resources are checked
 * against their table, other core resources against the default
 * (metadata.name, metadata.namespace); resources of other groups are
 * accepted as they come: their selectable fields (a custom resource's
 * selectableFields) are not known to the hub. */
int field_labels_check(const char *group, const char *resource, const struct selector *fields,
		       char **why);

/* The fields clients may select on for the resource of group ("" for
 * core), NULL-terminated: its table, or metadata.name and metadata.namespace
 * for other core resources.  NULL for other groups, whose selectable fields
 * the hub does not know. */
const char *const *field_labels_of(const char *group, const char *resource);

#endif
