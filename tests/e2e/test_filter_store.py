"""End to end: what the hub stores for a filtered component, and what it
answers from it offline after a topology change (docs/filters.md, "What
the cache holds").  Also a get: kubelet's kube-proxy ConfigMap is stored as
the cloud has it and answered filtered, online and offline.

The store holds the cloud's objects and the filters run on the way out,
offline too.  The finding this guards against: kube-proxy lists the
Endpoints of a service with hostname topology (this node's address); the
service's annotation changes to nodepool topology; online lists are right,
but the Endpoints object's resourceVersion did not change, so the relist
wrote nothing, and offline the first filtered copy came back.

The double serves pool "pool-a" (node1 and node2; the hub is node1) and
node-x in no pool.  Service default/app has endpoints on the three nodes.
For each direction of the change (hostname -> nodepool, nodepool ->
hostname), on a fresh hub:

  list online (the first topology), change the annotation in the double
  (the Endpoints and the EndpointSlice keep their resourceVersion), list
  online until the new topology shows, cut the link, then offline: a list,
  a watch from resourceVersion 0 and a watch-list (sendInitialEvents), and
  a list after a restart of the hub, all with the new topology.

Run with sharing off (--pool-scope-resources=: kube-proxy's Endpoints and
EndpointSlices both go through the store) and on (the default: the
EndpointSlices through the multiplexer's shared cache, the Endpoints
through the store), on the sanitizer build and, when it is there, the
release build (YURTHUB_RELEASE_BUILD, else <root>/build).
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, each_build, wait_for  # noqa: E402
from test_filters import (KUBE_PROXY, KUBE_PROXY_ACCEPT, endpoints_for, secure,  # noqa: E402
                          endpoints_nodes, hub_json, items, service, slice_for, slice_nodes)
from watch_stream import open_watch, read_events  # noqa: E402


EPS = [("10.244.0.5", "node1"), ("10.244.1.5", "node2"), ("10.244.9.5", "node-x")]
HOSTNAME, NODEPOOL = "kubernetes.io/hostname", "openyurt.io/nodepool"
WANT = {HOSTNAME: ["node1"], NODEPOOL: ["node1", "node2"]}

# resource -> (list path, the object's key, its endpoints' nodes)
RESOURCES = {
    "endpoints": ("/api/v1/endpoints", ("default", "app"), endpoints_nodes),
    "endpointslices": ("/apis/discovery.k8s.io/v1/endpointslices", ("default", "app-abcde"),
                       slice_nodes),
}


def set_topology(double, key):
    double.put_object(service("app", annotations={"openyurt.io/topologyKeys": key}))


def listed(hub, resource):
    path, key, nodes = RESOURCES[resource]
    obj = items(hub, path, KUBE_PROXY, accept=KUBE_PROXY_ACCEPT).get(key)
    return nodes(obj) if obj else None


def watched(hub, resource, query):
    """The app object's nodes in the initial events of a watch (None: not seen)."""
    path, key, nodes = RESOURCES[resource]
    sock, head, rest = open_watch(hub, path + "?watch=true&" + query, KUBE_PROXY)

    def app(events):
        return [e for e in events if e.get("type") == "ADDED" and
                (e["object"]["metadata"].get("namespace"), e["object"]["metadata"]["name"]) ==
                key]
    try:
        if not head.startswith(b"HTTP/1.1 200"):
            return "answered %r" % head[:60]
        events, _ = read_events(sock, rest, lambda ev: app(ev), 10)
    finally:
        sock.close()
    got = app(events)
    return nodes(got[-1]["object"]) if got else None


def go_offline(double, hub):
    double.cut()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 20, what="offline")


def go_online(double, hub):
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")


def served(hub, resource):
    """Is the list answered (not 404 "never cached")?  The cache's writes
    are made by its workers after the answer: a list just answered online
    may not be in the store yet when the link is cut."""
    try:
        listed(hub, resource)
        return True
    except AssertionError:
        return False


STORED = {"endpoints": ("endpoints.v1.core", "app", endpoints_nodes),
          "endpointslices": ("endpointslices.v1.discovery.k8s.io", "app-abcde", slice_nodes)}


def hub_binary(hub):
    return next(a for a in hub.args if a.endswith("/yurthub"))


def stored(hub, resource):
    """The nodes of the app object as the store holds it for kube-proxy."""
    res, name, nodes = STORED[resource]
    out = subprocess.run([hub_binary(hub), "cache", "get", hub.cache, "kube-proxy", res,
                          "default", name], capture_output=True, text=True, timeout=60)
    return nodes(json.loads(out.stdout)) if out.returncode == 0 else out.stderr.strip()


def check_offline(t, hub, resources, want, when, through_store):
    for res in resources:
        wait_for(lambda: served(hub, res), 15, what="the list in the store")
    for res in through_store:
        got = stored(hub, res)
        t.check("%s: the store holds kube-proxy's %s as the cloud sent it" % (when, res),
                got == ["node-x", "node1", "node2"], "got %r" % (got,))
    settle = [r for r in resources if r not in through_store]
    for res in settle:
        # served from the multiplexer's shared cache, which a restarted hub
        # fills from the store as it starts: the start-up rule (answers a
        # filter may change wait for its view) is docs/filters.md's, not
        # this suite's
        try:
            wait_for(lambda: listed(hub, res) == want, 15, what="the multiplexer's list")
        except Exception:
            pass
    for res in resources:
        got = listed(hub, res)
        t.check("%s: kube-proxy's %s list has the new topology's endpoints %s" %
                (when, res, want), got == want, "got %r" % (got,))
    for res in resources:
        for query in ("resourceVersion=0",
                      "sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                      "&allowWatchBookmarks=true"):
            got = watched(hub, res, query)
            t.check("%s: kube-proxy's %s watch (%s) starts with the new topology's endpoints"
                    % (when, res, query.split("&")[0]), got == want, "got %r" % (got,))


def change(t, double, label, binary, extra, resources, first, then):
    when = "%s, %s -> %s" % (label, first.split("/")[1], then.split("/")[1])
    set_topology(double, first)
    name = "hub-" + label.replace(" ", "-").replace(",", "") + "-" + first.split("/")[1]
    hub = Hub(t.workdir, [double.url], extra=[*secure(t.workdir), *extra], name=name, binary=binary)
    t.cleanups.append(hub.stop)
    try:
        for res in resources:
            # the first answers after a start wait for the filters' view:
            # the start-up rule of docs/filters.md, not this suite's
            try:
                wait_for(lambda: listed(hub, res) == WANT[first], 15, what="the first list")
            except Exception:
                pass
            got = listed(hub, res)
            t.check("%s: online, kube-proxy's %s list has %s" % (when, res, WANT[first]),
                    got == WANT[first], "got %r" % (got,))
        set_topology(double, then)
        for res in resources:
            ok = True
            try:
                wait_for(lambda: listed(hub, res) == WANT[then], 15,
                         what="the new topology online")
            except Exception:
                ok = False
            t.check("%s: online after the change, kube-proxy's %s list has %s" %
                    (when, res, WANT[then]), ok, "got %r" % (listed(hub, res),))
        go_offline(double, hub)
        # with sharing on, EndpointSlices are the multiplexer's, stored
        # under its own name (multiplexer-proxy-<node>), unfiltered as ever
        through_store = [r for r in resources if extra or r == "endpoints"]
        check_offline(t, hub, resources, WANT[then], when + ", offline", through_store)
        hub.stop()
        hub.start()
        # The filters' view is loaded from the cache at the start (Services,
        # the Node, the NodePool); an offline answer from the store waits
        # for it.
        check_offline(t, hub, resources, WANT[then], when + ", offline after a restart",
                      through_store)
        go_online(double, hub)
    finally:
        double.restore()
        hub.stop()


KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
KUBECONFIG_LINE = "  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf"
PROXY_CONF = "kind: KubeProxyConfiguration\nclientConnection:\n" + KUBECONFIG_LINE + "\n"
FILTERED_CONF = PROXY_CONF.replace("  kubeconfig:", "  #kubeconfig:")


def kubelet_conf(hub):
    s, _, cm = hub_json(hub, "/api/v1/namespaces/kube-system/configmaps/kube-proxy", KUBELET)
    return cm.get("data", {}).get("config.conf") if s == 200 and isinstance(cm, dict) else s


def get_filtered(t, double, label, binary):
    """A get: kubelet's kube-proxy ConfigMap is stored as the cloud has it
    and answered filtered (inclusterconfig), online and offline."""
    hub = Hub(t.workdir, [double.url], extra=secure(t.workdir), name="hub-get-" + label, binary=binary)
    t.cleanups.append(hub.stop)
    try:
        t.check("%s: online, kubelet's get of the kube-proxy ConfigMap is filtered" % label,
                kubelet_conf(hub) == FILTERED_CONF, repr(kubelet_conf(hub)))
        out = []

        def in_store():
            r = subprocess.run([hub_binary(hub), "cache", "get", hub.cache, "kubelet",
                                "configmaps.v1.core", "kube-system", "kube-proxy"],
                               capture_output=True, text=True, timeout=60)
            out[:] = [r.stdout]
            return r.returncode == 0
        wait_for(in_store, 15, what="the ConfigMap in the store")
        t.check("%s: the store holds it as the cloud sent it" % label,
                json.loads(out[0])["data"]["config.conf"] == PROXY_CONF, out[0][:300])
        go_offline(double, hub)
        t.check("%s: offline, kubelet's get of it is filtered" % label,
                kubelet_conf(hub) == FILTERED_CONF, repr(kubelet_conf(hub)))
    finally:
        double.restore()
        hub.stop()


def run_binary(t, double, label, binary):
    t.run(get_filtered, double, label, binary)
    for first, then in ((HOSTNAME, NODEPOOL), (NODEPOOL, HOSTNAME)):
        t.run(change, double, label + ", sharing off", binary, ["--pool-scope-resources="],
              ["endpoints", "endpointslices"], first, then)
        t.run(change, double, label + ", sharing on", binary, [],
              ["endpoints", "endpointslices"], first, then)


def main():
    t = Suite("filter_store")
    double = Double(t.workdir, ["--node", "node1", "--node", "node2", "--pool", "pool-a"])
    t.cleanups.append(double.stop)
    double.put_object(slice_for("app", EPS))
    double.put_object(endpoints_for("app", EPS))
    double.put_object({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
                       "data": {"config.conf": PROXY_CONF}})
    each_build(lambda label, binary: run_binary(t, double, label, binary))
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
