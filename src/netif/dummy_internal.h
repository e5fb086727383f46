/*
 * dummy_internal.h - the rtnetlink messages of dummy.c, built and read
 * apart from the socket so that the unit tests check them without
 * privileges.  Not part of the dummy interface's API.
 *
 * Each builder writes one request into buf (at least DUMMY_MSG_MAX bytes,
 * suitably aligned) and returns its length.
 */
#ifndef YURTHUB_NETIF_DUMMY_INTERNAL_H
#define YURTHUB_NETIF_DUMMY_INTERNAL_H

#include <linux/netlink.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DUMMY_MSG_MAX 512

struct dummy_addr {
	int family; /* AF_INET or AF_INET6 */
	unsigned char bytes[16];
	unsigned char prefix; /* 32 or 128: a host address */
};

/* What RTM_NEWLINK (the answer to RTM_GETLINK) says of a link. */
struct dummy_link {
	unsigned index;
	bool up;
	char kind[32]; /* IFLA_INFO_KIND; "" when the link has none (a NIC) */
};

/* The kind of link made and looked for: "dummy", unless
 * YURTHUB_TEST_NETIF_KIND names another (tests/e2e/test_dummy_if.py on a
 * kernel built without dummy interfaces: ifb behaves alike for this). */
const char *dummy_kind(void);

/* "169.254.2.1" or "fd00::2:1" -> *a; 0, or -1 when it is neither. */
int dummy_parse_ip(const char *ip, struct dummy_addr *a);

/* RTM_GETLINK for the link called name. */
size_t dummy_msg_getlink(void *buf, uint32_t seq, const char *name);
/* RTM_NEWLINK, create only (NLM_F_EXCL): a link of the kind given
 * (dummy_kind()). */
size_t dummy_msg_newlink(void *buf, uint32_t seq, const char *name, const char *kind);
/* RTM_NEWLINK on an existing link: IFF_UP set, no other flag changed. */
size_t dummy_msg_setup(void *buf, uint32_t seq, unsigned index);
/* RTM_GETADDR, a dump of one address family's addresses. */
size_t dummy_msg_getaddr(void *buf, uint32_t seq, int family);
/* RTM_NEWADDR (create or replace): a on the link, IFA_LOCAL and
 * IFA_ADDRESS, scope global as YurtHub's; IPv6 without duplicate address
 * detection, so that it is usable (bindable) at once. */
size_t dummy_msg_newaddr(void *buf, uint32_t seq, unsigned index, const struct dummy_addr *a);
/* RTM_DELLINK. */
size_t dummy_msg_dellink(void *buf, uint32_t seq, unsigned index);

/* An RTM_NEWLINK message -> *out; 0, or -1 when it is malformed. */
int dummy_parse_link(const struct nlmsghdr *nlh, struct dummy_link *out);
/* Whether an RTM_NEWADDR message is a on link index. */
bool dummy_addr_matches(const struct nlmsghdr *nlh, unsigned index, const struct dummy_addr *a);

#endif
