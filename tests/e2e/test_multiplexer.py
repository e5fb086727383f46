"""End to end: the multiplexer (issue 14, docs/sharing.md).  Six
components of one node (kubelet, kube-proxy, coredns, flanneld,
raven-agent-ds, node-problem-detector) list and watch services and
EndpointSlices through one hub:

- the test double sees one upstream watch per resource, from
  multiplexer-proxy-node1, however many local watchers there are;
- each client's list has what the cloud lists, after its own filters
  (kube-proxy's drops the discarded LoadBalancer; the others keep it);
- a change in the double reaches every watcher;
- a watch from a resourceVersion older than the multiplexer's history gets
  ERROR 410; list selectors and namespaces are honoured;
- a 410 to the multiplexer's upstream watch (a compacted history) makes it
  relist once, and its local watchers carry on with the change as an event;
- a custom resource named pool-scope (Widgets) is shared the same way;
  one the cloud does not serve is a 404, by the ordinary path;
- offline, after a restart of the hub, the lists are served from what the
  multiplexer's upstream cached on disk;
- offline, a pool-scope resource never listed answers the 404 any list
  never cached answers (not 429 after 5 s), on the sanitizer and the
  release build.
"""

import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from harness import HUB_BIN, RELEASE_HUB, Double, Hub, Suite, get, wait_for, within  # noqa: E402
from watch_stream import open_watch, read_events  # noqa: E402

UAS = {
    "kubelet": "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef",
    "kube-proxy": "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef",
    "coredns": "coredns/1.11.3 (linux/amd64) kubernetes/abcdef",
    "flanneld": "flanneld/0.25.1",
    "raven-agent-ds": "raven-agent-ds/v0.4.1",
    "node-problem-detector": "node-problem-detector/v0.8.19",
}
SERVICES = "/api/v1/services"
SLICES = "/apis/discovery.k8s.io/v1/endpointslices"
MUX_UA = "multiplexer-proxy-node1"


def service(name, ns="default", svc_type="ClusterIP", annotations=None, labels=None):
    m = {"name": name, "namespace": ns}
    if annotations:
        m["annotations"] = annotations
    if labels:
        m["labels"] = labels
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    if svc_type in ("NodePort", "LoadBalancer"):
        ports[0]["nodePort"] = 30080
    return {"apiVersion": "v1", "kind": "Service", "metadata": m,
            "spec": {"type": svc_type, "clusterIP": "10.96.1.1", "clusterIPs": ["10.96.1.1"],
                     "ports": ports}}


def slice_for(svc, ns="default", ip="10.0.0.1"):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": svc + "-abcde", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "nodeName": "node1"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def seed(double):
    for o in [service("web", labels={"app": "web"}), slice_for("web"),
              service("db", ns="data", labels={"app": "db"}), slice_for("db", ns="data"),
              service("lb-discard", svc_type="LoadBalancer",
                      annotations={"svc.openyurt.io/discard": "true"})]:
        double.put_object(o)


def hub_list(hub, path, ua):
    status, hdrs, body = get("127.0.0.1", hub.proxy_port, path,
                             headers={"User-Agent": ua, "Accept": "application/json"})
    return status, hdrs, (json.loads(body) if body[:1] == b"{" else body)


def names(lst):
    return sorted("%s/%s" % (i["metadata"].get("namespace", ""), i["metadata"]["name"])
                  for i in lst.get("items", []))


def cloud_list(double, path):
    status, _, body = get("127.0.0.1", double.port, path, headers={"Accept": "application/json"})
    return json.loads(body)


def upstream_watches(double, path):
    return double.state()["requests_by_verb_path"].get("watch " + path, 0)


def test_lists(t, double, hub):
    for path in (SERVICES, SLICES):
        cloud = names(cloud_list(double, path))
        for comp, ua in UAS.items():
            status, hdrs, lst = hub_list(hub, path, ua)
            t.check("%s lists %s: 200 JSON" % (comp, path), status == 200 and
                    isinstance(lst, dict), "%s %r" % (status, lst))
            if status != 200:
                continue
            want = cloud
            if comp == "kube-proxy" and path == SERVICES:  # its discard filter
                want = [n for n in cloud if n != "default/lb-discard"]
            t.check("%s's %s list is the cloud's after its filters" % (comp, path),
                    names(lst) == want, "%s != %s" % (names(lst), want))
            t.check("%s's %s list has kind %s and a resourceVersion" % (comp, path,
                    lst.get("kind")), lst.get("kind", "").endswith("List") and
                    int(lst.get("metadata", {}).get("resourceVersion", "0")) > 0)
    _, _, lst = hub_list(hub, SERVICES + "?labelSelector=" + urllib.parse.quote("app=web"),
                         UAS["flanneld"])
    t.check("a label selector is honoured", names(lst) == ["default/web"], names(lst))
    _, _, lst = hub_list(hub, "/api/v1/namespaces/data/services", UAS["flanneld"])
    t.check("a namespace is honoured", names(lst) == ["data/db"], names(lst))
    _, _, lst = hub_list(hub, SERVICES + "?fieldSelector=" +
                         urllib.parse.quote("metadata.name=db"), UAS["flanneld"])
    t.check("a field selector is honoured", names(lst) == ["data/db"], names(lst))
    st, _, _ = hub_list(hub, SERVICES + "?fieldSelector=" + urllib.parse.quote("spec.bogus=x"),
                        UAS["flanneld"])
    t.check("an unsupported field selector is 400, as the API server", st == 400, st)


def test_watches(t, double, hub):
    watches = []
    for path in (SERVICES, SLICES):
        for comp, ua in UAS.items():
            _, _, lst = hub_list(hub, path, ua)
            rv = lst["metadata"]["resourceVersion"]
            sock, head, rest = open_watch(
                hub, path + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv, ua)
            t.check("%s watches %s: 200" % (comp, path), b" 200 " in head.split(b"\r\n")[0],
                    head[:80])
            watches.append((comp, path, sock, rest))
    # one from rv 0 gets the current objects as ADDED
    sock0, head0, rest0 = open_watch(hub, SERVICES + "?watch=true", UAS["coredns"])
    ev0, _ = read_events(sock0, rest0, lambda e: len(e) >= 3, 10)
    t.check("a watch from rv 0 starts with the current objects as ADDED",
            len(ev0) >= 3 and all(e["type"] == "ADDED" for e in ev0[:3]),
            [e["type"] for e in ev0])
    sock0.close()
    double.put_object(service("added", labels={"app": "new"}))
    double.put_object(slice_for("web", ip="10.0.0.99"))
    for comp, path, sock, rest in watches:
        want = "default/added" if path == SERVICES else "default/web-abcde"

        def got(evs, want=want):
            return any("%s/%s" % (e["object"]["metadata"].get("namespace", ""),
                                  e["object"]["metadata"].get("name")) == want
                       for e in evs if e.get("type") in ("ADDED", "MODIFIED"))
        evs, closed = read_events(sock, rest, got, 15)
        t.check("%s's watch of %s gets the change" % (comp, path), got(evs),
                [(e.get("type"), e.get("object", {}).get("metadata", {}).get("name"))
                 for e in evs])
        if path == SLICES:
            t.check("%s's watch event object carries its kind" % comp,
                    all(e["object"].get("kind") for e in evs if e["type"] != "ERROR"))
    n_svc, n_sl = upstream_watches(double, SERVICES), upstream_watches(double, SLICES)
    t.check("one upstream watch of services for %d local watchers" % (len(UAS) + 2),
            n_svc == 1, "saw %d" % n_svc)
    t.check("one upstream watch of endpointslices for %d local watchers" % len(UAS),
            n_sl == 1, "saw %d" % n_sl)
    by_ua = double.state()["requests_by_user_agent"]
    t.check("the upstream is multiplexer-proxy-node1", by_ua.get(MUX_UA, 0) >= 4, by_ua)
    # two lists each: the multiplexer's and this test's own (cloud_list)
    by_path = double.state()["requests_by_verb_path"]
    t.check("no local component's list reached the cloud",
            by_path.get("list " + SERVICES) == 2 and by_path.get("list " + SLICES) == 2, by_path)
    for _, _, sock, _ in watches:
        sock.close()
    # too old: a resourceVersion before the history's start
    sock, head, rest = open_watch(hub, SERVICES + "?watch=true&resourceVersion=1",
                                  UAS["kubelet"])
    evs, _ = read_events(sock, rest, lambda e: len(e) >= 1, 10)
    t.check("a watch from a resourceVersion before the history: ERROR 410",
            evs and evs[0]["type"] == "ERROR" and evs[0]["object"].get("code") == 410, evs[:1])
    sock.close()


def test_upstream_expired(t, double, hub):
    """The upstream watch ends and the cloud answers its resumption 410 (its
    history was compacted): the multiplexer relists once, its local watchers
    carry on with the change as an event, and no client lists again."""
    watches = []
    for comp, ua in UAS.items():
        _, _, lst = hub_list(hub, SLICES, ua)
        sock, _, rest = open_watch(
            hub, SLICES + "?watch=true&allowWatchBookmarks=true&resourceVersion=" +
            lst["metadata"]["resourceVersion"], ua)
        watches.append((comp, sock, rest))
    double.control("POST", "/reset-counters")
    double.control("POST", "/fail?code=410&count=1&path=" + SLICES)
    double.control("POST", "/drop-connections")
    double.put_object(slice_for("db", ns="data", ip="10.0.0.77"))
    for comp, sock, rest in watches:
        def got(evs):
            return any(e.get("type") == "MODIFIED" and
                       e["object"]["metadata"]["name"] == "db-abcde" and
                       e["object"]["endpoints"][0]["addresses"] == ["10.0.0.77"] for e in evs)
        evs, closed = read_events(sock, rest, got, 20)
        t.check("after the upstream's 410, %s's watch goes on and gets the change" % comp,
                got(evs) and not any(e.get("type") == "ERROR" for e in evs),
                [(e.get("type"), e.get("object", {}).get("metadata", {}).get("name"))
                 for e in evs])
        sock.close()
    st = double.state()
    t.check("the 410 was served to the multiplexer's watch", not st["faults"], st["faults"])
    lists = st["requests_by_verb_path"].get("list " + SLICES, 0)
    t.check("one upstream relist for %d local watchers" % len(UAS), lists == 1,
            st["requests_by_verb_path"])
    by_ua = st["requests_by_user_agent"]
    t.check("... by the multiplexer, and no local client reached the cloud",
            set(by_ua) <= {"multiplexer-proxy-node1", "yurthub"}, by_ua)


WIDGETS = "/apis/example.com/v1/widgets"


def widget(name):
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default", "labels": {"color": "grey"}},
            "spec": {"size": 4, "color": "grey"}}


def test_crd(t, double):
    """A custom resource named pool-scope (the double's example.com Widgets,
    a kind the hub has never heard of) is shared like the built-in ones; one
    the cloud does not serve takes the ordinary path (404)."""
    double.control("POST", "/reset-counters")
    hub = Hub(t.workdir, [double.url], name="hub-crd", extra=[
        "--pool-scope-resources=/v1/services,example.com/v1/widgets,example.com/v1/gadgets"])
    t.cleanups.append(hub.stop)
    cloud = names(cloud_list(double, WIDGETS))
    lists = []
    for comp in ("kubelet", "coredns", "flanneld"):
        st, _, lst = hub_list(hub, WIDGETS, UAS[comp])
        lists.append(lst)
        t.check("%s lists Widgets (a CRD) through the multiplexer" % comp,
                st == 200 and names(lst) == cloud and lst.get("kind") == "WidgetList",
                "%s %s" % (st, lst if not isinstance(lst, dict) else (lst.get("kind"),
                                                                       names(lst))))
    vp = double.state()["requests_by_verb_path"]
    t.check("... from one upstream list (and this test's own)", vp.get("list " + WIDGETS) == 2,
            vp)
    rv = lists[0]["metadata"]["resourceVersion"]
    sock, _, rest = open_watch(hub, WIDGETS + "?watch=true&resourceVersion=" + rv,
                               UAS["coredns"])
    double.put_object(widget("widget-grey"))
    evs, _ = read_events(sock, rest, lambda e: any(
        x["object"]["metadata"]["name"] == "widget-grey" for x in e), 15)
    t.check("a watch of the CRD gets the new object, with its kind",
            any(e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "widget-grey" and
                e["object"].get("kind") == "Widget" for e in evs), evs[:2])
    sock.close()
    st, _, _ = hub_list(hub, "/apis/example.com/v1/gadgets", UAS["coredns"])
    t.check("a pool-scope resource the cloud does not serve: 404 as from the cloud",
            st == 404, st)
    hub.stop()


def test_offline_restart(t, double, hub):
    hub.stop()
    double.cut()
    hub.start()
    for path in (SERVICES, SLICES):
        for comp, ua in UAS.items():
            status, _, lst = hub_list(hub, path, ua)
            ok = status == 200 and isinstance(lst, dict) and "default/web" in " ".join(
                names(lst))
            t.check("offline after a restart, %s lists %s from the multiplexer" % (comp, path),
                    ok, "%s %s" % (status, lst if not isinstance(lst, dict) else names(lst)))
    _, _, lst = hub_list(hub, SERVICES, UAS["kubelet"])
    t.check("offline, the list has the change made online",
            "default/added" in names(lst), names(lst))
    double.restore()


def test_offline_never_listed(t, double, binary, tag):
    """Offline, a pool-scope resource never listed answers what any list
    never cached answers (the ordinary path's 404), at once - not 429 "the
    multiplexer's cache is not ready yet" after 5 s; back online, it is
    listed and shared."""
    hub = Hub(t.workdir, [double.url], name="hub-never-" + tag, binary=binary, extra=[
        "--pool-scope-resources=/v1/services,example.com/v1/widgets"])
    t.cleanups.append(hub.stop)
    double.cut()
    try:
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 20, what="offline")
        # a list no one ever made, of a resource that is not pool-scope
        ref, _, ref_body = hub_list(hub, "/api/v1/configmaps", UAS["coredns"])
        for comp in ("coredns", "kube-proxy"):
            st, hdrs, body = hub_list(hub, WIDGETS, UAS[comp])
            msg = body.get("message", "") if isinstance(body, dict) else body
            t.check("%s offline: %s's list of a pool-scope resource never listed is the 404 "
                    "of any list never cached" % (tag, comp),
                    st == ref == 404 and "never cached" in msg and
                    isinstance(body, dict) and body.get("reason") == ref_body.get("reason"),
                    "%s %r (a list not pool-scope: %s %r)" % (st, body, ref, ref_body))
        st, _, body = get("127.0.0.1", hub.proxy_port, WIDGETS + "?watch=true",
                          headers={"User-Agent": UAS["coredns"]})
        rst, _, rbody = get("127.0.0.1", hub.proxy_port, "/api/v1/configmaps?watch=true",
                            headers={"User-Agent": UAS["coredns"]})
        t.check("%s offline: a watch of it is answered as one not pool-scope" % tag,
                st == rst and st != 429, "%s %r / %s %r" % (st, body[:200], rst, rbody[:200]))
    finally:
        double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
    cloud = names(cloud_list(double, WIDGETS))
    got = {}

    def shared():
        st, _, lst = hub_list(hub, WIDGETS, UAS["coredns"])
        got["last"] = (st, lst)
        return st == 200 and names(lst) == cloud
    t.check("%s back online: it is listed and served" % tag,
            within(shared, 20, "the widgets listed"), repr(got.get("last"))[:300])
    hub.stop()


def main():
    t = Suite("multiplexer")
    double = Double(t.workdir, ["--node", "node1"])
    t.cleanups.append(double.stop)
    seed(double)
    hub = Hub(t.workdir, [double.url])
    t.cleanups.append(hub.stop)
    t.run(test_lists, double, hub)
    t.run(test_watches, double, hub)
    t.run(test_upstream_expired, double, hub)
    t.run(test_crd, double)
    t.run(test_offline_restart, double, hub)
    hub.stop()
    t.run(test_offline_never_listed, double, HUB_BIN, "san")
    if os.path.exists(RELEASE_HUB):
        t.run(test_offline_never_listed, double, RELEASE_HUB, "release")
    else:
        print("note: %s is absent: the release build's half is skipped" % RELEASE_HUB,
              flush=True)
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
