/*
 * hub_pool.c - the leader-hub configmap applied (hub_pool.h).
 */
#include "hub_pool.h"

#include <stdlib.h>
#include <string.h>

#include "cluster/leaderhub.h"
#include "proxy/multiplexer.h"
#include "util/log.h"

int hub_pool_start(struct hub_pool *hp, const struct config *cfg, struct multiplexer *mux)
{
	memset(hp, 0, sizeof *hp);
	hp->cfg = cfg;
	hp->mux = mux;
	if (!mux)
		return 0;
	if (!(hp->leaders = leaders_new(cfg->multiplexer_port)) || leaders_start(hp->leaders) < 0)
		return -1;
	return 0;
}

/* Serve the pool's hubs: on --node-ip if given, else on the address the
 * configmap gives this node (the one its followers dial). */
static void lead(struct hub_pool *hp, const struct leader_entry *me)
{
	const char *addr = *hp->cfg->node_ip ? hp->cfg->node_ip : me->address;
	if (*hp->cfg->node_ip && strcmp(hp->cfg->node_ip, me->address))
		log_warn("leader hub: the pool's configmap names this node %s, --node-ip is %s: "
			 "the multiplexer port listens on --node-ip",
			 me->address, hp->cfg->node_ip);
	if (!hp->cfg->multiplexer_port) {
		log_warn("leader hub: this node leads its pool, but --multiplexer-port is 0: its "
			 "followers fall back to the cloud");
		return;
	}
	if (server_enable_peer(hp->server, addr, hp->cfg->multiplexer_port) < 0)
		log_error("leader hub: out of memory starting the multiplexer port");
}

/* Whether this hub follows leaders now; they have been probed once. */
static bool follow(struct hub_pool *hp, const struct leader_hub *lh)
{
	const char **addrs = calloc(lh ? lh->nleaders + 1 : 1, sizeof *addrs);
	size_t n = 0;
	if (addrs && lh && leader_hub_is_follower(lh, hp->cfg->node_name))
		for (size_t i = 0; i < lh->nleaders; i++)
			addrs[n++] = lh->leaders[i].address;
	bool ok = addrs && leaders_set(hp->leaders, addrs, n) == 0;
	if (!ok)
		log_error("out of memory: the pool's leaders are not applied");
	else if (n)
		log_info("leader hub: this hub follows %zu leader(s) of its pool", n);
	free(addrs);
	if (ok && n) /* so that the first upstream list goes to a leader */
		leaders_wait_probed(hp->leaders, LEADERS_PROBE_TIMEOUT_MS + 1000);
	return ok && n;
}

void hub_pool_apply(struct hub_pool *hp, const struct leader_hub *lh, bool known)
{
	const struct strlist *flag = &hp->cfg->pool_scope_resources;
	/* the configmap's set replaces the flag's, even when empty (as in
	 * YurtHub); without the configmap, the flag's applies again */
	if (lh)
		multiplexer_set_resources(hp->mux, (const char *const *)lh->pool_scope,
					  lh->npool_scope);
	else
		multiplexer_set_resources(hp->mux, (const char *const *)flag->v, flag->n);
	(void)follow(hp, lh);
	/* The multiplexer's upstreams may start once the configmap is known,
	 * present or absent.  Unknown (the list was not served: a first boot
	 * before the hub has its certificate, or offline with nothing cached),
	 * the informer asks again as soon as the cloud is there, and the hold
	 * ends then, or when it runs out. */
	if (known)
		multiplexer_release(hp->mux);
	const struct leader_entry *me = lh ? leader_hub_find(lh, hp->cfg->node_name) : NULL;
	if (lh && lh->election && me)
		lead(hp, me);
}

void hub_pool_stop(struct hub_pool *hp)
{
	leaders_free(hp->leaders);
	hp->leaders = NULL;
}
