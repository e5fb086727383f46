"""End to end: the autonomy signal (docs/offline.md).  yurthub_autonomy_ready
is 0 until what the node's essential components need to start over is
cached - kubelet's pods and its Node always, kube-proxy's and coredns's lists
once the node runs them (services and EndpointSlices counted through the
multiplexer's cache) - and 1 then; /v1/readyz?verbose says which is missing,
and the hub stays ready either way; while the cloud answers, the verdict
is the Node's condition AutonomyState.  And kubelet's own Node is never an empty
answer offline: after a restart without the cloud its get and its list by
name give the node, and a node never cached is a 404, not an empty list.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, get, wait_for  # noqa: E402
from loadgen import COREDNS, KUBELET, PROXY  # noqa: E402

NODE = "node1"
OWN_NODE_LIST = "/api/v1/nodes?fieldSelector=metadata.name%3D" + NODE


def hub_get(hub, path, ua):
    return get("127.0.0.1", hub.proxy_port, path,
               headers={"User-Agent": ua, "Accept": "application/json"})


def verdict(hub):
    return hub.metric("yurthub_autonomy_ready")


def verbose(hub):
    s, _, body = get("127.0.0.1", hub.serve_port, "/v1/readyz?verbose")
    return s, body.decode()


def test_signal(t, double, hub):
    t.check("before any client: yurthub_autonomy_ready 0", verdict(hub) == 0, verdict(hub))
    # the hub is ready once its filters' informers have synced with the
    # cloud; on a busy machine that takes a moment after the start
    wait_for(lambda: verbose(hub)[0] == 200, 20, what="the hub ready")
    s, text = verbose(hub)
    t.check("/v1/readyz?verbose: the hub is ready, autonomy not, and why",
            s == 200 and "[-]autonomy not ready: kubelet's pods are not cached" in text, text)
    hub_get(hub, "/api/v1/pods?fieldSelector=spec.nodeName%3D" + NODE, KUBELET)
    t.check("kubelet's pods cached, not its node: still 0",
            wait_for(lambda: "kubelet's nodes are not cached" in verbose(hub)[1], 10,
                     what="kubelet's pods cached"))
    hub_get(hub, "/api/v1/nodes/" + NODE, KUBELET)
    t.check("kubelet's pods and node cached: 1",
            wait_for(lambda: verdict(hub) == 1, 10, what="the verdict"), verbose(hub)[1])
    # kube-proxy starts on the node: its node first (cached), then the shared lists
    hub_get(hub, "/api/v1/nodes/" + NODE, PROXY)
    t.check("kube-proxy seen, no EndpointSlices shared yet: 0, and it says so",
            wait_for(lambda: "kube-proxy's endpointslices.discovery.k8s.io are not cached"
                     in verbose(hub)[1], 10, what="kube-proxy's need"), verbose(hub)[1])
    hub_get(hub, "/api/v1/services", PROXY)
    hub_get(hub, "/apis/discovery.k8s.io/v1/endpointslices", PROXY)
    ok = wait_for(lambda: verdict(hub) == 1, 10, what="kube-proxy's lists")
    t.check("kube-proxy's services and EndpointSlices, cached once by the multiplexer: 1",
            ok, verbose(hub)[1])
    # coredns runs, its namespaces not listed yet
    hub_get(hub, "/api/v1/services", COREDNS)
    hub_get(hub, "/api/v1/pods?fieldSelector=metadata.name%3Dnothing", COREDNS)
    t.check("coredns seen without its namespaces: 0, and it says so",
            wait_for(lambda: "coredns's namespaces are not cached" in verbose(hub)[1], 10,
                     what="coredns's need"), verbose(hub)[1])
    hub_get(hub, "/api/v1/namespaces", COREDNS)
    t.check("coredns's namespaces cached: 1",
            wait_for(lambda: verdict(hub) == 1, 10, what="coredns's namespaces"),
            verbose(hub)[1])
    s, text = verbose(hub)
    t.check("/v1/readyz?verbose: autonomy ok", s == 200 and "[+]autonomy ok" in text, text)
    s, _, body = get("127.0.0.1", hub.serve_port, "/v1/readyz")
    t.check("/v1/readyz without verbose is unchanged", s == 200 and body == b"OK", body)

    def condition():
        st, body = double.control("GET", "/objects?apiVersion=v1&kind=Node")
        for n in json.loads(body)["items"] if st == 200 else []:
            if n["metadata"]["name"] == NODE:
                for c in n.get("status", {}).get("conditions", []):
                    if c["type"] == "AutonomyState":
                        return c
        return None
    c = wait_for(lambda: (condition() or {}).get("status") == "True" and condition(), 25,
                 what="the node's AutonomyState condition")
    t.check("the cloud's Node gets the condition AutonomyState True",
            c and c.get("reason") == "AutonomyReady" and c.get("lastHeartbeatTime"), c)
    st, body = double.control("GET", "/objects?apiVersion=v1&kind=Node")
    node = [n for n in json.loads(body)["items"] if n["metadata"]["name"] == NODE][0]
    t.check("... merged by type: kubelet's own conditions stay",
            any(c["type"] == "Ready" for c in node["status"]["conditions"]),
            [c["type"] for c in node["status"]["conditions"]])


def test_own_node_offline(t, double, hub):
    hub_get(hub, OWN_NODE_LIST, KUBELET)
    hub.stop()
    double.cut()
    hub.start()
    s, _, body = hub_get(hub, "/api/v1/nodes/" + NODE, KUBELET)
    t.check("offline after a restart: kubelet gets its Node",
            s == 200 and json.loads(body)["metadata"]["name"] == NODE, body[:200])
    s, _, body = hub_get(hub, OWN_NODE_LIST, KUBELET)
    items = json.loads(body).get("items") if s == 200 else None
    t.check("offline after a restart: kubelet's list of its Node has it, never empty",
            s == 200 and [i["metadata"]["name"] for i in items] == [NODE], body[:200])
    s, _, body = hub_get(hub, "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-never", KUBELET)
    t.check("offline: a Node list never cached is 404, not an empty list", s == 404, body[:200])
    t.check("offline after a restart: the verdict still 1",
            wait_for(lambda: verdict(hub) == 1, 10, what="the verdict"), verbose(hub)[1])
    double.restore()


def main():
    t = Suite("autonomy")
    double = Double(t.workdir, ["--node", NODE])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url])
    t.cleanups.append(hub.stop)
    t.run(test_signal, double, hub)
    t.run(test_own_node_offline, double, hub)
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
