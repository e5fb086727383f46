"""End to end: a pool's leader hub serving its followers (issue 14,
docs/sharing.md, "The pool's leader").  Three hubs of pool1 against one
test double playing the cluster (its CA, a bootstrap token, CSRs approved):
node1 is named leader by the leader-hub-pool1 configmap, node2 and node3
follow it.

- the leader serves the multiplexer port on its node IP, over TLS with its
  serving certificate; a client with a follower's node certificate lists
  there, one without a certificate or with a certificate that is not a
  node's is refused (401), and what is not a pool-scope list or watch is
  refused (403);
- local clients of the followers list and watch services and EndpointSlices
  and get what the cloud has (after their filters), while the double sees
  no request at all from the followers' multiplexers: their pool-scope
  traffic reaches the cloud only through the leader;
- the leader port serves the pool's nodes only (issue 23): a node
  certificate usable only as a TLS server gets 401, a node that is not in
  the NodePool's status.nodes gets 403 for everything (no Secret, no pod, no
  pool-scope list), a member still lists and watches; a configmap naming
  Secrets as pool-scope is refused with a log line, and Secrets are never
  served on the leader port;
- the leader is killed: the followers' watchers still get the cloud's
  changes (their multiplexers fall back to the cloud); the leader comes
  back: their multiplexers return to it;
- last, a leader that cannot list the NodePools answers 503 with
  Retry-After to every node, members included.
"""

import json
import os
import signal
import socket
import ssl
import http.client
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, free_port, get, wait_for  # noqa: E402
from test_multiplexer import SERVICES, SLICES, names, service, slice_for  # noqa: E402
from watch_stream import open_watch, read_events, read_head  # noqa: E402
from test_client_certs import make_client  # noqa: E402

TOKEN = "abcdef.0123456789abcdef"
POOL = "pool1"
NODES = {"node1": "127.0.0.11", "node2": "127.0.0.12", "node3": "127.0.0.13"}
LEADER = "node1"
FOLLOWERS = ("node2", "node3")
KUBE_PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
COREDNS = "coredns/1.11.3 (linux/amd64) kubernetes/abcdef"


SCOPE = "/v1/services,discovery.k8s.io/v1/endpointslices"


def leader_configmap(leaders, scope=SCOPE):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "leader-hub-" + POOL, "namespace": "kube-system",
                         "labels": {"openyurt.io/configmap-name": "leader-hub-" + POOL}},
            "data": {"leaders": leaders, "enable-leader-election": "true",
                     "pool-scoped-metadata": scope,
                     "interconnectivity": "true"}}


def seed(double):
    for n in NODES:
        double.put_object({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": n,
                                        "labels": {"apps.openyurt.io/nodepool": POOL}}})
    kubernetes = service("kubernetes")  # its cluster IP goes into serving certificates
    kubernetes["spec"]["clusterIP"] = "10.96.0.1"
    kubernetes["spec"]["clusterIPs"] = ["10.96.0.1"]
    for o in [kubernetes, service("web", labels={"app": "web"}), slice_for("web"),
              service("lb-discard", svc_type="LoadBalancer",
                      annotations={"svc.openyurt.io/discard": "true"}),
              leader_configmap("%s/%s" % (LEADER, NODES[LEADER])),
              {"apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
               "metadata": {"name": POOL}, "spec": {"type": "Edge"},
               "status": {"nodes": sorted(NODES)}},
              {"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "db-password", "namespace": "default"},
               "data": {"password": "c2VjcmV0"}}]:
        double.put_object(o)


class Pool:
    def __init__(self, t):
        self.t = t
        self.pki = os.path.join(t.workdir, "cluster-pki")
        self.double = Double(t.workdir, ["--seed", "none", "--pki-dir", self.pki,
                                         "--bootstrap-token", TOKEN, "--csr-auto-approve"])
        t.cleanups.append(self.double.stop)
        self.ca_file = os.path.join(self.pki, "ca.crt")
        self.url = "https://127.0.0.1:%d" % self.double.port
        self.mux_port = free_port()
        seed(self.double)
        self.hubs = {}
        for n in NODES:
            self.start(n)

    def start(self, node):
        h = Hub(self.t.workdir, [self.url], name="hub-" + node, node=node, ready_timeout=60,
                extra=["--root-dir=" + os.path.join(self.t.workdir, "root-" + node),
                       "--join-token=" + TOKEN, "--discovery-token-unsafe-skip-ca-verification",
                       "--node-ip=" + NODES[node], "--nodepool-name=" + POOL,
                       "--multiplexer-port=%d" % self.mux_port, "--enable-dummy-if=false"])
        self.t.cleanups.append(h.stop)
        self.hubs[node] = h
        return h

    def node_pem(self, node):
        return os.path.join(self.t.workdir, "root-" + node, "pki", "yurthub-current.pem")

    def by_ua(self):
        return self.double.state()["requests_by_user_agent"]


def log_has(hub, text):
    with open(hub.logpath, "rb") as f:
        return text in f.read().decode(errors="replace")


def mux_watch(pool, path, cert):
    """A watch on the leader port: (socket, response head, body so far)."""
    ctx = ssl.create_default_context(cafile=pool.ca_file)
    ctx.load_cert_chain(*cert) if isinstance(cert, tuple) else ctx.load_cert_chain(cert)
    sock = ctx.wrap_socket(socket.create_connection((NODES[LEADER], pool.mux_port), timeout=20),
                           server_hostname=NODES[LEADER])
    sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nUser-Agent: multiplexer-proxy-node3\r\n"
                  "Accept: application/json\r\n\r\n" % path).encode())
    head, rest = read_head(sock)
    return sock, head, rest


def mux_request(pool, path, cert=None, with_headers=False):
    ctx = ssl.create_default_context(cafile=pool.ca_file)
    if cert:
        ctx.load_cert_chain(*cert) if isinstance(cert, tuple) else ctx.load_cert_chain(cert)
    c = http.client.HTTPSConnection(NODES[LEADER], pool.mux_port, context=ctx, timeout=20)
    c.request("GET", path, headers={"User-Agent": "multiplexer-proxy-node2",
                                    "Accept": "application/json"})
    r = c.getresponse()
    body = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return (r.status, hdrs, body) if with_headers else (r.status, body)


def hub_list(hub, path, ua):
    st, _, body = get("127.0.0.1", hub.proxy_port, path,
                      headers={"User-Agent": ua, "Accept": "application/json"})
    return st, (json.loads(body) if body[:1] == b"{" else body)


def test_roles(t, pool):
    leader = pool.hubs[LEADER]
    wait_for(lambda: log_has(leader, "multiplexer port %s:%d serving" %
                             (NODES[LEADER], pool.mux_port)), 30, step=0.2,
             what="the leader's multiplexer port")
    t.check("the leader serves the multiplexer port on its node IP", True)
    for n in FOLLOWERS:
        url = "https://%s:%d" % (NODES[LEADER], pool.mux_port)
        ok = wait_for(lambda n=n, url=url: log_has(pool.hubs[n], "leader hub %s: answers" % url),
                      30, step=0.2, what="%s to find its leader" % n)
        t.check("%s follows the leader and finds it answering" % n, ok)
    t.check("the leader does not follow anyone",
            not log_has(leader, "this hub follows"))


def test_mux_port_auth(t, pool):
    st, body = mux_request(pool, SERVICES, cert=pool.node_pem("node2"))
    lst = json.loads(body) if st == 200 else {}
    t.check("a follower's node certificate lists services on the multiplexer port",
            st == 200 and "default/web" in names(lst), "%s %s" % (st, body[:200]))
    t.check("... unfiltered: the discarded LoadBalancer is there for the follower to filter",
            "default/lb-discard" in names(lst), names(lst))
    st, _ = mux_request(pool, SERVICES)
    t.check("no client certificate: 401 on the multiplexer port", st == 401, st)
    admin = (os.path.join(pool.pki, "admin.crt"), os.path.join(pool.pki, "admin.key"))
    st, _ = mux_request(pool, SERVICES, cert=admin)
    t.check("a certificate of the cluster CA that is not a node's: 401", st == 401, st)
    st, _ = mux_request(pool, "/api/v1/pods", cert=pool.node_pem("node3"))
    t.check("not a pool-scope resource: 403", st == 403, st)
    st, _ = mux_request(pool, "/api/v1/namespaces/default/services/web",
                        cert=pool.node_pem("node3"))
    t.check("a get, not a list or watch: 403", st == 403, st)


def test_leader_port_pool(t, pool):
    """Issue 23: who may use the leader port, and what it serves."""
    d = pool.pki
    server_only = make_client(d, "ca", "node2-server-only", "system:node:node2", "serverAuth")
    st, body = mux_request(pool, SERVICES, cert=server_only)
    t.check("a node certificate of the cluster CA with serverAuth only: 401", st == 401,
            (st, body[:200]))
    stranger = make_client(d, "ca", "node9", "system:node:node9", "clientAuth")
    st, body = mux_request(pool, SERVICES, cert=stranger)
    t.check("system:node:node9, not in the NodePool: 403 for a pool-scope list",
            st == 403 and b"not a member of NodePool" in body, (st, body[:300]))
    for path in ("/api/v1/secrets", "/api/v1/namespaces/default/secrets/db-password",
                 "/api/v1/pods", SERVICES + "?watch=true&timeoutSeconds=1"):
        st, body = mux_request(pool, path, cert=stranger)
        t.check("node9 gets 403 for %s, and nothing of it" % path,
                st == 403 and b"db-password" not in body and b"podIP" not in body,
                (st, body[:200]))
    member = pool.node_pem("node3")
    st, body = mux_request(pool, SERVICES, cert=member)
    lst = json.loads(body) if st == 200 else {}
    t.check("a member (node3) lists services on the leader port",
            st == 200 and "default/web" in names(lst), (st, body[:200]))
    rv = lst.get("metadata", {}).get("resourceVersion", "")
    sock, head, rest = mux_watch(pool, SERVICES + "?watch=true&resourceVersion=" + rv, member)
    t.check("a member watches services on the leader port", head.startswith(b"HTTP/1.1 200"),
            head[:100])
    pool.double.put_object(service("seen-by-member"))
    evs, _ = read_events(sock, rest, lambda e: changed(e, "seen-by-member"), 30)
    sock.close()
    t.check("... and gets the cloud's change", changed(evs, "seen-by-member"), evs[-3:])

    # Secrets named as pool-scope by the configmap: refused, with a log line
    leader = pool.hubs[LEADER]
    line = '"/v1/secrets" is refused as a pool-scope resource'
    pool.double.put_object(leader_configmap("%s/%s" % (LEADER, NODES[LEADER]),
                                            SCOPE + ",/v1/secrets"))
    try:
        logged = wait_for(lambda: log_has(leader, line), 30, step=0.2, what="the refusal")
    except TimeoutError:
        logged = False
    t.check("a configmap naming Secrets as pool-scope is refused with a log line", logged)
    st, body = mux_request(pool, "/api/v1/secrets", cert=pool.node_pem("node2"))
    t.check("... and a member gets 403 for Secrets on the leader port",
            st == 403 and b"db-password" not in body, (st, body[:200]))
    st, body = mux_request(pool, SERVICES, cert=pool.node_pem("node2"))
    t.check("... while the rest of the list is still served", st == 200, st)
    pool.double.put_object(leader_configmap("%s/%s" % (LEADER, NODES[LEADER])))


def open_watchers(t, pool):
    """kube-proxy and coredns on each follower list and watch services and slices."""
    out = []
    for n in FOLLOWERS:
        hub = pool.hubs[n]
        for ua in (KUBE_PROXY, COREDNS):
            for path in (SERVICES, SLICES):
                st, lst = hub_list(hub, path, ua)
                if st != 200:
                    t.check("%s: %s lists %s" % (n, ua.split("/")[0], path), False, st)
                    continue
                rv = lst["metadata"]["resourceVersion"]
                sock, head, rest = open_watch(
                    hub, path + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv,
                    ua)
                out.append([n, ua.split("/")[0], path, sock, rest, lst])
    return out


def changed(evs, name):
    return any(e.get("type") in ("ADDED", "MODIFIED") and
               e["object"]["metadata"]["name"] == name for e in evs)


def all_see(watchers, path, name, timeout=30):
    ok = True
    for w in watchers:
        if w[2] != path:
            continue
        evs, _ = read_events(w[3], w[4], lambda e: changed(e, name), timeout)
        w[4] = b""
        ok = ok and changed(evs, name)
    return ok


def test_followers_through_leader(t, pool, watchers):
    pool.double.control("POST", "/reset-counters")
    watchers.extend(open_watchers(t, pool))
    for n, comp, path, _, _, lst in watchers:
        if path == SERVICES:
            want = ["default/kubernetes", "default/web"] + (
                [] if comp == "kube-proxy" else ["default/lb-discard"])
            t.check("%s's %s lists the cloud's services after its filters" % (n, comp),
                    names(lst) == sorted(want), names(lst))
        else:
            t.check("%s's %s lists the cloud's EndpointSlices" % (n, comp),
                    names(lst) == ["default/web-abcde"], names(lst))
    pool.double.put_object(service("added", labels={"app": "new"}))
    pool.double.put_object(slice_for("added"))
    t.check("every follower watcher gets the new service",
            all_see(watchers, SERVICES, "added"))
    t.check("every follower watcher gets the new EndpointSlice",
            all_see(watchers, SLICES, "added-abcde"))
    by_ua = pool.by_ua()
    t.check("the followers' multiplexers sent nothing to the cloud",
            all(by_ua.get("multiplexer-proxy-" + n, 0) == 0 for n in FOLLOWERS), by_ua)
    t.check("no local component of a follower reached the cloud for them",
            by_ua.get("kube-proxy", 0) == 0 and by_ua.get("coredns", 0) == 0, by_ua)


def test_leader_killed_and_back(t, pool, watchers):
    leader = pool.hubs[LEADER]
    leader.stop(signal.SIGKILL)
    pool.double.put_object(service("while-leader-down"))
    t.check("with the leader killed, every follower watcher still gets the cloud's change",
            all_see(watchers, SERVICES, "while-leader-down", timeout=40))
    by_ua = pool.by_ua()
    t.check("... through the followers' own multiplexers, from the cloud",
            all(by_ua.get("multiplexer-proxy-" + n, 0) > 0 for n in FOLLOWERS), by_ua)
    pool.start(LEADER)
    url = "https://%s:%d" % (NODES[LEADER], pool.mux_port)

    def back():
        # the followers' probes (every 20 s) find it again
        return all(log_has(pool.hubs[n], "leader hub %s: answers" % url) and
                   log_text_count(pool.hubs[n], "leader hub %s: answers" % url) >= 2
                   for n in FOLLOWERS)
    t.check("the followers find the restarted leader", wait_for(back, 60, step=0.5,
                                                               what="followers to return"))
    seq = [0]

    def only_through_leader():
        seq[0] += 1
        pool.double.control("POST", "/reset-counters")
        name = "after-return-%d" % seq[0]
        pool.double.put_object(service(name))
        if not all_see(watchers, SERVICES, name, timeout=20):
            return False
        by = pool.by_ua()
        return all(by.get("multiplexer-proxy-" + n, 0) == 0 for n in FOLLOWERS)
    ok = wait_for(only_through_leader, 60, step=0.5, what="the followers back on the leader")
    t.check("the followers' pool-scope traffic goes through the leader again", ok,
            pool.by_ua())
    for w in watchers:
        w[3].close()


class UnreadyHub(Hub):
    """A hub taken as started once its multiplexer port serves: its
    /v1/readyz waits for lists this test keeps failing."""

    def __init__(self, port_line, *args, **kwargs):
        self.port_line = port_line
        super().__init__(*args, **kwargs)

    def ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError("hub exited with %s" % self.proc.returncode)
        return log_has(self, self.port_line)


def test_members_unknown(t, pool):
    """A leader that has not listed the NodePools does not know its pool's
    members: it serves nobody, and says when to try again."""
    pool.hubs[LEADER].stop()
    pool.double.control("POST", "/fail?code=500&count=1000000&path=/apis/apps.openyurt.io/"
                        "v1beta2/nodepools")
    name = "hub-%s-unsynced" % LEADER
    h = UnreadyHub("multiplexer port %s:%d serving" % (NODES[LEADER], pool.mux_port),
                   pool.t.workdir, [pool.url], name=name, node=LEADER, ready_timeout=60,
                   extra=["--root-dir=" + os.path.join(pool.t.workdir, "root-" + LEADER),
                          "--join-token=" + TOKEN,
                          "--discovery-token-unsafe-skip-ca-verification",
                          "--node-ip=" + NODES[LEADER], "--nodepool-name=" + POOL,
                          "--multiplexer-port=%d" % pool.mux_port, "--enable-dummy-if=false"])
    t.cleanups.append(h.stop)
    for node in ("node2", "node9"):
        cert = pool.node_pem(node) if node == "node2" else \
            (os.path.join(pool.pki, "node9.crt"), os.path.join(pool.pki, "node9.key"))
        st, hdrs, body = mux_request(pool, SERVICES, cert=cert, with_headers=True)
        t.check("NodePools not listed: %s gets 503 with Retry-After on the leader port" % node,
                st == 503 and hdrs.get("retry-after") and b"default/web" not in body
                and b"members are not known" in body, (st, hdrs, body[:200]))
    h.stop()


def log_text_count(hub, text):
    with open(hub.logpath, "rb") as f:
        return f.read().decode(errors="replace").count(text)


def main():
    t = Suite("pool")
    pool = Pool(t)
    t.run(test_roles, pool)
    t.run(test_mux_port_auth, pool)
    watchers = []
    t.run(test_followers_through_leader, pool, watchers)
    t.run(test_leader_port_pool, pool)
    t.run(test_leader_killed_and_back, pool, watchers)
    t.run(test_members_unknown, pool)  # last: it leaves the NodePools failing
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
