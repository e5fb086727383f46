/*
 * upgrade.h - protocol upgrades (exec, attach, port-forward; SPDY/3.1 or
 * WebSocket) passed through to the cloud, as YurtHub passes them.
 *
 * The request goes to a healthy backend as the client sent it (with the
 * hub's identity when the client brings none).  A 101 from the cloud is
 * passed on with its headers, and from then on the bytes are relayed both
 * ways, by a thread of their own, until either side closes, the backend is
 * declared unhealthy or the hub stops.  Any other answer (a 403, a 404, a
 * 400 that makes kubectl fall back from WebSocket to SPDY) is passed on as
 * it came.  Upgrades are long-running: not counted against
 * --max-requests-in-flight.
 */
#ifndef YURTHUB_PROXY_UPGRADE_H
#define YURTHUB_PROXY_UPGRADE_H

#include "http/request.h"
#include "proxy/remote.h"

struct proxy;

enum remote_outcome upgrade_proxy(struct proxy *p, struct request *req);

#endif
