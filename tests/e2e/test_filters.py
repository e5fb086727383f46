"""End to end: OpenYurt's response filters, as kubelet, kube-proxy and
coredns see them through the hub (docs/filters.md).

The test double serves a pool "pool-a" (a NodePool whose status.nodes are
node1 and node2, and node1 labelled with it); node-x is in no pool.  The
hub runs as node1 and finds its pool from the node's label.  Online, then
offline (the cloud cut), then after a restart offline:

- kubelet's services: default/kubernetes points at the hub (169.254.2.1,
  the secure port, which serves); its kube-proxy ConfigMap has the kubeconfig line commented;
  its pods' explicit KUBERNETES_SERVICE_HOST/PORT point at the hub;
- kube-proxy's services: LoadBalancers marked svc.openyurt.io/discard, the
  tunnel's internal service and NodePorts not listening in pool-a are left
  out; its EndpointSlices and Endpoints keep this node's (hostname
  topology) or the pool's (nodepool topology) endpoints; the kubernetes
  EndpointSlice points at the hub;
- coredns: topology, but not the kubernetes slice rewrite (not its filter);
- a gzip answer comes back filtered and plain;
- a watch turns an object a filter drops into DELETED, carrying the object;
- yurt-hub-cfg adds a component to a filter live, and its removal takes it
  away; its cache_agents makes a component cached;
- --disabled-resource-filters, --enable-resource-filter=false and
  --working-mode=cloud change what is filtered (cloud: no cache, no offline
  answers).
"""

import gzip
import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from clients import Informer, missing, py_api  # noqa: E402
from harness import Double, Hub, Suite, free_port, get, wait_for  # noqa: E402
from serving_cert import secure_flags  # noqa: E402
from watch_stream import open_watch, read_events  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
KUBE_PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
COREDNS = "coredns/1.11.3 (linux/amd64) kubernetes/abcdef"
OTHER = "mycomp/1.0"
# what kube-proxy really sends: protobuf first, anything else after
KUBE_PROXY_ACCEPT = "application/vnd.kubernetes.protobuf, */*"
HUB_HOST, HUB_PORT = "169.254.2.1", free_port()


def secure(workdir):
    """The secure port serving: the filters point pods only at a port that does."""
    return secure_flags(workdir, HUB_PORT)


def meta(name, ns=None, labels=None, annotations=None):
    m = {"name": name}
    if ns:
        m["namespace"] = ns
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    return m


def service(name, ns="default", svc_type="ClusterIP", annotations=None, ip="10.96.1.1"):
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    if svc_type in ("NodePort", "LoadBalancer"):
        ports[0]["nodePort"] = 30080
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, ns, None, annotations),
            "spec": {"type": svc_type, "clusterIP": ip, "clusterIPs": [ip], "ports": ports}}


def slice_for(svc, endpoints, ns="default"):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": meta(svc + "-abcde", ns, {"kubernetes.io/service-name": svc}),
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "nodeName": node}
                          for ip, node in endpoints],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def endpoints_for(svc, endpoints, ns="default"):
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta(svc, ns),
            "subsets": [{"addresses": [{"ip": ip, "nodeName": node} for ip, node in endpoints],
                         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}


EPS = [("10.244.0.5", "node1"), ("10.244.1.5", "node2"), ("10.244.9.5", "node-x")]
KUBECONFIG_LINE = "  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf"
PROXY_CONF = ("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nclientConnection:\n"
              "  acceptContentTypes: \"\"\n" + KUBECONFIG_LINE + "\n  qps: 5\n"
              "kind: KubeProxyConfiguration\nmode: iptables\n")


def seed(double):
    objs = [
        service("app-host", annotations={"openyurt.io/topologyKeys": "kubernetes.io/hostname"}),
        slice_for("app-host", EPS), endpoints_for("app-host", EPS),
        service("app-pool", annotations={"openyurt.io/topologyKeys": "openyurt.io/nodepool"}),
        slice_for("app-pool", EPS), endpoints_for("app-pool", EPS),
        service("app-plain"), slice_for("app-plain", EPS),
        service("lb-discard", svc_type="LoadBalancer",
                annotations={"svc.openyurt.io/discard": "true"}),
        service("lb-kept", svc_type="LoadBalancer"),
        service("x-tunnel-server-internal-svc", ns="kube-system"),
        service("np-mine", svc_type="NodePort",
                annotations={"nodeport.openyurt.io/listen": "pool-a"}),
        service("np-other", svc_type="NodePort",
                annotations={"nodeport.openyurt.io/listen": "pool-b,-pool-a"}),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("kube-proxy", "kube-system"),
         "data": {"config.conf": PROXY_CONF}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta("envpod", "default"),
         "spec": {"nodeName": "node1", "containers": [{
             "name": "c", "image": "busybox",
             "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "api.example.com"},
                     {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
                     {"name": "OTHER", "value": "x"}]}]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": meta("node-x")},
    ]
    for o in objs:
        double.put_object(o)


def hub_json(hub, path, ua, accept=None, extra_headers=None):
    headers = {"User-Agent": ua}
    if accept:
        headers["Accept"] = accept
    headers.update(extra_headers or {})
    s, h, body = get("127.0.0.1", hub.proxy_port, path, headers=headers)
    if h.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    try:
        return s, h, json.loads(body)
    except ValueError:
        return s, h, body


def by_name(items):
    return {(i["metadata"].get("namespace", ""), i["metadata"]["name"]): i for i in items}


def items(hub, path, ua, **kw):
    s, _, body = hub_json(hub, path, ua, **kw)
    if s != 200 or not isinstance(body, dict):
        raise AssertionError("%s as %s: %s %r" % (path, ua, s, body))
    return by_name(body.get("items") or [])


def slice_nodes(sl):
    return sorted(e.get("nodeName", "") for e in sl.get("endpoints") or [])


def endpoints_nodes(ep):
    return sorted(a.get("nodeName", "") for s in ep.get("subsets") or []
                  for a in s.get("addresses") or [])


# ---- what each component must see ----

def check_kubelet(t, hub, when):
    svcs = items(hub, "/api/v1/services", KUBELET)
    k = svcs.get(("default", "kubernetes"), {}).get("spec", {})
    https = [p for p in k.get("ports", []) if p.get("name") == "https"]
    t.check("%s: kubelet's kubernetes service points at the hub" % when,
            k.get("clusterIP") == HUB_HOST and k.get("clusterIPs") == [HUB_HOST]
            and https and https[0]["port"] == HUB_PORT, repr(k))
    t.check("%s: kubelet's other services are as the cloud has them" % when,
            svcs.get(("default", "app-host"), {}).get("spec", {}).get("clusterIP") == "10.96.1.1"
            and ("default", "lb-discard") in svcs)
    s, _, cm = hub_json(hub, "/api/v1/namespaces/kube-system/configmaps/kube-proxy", KUBELET)
    conf = cm.get("data", {}).get("config.conf", "") if isinstance(cm, dict) else ""
    want = PROXY_CONF.replace(KUBECONFIG_LINE, "  #kubeconfig: /var/lib/kube-proxy/kubeconfig.conf")
    t.check("%s: kubelet's kube-proxy ConfigMap has its kubeconfig line commented" % when,
            s == 200 and conf == want, repr(conf))
    pods = items(hub, "/api/v1/pods?fieldSelector=" + urllib.parse.quote("spec.nodeName=node1"),
                 KUBELET)
    env = {e["name"]: e.get("value") for e in
           pods.get(("default", "envpod"), {}).get("spec", {}).get("containers", [{}])[0].get(
               "env", [])}
    t.check("%s: kubelet's pods have KUBERNETES_SERVICE_HOST/PORT of the hub" % when,
            env == {"KUBERNETES_SERVICE_HOST": HUB_HOST,
                    "KUBERNETES_SERVICE_PORT": str(HUB_PORT), "OTHER": "x"}, repr(env))


def check_kube_proxy(t, hub, when, accept=KUBE_PROXY_ACCEPT):
    svcs = items(hub, "/api/v1/services", KUBE_PROXY, accept=accept)
    gone = [n for n in (("default", "lb-discard"), ("kube-system", "x-tunnel-server-internal-svc"),
                        ("default", "np-other")) if n in svcs]
    kept = [n for n in (("default", "lb-kept"), ("default", "np-mine"), ("default", "app-host"),
                        ("default", "kubernetes")) if n not in svcs]
    t.check("%s: kube-proxy's services leave out the discarded, the tunnel's and other "
            "pools' NodePorts" % when, not gone and not kept, "extra %r missing %r" % (gone, kept))
    t.check("%s: kube-proxy's kubernetes service is the cloud's" % when,
            svcs.get(("default", "kubernetes"), {}).get("spec", {}).get("clusterIP") ==
            "10.96.0.1")
    sl = items(hub, "/apis/discovery.k8s.io/v1/endpointslices", KUBE_PROXY, accept=accept)
    t.check("%s: kube-proxy's slice with hostname topology has this node's endpoints" % when,
            slice_nodes(sl.get(("default", "app-host-abcde"), {})) == ["node1"],
            repr(sl.get(("default", "app-host-abcde"))))
    t.check("%s: kube-proxy's slice with nodepool topology has the pool's endpoints" % when,
            slice_nodes(sl.get(("default", "app-pool-abcde"), {})) == ["node1", "node2"])
    t.check("%s: kube-proxy's slice without topology has every endpoint" % when,
            slice_nodes(sl.get(("default", "app-plain-abcde"), {})) == ["node-x", "node1",
                                                                         "node2"])
    k = sl.get(("default", "kubernetes"), {})
    t.check("%s: kube-proxy's kubernetes slice points at the hub" % when,
            k.get("endpoints") == [{"addresses": [HUB_HOST], "conditions": {"ready": True}}]
            and [p["port"] for p in k.get("ports", []) if p.get("name") == "https"] ==
            [HUB_PORT], repr(k))
    eps = items(hub, "/api/v1/endpoints", KUBE_PROXY, accept=accept)
    t.check("%s: kube-proxy's Endpoints get the topology too" % when,
            endpoints_nodes(eps.get(("default", "app-host"), {})) == ["node1"] and
            endpoints_nodes(eps.get(("default", "app-pool"), {})) == ["node1", "node2"],
            repr(eps.get(("default", "app-host"))))


def check_coredns(t, hub, when):
    sl = items(hub, "/apis/discovery.k8s.io/v1/endpointslices", COREDNS)
    t.check("%s: coredns's slices have the topology" % when,
            slice_nodes(sl.get(("default", "app-host-abcde"), {})) == ["node1"])
    t.check("%s: coredns's kubernetes slice is the cloud's" % when,
            sl.get(("default", "kubernetes"), {}).get("endpoints", [{}])[0].get("addresses") ==
            ["127.0.0.1"])


def check_all(t, hub, when):
    check_kubelet(t, hub, when)
    check_kube_proxy(t, hub, when)
    check_coredns(t, hub, when)


# ---- the parts ----

def test_online(t, double, hub):
    check_all(t, hub, "online")
    st = double.state()
    t.check("online: the hub read the cluster as yurthub, through its own proxy",
            st["requests_by_user_agent"].get("yurthub", 0) > 0,
            repr(st["requests_by_user_agent"]))


def test_gzip(t, double, hub):
    for i in range(400):  # a list over the double's 128 KiB gzip threshold
        double.put_object(service("bulk-%03d" % i, ns="kube-system", svc_type="LoadBalancer",
                                  annotations={"svc.openyurt.io/discard": "true",
                                               "padding": "x" * 300}, ip="10.97.%d.%d" %
                                  (i // 250, i % 250)))
    s, h, body = get("127.0.0.1", hub.proxy_port, "/api/v1/services",
                     headers={"User-Agent": KUBE_PROXY, "Accept-Encoding": "gzip"})
    plain = h.get("content-encoding") is None
    names = [i["metadata"]["name"] for i in json.loads(body)["items"]] if plain else []
    t.check("gzip: a gzip answer is filtered and sent plain, its length its own",
            s == 200 and plain and names and int(h.get("content-length", len(body))) ==
            len(body) and not any(n.startswith("bulk-") for n in names), repr(h))
    s, h, body = get("127.0.0.1", hub.proxy_port, "/api/v1/services",
                     headers={"User-Agent": OTHER, "Accept-Encoding": "gzip"})
    # services are pool-scope: the multiplexer answers from memory, plain
    # (docs/sharing.md); a list it does not take (a continue token, an
    # Exact resourceVersion) is still proxied as it came
    t.check("gzip: not filtered (mycomp), from the multiplexer: plain, every item",
            s == 200 and h.get("content-encoding") is None and
            len(json.loads(body)["items"]) > 400, repr(h))
    for i in range(400):
        double.delete_object("v1", "Service", "kube-system", "bulk-%03d" % i)


def test_watch(t, double, hub):
    path = "/api/v1/services?watch=true&resourceVersion=%s" % double.state()["rv"]
    sock, head, rest = open_watch(hub, path, KUBE_PROXY)
    np = service("np-mine", svc_type="NodePort",
                 annotations={"nodeport.openyurt.io/listen": "pool-c"})
    double.put_object(np)
    double.put_object(service("lb-new", svc_type="LoadBalancer",
                              annotations={"svc.openyurt.io/discard": "true"}))
    double.put_object(service("plain-new"))
    events, _ = read_events(sock, rest, lambda ev: any(
        e["object"]["metadata"]["name"] == "plain-new" for e in ev), 10)
    sock.close()
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    t.check("watch: an object a filter drops comes as DELETED, the others as they are",
            seen == [("DELETED", "np-mine"), ("DELETED", "lb-new"), ("ADDED", "plain-new")],
            repr(seen))
    t.check("watch: the DELETED event carries the object as the cloud sent it",
            events and events[0]["object"]["metadata"].get("annotations", {}).get(
                "nodeport.openyurt.io/listen") == "pool-c")
    double.put_object(service("np-mine", svc_type="NodePort",
                              annotations={"nodeport.openyurt.io/listen": "pool-a"}))
    double.delete_object("v1", "Service", "default", "lb-new")
    double.delete_object("v1", "Service", "default", "plain-new")


def test_real_clients(t, double, hub):
    """Clients nobody here wrote, as kube-proxy: @kubernetes/client-node's
    informer sees a service a filter drops as deleted, python3-kubernetes
    lists the filtered objects."""
    for m in missing():
        t.check("real client installed: " + m, False)
    if missing():
        return
    v1 = py_api(hub.url, user_agent=KUBE_PROXY)
    names = {(s.metadata.namespace, s.metadata.name) for s in
             v1.list_service_for_all_namespaces().items}
    t.check("python3-kubernetes as kube-proxy: the filtered services",
            ("default", "lb-kept") in names and ("default", "lb-discard") not in names and
            ("default", "np-other") not in names)
    disc = py_api(hub.url, api="DiscoveryV1Api", user_agent=KUBE_PROXY)
    sl = {s.metadata.name: s for s in
          disc.list_endpoint_slice_for_all_namespaces().items}
    host = sl.get("app-host-abcde")
    t.check("python3-kubernetes as kube-proxy: the slice with this node's endpoints",
            host is not None and [e.node_name for e in host.endpoints or []] == ["node1"])
    inf = Informer(t.workdir, hub.url, "/api/v1/services", user_agent=KUBE_PROXY,
                   name="informer-services")
    try:
        inf.wait_started()
        keys = inf.dump()["keys"]
        t.check("client-node informer as kube-proxy: its cache holds the filtered services",
                "default/lb-kept" in keys and "default/np-mine" in keys and
                "default/lb-discard" not in keys, repr(keys))
        since = inf.mark()
        double.put_object(service("np-mine", svc_type="NodePort",
                                  annotations={"nodeport.openyurt.io/listen": "-pool-a"}))
        inf.wait_event(lambda e: e["event"] == "delete" and e.get("name") == "np-mine", 10,
                       "np-mine deleted", since)
        t.check("client-node informer: a service filtered out while watched is deleted",
                "default/np-mine" not in inf.dump()["keys"])
        since = inf.mark()
        double.put_object(service("np-mine", svc_type="NodePort",
                                  annotations={"nodeport.openyurt.io/listen": "pool-a"}))
        inf.wait_event(lambda e: e["event"] == "add" and e.get("name") == "np-mine", 10,
                       "np-mine added again", since)
        t.check("client-node informer: and back once it is for this pool again",
                "default/np-mine" in inf.dump()["keys"] and not inf.errors())
    finally:
        inf.stop()


def configmap(data):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta("yurt-hub-cfg", "kube-system",
                             {"openyurt.io/configmap-name": "yurt-hub-cfg"}),
            "data": data}


def other_nodes(hub):
    sl = items(hub, "/apis/discovery.k8s.io/v1/endpointslices", OTHER)
    return slice_nodes(sl.get(("default", "app-host-abcde"), {}))


def test_configmap(t, double, hub):
    t.check("configmap: before, mycomp's slices are not filtered",
            other_nodes(hub) == ["node-x", "node1", "node2"])
    double.put_object(configmap({"servicetopology": " kube-proxy, MyComp ",
                                 "cache_agents": "mycomp"}))
    ok = True
    try:
        wait_for(lambda: other_nodes(hub) == ["node1"], 10, what="the configmap to apply")
    except Exception:
        ok = False
    t.check("configmap: a component added to servicetopology is filtered, live", ok)
    other_nodes(hub)
    # slices come from the multiplexer (cached once, as its own component):
    # a resource that is not pool-scope makes mycomp's own cache
    items(hub, "/api/v1/endpoints", OTHER)
    cached = True
    try:
        wait_for(lambda: os.path.isdir(os.path.join(hub.cache, "mycomp")), 10,
                 what="mycomp's cache")
    except Exception:
        cached = False
    t.check("configmap: cache_agents makes the component cached", cached,
            repr(os.listdir(hub.cache)))
    double.delete_object("v1", "ConfigMap", "kube-system", "yurt-hub-cfg")
    ok = True
    try:
        wait_for(lambda: other_nodes(hub) == ["node-x", "node1", "node2"], 10,
                 what="the defaults to return")
    except Exception:
        ok = False
    t.check("configmap: deleting it returns to the defaults", ok)


def go_offline(double, hub):
    double.cut()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 20, what="offline")


def test_offline(t, double, hub):
    check_all(t, hub, "online again")  # what the components see now is what is cached
    go_offline(double, hub)
    check_all(t, hub, "offline")
    hub.stop()
    hub.start()
    check_all(t, hub, "offline after a restart")
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")


def test_disabled(t, double):
    hub = Hub(t.workdir, [double.url],
              extra=secure(t.workdir) + ["--disabled-resource-filters="
                                         "servicetopology, masterservice"], name="hub-dis")
    t.cleanups.append(hub.stop)
    svcs = items(hub, "/api/v1/services", KUBELET)
    t.check("disabled: masterservice off: kubelet's kubernetes service is the cloud's",
            svcs[("default", "kubernetes")]["spec"]["clusterIP"] == "10.96.0.1")
    sl = items(hub, "/apis/discovery.k8s.io/v1/endpointslices", KUBE_PROXY)
    t.check("disabled: servicetopology off: every endpoint",
            slice_nodes(sl[("default", "app-host-abcde")]) == ["node-x", "node1", "node2"])
    svcs = items(hub, "/api/v1/services", KUBE_PROXY)
    t.check("disabled: the others still run", ("default", "lb-discard") not in svcs)
    hub.stop()
    hub = Hub(t.workdir, [double.url],
              extra=secure(t.workdir) + ["--disabled-resource-filters=*"], name="hub-star")
    t.cleanups.append(hub.stop)
    svcs = items(hub, "/api/v1/services", KUBE_PROXY)
    t.check("disabled *: nothing filtered", ("default", "lb-discard") in svcs)
    hub.stop()
    hub = Hub(t.workdir, [double.url],
              extra=secure(t.workdir) + ["--enable-resource-filter=false"], name="hub-off")
    t.cleanups.append(hub.stop)
    svcs = items(hub, "/api/v1/services", KUBELET)
    t.check("--enable-resource-filter=false: nothing filtered",
            svcs[("default", "kubernetes")]["spec"]["clusterIP"] == "10.96.0.1")
    hub.stop()


def test_cloud_mode(t, double):
    hub = Hub(t.workdir, [double.url], extra=secure(t.workdir) + ["--working-mode=cloud"],
              name="hub-cloud")
    t.cleanups.append(hub.stop)
    svcs = items(hub, "/api/v1/services", KUBELET)
    t.check("cloud: masterservice runs",
            svcs[("default", "kubernetes")]["spec"]["clusterIP"] == HUB_HOST)
    svcs = items(hub, "/api/v1/services", KUBE_PROXY)
    t.check("cloud: discardcloudservice is off",
            ("default", "lb-discard") in svcs and ("default", "np-other") not in svcs)
    sl = items(hub, "/apis/discovery.k8s.io/v1/endpointslices", KUBE_PROXY)
    t.check("cloud: forwardkubesvctraffic is off, servicetopology on",
            sl[("default", "kubernetes")]["endpoints"][0]["addresses"] == ["127.0.0.1"] and
            slice_nodes(sl[("default", "app-host-abcde")]) == ["node1"])
    t.check("cloud: nothing is cached", not os.path.exists(hub.cache) or
            not [d for d in os.listdir(hub.cache) if d != "_internal"],
            repr(os.listdir(hub.cache)) if os.path.exists(hub.cache) else "")
    go_offline(double, hub)
    s, _, body = hub_json(hub, "/api/v1/services", KUBELET)
    t.check("cloud: offline, no answers from a cache (503)", s == 503, "%s %r" % (s, body))
    double.restore()
    hub.stop()


def main():
    t = Suite("filters")
    double = Double(t.workdir, ["--node", "node1", "--node", "node2", "--pool", "pool-a"])
    t.cleanups.append(double.stop)
    seed(double)
    hub = Hub(t.workdir, [double.url], extra=secure(t.workdir))
    t.cleanups.append(hub.stop)
    t.run(test_online, double, hub)
    t.run(test_gzip, double, hub)
    t.run(test_watch, double, hub)
    t.run(test_real_clients, double, hub)
    t.run(test_configmap, double, hub)
    t.run(test_offline, double, hub)
    hub.stop()
    t.run(test_disabled, double)
    t.run(test_cloud_mode, double)
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
