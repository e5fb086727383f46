"""End to end: open watches follow a change of what the filters read
(issue 24, item 3; docs/filters.md, "Watches follow topology changes").

kube-proxy's EndpointSlice and Service watches are answered by the
multiplexer (sharing on, the default).  The double serves node1 (the hub's
node), node2 and node3; NodePool pool-a holds node1 and node2, pool-b holds
node3.  With the watches open, and nothing touching the EndpointSlices
(no yurt-manager here):

- a Service's topology annotation goes hostname -> nodepool -> hostname:
  its slice's watch gets MODIFIED with the pool's, then the node's endpoints;
- pool-a's members change: MODIFIED with the new members' endpoints;
- node1 moves to pool-b: the slice follows the new pool, and the NodePort
  Service listening in pool-a only goes (DELETED); its listen annotation
  changed to pool-b brings it back (ADDED); node1 back in pool-a drops it
  again, and brings back the one listening in pool-a;
- a watch opened from a list made before such a change (the change is in
  no event of the history) gets the objects as now filtered;
- after each, the watch's state (its list plus its events) equals a fresh
  list, and a watch resumed from the watch's last resourceVersion carries
  on (no 410, the next change arrives);
- kube-proxy's Endpoints watch (proxied: Endpoints are not shared) gets the
  MODIFIED with the pool's, then the node's addresses, no 410, its state
  equal to a fresh list;
- a python3-kubernetes watch of the slices gets the MODIFIED of a topology
  change, at a resourceVersion it takes.

With sharing off (--pool-scope-resources=), kube-proxy's EndpointSlice and
Service watches are proxied from the cloud and follow the same way: MODIFIED
on a topology change, DELETED/ADDED of the NodePort Services when the node
changes pools, each watch's state equal to a fresh list; a watch from
resourceVersion 0 gets exactly the changed slice's events.

A secure port that starts serving after the start (bootstrap, the serving
CSR approved later; issue 24, item 5): kubelet's open Service watch (the
multiplexer's) gets default/kubernetes MODIFIED to the hub's address and
port, its open pod watch (proxied) the pod with the hub's
KUBERNETES_SERVICE_HOST.

Against the sanitizer build, and the release build when it is there.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from clients import PyWatch, missing  # noqa: E402
from harness import Double, Hub, Suite, each_build, get, wait_for  # noqa: E402
from watch_stream import dechunk, open_watch  # noqa: E402

KUBE_PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
SERVICES = "/api/v1/services"
SLICES = "/apis/discovery.k8s.io/v1/endpointslices"
ENDPOINTS = "/api/v1/endpoints"
TOPOLOGY = "openyurt.io/topologyKeys"
LISTEN = "nodeport.openyurt.io/listen"
EPS = [("10.244.0.5", "node1"), ("10.244.1.5", "node2"), ("10.244.2.5", "node3")]
WAIT = 15  # generous: the hub's bound is a second


def service(name, svc_type="ClusterIP", annotations=None):
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    if svc_type == "NodePort":
        ports[0]["nodePort"] = 30080
    m = {"name": name, "namespace": "default"}
    if annotations:
        m["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Service", "metadata": m,
            "spec": {"type": svc_type, "clusterIP": "10.96.1.1", "clusterIPs": ["10.96.1.1"],
                     "ports": ports}}


def slice_for(svc):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": svc + "-abcde", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "nodeName": node}
                          for ip, node in EPS],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def nodepool(name, nodes):
    return {"apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
            "metadata": {"name": name}, "spec": {"type": "Edge"},
            "status": {"readyNodeNum": len(nodes), "unreadyNodeNum": 0, "nodes": sorted(nodes)}}


def set_node_pool(double, node, pool):
    _, _, body = get("127.0.0.1", double.port, "/api/v1/nodes/" + node,
                     headers={"Accept": "application/json"})
    obj = json.loads(body)
    obj["metadata"]["labels"]["apps.openyurt.io/nodepool"] = pool
    obj["metadata"].pop("resourceVersion", None)
    double.put_object(obj)


def endpoints_for(svc):
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": svc, "namespace": "default"},
            "subsets": [{"addresses": [{"ip": ip, "nodeName": node} for ip, node in EPS],
                         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}


def seed(double):
    for o in [service("app", annotations={TOPOLOGY: "kubernetes.io/hostname"}),
              slice_for("app"), endpoints_for("app"), service("plain"), slice_for("plain"),
              service("np-a", "NodePort", {LISTEN: "pool-a"}),
              service("np-b", "NodePort", {LISTEN: "pool-b"}),
              nodepool("pool-a", ["node1", "node2"]), nodepool("pool-b", ["node3"])]:
        double.put_object(o)
    set_node_pool(double, "node3", "pool-b")


def key(obj):
    return "%s/%s" % (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def content(obj):
    """What a client acts on: the object without its resourceVersion, kind and apiVersion
    (a list's items carry none, a watch event's object both)."""
    o = json.loads(json.dumps(obj))
    o["metadata"].pop("resourceVersion", None)
    o.pop("kind", None)
    o.pop("apiVersion", None)
    return o


def hub_list(hub, path, ua=KUBE_PROXY):
    status, _, body = get("127.0.0.1", hub.proxy_port, path,
                          headers={"User-Agent": ua, "Accept": "application/json"})
    return json.loads(body) if status == 200 else None


class Watch:
    """kube-proxy's list then watch through the hub, and the state it makes: the list's
    items, with each event applied as a client-go informer applies it."""

    def __init__(self, hub, path, rv=None, ua=KUBE_PROXY):
        self.hub, self.path, self.ua = hub, path, ua
        if rv is None:
            lst = hub_list(hub, path, ua)
            self.state = {key(i): i for i in lst["items"]}
            rv = lst["metadata"]["resourceVersion"]
        else:
            self.state = None  # a resumed watch: only its events are looked at
        self.sock, head, self.raw = open_watch(
            hub, "%s%swatch=true&allowWatchBookmarks=true&resourceVersion=%s" %
            (path, "&" if "?" in path else "?", rv), ua)
        self.ok = b" 200 " in head.split(b"\r\n")[0]
        self.events = []
        self.rv = rv

    def pump(self):
        self.sock.settimeout(0.2)
        try:
            b = self.sock.recv(65536)
            if b:
                self.raw += b
        except OSError:
            pass
        lines = dechunk(self.raw).split(b"\n")
        for line in lines[len(self.events):-1]:  # the last one is not complete
            ev = json.loads(line)
            self.events.append(ev)
            obj = ev.get("object", {})
            if ev["type"] in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                self.rv = obj["metadata"]["resourceVersion"]
            if self.state is None or ev["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            if ev["type"] == "DELETED":
                self.state.pop(key(obj), None)
            else:
                self.state[key(obj)] = obj

    def wait(self, pred, what):
        """Events after those seen so far until pred(new events) holds; the new events."""
        start = len(self.events)

        def cond():
            self.pump()
            return pred(self.events[start:])
        try:
            wait_for(cond, WAIT, what=what)
        except TimeoutError:
            pass
        return self.events[start:]

    def matches_list(self):
        """(equal, the keys that differ) between the watch's state and a fresh list."""
        self.pump()
        lst = hub_list(self.hub, self.path, self.ua)
        fresh = {key(i): content(i) for i in lst["items"]}
        mine = {k: content(o) for k, o in self.state.items()}
        diff = [k for k in sorted(set(fresh) | set(mine)) if fresh.get(k) != mine.get(k)]
        return not diff, diff

    def close(self):
        self.sock.close()


def slice_nodes(obj):
    return sorted(e.get("nodeName") for e in obj.get("endpoints", []))


def event_for(name, types, nodes=None):
    def pred(evs):
        for e in evs:
            o = e.get("object", {})
            if e["type"] in types and o.get("metadata", {}).get("name") == name and \
                    (nodes is None or slice_nodes(o) == nodes):
                return True
        return False
    return pred


def eps_nodes(obj):
    return sorted(a.get("nodeName") for s in obj.get("subsets") or []
                  for a in s.get("addresses") or [])


def eps_event(name, nodes):
    """A MODIFIED of Endpoints name with the addresses of nodes."""
    def pred(evs):
        return any(e["type"] == "MODIFIED" and e["object"]["metadata"]["name"] == name and
                   eps_nodes(e["object"]) == nodes for e in evs)
    return pred


def summary(evs):
    return [(e["type"], e["object"].get("metadata", {}).get("name"),
             slice_nodes(e["object"]) if "endpoints" in e["object"] else
             eps_nodes(e["object"]) if "subsets" in e["object"] else None) for e in evs]


def check_state(t, label, w):
    try:
        wait_for(lambda: w.matches_list()[0], WAIT, what="the watch to match a list")
    except TimeoutError:
        pass
    same, diff = w.matches_list()
    t.check("%s: the watch's state equals a fresh list" % label, same, diff)


def check_resume(t, hub, label, w, double, change, name):
    """A watch from w's last resourceVersion is served (no 410) and gets the next change."""
    r = Watch(hub, w.path, rv=w.rv)
    double.put_object(change)
    evs = r.wait(lambda evs: any(e["type"] == "ERROR" for e in evs) or
                 event_for(name, ("ADDED", "MODIFIED"))(evs), "the resumed watch's event")
    t.check("%s: a watch resumed from the watch's last resourceVersion (%s) carries on" %
            (label, w.rv), r.ok and event_for(name, ("ADDED", "MODIFIED"))(evs) and
            not any(e["type"] == "ERROR" for e in evs), summary(evs))
    r.close()


def run(t, binary, label):
    double = Double(t.workdir, ["--node", "node1", "--node", "node2", "--node", "node3",
                                "--pool", "pool-a"])
    t.cleanups.append(double.stop)
    seed(double)
    hub = Hub(t.workdir, [double.url], binary=binary, name="hub-" + label)
    t.cleanups.append(hub.stop)
    app = service("app", annotations={TOPOLOGY: "kubernetes.io/hostname"})
    wait_for(lambda: slice_nodes(next(i for i in hub_list(hub, SLICES)["items"]
                                      if i["metadata"]["name"] == "app-abcde")) == ["node1"],
             30, what="the hub's filters to know the app's topology")
    sl, sv, ep = Watch(hub, SLICES), Watch(hub, SERVICES), Watch(hub, ENDPOINTS)
    t.check("%s: kube-proxy's watches are open" % label, sl.ok and sv.ok)
    t.check("%s: at the start, app's slice has node1's endpoint, np-b is left out" % label,
            slice_nodes(sl.state["default/app-abcde"]) == ["node1"] and
            "default/np-b" not in sv.state and "default/np-a" in sv.state)
    py = None
    list_rv = int(sl.rv)
    if any("python3-kubernetes" in m for m in missing()):
        print("note: no python3-kubernetes: its check is skipped (scripts/deps.sh)", flush=True)
    else:
        py = PyWatch(t.workdir, hub.url, "list_endpoint_slice_for_all_namespaces",
                     api="DiscoveryV1Api", resource_version=sl.rv, user_agent=KUBE_PROXY,
                     name="py-slices-" + label)
        t.cleanups.append(py.stop)

    # 1. hostname -> nodepool
    py_mark = py.mark() if py else 0
    app["metadata"]["annotations"][TOPOLOGY] = "openyurt.io/nodepool"
    double.put_object(app)
    evs = sl.wait(event_for("app-abcde", ("MODIFIED",), ["node1", "node2"]), "MODIFIED app")
    t.check("%s: topology hostname -> nodepool: the open slice watch gets MODIFIED with "
            "the pool's endpoints" % label,
            event_for("app-abcde", ("MODIFIED",), ["node1", "node2"])(evs), summary(evs))
    check_state(t, label + ", nodepool topology", sl)
    evs = ep.wait(eps_event("app", ["node1", "node2"]), "MODIFIED app (Endpoints)")
    t.check("%s: the proxied Endpoints watch gets MODIFIED with the pool's addresses, "
            "no 410" % label, eps_event("app", ["node1", "node2"])(evs) and
            not any(e["type"] == "ERROR" for e in evs), summary(evs))
    check_state(t, label + ", nodepool topology (Endpoints)", ep)
    if py:
        try:
            ev = py.wait_event(lambda e: e["event"] == "MODIFIED" and e.get("name") == "app-abcde",
                               WAIT, "python3-kubernetes' MODIFIED", py_mark)
        except TimeoutError:
            ev = None
        t.check("%s: python3-kubernetes' watch takes the MODIFIED, at a resourceVersion "
                "not before its list's" % label, ev is not None and
                int(ev.get("resourceVersion") or 0) >= list_rv and
                not py.select(lambda e: e["event"] == "error"), ev)
    # 2. nodepool -> hostname
    app["metadata"]["annotations"][TOPOLOGY] = "kubernetes.io/hostname"
    double.put_object(app)
    evs = sl.wait(event_for("app-abcde", ("MODIFIED",), ["node1"]), "MODIFIED app")
    t.check("%s: topology nodepool -> hostname: MODIFIED with this node's endpoint only" %
            label, event_for("app-abcde", ("MODIFIED",), ["node1"])(evs), summary(evs))
    check_state(t, label + ", hostname topology", sl)
    evs = ep.wait(eps_event("app", ["node1"]), "MODIFIED app (Endpoints)")
    t.check("%s: topology nodepool -> hostname: the proxied Endpoints watch gets MODIFIED "
            "with this node's address only" % label, eps_event("app", ["node1"])(evs) and
            not any(e["type"] == "ERROR" for e in evs), summary(evs))
    check_state(t, label + ", hostname topology (Endpoints)", ep)
    ep.close()
    check_resume(t, hub, label + ", after the topology changes", sl, double,
                 slice_for("plain"), "plain-abcde")
    # a list made before a change, its watch opened after it: the change is
    # in no event of the history, the watch still brings the client to it
    lst = hub_list(hub, SLICES)
    app["metadata"]["annotations"][TOPOLOGY] = "openyurt.io/nodepool"
    double.put_object(app)
    wait_for(lambda: slice_nodes(next(i for i in hub_list(hub, SLICES)["items"]
                                      if i["metadata"]["name"] == "app-abcde")) ==
             ["node1", "node2"], WAIT, what="the list to show the pool's endpoints")
    late = Watch(hub, SLICES, rv=lst["metadata"]["resourceVersion"])
    late.state = {key(i): i for i in lst["items"]}
    evs = late.wait(event_for("app-abcde", ("MODIFIED",), ["node1", "node2"]), "MODIFIED app")
    t.check("%s: a watch from a list made before the change gets MODIFIED with the pool's "
            "endpoints" % label,
            late.ok and event_for("app-abcde", ("MODIFIED",), ["node1", "node2"])(evs),
            summary(evs))
    check_state(t, label + ", watch from a list before the change", late)
    late.close()
    # 3. pool-a's members change
    sl.wait(event_for("app-abcde", ("MODIFIED",), ["node1", "node2"]), "MODIFIED app")
    double.put_object(nodepool("pool-a", ["node1", "node3"]))
    evs = sl.wait(event_for("app-abcde", ("MODIFIED",), ["node1", "node3"]), "MODIFIED app")
    t.check("%s: pool-a's members become node1, node3: MODIFIED with their endpoints" % label,
            event_for("app-abcde", ("MODIFIED",), ["node1", "node3"])(evs), summary(evs))
    check_state(t, label + ", pool members changed", sl)
    # 4. this node moves to pool-b
    double.put_object(nodepool("pool-a", ["node2"]))
    double.put_object(nodepool("pool-b", ["node1", "node3"]))
    set_node_pool(double, "node1", "pool-b")
    evs = sl.wait(event_for("app-abcde", ("MODIFIED",), ["node1", "node3"]), "MODIFIED app")
    t.check("%s: node1 moves to pool-b: its slice watch follows the new pool" % label,
            slice_nodes(sl.state["default/app-abcde"]) == ["node1", "node3"], summary(evs))
    check_state(t, label + ", node in pool-b (slices)", sl)
    evs = sv.wait(lambda evs: event_for("np-a", ("DELETED",))(evs) and
                  event_for("np-b", ("ADDED",))(evs), "np-a DELETED, np-b ADDED")
    t.check("%s: node1 moves to pool-b: the service watch loses np-a (DELETED) and gets "
            "np-b (ADDED)" % label, event_for("np-a", ("DELETED",))(evs) and
            event_for("np-b", ("ADDED",))(evs), summary(evs))
    check_state(t, label + ", node in pool-b (services)", sv)
    # 5. a NodePort service's listen annotation
    double.put_object(service("np-a", "NodePort", {LISTEN: "pool-a,pool-b"}))
    evs = sv.wait(event_for("np-a", ("ADDED",)), "np-a ADDED")
    t.check("%s: np-a now listens in pool-b too: ADDED (the client did not hold it)" % label,
            event_for("np-a", ("ADDED",))(evs), summary(evs))
    check_state(t, label + ", np-a listens in pool-b", sv)
    # 6. back to pool-a: np-b goes, np-a stays
    set_node_pool(double, "node1", "pool-a")
    evs = sv.wait(event_for("np-b", ("DELETED",)), "np-b DELETED")
    t.check("%s: node1 back in pool-a: np-b DELETED, np-a kept" % label,
            event_for("np-b", ("DELETED",))(evs) and "default/np-a" in sv.state and
            not event_for("np-a", ("DELETED",))(evs), summary(evs))
    check_state(t, label + ", node back in pool-a (services)", sv)
    sl.wait(lambda evs: slice_nodes(sl.state["default/app-abcde"]) == ["node2"],
            "app's slice with pool-a's nodes")
    check_state(t, label + ", node back in pool-a (slices)", sl)
    check_resume(t, hub, label + ", after the pool moves", sv, double,
                 service("plain", annotations={"touched": "yes"}), "plain")
    sl.close()
    sv.close()
    if py:
        py.stop()
    hub.stop()
    double.stop()


def proxied_requests(double):
    return double.state()["requests_by_user_agent"].get("kube-proxy", 0)


def run_unshared(t, binary, label):
    """Sharing off (--pool-scope-resources=): kube-proxy's EndpointSlice and Service
    watches are proxied from the cloud, and follow as the multiplexer's do."""
    label += ", sharing off"
    double = Double(t.workdir, ["--node", "node1", "--node", "node2", "--node", "node3",
                                "--pool", "pool-a"])
    t.cleanups.append(double.stop)
    seed(double)
    hub = Hub(t.workdir, [double.url], binary=binary, name="hub-unshared-" + label.split(",")[0],
              extra=["--pool-scope-resources="])
    t.cleanups.append(hub.stop)
    app = service("app", annotations={TOPOLOGY: "kubernetes.io/hostname"})
    wait_for(lambda: slice_nodes(next(i for i in hub_list(hub, SLICES)["items"]
                                      if i["metadata"]["name"] == "app-abcde")) == ["node1"],
             30, what="the hub's filters to know the app's topology")
    before = proxied_requests(double)
    sl, sv = Watch(hub, SLICES), Watch(hub, SERVICES)
    # a watch from "0": its initial events went through its follow, so a change sends
    # only the objects it changes
    zero = Watch(hub, SLICES, rv="0")
    t.check("%s: kube-proxy's watches are proxied to the cloud" % label,
            sl.ok and sv.ok and zero.ok and proxied_requests(double) >= before + 5,
            "%s -> %s" % (before, proxied_requests(double)))
    zero.wait(lambda evs: any(e["type"] == "ADDED" and e["object"]["metadata"].get("name") ==
                              "plain-abcde" for e in evs), "the initial events")
    mark = len(zero.events)
    app["metadata"]["annotations"][TOPOLOGY] = "openyurt.io/nodepool"
    double.put_object(app)
    evs = sl.wait(event_for("app-abcde", ("MODIFIED",), ["node1", "node2"]), "MODIFIED app")
    t.check("%s: topology hostname -> nodepool: the proxied slice watch gets MODIFIED with "
            "the pool's endpoints, no 410" % label,
            event_for("app-abcde", ("MODIFIED",), ["node1", "node2"])(evs) and
            not any(e["type"] == "ERROR" for e in evs), summary(evs))
    check_state(t, label + ", nodepool topology", sl)
    app["metadata"]["annotations"][TOPOLOGY] = "kubernetes.io/hostname"
    double.put_object(app)
    evs = sl.wait(event_for("app-abcde", ("MODIFIED",), ["node1"]), "MODIFIED app")
    t.check("%s: topology nodepool -> hostname: MODIFIED with this node's endpoint only" %
            label, event_for("app-abcde", ("MODIFIED",), ["node1"])(evs), summary(evs))
    check_state(t, label + ", hostname topology", sl)
    zero.wait(event_for("app-abcde", ("MODIFIED",), ["node1"]), "MODIFIED app")
    evs = zero.events[mark:]
    t.check("%s: a watch from resourceVersion 0 gets the two MODIFIED of app's slice and "
            "nothing of the slices the changes leave alone" % label,
            [x[0:3] for x in summary(evs) if x[0] != "BOOKMARK"] ==
            [("MODIFIED", "app-abcde", ["node1", "node2"]),
             ("MODIFIED", "app-abcde", ["node1"])], summary(evs))
    zero.close()
    check_resume(t, hub, label + ", after the topology changes", sl, double,
                 slice_for("plain"), "plain-abcde")
    # this node moves to pool-b: the proxied Service watch drops np-a and adds np-b
    double.put_object(nodepool("pool-a", ["node2"]))
    double.put_object(nodepool("pool-b", ["node1", "node3"]))
    set_node_pool(double, "node1", "pool-b")
    evs = sv.wait(lambda evs: event_for("np-a", ("DELETED",))(evs) and
                  event_for("np-b", ("ADDED", "MODIFIED"))(evs), "np-a DELETED, np-b ADDED")
    t.check("%s: node1 moves to pool-b: the proxied service watch loses np-a (DELETED) and "
            "gets np-b" % label, event_for("np-a", ("DELETED",))(evs) and
            event_for("np-b", ("ADDED", "MODIFIED"))(evs) and
            not any(e["type"] == "ERROR" for e in evs), summary(evs))
    check_state(t, label + ", node in pool-b (services)", sv)
    set_node_pool(double, "node1", "pool-a")
    evs = sv.wait(event_for("np-b", ("DELETED",)), "np-b DELETED")
    t.check("%s: node1 back in pool-a: np-b DELETED (the watch knows the client holds it)"
            % label, event_for("np-b", ("DELETED",))(evs), summary(evs))
    check_state(t, label + ", node back in pool-a (services)", sv)
    sl.close()
    sv.close()
    hub.stop()
    double.stop()


KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
HUB_HOST = "169.254.2.1"
CLOUD_HOST = "api.example.com"
NODE_PODS = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1"


def env_pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "node1", "containers": [{
                "name": "c", "image": "busybox",
                "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": CLOUD_HOST},
                        {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]}]}}


def name_of(ev):
    m = ev.get("object", {}).get("metadata", {})
    return "%s/%s" % (m.get("namespace", ""), m.get("name"))


def kube_svc(obj):
    """default/kubernetes's clusterIP and https port."""
    spec = obj.get("spec", {})
    https = [p["port"] for p in spec.get("ports", []) if p.get("name") == "https"]
    return spec.get("clusterIP"), https[0] if https else None


def run_late_certificate(t, binary, label):
    """The secure port starts serving after the start (bootstrap; the serving CSR approved
    later): kubelet's open watches of Services (the multiplexer's) and of its pods
    (proxied) get default/kubernetes and the pod rewritten to the hub (issue 24, item 5)."""
    from test_filter_odd import approve, csrs, start_hub_serving_later
    label += ", late certificate"
    tag = label.split(",")[0]
    token = "abcdef.0123456789abcdef"
    pki = os.path.join(t.workdir, "pki-" + tag)
    cloud = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--pki-dir", pki,
                               "--bootstrap-token", token])
    t.cleanups.append(cloud.stop)
    cloud.put_object(env_pod("web"))
    hub, port = start_hub_serving_later(t, cloud, pki, token, tag, binary)
    def kubelet_requests():
        return cloud.state()["requests_by_user_agent"].get("kubelet", 0)
    before = kubelet_requests()
    svc = Watch(hub, SERVICES, ua=KUBELET)
    shared = kubelet_requests() == before
    pods = Watch(hub, NODE_PODS, ua=KUBELET)
    proxied = kubelet_requests() >= before + 2
    k = svc.state.get("default/kubernetes", {})
    t.check("%s: kubelet's Service watch is the multiplexer's, its pod watch proxied" % label,
            shared and proxied, "%s -> %s" % (before, kubelet_requests()))
    t.check("%s: before it, kubelet's watches hold the cloud's kubernetes Service and pod" %
            label, svc.ok and pods.ok and kube_svc(k)[0] not in (None, HUB_HOST) and
            pods.state["default/web"]["spec"]["containers"][0]["env"][0]["value"] ==
            CLOUD_HOST, repr(kube_svc(k)))
    wait_for(lambda: [c for c in csrs(cloud)
                      if c["spec"].get("signerName") == "kubernetes.io/kubelet-serving"],
             30, what="the serving CSR")
    t.check("%s: the serving CSR approved" % label,
            approve(cloud, "kubernetes.io/kubelet-serving") == 1)

    def svc_moved(evs):
        return any(e["type"] == "MODIFIED" and name_of(e) == "default/kubernetes" and
                   kube_svc(e["object"]) == (HUB_HOST, port) for e in evs)
    evs = svc.wait(svc_moved, "default/kubernetes MODIFIED to the hub")
    t.check("%s: the open Service watch gets MODIFIED: default/kubernetes at the hub's "
            "address and secure port" % label, svc_moved(evs),
            [(e["type"], name_of(e)) for e in evs if e["type"] != "BOOKMARK"])
    check_state(t, label + " (services)", svc)

    def pod_moved(evs):
        return any(e["type"] == "MODIFIED" and name_of(e) == "default/web" and
                   e["object"]["spec"]["containers"][0]["env"][0]["value"] == HUB_HOST
                   for e in evs)
    evs = pods.wait(pod_moved, "the pod MODIFIED to the hub")
    t.check("%s: the open (proxied) pod watch gets MODIFIED: KUBERNETES_SERVICE_HOST is the "
            "hub's" % label, pod_moved(evs),
            [(e["type"], name_of(e)) for e in evs if e["type"] != "BOOKMARK"])
    check_state(t, label + " (pods)", pods)
    svc.close()
    pods.close()
    hub.stop()
    cloud.stop()


def main():
    t = Suite("filter_follow")
    each_build(lambda label, binary: run(t, binary, label))
    each_build(lambda label, binary: run_unshared(t, binary, label))
    each_build(lambda label, binary: run_late_certificate(t, binary, label))
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
