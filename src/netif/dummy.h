/*
 * dummy.h - the hub's dummy network interface (YurtHub's hub-dummy0): a
 * link of kind "dummy" holding one host address (/32, or /128 for IPv6),
 * 169.254.2.1 by default, on which the proxy ports listen for the node's
 * pods.  The response filters write that address into what kubelet and
 * kube-proxy see (docs/filters.md), so pods connect to it.
 *
 * Made with rtnetlink messages (libmnl), not by running `ip`: no shell, no
 * dependency on iproute2 being installed in the hub's image.  Changing
 * links and addresses needs CAP_NET_ADMIN; looking at them does not, so a
 * hub without the capability can still use an interface that exists, is
 * up and holds the address (made by an earlier run, by the Go YurtHub or
 * by the operator).
 *
 * Each call opens its own netlink socket and closes it: calls are rare
 * (start, every 60 s, stop) and share no state, so any thread may make them.
 */
#ifndef YURTHUB_NETIF_DUMMY_H
#define YURTHUB_NETIF_DUMMY_H

#include <stdbool.h>
#include <stddef.h>

/* What dummy_ensure() found missing and put right, as bits. */
enum {
	DUMMY_CREATED = 1,    /* the link did not exist */
	DUMMY_SET_UP = 2,     /* it was down */
	DUMMY_ADDR_ADDED = 4, /* it did not hold the address */
};

/* Linux's rule for an interface name (dev_valid_name): 1 to 15 bytes, not
 * "." or "..", no '/', ':' or white space. */
bool dummy_name_ok(const char *name);

/* Make sure link `name` exists, is a dummy, is up and holds `ip` (IPv4 or
 * IPv6 text) as a host address; an existing dummy link is kept as it is,
 * other addresses included.  A link of that name that is not a dummy is
 * never touched.  0 with *changed set (0 when all was in place), or
 * -errno with a sentence for the log in why[] (what failed and, where the
 * errno says it, what to do: EPERM names CAP_NET_ADMIN). */
int dummy_ensure(const char *name, const char *ip, unsigned *changed, char *why, size_t whylen);

/* Delete link `name` if it is a dummy.  0 when it is gone (or was not
 * there), -EEXIST when a link of that name is not a dummy (kept), else
 * -errno; why[] says it either way. */
int dummy_remove(const char *name, char *why, size_t whylen);

#endif
