/*
 * json_scan.h - a streaming JSON tokenizer that checks every byte and
 * reports only what its reader asks for.
 *
 * The list and watch decoders (kube/stream.c) read tens of megabytes of JSON
 * per list and need a dozen values of each object: its kind, name,
 * namespace and resourceVersion.  A general parser calls back for every
 * token; this one lets the reader answer JSON_SCAN_SKIP when a container
 * opens, and then checks the container's bytes in a tight loop, without
 * calls, copies or unescaping, until the container closes (which is
 * reported).  The grammar checked is RFC 8259's, with the few liberties
 * yajl takes, so that what the decoders accept does not change with the
 * tokenizer: \v and \f count as whitespace, and a string's UTF-8 is checked
 * for its shape (a lead byte and its continuation bytes), not for overlong
 * forms or surrogates.
 *
 * Input comes in chunks cut anywhere.  A reported token that a chunk end
 * cuts is gathered until it ends, so the reader always sees it whole.
 */
#ifndef YURTHUB_UTIL_JSON_SCAN_H
#define YURTHUB_UTIL_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>

enum json_token {
	JSON_NULL,
	JSON_TRUE,
	JSON_FALSE,
	JSON_NUMBER, /* its text, as written */
	JSON_STRING, /* unescaped; may hold NUL bytes */
	JSON_KEY,    /* likewise */
	JSON_MAP_START,
	JSON_MAP_END,
	JSON_ARRAY_START,
	JSON_ARRAY_END,
};

/* What the reader's callback returns. */
enum {
	JSON_SCAN_STOP = 0, /* the reader failed: the scan stops (feed returns -1) */
	JSON_SCAN_GO = 1,
	JSON_SCAN_SKIP = 2, /* after a *_START: report nothing until its *_END */
};

/* s is valid during the call only; NULL with len 0 for tokens without text. */
typedef int (*json_token_fn)(void *ctx, enum json_token t, const char *s, size_t len);

struct json_scan_limits {
	size_t depth_max;	    /* open containers */
	unsigned long long gap_max; /* bytes from one token's end to the next's */
	size_t number_max;	    /* bytes of a number */
};

struct json_scan;

/* multiple: top-level values may follow one another (a watch stream);
 * otherwise exactly one is expected. */
struct json_scan *json_scan_new(const struct json_scan_limits *limits, bool multiple,
				json_token_fn fn, void *ctx);
void json_scan_free(struct json_scan *s);

/* 0, or -1 on malformed JSON, a bound passed, a stop, or ENOMEM.  Once -1,
 * later calls return -1. */
int json_scan_feed(struct json_scan *s, const char *data, size_t len);
/* End of input: 0 when it ended between top-level values (and, unless
 * multiple, after one); a top-level number pending is reported first. */
int json_scan_finish(struct json_scan *s);

/* During a callback: the offset, in the chunk being fed, just past the
 * token being reported.  A one-byte token ({ } [ ]) is always in the
 * chunk, at this offset - 1. */
size_t json_scan_consumed(const struct json_scan *s);
/* Bytes of input read so far; after an error, where it was found. */
unsigned long long json_scan_position(const struct json_scan *s);
enum json_scan_fault {
	JSON_SCAN_OK, /* none, or the reader stopped the scan (it knows why) */
	JSON_SCAN_MALFORMED,
	JSON_SCAN_TOO_DEEP,	   /* more than depth_max containers open */
	JSON_SCAN_NO_TOKEN_END,	   /* gap_max bytes without a token ending */
	JSON_SCAN_NUMBER_TOO_LONG, /* a number over number_max bytes */
	JSON_SCAN_NO_MEMORY,
};

/* Why the scan failed; *detail says more of malformed JSON, else NULL. */
enum json_scan_fault json_scan_error(const struct json_scan *s, const char **detail);

#endif
