/*
 * respond.h - building the responses the hub itself writes: Kubernetes
 * Status objects for errors, and plain JSON or text bodies.
 */
#ifndef YURTHUB_SERVER_RESPOND_H
#define YURTHUB_SERVER_RESPOND_H

#include <microhttpd.h>
#include <stddef.h>

#include "util/buf.h"

/* A body to send: the response takes the bytes (MHD frees them). */
struct MHD_Response *respond_bytes(char *data, size_t len, const char *content_type);
/* A Status object: {"kind":"Status",...,"status":"Failure","message":...,
 * "reason":...,"code":...}.  details may be NULL (a JSON object text). */
struct MHD_Response *respond_status(int code, const char *reason, const char *message,
				    const char *details_json);
/* Queue and release: the usual pair, one call. */
enum MHD_Result respond_queue(struct MHD_Connection *c, unsigned int code, struct MHD_Response *r);
/* The reason Kubernetes uses for an HTTP status (NotFound, Forbidden, ...). */
const char *respond_reason(int code);

#endif
