/*
 * local.c - answers from the store while the cloud is unreachable, see
 * local.h.
 */
#include "proxy/local.h"

#include "hub.h"
#include "server/respond.h"
#include "server/server.h"

enum MHD_Result local_answer(struct hub *h, struct MHD_Connection *c, struct request *req)
{
	(void)h;
	req->status = 503;
	return respond_queue(
	    c, 503, respond_status(503, NULL, "the cloud's API servers cannot be reached", NULL));
}
