/*
 * test_dummy.c - the dummy interface's pieces that need no privilege: the
 * interface name rule, the rtnetlink requests as the kernel will read them
 * (type, flags, header, attributes), and the reading of the kernel's
 * answers, well-formed or not.  What the kernel does with them is
 * tests/e2e/test_dummy_if.py's, in a network namespace of its own.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "netif/dummy.h"
#include "netif/dummy_internal.h"

static char buf[DUMMY_MSG_MAX] __attribute__((aligned(8)));

/* ---- names and addresses ---- */

static void test_name_rule(void **state)
{
	(void)state;
	const char *good[] = {"hub-dummy0",	 "yurthub-dummy0", "a",
			      "abcdefghijklmno", "x.y_z-1",	   "..."};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		if (!dummy_name_ok(good[i]))
			fail_msg("\"%s\" refused", good[i]);
	const char *bad[] = {"",      "abcdefghijklmnop", ".",	"..",	    "a/b", "hub:0",
			     "hub 0", "hub\t0",		  "\n", "hub0\x0b", "/",   "abc\r"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (dummy_name_ok(bad[i]))
			fail_msg("\"%s\" accepted", bad[i]);
}

static void test_parse_ip(void **state)
{
	(void)state;
	struct dummy_addr a;
	assert_int_equal(dummy_parse_ip("169.254.2.1", &a), 0);
	assert_int_equal(a.family, AF_INET);
	assert_int_equal(a.prefix, 32);
	assert_memory_equal(a.bytes, "\xa9\xfe\x02\x01", 4);
	assert_int_equal(dummy_parse_ip("fd00::2:1", &a), 0);
	assert_int_equal(a.family, AF_INET6);
	assert_int_equal(a.prefix, 128);
	assert_memory_equal(a.bytes, "\xfd\0\0\0\0\0\0\0\0\0\0\0\0\x02\0\x01", 16);
	assert_int_equal(dummy_parse_ip("169.254.2", &a), -1);
	assert_int_equal(dummy_parse_ip("hub", &a), -1);
	assert_int_equal(dummy_parse_ip("", &a), -1);
}

static void test_kind(void **state)
{
	(void)state;
	assert_int_equal(unsetenv("YURTHUB_TEST_NETIF_KIND"), 0);
	assert_string_equal(dummy_kind(), "dummy");
	assert_int_equal(setenv("YURTHUB_TEST_NETIF_KIND", "", 1), 0);
	assert_string_equal(dummy_kind(), "dummy");
	assert_int_equal(setenv("YURTHUB_TEST_NETIF_KIND", "ifb", 1), 0);
	assert_string_equal(dummy_kind(), "ifb");
	assert_int_equal(unsetenv("YURTHUB_TEST_NETIF_KIND"), 0);
}

/* Refused before any socket is opened: no privilege needed to see it. */
static void test_invalid_arguments(void **state)
{
	(void)state;
	char why[256];
	unsigned changed = 99;
	assert_int_equal(dummy_ensure("a/b", "169.254.2.1", &changed, why, sizeof why), -EINVAL);
	assert_int_equal(changed, 0);
	assert_non_null(strstr(why, "a/b"));
	assert_int_equal(dummy_ensure("hub-dummy0", "10.0", &changed, why, sizeof why), -EINVAL);
	assert_non_null(strstr(why, "10.0"));
	assert_int_equal(dummy_remove("", why, sizeof why), -EINVAL);
	assert_int_equal(dummy_remove("abcdefghijklmnop", why, sizeof why), -EINVAL);
}

/* ---- requests ---- */

/* The message in buf, checked as the kernel checks it: the length the
 * builder returned is the header's, and the attributes parse. */
static const struct nlmsghdr *msg_ok(size_t len, uint16_t type, uint16_t flags, uint32_t seq)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
	assert_true(len > 0 && len <= sizeof buf);
	assert_int_equal(nlh->nlmsg_len, len);
	assert_true(mnl_nlmsg_ok(nlh, (int)len));
	assert_int_equal(nlh->nlmsg_type, type);
	assert_int_equal(nlh->nlmsg_flags, NLM_F_REQUEST | flags);
	assert_int_equal(nlh->nlmsg_seq, seq);
	assert_int_equal(nlh->nlmsg_pid, 0);
	return nlh;
}

struct attrs {
	const struct nlattr *tb[IFLA_MAX + 1];
};

static int keep_attr(const struct nlattr *attr, void *data)
{
	struct attrs *a = data;
	uint16_t type = mnl_attr_get_type(attr);
	if (type <= IFLA_MAX)
		a->tb[type] = attr;
	return MNL_CB_OK;
}

static void parse_attrs(const struct nlmsghdr *nlh, size_t hdr, struct attrs *a)
{
	memset(a, 0, sizeof *a);
	assert_int_equal(mnl_attr_parse(nlh, (unsigned)hdr, keep_attr, a), MNL_CB_OK);
}

static void test_getlink(void **state)
{
	(void)state;
	const struct nlmsghdr *nlh =
	    msg_ok(dummy_msg_getlink(buf, 7, "hub-dummy0"), RTM_GETLINK, NLM_F_ACK, 7);
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	assert_int_equal(ifi->ifi_family, AF_UNSPEC);
	assert_int_equal(ifi->ifi_index, 0);
	struct attrs a;
	parse_attrs(nlh, sizeof *ifi, &a);
	assert_non_null(a.tb[IFLA_IFNAME]);
	assert_int_equal(mnl_attr_validate(a.tb[IFLA_IFNAME], MNL_TYPE_NUL_STRING), 0);
	assert_string_equal(mnl_attr_get_str(a.tb[IFLA_IFNAME]), "hub-dummy0");
}

static void test_newlink(void **state)
{
	(void)state;
	const struct nlmsghdr *nlh = msg_ok(dummy_msg_newlink(buf, 8, "hub-dummy0", "dummy"),
					    RTM_NEWLINK, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, 8);
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	assert_int_equal(ifi->ifi_index, 0);
	assert_int_equal(ifi->ifi_flags, 0);
	assert_int_equal(ifi->ifi_change, 0);
	struct attrs a;
	parse_attrs(nlh, sizeof *ifi, &a);
	assert_string_equal(mnl_attr_get_str(a.tb[IFLA_IFNAME]), "hub-dummy0");
	assert_non_null(a.tb[IFLA_LINKINFO]);
	assert_int_equal(mnl_attr_validate(a.tb[IFLA_LINKINFO], MNL_TYPE_NESTED), 0);
	struct attrs info;
	memset(&info, 0, sizeof info);
	assert_int_equal(mnl_attr_parse_nested(a.tb[IFLA_LINKINFO], keep_attr, &info), MNL_CB_OK);
	assert_non_null(info.tb[IFLA_INFO_KIND]);
	assert_string_equal(mnl_attr_get_str(info.tb[IFLA_INFO_KIND]), "dummy");

	/* what does not fit is not sent */
	char *longname = malloc(DUMMY_MSG_MAX);
	assert_non_null(longname);
	memset(longname, 'x', DUMMY_MSG_MAX - 1);
	longname[DUMMY_MSG_MAX - 1] = '\0';
	assert_int_equal(dummy_msg_newlink(buf, 9, longname, "dummy"), 0);
	assert_int_equal(dummy_msg_getlink(buf, 9, longname), 0);
	free(longname);
}

static void test_setup(void **state)
{
	(void)state;
	const struct nlmsghdr *nlh = msg_ok(dummy_msg_setup(buf, 9, 42), RTM_NEWLINK, NLM_F_ACK, 9);
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	assert_int_equal(ifi->ifi_index, 42);
	assert_int_equal(ifi->ifi_flags, IFF_UP);
	assert_int_equal(ifi->ifi_change, IFF_UP); /* no other flag touched */
	assert_int_equal(nlh->nlmsg_len, NLMSG_LENGTH(sizeof *ifi));
}

static void test_getaddr(void **state)
{
	(void)state;
	const struct nlmsghdr *nlh =
	    msg_ok(dummy_msg_getaddr(buf, 10, AF_INET6), RTM_GETADDR, NLM_F_DUMP, 10);
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	assert_int_equal(ifa->ifa_family, AF_INET6);
	assert_int_equal(ifa->ifa_index, 0);
}

static void check_newaddr(const char *ip, int family, int prefix, unsigned char flags)
{
	struct dummy_addr a;
	assert_int_equal(dummy_parse_ip(ip, &a), 0);
	const struct nlmsghdr *nlh = msg_ok(dummy_msg_newaddr(buf, 11, 42, &a), RTM_NEWADDR,
					    NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, 11);
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	assert_int_equal(ifa->ifa_family, family);
	assert_int_equal(ifa->ifa_prefixlen, prefix);
	assert_int_equal(ifa->ifa_index, 42);
	assert_int_equal(ifa->ifa_scope, RT_SCOPE_UNIVERSE);
	assert_int_equal(ifa->ifa_flags, flags);
	struct attrs at;
	parse_attrs(nlh, sizeof *ifa, &at);
	size_t n = family == AF_INET ? 4 : 16;
	for (int t = IFA_ADDRESS; t <= IFA_LOCAL; t++) {
		assert_non_null(at.tb[t]);
		assert_int_equal(mnl_attr_get_payload_len(at.tb[t]), n);
		assert_memory_equal(mnl_attr_get_payload(at.tb[t]), a.bytes, n);
	}
}

static void test_newaddr(void **state)
{
	(void)state;
	check_newaddr("169.254.2.1", AF_INET, 32, 0);
	/* no duplicate address detection: bindable at once */
	check_newaddr("fd00::2:1", AF_INET6, 128, IFA_F_NODAD);
}

static void test_dellink(void **state)
{
	(void)state;
	const struct nlmsghdr *nlh =
	    msg_ok(dummy_msg_dellink(buf, 12, 42), RTM_DELLINK, NLM_F_ACK, 12);
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	assert_int_equal(ifi->ifi_index, 42);
	assert_int_equal(nlh->nlmsg_len, NLMSG_LENGTH(sizeof *ifi));
}

/* ---- answers ---- */

/* An RTM_NEWLINK as the kernel sends it: index, flags, a name, and a
 * IFLA_LINKINFO with the kind unless kind is NULL. */
static struct nlmsghdr *link_answer(int index, unsigned flags, const char *kind)
{
	memset(buf, 0, sizeof buf);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWLINK;
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof *ifi);
	ifi->ifi_index = index;
	ifi->ifi_flags = flags;
	mnl_attr_put_u32(nlh, IFLA_MTU, 1500);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, "hub-dummy0");
	if (kind) {
		struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
		mnl_attr_put_strz(nlh, IFLA_INFO_KIND, kind);
		mnl_attr_nest_end(nlh, info);
	}
	return nlh;
}

static void test_parse_link(void **state)
{
	(void)state;
	struct dummy_link l;
	assert_int_equal(dummy_parse_link(link_answer(5, IFF_UP | IFF_NOARP, "dummy"), &l), 0);
	assert_int_equal(l.index, 5);
	assert_true(l.up);
	assert_string_equal(l.kind, "dummy");

	assert_int_equal(dummy_parse_link(link_answer(6, IFF_NOARP, "bridge"), &l), 0);
	assert_false(l.up);
	assert_string_equal(l.kind, "bridge");

	/* a device (eth0) has no kind */
	assert_int_equal(dummy_parse_link(link_answer(2, IFF_UP, NULL), &l), 0);
	assert_string_equal(l.kind, "");

	/* not a link, no index, a header cut short, an attribute that
	 * claims more than the message holds */
	struct nlmsghdr *nlh = link_answer(5, IFF_UP, "dummy");
	nlh->nlmsg_type = RTM_NEWADDR;
	assert_int_equal(dummy_parse_link(nlh, &l), -1);
	assert_int_equal(dummy_parse_link(link_answer(0, IFF_UP, "dummy"), &l), -1);
	nlh = link_answer(5, IFF_UP, "dummy");
	nlh->nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg) - 4);
	assert_int_equal(dummy_parse_link(nlh, &l), -1);
	nlh = link_answer(5, IFF_UP, "dummy");
	struct nlattr *first = (struct nlattr *)((char *)mnl_nlmsg_get_payload(nlh) +
						 MNL_ALIGN(sizeof(struct ifinfomsg)));
	first->nla_len = 0xfff0;
	assert_int_equal(dummy_parse_link(nlh, &l), -1);
	/* a kind that is not a string */
	nlh = link_answer(5, IFF_UP, NULL);
	struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put(nlh, IFLA_INFO_KIND, 5, "dummy"); /* no NUL */
	mnl_attr_nest_end(nlh, info);
	assert_int_equal(dummy_parse_link(nlh, &l), -1);
	/* a kind longer than any the kernel has is cut, not overflowed */
	assert_int_equal(
	    dummy_parse_link(link_answer(5, IFF_UP, "a-kind-name-far-longer-than-thirty-two-bytes"),
			     &l),
	    0);
	assert_int_equal(strlen(l.kind), sizeof l.kind - 1);
}

static struct nlmsghdr *addr_answer(int family, unsigned index, const char *local,
				    const char *address)
{
	memset(buf, 0, sizeof buf);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWADDR;
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
	ifa->ifa_family = (unsigned char)family;
	ifa->ifa_index = index;
	ifa->ifa_prefixlen = family == AF_INET ? 32 : 128;
	unsigned char bytes[16];
	size_t n = family == AF_INET ? 4 : 16;
	if (address) {
		assert_int_equal(inet_pton(family, address, bytes), 1);
		mnl_attr_put(nlh, IFA_ADDRESS, n, bytes);
	}
	if (local) {
		assert_int_equal(inet_pton(family, local, bytes), 1);
		mnl_attr_put(nlh, IFA_LOCAL, n, bytes);
	}
	mnl_attr_put_strz(nlh, IFA_LABEL, "hub-dummy0");
	return nlh;
}

static void test_addr_matches(void **state)
{
	(void)state;
	struct dummy_addr v4, v6;
	assert_int_equal(dummy_parse_ip("169.254.2.1", &v4), 0);
	assert_int_equal(dummy_parse_ip("fd00::2:1", &v6), 0);
	assert_true(
	    dummy_addr_matches(addr_answer(AF_INET, 5, "169.254.2.1", "169.254.2.1"), 5, &v4));
	/* another link, another address, another family */
	assert_false(
	    dummy_addr_matches(addr_answer(AF_INET, 6, "169.254.2.1", "169.254.2.1"), 5, &v4));
	assert_false(
	    dummy_addr_matches(addr_answer(AF_INET, 5, "169.254.2.2", "169.254.2.2"), 5, &v4));
	assert_false(dummy_addr_matches(addr_answer(AF_INET6, 5, NULL, "fd00::2:1"), 5, &v4));
	/* point-to-point: IFA_ADDRESS is the peer, IFA_LOCAL decides */
	assert_false(
	    dummy_addr_matches(addr_answer(AF_INET, 5, "169.254.9.9", "169.254.2.1"), 5, &v4));
	assert_true(
	    dummy_addr_matches(addr_answer(AF_INET, 5, "169.254.2.1", "169.254.9.9"), 5, &v4));
	/* IPv6: IFA_ADDRESS alone */
	assert_true(dummy_addr_matches(addr_answer(AF_INET6, 5, NULL, "fd00::2:1"), 5, &v6));
	assert_false(dummy_addr_matches(addr_answer(AF_INET6, 5, NULL, "fd00::2:2"), 5, &v6));
	/* not an address message, or cut short */
	struct nlmsghdr *nlh = addr_answer(AF_INET, 5, "169.254.2.1", "169.254.2.1");
	nlh->nlmsg_type = RTM_NEWLINK;
	assert_false(dummy_addr_matches(nlh, 5, &v4));
	nlh = addr_answer(AF_INET, 5, "169.254.2.1", "169.254.2.1");
	nlh->nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg) - 2);
	assert_false(dummy_addr_matches(nlh, 5, &v4));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_name_rule),  cmocka_unit_test(test_parse_ip),
	    cmocka_unit_test(test_kind),       cmocka_unit_test(test_invalid_arguments),
	    cmocka_unit_test(test_getlink),    cmocka_unit_test(test_newlink),
	    cmocka_unit_test(test_setup),      cmocka_unit_test(test_getaddr),
	    cmocka_unit_test(test_newaddr),    cmocka_unit_test(test_dellink),
	    cmocka_unit_test(test_parse_link), cmocka_unit_test(test_addr_matches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
