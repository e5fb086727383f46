"""End to end with clients nobody on this project wrote, through the hub to the
test double (tests/e2e/clients.py drives them; scripts/clients.sh installs them):

- kubectl 1.20 (Debian's kubernetes-client): get pods, nodes and services,
  one pod as JSON, online and then offline (the cloud cut), with the same
  answers; a list nobody cached is an error, not an empty table.  kubectl is
  no cache agent: what it reads offline is what kubelet and flanneld cached.
- @kubernetes/client-node 1.x: an informer on all pods sees an ADDED and a
  DELETED made in the cloud, keeps its cache through a link cut (while the
  cloud changes), catches up when the link is back, and ends with exactly
  the cloud's pods at their resourceVersions.
- python3-kubernetes: a watch from a list's resourceVersion sees a pod
  created in the cloud; the watch the hub ends at a cut ends cleanly.
- the review's lost deletion, seen by an informer: kubelet holds two views
  of pods (all, and its node's, watched); a pod made on the node and deleted
  in the cloud; an informer started offline does not have it, and after the
  link returns it still does not (no DELETED would ever come for it).
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, get, wait_for  # noqa: E402
from clients import Informer, PyWatch, kubectl120, missing  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
FLANNELD = "flanneld/v0.25.1"
JSON = "application/json"

# What the cache agents read online, so that kubectl (no cache agent) has
# something to be answered from offline: every pod, node and service.
AGENT_READS = [
    (KUBELET, "/api/v1/pods"),
    (KUBELET, "/api/v1/services"),
    (FLANNELD, "/api/v1/nodes"),
]

KUBECTL_GETS = [
    ("get pods -A", ["get", "pods", "-A"]),
    ("get pods (namespace default)", ["get", "pods"]),
    ("get nodes", ["get", "nodes"]),
    ("get services -A", ["get", "services", "-A"]),
]


def agent_get(hub, ua, path):
    return get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": ua, "Accept": JSON})


def offline(hub):
    return hub.metric("yurthub_upstream_healthy") == 0


def go_offline(double, hub):
    double.cut("refuse")
    agent_get(hub, KUBELET, "/api/v1/nodes/node1")  # the first failure triggers a probe
    wait_for(lambda: offline(hub), 15, what="the hub to see the cloud gone")


def go_online(double, hub):
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20,
             what="the hub to see the cloud back")


def cloud_pods(double):
    """{ns/name: rv} of every pod in the cloud, read on the control port."""
    s, body = double.control("GET", "/objects?apiVersion=v1&kind=Pod")
    assert s == 200, body
    return {"%s/%s" % (o["metadata"]["namespace"], o["metadata"]["name"]):
            o["metadata"]["resourceVersion"] for o in json.loads(body)["items"]}


def pod(name, ns="default", node="node2"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "real-clients"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}


def rows(out):
    """The name columns of kubectl's table (NAMESPACE and NAME, or NAME):
    AGE moves on between two runs."""
    lines = out.splitlines()
    if not lines:
        return []
    width = 2 if lines[0].split()[:1] == ["NAMESPACE"] else 1
    return [" ".join(line.split()[:width]) for line in lines]


def populate(t, hub):
    writes = hub.metric("yurthub_cache_writes_total") or 0
    for ua, path in AGENT_READS:
        s, _, body = agent_get(hub, ua, path)
        t.check("online: %s lists %s (200)" % (ua.split("/")[0], path), s == 200, body[:200])
    # the lists are stored by worker threads: wait until the hub says so (the
    # services come from the multiplexer, whose own upstream is what is cached)
    stored = [p for _, p in AGENT_READS if p != "/api/v1/services"]
    wait_for(lambda: (hub.metric("yurthub_cache_writes_total") or 0) >= writes + len(stored),
             10,
             what="the agents' lists cached")


def test_kubectl120(t, double, hub):
    rc, out, err = kubectl120(hub.url, "version", "--client")
    t.check("kubectl is 1.20 (Debian's kubernetes-client)", rc == 0 and "v1.20." in out,
            out + err)
    populate(t, hub)
    online = {}
    for label, args in KUBECTL_GETS:
        rc, out, err = kubectl120(hub.url, *args)
        t.check("kubectl 1.20 online: %s" % label, rc == 0 and len(rows(out)) >= 2,
                out + err)
        online[label] = out
    one = next(k for k in sorted(cloud_pods(double)) if k.startswith("kube-system/"))
    ns, name = one.split("/")
    rc, pod_online, err = kubectl120(hub.url, "get", "pod", name, "-n", ns, "-o", "json")
    t.check("kubectl 1.20 online: get pod -o json", rc == 0, err)

    go_offline(double, hub)
    try:
        for label, args in KUBECTL_GETS:
            rc, out, err = kubectl120(hub.url, *args)
            t.check("kubectl 1.20 offline: %s gives the online rows" % label,
                    rc == 0 and rows(out) == rows(online[label]),
                    "\nonline:\n%s\noffline:\n%s\n%s" % (online[label], out, err))
        rc, out, err = kubectl120(hub.url, "get", "pod", name, "-n", ns, "-o", "json")
        same = False
        if rc == 0 and pod_online:
            a, b = json.loads(pod_online), json.loads(out)
            same = (a["metadata"]["uid"], a["metadata"]["resourceVersion"]) == \
                (b["metadata"]["uid"], b["metadata"]["resourceVersion"])
        t.check("kubectl 1.20 offline: get pod -o json is the online object (uid, rv)", same,
                out[:300] + err)
        rc, out, err = kubectl120(hub.url, "get", "configmaps", "-A")
        t.check("kubectl 1.20 offline: a list nobody cached is an error, not an empty table",
                rc != 0 and "No resources found" not in out + err, "rc %d: %s%s" % (rc, out, err))
        rc, out, err = kubectl120(hub.url, "delete", "pod", name, "-n", ns, "--wait=false")
        t.check("kubectl 1.20 offline: delete is refused (Forbidden)",
                rc != 0 and "Forbidden" in err, "rc %d: %s%s" % (rc, out, err))
    finally:
        go_online(double, hub)
    t.check("the pod kubectl tried to delete offline is still in the cloud",
            one in cloud_pods(double))


def test_informer(t, double, hub):
    inf = Informer(t.workdir, hub.url, "/api/v1/pods")
    t.cleanups.append(inf.stop)
    inf.wait_started(30)
    cloud = cloud_pods(double)
    keys = inf.dump()["keys"]
    t.check("informer: the first list has the cloud's pods", keys == sorted(cloud),
            "%s vs %s" % (keys, sorted(cloud)))

    # an ADDED and a DELETED made in the cloud
    double.put_object(pod("rc-added"))
    ev = inf.wait_event(lambda e: e["event"] == "add" and e["name"] == "rc-added", 15,
                        "add of rc-added")
    t.check("informer: ADDED made in the cloud arrives", ev["namespace"] == "default")
    victim = next(k for k in sorted(cloud) if k.startswith("default/"))
    vns, vname = victim.split("/")
    double.delete_object("v1", "Pod", vns, vname)
    inf.wait_event(lambda e: e["event"] == "delete" and e["name"] == vname, 15,
                   "delete of " + vname)
    t.check("informer: DELETED made in the cloud arrives", True)
    wait_for(lambda: inf.dump()["keys"] == sorted(cloud_pods(double)), 10,
             what="the informer to hold the cloud's pods")
    before_cut = inf.dump()
    # kubelet's view of all pods, fresh: should the informer list again while
    # offline, the hub answers from it with the pods the cloud has now
    populate(t, hub)

    # the link is cut: the informer's watch is ended by the hub; it comes back
    # (to the hub answering from its cache) and keeps its objects
    mark = inf.mark()
    go_offline(double, hub)
    try:
        inf.wait_event(lambda e: e["event"] in ("connect", "started"), 20,
                       "a reconnect after the cut", mark)
        errs = inf.errors(mark)
        t.check("informer: the watch the hub ends at the cut ends cleanly (no client error)",
                not errs, "client-node reports %s" % (
                    [e.get("code") or e.get("message") for e in errs]))
        # the cloud changes while the node is offline
        double.put_object(pod("rc-added-offline"))
        gone = "default/rc-added"
        double.delete_object("v1", "Pod", "default", "rc-added")
        # the informer is back on a watch, now answered by the hub itself
        wait_for(lambda: (hub.metric("yurthub_watches_open") or 0) >= 1, 15,
                 what="the informer's offline watch open")
        offline_dump = inf.dump()
        t.check("informer offline: still running, cache unchanged",
                inf.alive() and offline_dump["keys"] == before_cut["keys"],
                "%s vs %s" % (offline_dump["keys"], before_cut["keys"]))
        t.check("informer offline: no delete or add reported while the cloud is cut",
                not inf.select(lambda e: e["event"] in ("add", "delete"), mark),
                json.dumps(inf.select(lambda e: e["event"] in ("add", "delete"), mark)))
    finally:
        go_online(double, hub)

    # back online: the hub ends the offline watch, the informer re-watches the
    # cloud from its resourceVersion and gets what it missed
    inf.wait_event(lambda e: e["event"] == "add" and e["name"] == "rc-added-offline", 30,
                   "add of the pod created while offline", mark)
    inf.wait_event(lambda e: e["event"] == "delete" and e["name"] == "rc-added", 30,
                   "delete of the pod deleted while offline", mark)
    t.check("informer: after the link is back, the pod added meanwhile arrives", True)
    t.check("informer: after the link is back, the pod deleted meanwhile goes", True)

    def converged():
        d = inf.dump()
        return d["rv"] == cloud_pods(double)
    try:
        wait_for(converged, 20, what="the informer cache to equal the cloud's pods")
        ok = True
    except TimeoutError:
        ok = False
    final, cloud = inf.dump(), cloud_pods(double)
    t.check("informer: the cache ends equal to the cloud's (names and resourceVersions)", ok,
            "informer %s\ncloud    %s" % (final["rv"], cloud))
    t.check("informer: %s is not in it" % gone, gone not in final["keys"])
    t.check("informer: the process stops cleanly by request (exit 0)", inf.stop() == 0,
            inf.stderr_tail())


def test_python_watch(t, double, hub):
    s, _, body = agent_get(hub, "python-test/1.0", "/api/v1/namespaces/default/pods")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    w = PyWatch(t.workdir, hub.url, "list_namespaced_pod", namespace="default",
                resource_version=rv, timeout_seconds=30)
    t.cleanups.append(w.stop)
    double.put_object(pod("py-added"))
    ev = w.wait_event(lambda e: e["event"] in ("ADDED", "error", "end") and
                      e.get("name") in ("py-added", None), 15, "ADDED py-added")
    t.check("python3-kubernetes watch from a list's rv: the pod created in the cloud",
            ev["event"] == "ADDED", json.dumps(ev))
    # the link is cut under the watch: the hub ends it.  With timeout_seconds
    # the client does not re-watch by itself, so a clean end is an "end".
    mark = w.mark()
    go_offline(double, hub)
    try:
        last = w.wait_event(lambda e: e["event"] in ("end", "error"), 20,
                            "the end of the watch", mark)
    finally:
        go_online(double, hub)
    t.check("python3-kubernetes watch: the watch the hub ends at the cut ends cleanly",
            last["event"] == "end",
            "python3-kubernetes raises %s" % (last.get("type") or last.get("reason")))
    t.check("python3-kubernetes watch: the process is gone (stopped by PID if need be)",
            w.stop() is not None)


def test_informer_started_offline(t, double, hub):
    mine = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1"
    s, _, body = agent_get(hub, KUBELET, "/api/v1/pods")
    t.check("kubelet lists all pods", s == 200)
    s, _, body = agent_get(hub, KUBELET, mine)
    rv = json.loads(body)["metadata"]["resourceVersion"]
    w = PyWatch(t.workdir, hub.url, "list_pod_for_all_namespaces", resource_version=rv,
                field_selector="spec.nodeName=node1", timeout_seconds=60, user_agent=KUBELET,
                name="kubelet-watch")
    try:
        double.put_object(pod("ghost", node="node1"))
        w.wait_event(lambda e: e["event"] == "ADDED" and e.get("name") == "ghost", 15,
                     "ADDED ghost through kubelet's watch")
        double.delete_object("v1", "Pod", "default", "ghost")
        w.wait_event(lambda e: e["event"] == "DELETED" and e.get("name") == "ghost", 15,
                     "DELETED ghost through kubelet's watch")
    finally:
        w.stop()
    # both views relisted after the deletion, as kubelet does after a restart
    agent_get(hub, KUBELET, "/api/v1/pods")
    agent_get(hub, KUBELET, mine)
    wait_for(lambda: (hub.metric("yurthub_cache_queue_bytes") or 0) == 0, 10, what="cached")
    go_offline(double, hub)
    inf = Informer(t.workdir, hub.url, "/api/v1/pods", name="informer-offline")
    try:
        inf.wait_started(30)
        keys = inf.dump()["keys"]
        t.check("an informer started offline does not have the deleted pod",
                "default/ghost" not in keys and keys, str(keys))
        mark = inf.mark()
        go_online(double, hub)
        inf.wait_event(lambda e: e["event"] in ("connect", "started"), 30,
                       "the informer back on the cloud", mark)
        want = sorted(cloud_pods(double))
        wait_for(lambda: inf.dump()["keys"] == want, 20, what="the informer equal to the cloud")
        t.check("after the link returns, it still has exactly the cloud's pods",
                "default/ghost" not in inf.dump()["keys"])
    finally:
        inf.stop()


def main():
    t = Suite("real_clients")
    lacking = missing()
    if lacking:
        for m in lacking:
            t.check("real client installed: " + m, False)
        t.finish()
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--node", "node2",
                                "--bookmark-interval", "1"])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url])
    t.cleanups.append(hub.stop)
    t0 = time.time()
    t.run(test_kubectl120, double, hub)
    t.run(test_informer, double, hub)
    t.run(test_python_watch, double, hub)
    t.run(test_informer_started_offline, double, hub)
    print("time: %.1f s" % (time.time() - t0))
    t.finish()


if __name__ == "__main__":
    main()
