/*
 * local.h - answering from the store when the cloud cannot be reached
 * (DESIGN.md §4.6).
 */
#ifndef YURTHUB_PROXY_LOCAL_H
#define YURTHUB_PROXY_LOCAL_H

#include <microhttpd.h>

struct hub;
struct request;

/* Answer req from the store, as the API server would. */
enum MHD_Result local_answer(struct hub *h, struct MHD_Connection *c, struct request *req);

#endif
