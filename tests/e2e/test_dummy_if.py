"""End to end, the dummy interface (docs/install.md): the hub makes
hub-dummy0 holding 169.254.2.1/32, brought up; a client reaches the plain
proxy port through that address and gets the cloud's answer; what is taken
away (the address, the link's up flag, the link itself) is put back within
the re-ensure period; an interface found in place is kept, other addresses
and all; a link of that name that is not a dummy is left alone and nothing
listens on the address then; without CAP_NET_ADMIN the hub warns, goes on,
listens on nothing there, and still uses an interface that is in order;
--enable-dummy-if=false makes none; IPv6 (fd00::2:1/128) and another
--dummy-if-name work alike; the interface is gone once the hub stops.

Everything runs in a network namespace of its own: the script re-executes
itself under `unshare --net` (root), brings up the namespace's loopback and
starts the test double and the hubs there, so the host's network is never
touched.  Where namespaces cannot be made, it prints one SKIPPED line and
counts nothing.  The `ip` command is the test's, never the hub's.

The hub's re-ensure period (60 s) is shortened through
YURTHUB_TEST_NETIF_PERIOD_MS.  A kernel built without dummy links
(CONFIG_DUMMY unset, as on some CI virtual machines) cannot make one at
all; the test then says so on a NOTE line and runs with links of kind ifb
(YURTHUB_TEST_NETIF_KIND), which the hub treats exactly as a dummy - the
rtnetlink conversation, the checks and the listening are the same.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import PYTHON, Double, Hub, Suite, free_port, get, wait_for  # noqa: E402

IN_NS = "YURTHUB_E2E_IN_NETNS"
NAME = "hub-dummy0"
IP4 = "169.254.2.1"
KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
PERIOD_MS = 200


def skip(why):
    print("SKIPPED: %s" % why, flush=True)
    print("RESULT: 0 passed, 0 failed", flush=True)
    sys.exit(0)


def ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def ip_ok(*args):
    p = ip(*args)
    if p.returncode != 0:
        raise RuntimeError("ip %s: %s" % (" ".join(args), p.stderr.strip()))


def link(name=NAME):
    """`ip -d link` of name as a dict (ifindex, flags, linkinfo), None if absent."""
    p = ip("-j", "-d", "link", "show", "dev", name)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)[0]


def kind_of(info):
    return (info or {}).get("linkinfo", {}).get("info_kind")


def is_up(info):
    return info is not None and "UP" in info.get("flags", [])


def addrs(name=NAME):
    """[(address, prefix length)] of name."""
    p = ip("-j", "addr", "show", "dev", name)
    if p.returncode != 0 or not p.stdout.strip():
        return []
    return [(a["local"], a["prefixlen"]) for a in json.loads(p.stdout)[0].get("addr_info", [])]


def in_order(name=NAME, addr=IP4, prefix=32):
    info = link(name)
    return is_up(info) and (addr, prefix) in addrs(name)


def pods_via(host, port):
    """GET /api/v1/pods as kubelet: (status, the pods' names)."""
    status, _, body = get(host, port, "/api/v1/pods", headers={"User-Agent": KUBELET},
                          timeout=10)
    names = []
    if status == 200:
        doc = json.loads(body)
        names = sorted(i["metadata"]["name"] for i in doc.get("items", []))
    return status, names


def connect_result(host, port):
    """'connected', 'refused', or the error's name."""
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except OSError as e:
        return type(e).__name__


def log_of(hub):
    with open(hub.logpath, "rb") as f:
        return f.read().decode(errors="replace")


def pick_kind():
    """dummy if this kernel makes dummy links, else ifb; None if neither."""
    for kind in ("dummy", "ifb"):
        if ip("link", "add", "yh-probe0", "type", kind).returncode == 0:
            ip("link", "del", "yh-probe0")
            return kind
    return None


class Env:
    def __init__(self, kind):
        self.kind = kind
        self.vars = {"YURTHUB_TEST_NETIF_PERIOD_MS": str(PERIOD_MS)}
        if kind != "dummy":
            self.vars["YURTHUB_TEST_NETIF_KIND"] = kind


def start(t, double, env, name, extra=(), net_admin=True):
    hub = Hub(t.workdir, [double.url], name=name, extra=list(extra), env=env.vars,
              net_admin=net_admin)
    t.cleanups.append(hub.stop)
    return hub


def test_made_kept_removed(t, double, env):
    hub = start(t, double, env, "made")
    info = link()
    t.check("the hub made %s, kind %s, up" % (NAME, env.kind),
            kind_of(info) == env.kind and is_up(info), str(info))
    t.check("it holds %s/32 and nothing else of IPv4" % IP4,
            [a for a in addrs() if ":" not in a[0]] == [(IP4, 32)], str(addrs()))
    direct = pods_via("127.0.0.1", hub.proxy_port)
    via = pods_via(IP4, hub.proxy_port)
    t.check("a client reaches the proxy port through %s: 200, the cloud's pods" % IP4,
            via[0] == 200 and via == direct and len(via[1]) > 0, "%s vs %s" % (via, direct))
    t.check("the serve port does not listen on %s" % IP4,
            connect_result(IP4, hub.serve_port) == "refused")

    ip_ok("addr", "del", IP4 + "/32", "dev", NAME)
    t.check("the address taken away is back within the period",
            wait_for(lambda: in_order(), 10, step=0.05, what="the address"))
    ip_ok("link", "set", NAME, "down")
    t.check("the link set down is up again within the period",
            wait_for(lambda: in_order(), 10, step=0.05, what="the link up"))
    before = link()["ifindex"]
    ip_ok("link", "del", NAME)
    t.check("the link deleted is made again, with its address, within the period",
            wait_for(lambda: in_order(), 10, step=0.05, what="the link"))
    t.check("(it is a new link)", link()["ifindex"] != before)
    via = pods_via(IP4, hub.proxy_port)
    t.check("the proxy answers through the new link (its listener lived on)",
            via[0] == 200 and via == direct, str(via))
    log = log_of(hub)
    t.check("the log warns of each repair",
            "was not in order: its address added" in log and
            "was not in order: brought up" in log and "was gone: created again" in log,
            log[-1500:])
    rc = hub.stop()
    t.check("the hub stops cleanly", rc == 0, hub.tail())
    t.check("the interface is gone once the hub has stopped", link() is None, str(link()))
    t.check("the log says it was deleted", "dummy interface %s deleted" % NAME in log_of(hub))


def test_found_and_kept(t, double, env):
    """An interface made before (by a hub that crashed, the Go YurtHub or
    the operator): kept, not made again; brought up, given the address; its
    other addresses stay.  Deleted at stop all the same, as YurtHub does."""
    ip_ok("link", "add", NAME, "type", env.kind)
    ip_ok("addr", "add", "169.254.7.7/32", "dev", NAME)
    index = link()["ifindex"]
    hub = start(t, double, env, "found")
    t.check("an existing interface is kept (same link), brought up, given the address",
            link()["ifindex"] == index and in_order(), "%s %s" % (link(), addrs()))
    t.check("its other address stays", ("169.254.7.7", 32) in addrs(), str(addrs()))
    t.check("the log says it was found and what was done",
            "found; brought up, its address added" in log_of(hub), hub.tail())
    t.check("the proxy answers through it", pods_via(IP4, hub.proxy_port)[0] == 200)
    hub.stop()
    t.check("it is deleted at stop", link() is None)


def test_not_a_dummy(t, double, env):
    """A link of that name of another kind is never used nor deleted, and
    nothing listens on the address, even when the address is on the node."""
    other = "bridge" if env.kind != "bridge" else "ifb"
    if ip("link", "add", NAME, "type", other).returncode != 0:
        print("SKIPPED: this kernel makes no %s link (the not-a-dummy check)" % other)
        return
    ip_ok("addr", "add", IP4 + "/32", "dev", NAME)
    ip_ok("link", "set", NAME, "up")
    try:
        hub = start(t, double, env, "notdummy")
        log = log_of(hub)
        t.check("a %s called %s: the hub warns and goes on" % (other, NAME),
                "is not a %s interface (kind %s)" % (env.kind, other) in log and
                "going on without it" in log, log[-800:])
        t.check("nothing listens on %s, though the node has the address" % IP4,
                connect_result(IP4, hub.proxy_port) == "refused",
                connect_result(IP4, hub.proxy_port))
        t.check("the proxy answers on 127.0.0.1",
                pods_via("127.0.0.1", hub.proxy_port)[0] == 200)
        rc = hub.stop()
        t.check("the %s is still there after the hub stopped, as it was" % other,
                rc == 0 and kind_of(link()) == other and (IP4, 32) in addrs(), str(link()))
    finally:
        ip("link", "del", NAME)


def test_no_permission(t, double, env):
    """Without CAP_NET_ADMIN: one warning naming it, the hub serves, and
    nothing listens on the address (put on lo here, so that a listener
    would be found)."""
    ip_ok("addr", "add", IP4 + "/32", "dev", "lo")
    try:
        hub = start(t, double, env, "noperm", net_admin=False)
        log = log_of(hub)
        warned = [ln for ln in log.splitlines() if ln.startswith("W ") and NAME in ln]
        t.check("without CAP_NET_ADMIN: one warning, naming CAP_NET_ADMIN",
                len(warned) == 1 and "CAP_NET_ADMIN" in warned[0] and
                "going on without it" in warned[0], str(warned))
        t.check("no interface", link() is None)
        t.check("nothing listens on %s" % IP4,
                connect_result(IP4, hub.proxy_port) == "refused")
        t.check("the proxy answers on 127.0.0.1",
                pods_via("127.0.0.1", hub.proxy_port)[0] == 200)
        time.sleep(3 * PERIOD_MS / 1000)
        t.check("and it does not try again (one warning in all)",
                log_of(hub).count("CAP_NET_ADMIN") == 1)
        t.check("the hub stops cleanly", hub.stop() == 0)
    finally:
        ip("addr", "del", IP4 + "/32", "dev", "lo")


def test_in_order_without_permission(t, double, env):
    """An interface already in order is used without CAP_NET_ADMIN (looking
    needs none); at stop the hub cannot delete it, and says so quietly."""
    ip_ok("link", "add", NAME, "type", env.kind)
    ip_ok("addr", "add", IP4 + "/32", "dev", NAME)
    ip_ok("link", "set", NAME, "up")
    try:
        hub = start(t, double, env, "inorder", net_admin=False)
        t.check("without CAP_NET_ADMIN an interface in order is used",
                "%s with %s: found in order" % (NAME, IP4) in log_of(hub) and
                pods_via(IP4, hub.proxy_port)[0] == 200, hub.tail())
        rc = hub.stop()
        log = log_of(hub)
        t.check("at stop it stays (no permission to delete it), said at info level",
                rc == 0 and in_order() and "it stays" in log and
                not any(ln.startswith("W ") and "stays" in ln for ln in log.splitlines()),
                log[-600:])
    finally:
        ip("link", "del", NAME)


def test_disabled(t, double, env):
    hub = start(t, double, env, "disabled", extra=["--enable-dummy-if=false"])
    t.check("--enable-dummy-if=false: no interface", link() is None)
    t.check("and no word of it in the log", NAME not in log_of(hub))
    hub.stop()


def test_ipv6_and_name(t, double, env):
    if not os.path.exists("/proc/sys/net/ipv6") or ip("-6", "addr", "show", "dev",
                                                        "lo").stdout.find("::1") < 0:
        print("SKIPPED: no IPv6 in this namespace (fd00::2:1)")
        return
    name = "yurthub-dummy0"  # the older YurtHub's default name
    hub = start(t, double, env, "v6", extra=["--dummy-if-ip=fd00::2:1",
                                              "--dummy-if-name=" + name])
    t.check("IPv6: %s holds fd00::2:1/128, up" % name,
            wait_for(lambda: in_order(name, "fd00::2:1", 128), 5, what="fd00::2:1"),
            "%s %s" % (link(name), addrs(name)))
    t.check("no interface under the default name", link() is None)
    via = pods_via("fd00::2:1", hub.proxy_port)
    t.check("a client reaches the proxy port through [fd00::2:1]", via[0] == 200, str(via))
    ip_ok("-6", "addr", "del", "fd00::2:1/128", "dev", name)
    t.check("the IPv6 address taken away is back within the period",
            wait_for(lambda: in_order(name, "fd00::2:1", 128), 10, what="fd00::2:1 again"))
    t.check("and still answers", pods_via("fd00::2:1", hub.proxy_port)[0] == 200)
    hub.stop()
    t.check("%s is gone once the hub has stopped" % name, link(name) is None)


def test_pods_over_tls(t, double, env):
    """What pods do: a TLS client that trusts only the cluster CA (the
    service account's ca.crt) reaches https://169.254.2.1:<secure port> with
    its bearer token; the hub serves a certificate it got by CSR for that
    address and forwards the token without its own certificate."""
    import hashlib
    import http.client
    import ssl
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    token = "abcdef.0123456789abcdef"
    pki = os.path.join(t.workdir, "pki")
    cloud = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--pki-dir", pki,
                               "--bootstrap-token", token, "--csr-auto-approve"])
    t.cleanups.append(cloud.stop)
    ca_file = os.path.join(pki, "ca.crt")
    with open(ca_file, "rb") as f:
        spki = x509.load_pem_x509_certificate(f.read()).public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    secure = free_port()
    root = os.path.join(t.workdir, "root-tls")
    hub = Hub(t.workdir, ["https://127.0.0.1:%d" % cloud.port], name="tls", env=env.vars,
              net_admin=True,
              extra=["--join-token=" + token, "--root-dir=" + root,
                     "--discovery-token-ca-cert-hash=sha256:" + hashlib.sha256(spki).hexdigest(),
                     "--proxy-secure-port=%d" % secure])
    t.cleanups.append(hub.stop)
    t.check("the dummy interface is there with its address", in_order(), str(addrs()))
    cert = os.path.join(root, "pki", "yurthub-server-current.pem")
    wait_for(lambda: os.path.exists(cert) and connect_result(IP4, secure) == "connected",
             60, step=0.2, what="the serving certificate and the secure port")
    ctx = ssl.create_default_context(cafile=ca_file)  # checks the name: 169.254.2.1
    path = "/api/v1/namespaces/default/pods"

    def pod_get():
        try:
            c = http.client.HTTPSConnection(IP4, secure, context=ctx, timeout=20)
            c.request("GET", path, headers={"Authorization": "Bearer pod-sa-token",
                                            "User-Agent": "in-cluster-app/1.0"})
            r = c.getresponse()
            r.read()
            c.close()
            return r.status
        except (OSError, ssl.SSLError) as e:
            return repr(e)

    # the hub may still be calling the cloud reachable (its first probe with the new
    # certificate): until then it answers from its cache, as a pod would retry
    status = None
    for _ in range(100):
        status = pod_get()
        if status == 200:
            break
        time.sleep(0.2)
    t.check("a pod's TLS client trusting only the cluster CA reaches https://%s:%d with its "
            "token: 200" % (IP4, secure), status == 200, str(status))
    st = cloud.state()
    t.check("the request reached the cloud with the pod's token, without the hub's "
            "certificate",
            st.get("requests_bearer_without_client_cert", {}).get(path, 0) >= 1 and
            st.get("requests_by_bearer_user", {}).get("token:pod-sa-token", 0) >= 1, str(st))
    hub.stop()
    t.check("the interface is gone after stop", link() is None, str(link()))


def in_namespace():
    ip_ok("link", "set", "lo", "up")
    kind = pick_kind()
    if kind is None:
        skip("this kernel makes neither dummy nor ifb links")
    if kind != "dummy":
        print("NOTE: this kernel makes no dummy links (CONFIG_DUMMY is not set); the hub is "
              "tested with links of kind %s (YURTHUB_TEST_NETIF_KIND)" % kind, flush=True)
    env = Env(kind)
    t = Suite("dummy-if")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(double.stop)
    for test in (test_made_kept_removed, test_found_and_kept, test_not_a_dummy,
                 test_no_permission, test_in_order_without_permission, test_disabled,
                 test_ipv6_and_name, test_pods_over_tls):
        t.run(test, double, env)
        ip("link", "del", NAME)  # whatever a failed check left behind
    t.finish()


def main():
    if os.environ.get(IN_NS) == "1":
        in_namespace()
        return
    if os.geteuid() != 0:
        skip("not root: the test makes a network namespace (unshare --net) and links in it")
    for tool in ("unshare", "ip"):
        if not shutil.which(tool):
            skip("no %s command" % tool)
    probe = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        skip("network namespaces cannot be made here (unshare --net: %s); the dummy "
             "interface is not tested" % probe.stderr.strip())
    p = subprocess.run(["unshare", "--net", "--", PYTHON, os.path.abspath(__file__)],
                       env=dict(os.environ, **{IN_NS: "1"}))
    sys.exit(p.returncode)


if __name__ == "__main__":
    main()
