/*
 * stream_check.h - what the list and watch stream targets check of every
 * object a decoder hands out: the same bytes and metadata whatever the
 * chunking (recorded here to be compared), and bytes that are one JSON
 * object whose metadata, read again by kube_meta_parse, is what the decoder
 * picked.
 */
#ifndef YURTHUB_FUZZ_STREAM_CHECK_H
#define YURTHUB_FUZZ_STREAM_CHECK_H

#include "kube/stream.h"
#include "util/buf.h"

/* Check o and append a record of it to log. */
void stream_check_object(struct buf *log, const struct stream_object *o);

#endif
