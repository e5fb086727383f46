/*
 * stream_internal.h - test-only views into the stream decoders (stream.c).
 * Not part of the API: tests use them to check that memory stays bounded.
 */
#ifndef YURTHUB_KUBE_STREAM_INTERNAL_H
#define YURTHUB_KUBE_STREAM_INTERNAL_H

#include <stddef.h>

#include "kube/stream.h"

/* Capacity of the buffer that gathers an item/event object spanning chunks. */
size_t list_decoder_held_cap(const struct list_decoder *d);
size_t watch_decoder_held_cap(const struct watch_decoder *d);

#endif
