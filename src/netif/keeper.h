/*
 * keeper.h - the hub's dummy interface for its whole run: made (or found)
 * at start, put right every 60 s by a thread of its own - created again,
 * brought up, its address added again, whatever went missing - and deleted
 * at stop, as the Go YurtHub's network manager does.
 *
 * A thread of its own rather than a chore of housekeeping.c: housekeeping
 * runs with the store only (not in cloud mode) and its chores may wait on
 * the store for seconds; the interface is needed in every mode and its
 * check takes a few system calls.
 *
 * YURTHUB_TEST_NETIF_PERIOD_MS in the environment sets the period in
 * milliseconds (100 to 3600000), for the tests only: an operator has no
 * reason to change it and YurtHub has no flag for it.
 */
#ifndef YURTHUB_NETIF_KEEPER_H
#define YURTHUB_NETIF_KEEPER_H

struct netif_keeper;

/* Make sure interface `name` holds `ip` (dummy_ensure) and start the
 * thread that keeps it so.  NULL when the interface cannot be had (no
 * CAP_NET_ADMIN, no netlink, a link of that name that is not a dummy,
 * out of memory), with one warning logged saying why: the hub goes on
 * without it.  name and ip must outlive the keeper. */
struct netif_keeper *netif_keeper_start(const char *name, const char *ip);

/* Stop the thread and delete the interface (a dummy link of that name,
 * whoever made it, as YurtHub does); NULL is fine. */
void netif_keeper_stop(struct netif_keeper *k);

#endif
