/*
 * selectable.h - the part of an object that label and field selectors can
 * look at, picked out of its JSON into a small JSON document of the same
 * shape.
 *
 * The disk store keeps this "selectable document" of every object in its
 * index (storage/disk_index.h), so that an offline list with a selector
 * opens only the files it returns.  The document holds metadata.name,
 * metadata.namespace, metadata.labels and the fields the API server lets
 * clients select on for the resource (kube/fieldlabels.h), each copied
 * byte for byte, so that selector_match_json() on it answers as it would on
 * the whole object.
 */
#ifndef YURTHUB_KUBE_SELECTABLE_H
#define YURTHUB_KUBE_SELECTABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/selector.h"
#include "util/buf.h"

/* Append the selectable document of json, an object of (group, resource),
 * to out.  0, or -1 when the bytes are not a JSON object this picker reads
 * exactly as the selector code would (malformed, a key spelled with
 * escapes, a picked key given twice); out is then as it was. */
int selectable_pick(const char *group, const char *resource, const char *json, size_t len,
		    struct buf *out);

/* Can the field selector (NULL: none) be answered from the selectable
 * document of the resource?  Label selectors always can. */
bool selectable_answers(const char *group, const char *resource, const struct selector *fields);

#endif
