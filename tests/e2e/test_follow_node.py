"""End to end: offline that follows the node (docs/offline.md).

The node's components cache through the hub (kubelet its pods and Node,
kube-proxy Services and EndpointSlices, coredns Services, EndpointSlices,
Endpoints and namespaces); the link is cut and the hub restarted without the
cloud.  Kubelet reports two of its pods with new IPs and one NotReady:

- the open watches of kube-proxy and coredns on EndpointSlices (shared by the
  multiplexer) and Endpoints (the ordinary offline watch) get MODIFIED events
  with the new addresses and conditions, at resourceVersions above any they
  saw before; their relists agree with what the watches built;
- endpoints of a pod on another node are left as cached;
- a second offline restart keeps all of it;
- once the link is back, a watch resumed at a local resourceVersion is
  answered 410, the clients list again from the cloud and end equal to it,
  and the hub's cache holds the cloud's objects again, not the local edits.

One client lists and watches EndpointSlices through the whole sequence and
checks that it never sees a resourceVersion go back (the double's rv moves
past the local ones while the link is cut, as a live cluster's does).  A
client nobody here wrote, @kubernetes/client-node's informer on Endpoints as
coredns, goes through it all too: it gets the update, and ends equal to the
cloud.  Run on the disk store and on the etcd store (a throw-away etcd).
"""

import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Etcd, Hub, Suite, get, request, wait_for, within  # noqa: E402
from loadgen import COREDNS, KUBELET, PROXY  # noqa: E402
from watch_stream import dechunk, open_watch  # noqa: E402
from clients import Informer, missing  # noqa: E402

NODE = "node1"
SLICES = "/apis/discovery.k8s.io/v1/endpointslices"
ENDPOINTS = "/api/v1/endpoints"
RV_CLIENT = "rv-checker/1.0"
WEB_IPS = {"web-a": "10.244.0.21", "web-b": "10.244.0.22", "web-c": "10.244.1.23"}
NEW_IPS = {"web-a": "10.244.0.121"}


def web_pod(name, node, ip):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": "uid-" + name,
                         "labels": {"app": "web2"}},
            "spec": {"nodeName": node, "containers": [{"name": "web", "image": "web:1"}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def web_objects():
    """Service web2 with pods web-a, web-b on this node and web-c on node2."""
    nodes = {"web-a": NODE, "web-b": NODE, "web-c": "node2"}
    objs = [web_pod(n, nodes[n], ip) for n, ip in WEB_IPS.items()]
    objs.append({"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": "web2", "namespace": "default"},
                 "spec": {"clusterIP": "10.96.0.50", "selector": {"app": "web2"},
                          "ports": [{"port": 80, "protocol": "TCP"}]}})
    objs.append({"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": "web2", "namespace": "default"},
                 "subsets": [{"addresses": [
                     {"ip": ip, "nodeName": nodes[n],
                      "targetRef": {"kind": "Pod", "name": n, "namespace": "default",
                                    "uid": "uid-" + n}} for n, ip in WEB_IPS.items()],
                     "ports": [{"port": 80, "protocol": "TCP"}]}]})
    objs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                 "metadata": {"name": "web2-x7k2p", "namespace": "default",
                              "labels": {"kubernetes.io/service-name": "web2"}},
                 "addressType": "IPv4",
                 "endpoints": [{"addresses": [ip], "nodeName": nodes[n],
                                "conditions": {"ready": True, "serving": True,
                                               "terminating": False},
                                "targetRef": {"kind": "Pod", "name": n,
                                              "namespace": "default", "uid": "uid-" + n}}
                               for n, ip in WEB_IPS.items()],
                 "ports": [{"port": 80, "protocol": "TCP"}]})
    return objs


def hub_get(hub, path, ua):
    return get("127.0.0.1", hub.proxy_port, path,
               headers={"User-Agent": ua, "Accept": "application/json"}, timeout=20)


def hub_list(hub, path, ua):
    s, _, body = hub_get(hub, path, ua)
    return (s, json.loads(body)) if s == 200 else (s, body)


def patch_status(hub, name, ns, status):
    body = json.dumps({"status": status}).encode()
    return request("127.0.0.1", hub.proxy_port, "PATCH",
                   "/api/v1/namespaces/%s/pods/%s/status" % (ns, name), body=body,
                   headers={"User-Agent": KUBELET,
                            "Content-Type": "application/strategic-merge-patch+json"},
                   timeout=20)


def rv_of(obj):
    return int(obj["metadata"]["resourceVersion"])


def by_name(items):
    return {i["metadata"]["namespace"] + "/" + i["metadata"]["name"]: i for i in items}


def slice_endpoint(slc, pod):
    for e in slc.get("endpoints") or []:
        if (e.get("targetRef") or {}).get("name") == pod:
            return e
    return None


def endpoints_entry(eps, pod):
    """(ip, ready) of the pod's entry in an Endpoints object, or None."""
    for sub in eps.get("subsets") or []:
        for field, ready in (("addresses", True), ("notReadyAddresses", False)):
            for a in sub.get(field) or []:
                if (a.get("targetRef") or {}).get("name") == pod:
                    return a["ip"], ready
    return None


class Watcher:
    """A client that lists, then watches from the list's rv, keeping its own
    copy of the collection as an informer does; on a 410 or an ended watch it
    resumes at its last rv, and on 410 lists again (client-go's reflector)."""

    def __init__(self, hub, path, ua):
        self.hub, self.path, self.ua = hub, path, ua
        self.objects, self.rv, self.rvs = {}, 0, []
        self.expired, self.backwards = 0, []
        self.modified = []
        self.errors = []
        self.lock = threading.Lock()
        self.stop = False

    def note_rv(self, rv, what):
        if rv < self.rv:
            self.backwards.append((what, self.rv, rv))
        self.rv = max(self.rv, rv)
        self.rvs.append(rv)

    def relist(self):
        s, doc = hub_list(self.hub, self.path, self.ua)
        if s != 200:
            return False
        with self.lock:
            self.objects = by_name(doc["items"])
            self.note_rv(int(doc["metadata"]["resourceVersion"]), "list")
        return True

    def run(self):
        need_list = True
        while not self.stop:
            try:
                if need_list and not self.relist():
                    time.sleep(0.3)
                    continue
                sock, head, rest = open_watch(
                    self.hub, "%s?watch=1&allowWatchBookmarks=true&resourceVersion=%d"
                    "&timeoutSeconds=60" % (self.path, self.rv), self.ua)
                if b" 200 " not in head.split(b"\r\n")[0]:
                    need_list = True  # not a watch: a Status (404, 503, ...)
                    time.sleep(0.3)
                else:
                    need_list = self.follow(sock, rest) or False
                sock.close()
            except (OSError, ValueError, KeyError) as e:
                self.errors.append(repr(e))
                time.sleep(0.3)

    def follow(self, sock, buf):
        """Apply the watch's events as they come, until it ends."""
        seen = 0
        sock.settimeout(0.3)
        b = buf  # what came with the head first
        while not self.stop:
            try:
                b = b or sock.recv(65536)
                if not b:
                    return
                buf, b = buf + b if b is not buf else buf, b""
            except socket.timeout:
                continue
            ended = b"\r\n0\r\n\r\n" in buf or buf.startswith(b"0\r\n\r\n")
            lines = [ln for ln in dechunk(buf).split(b"\n") if ln.strip()]
            complete = lines if dechunk(buf).endswith(b"\n") else lines[:-1]
            for line in complete[seen:]:
                if self.apply(json.loads(line)):
                    return True
            seen = len(complete)
            if ended:
                return

    def apply(self, ev):
        """One event; True when the client must list again."""
        obj = ev.get("object") or {}
        if ev["type"] == "ERROR":
            if obj.get("code") == 410:
                self.expired += 1
            return True
        with self.lock:
            self.note_rv(rv_of(obj), ev["type"])
            if ev["type"] == "BOOKMARK":
                return False
            key = obj["metadata"]["namespace"] + "/" + obj["metadata"]["name"]
            if ev["type"] == "DELETED":
                self.objects.pop(key, None)
            else:
                self.objects[key] = obj
            if ev["type"] == "MODIFIED":
                self.modified.append(obj)
        return False

    def snapshot(self):
        with self.lock:
            return dict(self.objects)


def start(w):
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    return th


def offline(hub):
    return hub.metric("yurthub_upstream_healthy") == 0


def cache_as_node(hub):
    for path, ua in (("/api/v1/pods?fieldSelector=spec.nodeName%3D" + NODE, KUBELET),
                     ("/api/v1/nodes?fieldSelector=metadata.name%3D" + NODE, KUBELET),
                     ("/api/v1/services", PROXY), (SLICES, PROXY),
                     ("/api/v1/services", COREDNS), (SLICES, COREDNS),
                     (ENDPOINTS, COREDNS), ("/api/v1/namespaces", COREDNS)):
        s, _, _ = hub_get(hub, path, ua)
        if s != 200:
            return False
    return True


def cloud_list(double, api_version, kind):
    st, body = double.control("GET", "/objects?apiVersion=%s&kind=%s" % (api_version, kind))
    return by_name(json.loads(body)["items"]) if st == 200 else {}


def check_followed(t, what, slices, endpoints):
    web = slices.get("default/web2-x7k2p", {})
    a, b, c = (slice_endpoint(web, p) for p in ("web-a", "web-b", "web-c"))
    t.check(what + ": web-a's new IP in the EndpointSlice",
            a and a["addresses"] == [NEW_IPS["web-a"]] and a["conditions"]["ready"], str(a))
    t.check(what + ": web-b not ready, not serving, in the EndpointSlice",
            b and b["addresses"] == [WEB_IPS["web-b"]] and b["conditions"]["ready"] is False
            and b["conditions"]["serving"] is False, str(b))
    t.check(what + ": web-c (another node's pod) as cached",
            c and c["addresses"] == [WEB_IPS["web-c"]] and c["conditions"]["ready"], str(c))
    dns = [s for k, s in slices.items() if k.startswith("kube-system/kube-dns-")]
    dns_ep = slice_endpoint(dns[0], DNS_POD[0]) if dns else None
    t.check(what + ": the node's coredns pod's new IP in kube-dns's EndpointSlice",
            dns_ep and dns_ep["addresses"] == [DNS_POD[1]], str(dns_ep))
    eps = endpoints.get("default/web2", {})
    t.check(what + ": Endpoints web2: web-a's new IP, web-b in notReadyAddresses",
            endpoints_entry(eps, "web-a") == (NEW_IPS["web-a"], True) and
            endpoints_entry(eps, "web-b") == (WEB_IPS["web-b"], False) and
            endpoints_entry(eps, "web-c") == (WEB_IPS["web-c"], True), json.dumps(eps)[:400])
    dns_eps = endpoints.get("kube-system/kube-dns", {})
    t.check(what + ": Endpoints kube-dns: the coredns pod's new IP",
            endpoints_entry(dns_eps, DNS_POD[0]) == (DNS_POD[1], True),
            json.dumps(dns_eps)[:400])


DNS_POD = [None, "10.244.0.132"]  # the node's coredns pod, its new IP


def test_follow(t, double, hub):
    t.check("online: the node's components cache", within(lambda: cache_as_node(hub), 20,
                                                                what="caching"))
    # a client nobody here wrote: @kubernetes/client-node's informer, as coredns
    inf = Informer(t.workdir, hub.url, ENDPOINTS, user_agent=COREDNS,
                   name="informer-" + os.path.basename(hub.cache))
    t.cleanups.append(inf.stop)
    inf.wait_started(30)
    pods = cloud_list(double, "v1", "Pod")
    DNS_POD[0] = [p["metadata"]["name"] for p in pods.values()
                  if p["metadata"]["name"].startswith("coredns-") and
                  p["spec"]["nodeName"] == NODE][0]
    checker = Watcher(hub, SLICES, RV_CLIENT)
    start(checker)
    wait_for(lambda: checker.rv > 0, 10, what="the rv checker's list")
    # the cloud's rv before the cut: every local rv is above it
    # every local rv is above the cloud's newest of its resource before the
    # cut (a client compares the rvs of one resource)
    cloud_rv = {kind: max(rv_of(o) for o in cloud_list(double, av, kind).values())
                for av, kind in (("v1", "Pod"), ("v1", "Endpoints"),
                                 ("discovery.k8s.io/v1", "EndpointSlice"))}

    double.cut("refuse")
    hub_get(hub, "/api/v1/pods?fieldSelector=spec.nodeName%3D" + NODE, KUBELET)
    wait_for(lambda: offline(hub), 10, what="offline")
    hub.stop()
    hub.start()
    t.check("restarted offline", within(lambda: offline(hub), 10, what="offline"))

    # kube-proxy's and coredns's informers, started offline: list, then watch
    proxy_slices = Watcher(hub, SLICES, PROXY)
    dns_eps = Watcher(hub, ENDPOINTS, COREDNS)
    for w in (proxy_slices, dns_eps):
        start(w)
    t.check("offline lists for the informers",
            within(lambda: proxy_slices.rv and dns_eps.rv, 15, what="offline lists"))
    time.sleep(1)  # their watches open (nothing is expected on them yet)

    # kubelet reports the restarted pods, with the patches it makes (a
    # two-way strategic merge patch: podIPs merged by ip)
    def new_ip(old, new):
        return {"$setElementOrder/podIPs": [{"ip": new}], "podIP": new,
                "podIPs": [{"ip": new}, {"$patch": "delete", "ip": old}]}
    dns_old_ip = pods["kube-system/" + DNS_POD[0]]["status"]["podIP"]
    r1 = patch_status(hub, "web-a", "default", new_ip(WEB_IPS["web-a"], NEW_IPS["web-a"]))
    r2 = patch_status(hub, DNS_POD[0], "kube-system", new_ip(dns_old_ip, DNS_POD[1]))
    r3 = patch_status(hub, "web-b", "default",
                      {"conditions": [{"type": "Ready", "status": "False"}]})
    t.check("kubelet's three status patches answered 200", [r[0] for r in (r1, r2, r3)] ==
            [200, 200, 200], str([r[:1] + (r[2][:200],) for r in (r1, r2, r3)]))
    patched = json.loads(r1[2]) if r1[0] == 200 else {}
    t.check("the patched pod has a local rv above the cloud's last",
            patched and rv_of(patched) > cloud_rv["Pod"], str(patched.get("metadata")))

    def followed(w, names):
        return lambda: all(any(o["metadata"]["name"] == n for o in w.modified) for n in names)
    t.check("kube-proxy's watch (multiplexer) gets MODIFIED EndpointSlices",
            within(followed(proxy_slices, ["web2-x7k2p"]), 15, what="slice events"),
            str([o["metadata"]["name"] for o in proxy_slices.modified]))
    t.check("coredns's Endpoints watch gets MODIFIED web2 and kube-dns",
            within(followed(dns_eps, ["web2", "kube-dns"]), 15, what="endpoints events"),
            str([o["metadata"]["name"] for o in dns_eps.modified]))
    wait_for(lambda: slice_endpoint(proxy_slices.snapshot().get("default/web2-x7k2p", {}),
                                    "web-b")["conditions"]["ready"] is False, 10,
             what="web-b not ready in the watch")
    wait_for(lambda: endpoints_entry(dns_eps.snapshot().get("kube-system/kube-dns", {}),
                                     DNS_POD[0]) == (DNS_POD[1], True), 10,
             what="coredns's IP in the Endpoints watch")
    check_followed(t, "watches", proxy_slices.snapshot(), dns_eps.snapshot())
    for who, ua, path, w in (("kube-proxy", PROXY, SLICES, proxy_slices),
                             ("coredns", COREDNS, ENDPOINTS, dns_eps)):
        s, doc = hub_list(hub, path, ua)
        t.check("%s's relist agrees with its watch" % who,
                s == 200 and by_name(doc["items"]) == w.snapshot() and
                int(doc["metadata"]["resourceVersion"]) >= w.rv, "")
    try:
        ev = inf.wait_event(lambda e: e["event"] == "update" and e["name"] == "web2", 20,
                            "client-node's update of web2")
    except TimeoutError:
        ev = {}
    t.check("client-node's informer gets the Endpoints update, at a local rv",
            ev and int(ev["resourceVersion"]) > cloud_rv["Endpoints"], str(ev))
    t.check("the rv checker saw the changes too",
            within(followed(checker, ["web2-x7k2p"]), 10, what="checker events"))

    # the cloud moves on meanwhile: its endpoints controller has other news
    for i in range(40):
        double.put_object({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "tick", "namespace": "default"},
                           "data": {"n": str(i)}})
    cloud_slice = dict(cloud_list(double, "discovery.k8s.io/v1", "EndpointSlice")
                       ["default/web2-x7k2p"])
    cloud_slice["endpoints"] = [e for e in cloud_slice["endpoints"]
                                if e["targetRef"]["name"] != "web-b"]
    double.put_object(cloud_slice)

    for w in (proxy_slices, dns_eps):
        w.stop = True
    hub.stop()
    hub.start()
    t.check("restarted offline again", within(lambda: offline(hub), 10, what="offline"))
    s1, slices = hub_list(hub, SLICES, PROXY)
    s2, eps = hub_list(hub, ENDPOINTS, COREDNS)
    check_followed(t, "after a second offline restart",
                   by_name(slices["items"]) if s1 == 200 else {},
                   by_name(eps["items"]) if s2 == 200 else {})
    s, doc = hub_list(hub, "/api/v1/pods?fieldSelector=spec.nodeName%3D" + NODE, KUBELET)
    pod = by_name(doc["items"]).get("default/web-a", {}) if s == 200 else {}
    t.check("kubelet's pod keeps its offline status",
            pod.get("status", {}).get("podIP") == NEW_IPS["web-a"], str(pod.get("status")))

    # coredns's informer started again offline: its list and watch are at a
    # local rv when the link returns
    dns_eps = Watcher(hub, ENDPOINTS, COREDNS)
    start(dns_eps)
    wait_for(lambda: dns_eps.rv > cloud_rv["Endpoints"], 10, what="coredns's offline list")
    local_rv = dns_eps.rv
    t.check("offline, coredns's Endpoints list is at a local rv",
            local_rv > cloud_rv["Endpoints"], "%d <= %d" % (local_rv, cloud_rv["Endpoints"]))
    time.sleep(1)
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
    t.check("back online, coredns's watch resumed at its local rv gets 410 and it relists",
            within(lambda: dns_eps.expired > 0, 20, what="410"),
            "expired %d, errors %s, rvs %s" % (dns_eps.expired, dns_eps.errors[-3:],
                                               dns_eps.rvs[-5:]))
    if os.environ.get("DEBUG_FOLLOW"):
        sock, head, rest = open_watch(hub, ENDPOINTS + "?watch=1&resourceVersion=%d" % local_rv,
                                      COREDNS)
        sock.settimeout(3)
        try:
            rest += sock.recv(65536)
        except OSError:
            pass
        print("DEBUG", head, rest[:500], dns_eps.rvs, dns_eps.errors)
    s, _, body = hub_get(hub, ENDPOINTS + "?resourceVersion=%d" % local_rv, COREDNS)
    t.check("online, a list at a local rv is 410 Expired",
            s == 410 and json.loads(body).get("reason") == "Expired", body[:200])
    cloud = cloud_list(double, "discovery.k8s.io/v1", "EndpointSlice")
    cloud_eps = cloud_list(double, "v1", "Endpoints")

    def converged(w, want):
        def same():
            snap = w.snapshot()
            return set(snap) == set(want) and all(rv_of(snap[k]) == rv_of(want[k])
                                                  for k in want)
        return same
    t.check("the rv checker (through the multiplexer) ends equal to the cloud",
            within(converged(checker, cloud), 30, what="checker converged"))
    t.check("coredns's Endpoints informer ends equal to the cloud",
            within(converged(dns_eps, cloud_eps), 30, what="coredns converged"))
    s, doc = hub_list(hub, SLICES, PROXY)
    t.check("kube-proxy's relist is the cloud's",
            s == 200 and {k: rv_of(v) for k, v in by_name(doc["items"]).items()} ==
            {k: rv_of(v) for k, v in cloud.items()})
    want = {k: v["metadata"]["resourceVersion"] for k, v in cloud_eps.items()}
    t.check("client-node's informer ends equal to the cloud (names and resourceVersions)",
            within(lambda: inf.dump()["rv"] == want, 30, what="client-node converged"),
            "%s != %s" % (inf.dump()["rv"], want))
    t.check("client-node's informer is still running", inf.alive(), inf.stderr_tail())
    t.check("the rv checker never saw a resourceVersion go back", not checker.backwards,
            str(checker.backwards[:5]))
    t.check("the rv checker saw local rvs, then the cloud's",
            any(r > cloud_rv["EndpointSlice"] for r in checker.rvs) and checker.rv >= rv_of(
                cloud["default/web2-x7k2p"]), str(checker.rvs[-8:]))
    checker.stop = dns_eps.stop = True

    # the cache holds the cloud's objects again: offline, they are served
    hub_get(hub, SLICES, PROXY)
    hub_get(hub, ENDPOINTS, COREDNS)
    time.sleep(1)
    double.cut("refuse")
    hub_get(hub, ENDPOINTS, COREDNS)
    wait_for(lambda: offline(hub), 10, what="offline")
    s1, slices = hub_list(hub, SLICES, PROXY)
    s2, eps = hub_list(hub, ENDPOINTS, COREDNS)
    web = by_name(slices["items"]).get("default/web2-x7k2p") if s1 == 200 else None
    t.check("offline after the return: the EndpointSlice is the cloud's, not the local edit",
            web and rv_of(web) == rv_of(cloud["default/web2-x7k2p"]) and
            slice_endpoint(web, "web-b") is None, json.dumps(web)[:300])
    got = {k: rv_of(v) for k, v in by_name(eps["items"]).items()} if s2 == 200 else s2
    t.check("offline after the return: the Endpoints are the cloud's",
            got == {k: rv_of(v) for k, v in cloud_eps.items()},
            "%s != %s" % (got, {k: rv_of(v) for k, v in cloud_eps.items()}))
    double.restore()


def run(t, storage):
    print("-- on the %s store" % storage, flush=True)
    double = Double(t.workdir, ["--node", NODE, "--node", "node2"])
    t.cleanups.append(double.stop)
    double.put_object(web_objects())
    extra = []
    if storage == "etcd":
        etcd = Etcd(t.workdir)
        t.cleanups.append(etcd.stop)
        extra = ["--storage=etcd", "--etcd-servers=" + etcd.url]
    hub = Hub(t.workdir, [double.url], extra=extra, name="hub-" + storage)
    t.cleanups.append(hub.stop)
    t.run(test_follow, double, hub)
    hub.stop()
    double.stop()


def main():
    t = Suite("follow_node")
    lacking = missing()
    if lacking:
        for m in lacking:
            t.check("real client installed: " + m, False)
        t.finish()
    for storage in sys.argv[1:] or ("disk", "etcd"):
        run(t, storage)
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
