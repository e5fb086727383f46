/*
 * dummy.c - the hub's dummy interface over rtnetlink (libmnl), see dummy.h.
 *
 * A call is a short conversation with the kernel on a socket of its own:
 * one request, its answers up to the acknowledgement (or the end of a
 * dump).  The messages are built and read by the functions of
 * dummy_internal.h, which touch no socket.
 */
#include "netif/dummy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "netif/dummy_internal.h"

/* A kernel that does not answer a request on its own socket within this
 * is broken; the hub must not hang on it at start or stop. */
#define NL_TIMEOUT_S 5
/* Large enough that the kernel never truncates a message of an address
 * dump (it sizes its dump messages by what the reader took before). */
#define NL_RECV_SIZE 32768

bool dummy_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= IFNAMSIZ || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (const char *p = name; *p; p++)
		if (*p == '/' || *p == ':' || isspace((unsigned char)*p))
			return false;
	return true;
}

int dummy_parse_ip(const char *ip, struct dummy_addr *a)
{
	memset(a, 0, sizeof *a);
	if (inet_pton(AF_INET, ip, a->bytes) == 1) {
		a->family = AF_INET;
		a->prefix = 32;
		return 0;
	}
	if (inet_pton(AF_INET6, ip, a->bytes) == 1) {
		a->family = AF_INET6;
		a->prefix = 128;
		return 0;
	}
	return -1;
}

const char *dummy_kind(void)
{
	const char *k = getenv("YURTHUB_TEST_NETIF_KIND");
	return k && *k ? k : "dummy";
}

static size_t addr_len(const struct dummy_addr *a)
{
	return a->family == AF_INET ? 4 : 16;
}

/* ---- requests ---- */

static struct nlmsghdr *start_msg(void *buf, uint16_t type, uint16_t flags, uint32_t seq)
{
	memset(buf, 0, DUMMY_MSG_MAX);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	/* NLM_F_ACK on every request that is not a dump, so that each ends
	 * with an acknowledgement the reader can stop at */
	nlh->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
	nlh->nlmsg_seq = seq;
	return nlh;
}

static struct ifinfomsg *put_ifinfo(struct nlmsghdr *nlh, unsigned index)
{
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof *ifi);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = (int)index;
	return ifi;
}

size_t dummy_msg_getlink(void *buf, uint32_t seq, const char *name)
{
	struct nlmsghdr *nlh = start_msg(buf, RTM_GETLINK, NLM_F_ACK, seq);
	put_ifinfo(nlh, 0);
	if (!mnl_attr_put_strz_check(nlh, DUMMY_MSG_MAX, IFLA_IFNAME, name))
		return 0;
	return nlh->nlmsg_len;
}

size_t dummy_msg_newlink(void *buf, uint32_t seq, const char *name, const char *kind)
{
	struct nlmsghdr *nlh =
	    start_msg(buf, RTM_NEWLINK, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, seq);
	put_ifinfo(nlh, 0);
	if (!mnl_attr_put_strz_check(nlh, DUMMY_MSG_MAX, IFLA_IFNAME, name))
		return 0;
	struct nlattr *info = mnl_attr_nest_start_check(nlh, DUMMY_MSG_MAX, IFLA_LINKINFO);
	if (!info || !mnl_attr_put_strz_check(nlh, DUMMY_MSG_MAX, IFLA_INFO_KIND, kind))
		return 0;
	mnl_attr_nest_end(nlh, info);
	return nlh->nlmsg_len;
}

size_t dummy_msg_setup(void *buf, uint32_t seq, unsigned index)
{
	struct nlmsghdr *nlh = start_msg(buf, RTM_NEWLINK, NLM_F_ACK, seq);
	struct ifinfomsg *ifi = put_ifinfo(nlh, index);
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP; /* only this flag changes */
	return nlh->nlmsg_len;
}

size_t dummy_msg_getaddr(void *buf, uint32_t seq, int family)
{
	struct nlmsghdr *nlh = start_msg(buf, RTM_GETADDR, NLM_F_DUMP, seq);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
	ifa->ifa_family = (unsigned char)family;
	return nlh->nlmsg_len;
}

size_t dummy_msg_newaddr(void *buf, uint32_t seq, unsigned index, const struct dummy_addr *a)
{
	struct nlmsghdr *nlh =
	    start_msg(buf, RTM_NEWADDR, NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, seq);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
	ifa->ifa_family = (unsigned char)a->family;
	ifa->ifa_prefixlen = a->prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = index;
	/* a tentative IPv6 address cannot be bound: listeners follow at once */
	if (a->family == AF_INET6)
		ifa->ifa_flags = IFA_F_NODAD;
	size_t n = addr_len(a);
	if (!mnl_attr_put_check(nlh, DUMMY_MSG_MAX, IFA_LOCAL, n, a->bytes) ||
	    !mnl_attr_put_check(nlh, DUMMY_MSG_MAX, IFA_ADDRESS, n, a->bytes))
		return 0;
	return nlh->nlmsg_len;
}

size_t dummy_msg_dellink(void *buf, uint32_t seq, unsigned index)
{
	struct nlmsghdr *nlh = start_msg(buf, RTM_DELLINK, NLM_F_ACK, seq);
	put_ifinfo(nlh, index);
	return nlh->nlmsg_len;
}

/* ---- answers ---- */

/* mnl_attr_parse() stops quietly at an attribute that overruns the
 * message; an answer from the kernel never has one, so it is refused here
 * as malformed rather than read as a link without a kind. */
/* The attributes from attr to end, each handed to cb.  mnl_attr_parse()
 * stops quietly at an attribute that overruns its message; the kernel
 * never sends one, so it is refused here as malformed rather than read as,
 * say, a link without a kind.  0 or -1. */
static int parse_span(const struct nlattr *attr, const char *end, mnl_attr_cb_t cb, void *data)
{
	while (mnl_attr_ok(attr, (int)(end - (const char *)attr))) {
		if (cb(attr, data) == MNL_CB_ERROR)
			return -1;
		attr = mnl_attr_next(attr);
	}
	return (const char *)attr == end ? 0 : -1;
}

static int parse_attrs(const struct nlmsghdr *nlh, unsigned offset, mnl_attr_cb_t cb, void *data)
{
	return parse_span(mnl_nlmsg_get_payload_offset(nlh, offset),
			  mnl_nlmsg_get_payload_tail(nlh), cb, data);
}

static int parse_nested(const struct nlattr *nest, mnl_attr_cb_t cb, void *data)
{
	const char *payload = mnl_attr_get_payload(nest);
	return parse_span((const struct nlattr *)payload, payload + mnl_attr_get_payload_len(nest),
			  cb, data);
}

static int linkinfo_attr(const struct nlattr *attr, void *data)
{
	struct dummy_link *out = data;
	if (mnl_attr_get_type(attr) != IFLA_INFO_KIND)
		return MNL_CB_OK;
	if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0) /* read as a C string */
		return MNL_CB_ERROR;
	snprintf(out->kind, sizeof out->kind, "%s", mnl_attr_get_str(attr));
	return MNL_CB_OK;
}

static int link_attr(const struct nlattr *attr, void *data)
{
	if (mnl_attr_get_type(attr) != IFLA_LINKINFO)
		return MNL_CB_OK;
	if (mnl_attr_validate(attr, MNL_TYPE_NESTED) < 0)
		return MNL_CB_ERROR;
	return parse_nested(attr, linkinfo_attr, data) < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

int dummy_parse_link(const struct nlmsghdr *nlh, struct dummy_link *out)
{
	memset(out, 0, sizeof *out);
	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct ifinfomsg))
		return -1;
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	if (ifi->ifi_index <= 0)
		return -1;
	out->index = (unsigned)ifi->ifi_index;
	out->up = (ifi->ifi_flags & IFF_UP) != 0;
	return parse_attrs(nlh, sizeof *ifi, link_attr, out);
}

struct addr_match {
	const struct dummy_addr *a;
	bool local, address; /* IFA_LOCAL / IFA_ADDRESS seen equal to a */
	bool has_local;
};

static int addr_attr(const struct nlattr *attr, void *data)
{
	struct addr_match *m = data;
	uint16_t type = mnl_attr_get_type(attr);
	if (type != IFA_LOCAL && type != IFA_ADDRESS)
		return MNL_CB_OK;
	size_t n = addr_len(m->a);
	bool eq = mnl_attr_get_payload_len(attr) == n &&
		  !memcmp(mnl_attr_get_payload(attr), m->a->bytes, n);
	if (type == IFA_LOCAL) {
		m->has_local = true;
		m->local = eq;
	} else {
		m->address = eq;
	}
	return MNL_CB_OK;
}

bool dummy_addr_matches(const struct nlmsghdr *nlh, unsigned index, const struct dummy_addr *a)
{
	if (nlh->nlmsg_type != RTM_NEWADDR ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct ifaddrmsg))
		return false;
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	if (ifa->ifa_family != a->family || ifa->ifa_index != index)
		return false;
	struct addr_match m = {a, false, false, false};
	if (parse_attrs(nlh, sizeof *ifa, addr_attr, &m) < 0)
		return false;
	/* IPv4 names the interface's own address in IFA_LOCAL (IFA_ADDRESS is
	 * the peer on point-to-point links); IPv6 in IFA_ADDRESS alone */
	return m.has_local ? m.local : m.address;
}

/* ---- the conversation ---- */

struct nl {
	struct mnl_socket *sock;
	unsigned portid;
	uint32_t seq;
	char *rbuf;
};

static int nl_open(struct nl *nl)
{
	memset(nl, 0, sizeof *nl);
	if (!(nl->rbuf = malloc(NL_RECV_SIZE)))
		return -ENOMEM;
	nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl->sock) {
		int e = errno;
		free(nl->rbuf);
		return -e;
	}
	struct timeval tv = {NL_TIMEOUT_S, 0};
	if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0 ||
	    setsockopt(mnl_socket_get_fd(nl->sock), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) {
		int e = errno;
		mnl_socket_close(nl->sock);
		free(nl->rbuf);
		return -e;
	}
	nl->portid = mnl_socket_get_portid(nl->sock);
	return 0;
}

static void nl_close(struct nl *nl)
{
	/* nothing was changed by closing: an error here changes nothing */
	(void)mnl_socket_close(nl->sock);
	free(nl->rbuf);
}

/* Send the request in req (its length from the builder, 0 when it did not
 * fit) and read its answers, each data message handed to cb, up to the
 * acknowledgement or the end of the dump.  0, or -errno (the kernel's
 * answer, or the socket's). */
static int nl_talk(struct nl *nl, void *req, size_t len, mnl_cb_t cb, void *data)
{
	if (len == 0)
		return -ENAMETOOLONG;
	uint32_t seq = ((struct nlmsghdr *)req)->nlmsg_seq;
	if (mnl_socket_sendto(nl->sock, req, len) < 0)
		return -errno;
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl->sock, nl->rbuf, NL_RECV_SIZE);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		}
		errno = 0;
		int rc = mnl_cb_run(nl->rbuf, (size_t)n, seq, nl->portid, cb, data);
		if (rc == MNL_CB_STOP)
			return 0;
		if (rc == MNL_CB_ERROR)
			return errno ? -errno : -EPROTO;
	}
}

static int got_link(const struct nlmsghdr *nlh, void *data)
{
	if (dummy_parse_link(nlh, data) < 0) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	return MNL_CB_OK;
}

static int get_link(struct nl *nl, const char *name, struct dummy_link *l)
{
	char req[DUMMY_MSG_MAX] __attribute__((aligned(8)));
	memset(l, 0, sizeof *l);
	int rc = nl_talk(nl, req, dummy_msg_getlink(req, ++nl->seq, name), got_link, l);
	if (rc == 0 && l->index == 0)
		rc = -EBADMSG; /* acknowledged, but no link in the answer */
	return rc;
}

static int simple(struct nl *nl, void *req, size_t len)
{
	return nl_talk(nl, req, len, NULL, NULL);
}

struct addr_search {
	unsigned index;
	const struct dummy_addr *a;
	bool found;
};

static int got_addr(const struct nlmsghdr *nlh, void *data)
{
	struct addr_search *s = data;
	if (dummy_addr_matches(nlh, s->index, s->a))
		s->found = true;
	return MNL_CB_OK;
}

/* What to do about an errno, for the log. */
static const char *hint(int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		return " (the hub needs CAP_NET_ADMIN for its dummy interface)";
	case EAFNOSUPPORT:
	case EPROTONOSUPPORT:
		return " (no netlink: not Linux, or the service's sandbox forbids AF_NETLINK "
		       "sockets)";
	case EOPNOTSUPP:
		return " (the kernel cannot make dummy interfaces: it needs CONFIG_DUMMY, module "
		       "dummy)";
	default:
		return "";
	}
}

static int fail(int rc, char *why, size_t whylen, const char *what, const char *name)
{
	snprintf(why, whylen, "cannot %s interface %s: %s%s", what, name, strerror(-rc), hint(-rc));
	return rc;
}

static int not_dummy(const struct dummy_link *l, char *why, size_t whylen, const char *name)
{
	snprintf(why, whylen,
		 "interface %s exists and is not a %s interface (kind %s): it is left alone; "
		 "choose another --dummy-if-name",
		 name, dummy_kind(), *l->kind ? l->kind : "none, a device");
	return -EEXIST;
}

static int ensure(struct nl *nl, const char *name, const struct dummy_addr *a, unsigned *changed,
		  char *why, size_t whylen)
{
	char req[DUMMY_MSG_MAX] __attribute__((aligned(8)));
	struct dummy_link l;
	int rc = get_link(nl, name, &l);
	if (rc == -ENODEV) {
		rc = simple(nl, req, dummy_msg_newlink(req, ++nl->seq, name, dummy_kind()));
		/* -EEXIST: made meanwhile by someone else; it is looked at below */
		if (rc < 0 && rc != -EEXIST)
			return fail(rc, why, whylen, "create", name);
		if (rc == 0)
			*changed |= DUMMY_CREATED;
		rc = get_link(nl, name, &l);
	}
	if (rc < 0)
		return fail(rc, why, whylen, "look up", name);
	if (strcmp(l.kind, dummy_kind()) != 0)
		return not_dummy(&l, why, whylen, name);
	if (!l.up) {
		if ((rc = simple(nl, req, dummy_msg_setup(req, ++nl->seq, l.index))) < 0)
			return fail(rc, why, whylen, "bring up", name);
		*changed |= DUMMY_SET_UP;
	}
	struct addr_search s = {l.index, a, false};
	if ((rc = nl_talk(nl, req, dummy_msg_getaddr(req, ++nl->seq, a->family), got_addr, &s)) < 0)
		return fail(rc, why, whylen, "list the addresses of", name);
	if (!s.found) {
		if ((rc = simple(nl, req, dummy_msg_newaddr(req, ++nl->seq, l.index, a))) < 0)
			return fail(rc, why, whylen, "add the address to", name);
		*changed |= DUMMY_ADDR_ADDED;
	}
	return 0;
}

int dummy_ensure(const char *name, const char *ip, unsigned *changed, char *why, size_t whylen)
{
	*changed = 0;
	*why = '\0';
	struct dummy_addr a;
	if (!dummy_name_ok(name) || dummy_parse_ip(ip, &a) < 0) {
		snprintf(why, whylen, "invalid interface name \"%s\" or address \"%s\"", name, ip);
		return -EINVAL;
	}
	struct nl nl;
	int rc = nl_open(&nl);
	if (rc < 0) {
		snprintf(why, whylen, "cannot open a netlink socket for interface %s: %s%s", name,
			 strerror(-rc), hint(-rc));
		return rc;
	}
	rc = ensure(&nl, name, &a, changed, why, whylen);
	nl_close(&nl);
	return rc;
}

int dummy_remove(const char *name, char *why, size_t whylen)
{
	*why = '\0';
	if (!dummy_name_ok(name)) {
		snprintf(why, whylen, "invalid interface name \"%s\"", name);
		return -EINVAL;
	}
	struct nl nl;
	int rc = nl_open(&nl);
	if (rc < 0) {
		snprintf(why, whylen, "cannot open a netlink socket for interface %s: %s%s", name,
			 strerror(-rc), hint(-rc));
		return rc;
	}
	struct dummy_link l;
	char req[DUMMY_MSG_MAX] __attribute__((aligned(8)));
	rc = get_link(&nl, name, &l);
	if (rc == -ENODEV) {
		snprintf(why, whylen, "interface %s is not there", name);
		rc = 0;
	} else if (rc < 0) {
		fail(rc, why, whylen, "look up", name);
	} else if (strcmp(l.kind, dummy_kind()) != 0) {
		rc = not_dummy(&l, why, whylen, name);
	} else if ((rc = simple(&nl, req, dummy_msg_dellink(req, ++nl.seq, l.index))) < 0) {
		/* gone meanwhile is gone */
		rc = rc == -ENODEV ? 0 : fail(rc, why, whylen, "delete", name);
	}
	nl_close(&nl);
	return rc;
}
