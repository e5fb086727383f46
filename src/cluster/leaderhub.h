/*
 * leaderhub.h - the pool's leader-hub-<pool> configmap, as yurt-manager
 * writes it for a NodePool with leader election (docs/sharing.md):
 *
 *   leaders                 "node-a/10.0.0.5,node-b/10.0.0.6"
 *   enable-leader-election  "true" | "false"
 *   pool-scoped-metadata    "/v1/services,discovery.k8s.io/v1/endpointslices"
 *   interconnectivity       (not used by hubs)
 *
 * Parsed here into plain data that cluster.c hands to the hub; entries that
 * do not have the documented shape are skipped, as YurtHub skips them.
 */
#ifndef YURTHUB_CLUSTER_LEADERHUB_H
#define YURTHUB_CLUSTER_LEADERHUB_H

#include <stdbool.h>
#include <stddef.h>

struct leader_entry {
	char *node, *address;
};

struct leader_hub {
	bool election;
	struct leader_entry *leaders;
	size_t nleaders;
	char **pool_scope; /* "group/version/resource" */
	size_t npool_scope;
};

/* Fill lh from the configmap's data values (NULL: the key is absent).
 * 0, or -1 out of memory (lh freed). */
int leader_hub_parse(struct leader_hub *lh, const char *leaders, const char *election,
		     const char *pool_scope);
void leader_hub_free(struct leader_hub *lh);

/* This hub's leader entry, or NULL when node is not a leader. */
const struct leader_entry *leader_hub_find(const struct leader_hub *lh, const char *node);
/* A follower: election on, leaders named, and node not among them. */
bool leader_hub_is_follower(const struct leader_hub *lh, const char *node);

#endif
