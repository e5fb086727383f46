/*
 * framing.h - where the events of a watch stream begin and end, as
 * kube-apiserver frames them: JSON events one per line (each ends in a
 * newline), protobuf events each behind a 4-byte big-endian length.
 *
 * The proxy feeds it every byte of a watch answer it passes on, to know
 * whether the stream so far ends between two events.  A watch that has to
 * be ended there can end cleanly (a final chunk: the client re-watches);
 * one cut inside an event must be broken off, or the client would take the
 * half event for a whole one.
 */
#ifndef YURTHUB_KUBE_FRAMING_H
#define YURTHUB_KUBE_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum framing_kind {
	FRAMING_UNKNOWN, /* not a framing we know: never between events */
	FRAMING_LINES,	 /* JSON */
	FRAMING_LENGTH,	 /* application/vnd.kubernetes.protobuf;stream=watch */
};

struct framing {
	enum framing_kind kind;
	bool mid_line;	   /* LINES: bytes since the last newline */
	unsigned int head; /* LENGTH: bytes of the 4-byte length read */
	uint32_t length;   /* LENGTH: the length as read so far */
	uint32_t left;	   /* LENGTH: bytes of the event still to come */
};

/* The framing of a watch answer with this Content-Type (may be NULL). */
void framing_init(struct framing *f, const char *content_type);
void framing_feed(struct framing *f, const char *data, size_t len);
/* Does what was fed end between two events (or is it empty)? */
bool framing_between_events(const struct framing *f);

#endif
