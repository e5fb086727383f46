"""End to end, offline: the cloud goes away and the node keeps working.

A scripted node - kubelet-, kube-proxy- and coredns-like clients - lists and
watches through the hub; the link is cut; every client's list, get and watch
keeps working with the right objects; the hub is killed and restarted while
still offline and serves the same answers; the link comes back, offline
watches are closed, the clients re-list, and objects deleted in the cloud
meanwhile are gone from the cache.  Also: kubectl offline (compared with its
own online output), python3-kubernetes watches, a client-go style WatchList,
writes offline (leases, node status, events), and Events created offline
reaching the cloud in order, exactly once.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import (PYTHON, Double, Hub, Suite, get, kubectl, request,  # noqa: E402
                     wait_for)
from watch_stream import open_watch, read_events  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
COREDNS = "coredns/1.11.1 (linux/amd64)"
PROTO_JSON = "application/vnd.kubernetes.protobuf,application/json"
PROXY_SEL = ("labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io"
             "%2Fservice-proxy-name")

# what each node component reads: (name, user agent, path)
READS = [
    ("kubelet pods of node1", KUBELET, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1"),
    ("kubelet node", KUBELET, "/api/v1/nodes?fieldSelector=metadata.name%3Dnode1"),
    ("kubelet services", KUBELET, "/api/v1/services"),
    ("kube-proxy services", PROXY, "/api/v1/services?" + PROXY_SEL),
    ("kube-proxy endpointslices", PROXY, "/apis/discovery.k8s.io/v1/endpointslices?" + PROXY_SEL),
    ("coredns services", COREDNS, "/api/v1/services"),
    ("coredns endpointslices", COREDNS, "/apis/discovery.k8s.io/v1/endpointslices"),
    ("coredns namespaces", COREDNS, "/api/v1/namespaces"),
]
GETS = [
    ("kubelet gets its node", KUBELET, "/api/v1/nodes/node1"),
    ("kubelet gets its lease", KUBELET,
     "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1"),
]


def hub_get(hub, path, ua, accept=PROTO_JSON, timeout=30):
    return get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": ua, "Accept": accept},
               timeout=timeout)


def summary(body):
    """{namespace/name: resourceVersion} of a list body, or the object's."""
    doc = json.loads(body)
    items = doc.get("items", [doc]) or []
    return {(i["metadata"].get("namespace", "") + "/" + i["metadata"]["name"]):
            i["metadata"].get("resourceVersion") for i in items}


def offline(hub):
    return hub.metric("yurthub_upstream_healthy") == 0


def test_node(t, double, hub):
    online = {}
    for name, ua, path in READS + GETS:
        s, _, body = hub_get(hub, path, ua)
        t.check("online: " + name, s == 200, body[:200])
        online[name] = summary(body)
    t.check("the node's pods are there", len(online["kubelet pods of node1"]) >= 2)
    # a watch opened online on the cloud, and the link is cut under it
    s, _, body = hub_get(hub, READS[0][2], KUBELET)
    rv = json.loads(body)["metadata"]["resourceVersion"]
    time.sleep(1)  # let the cache catch up
    sock, head, rest = open_watch(hub, READS[0][2] + "&watch=true&resourceVersion=" + rv, KUBELET)
    t0 = time.time()
    double.cut("refuse")
    hub_get(hub, "/api/v1/namespaces/default/pods", KUBELET)  # the first failure
    wait_for(lambda: offline(hub), 5, what="offline")
    t.check("offline within 3 s of the first failed request (%.2fs)" % (time.time() - t0),
            time.time() - t0 < 3)
    _, closed = read_events(sock, rest, lambda e: False, 3)
    t.check("the proxied watch ended when the cloud went away", closed)
    sock.close()
    # meanwhile, in the cloud: a pod of node1 is deleted
    victim = sorted(online["kubelet pods of node1"])[0]
    ns, name = victim.split("/")
    double.delete_object("v1", "Pod", ns, name)

    def same_answers(label):
        for n, ua, path in READS + GETS:
            s, _, body = hub_get(hub, path, ua)
            ok = s == 200 and summary(body) == online[n]
            t.check("%s: %s answers as online" % (label, n), ok,
                    "%s %s" % (s, body[:300]))
    same_answers("offline")
    s, _, body = hub_get(hub, "/api/v1/namespaces/default/pods/not-there", KUBELET)
    t.check("offline: an object never cached is 404 NotFound", s == 404 and
            json.loads(body).get("reason") == "NotFound", body[:200])
    s, _, body = hub_get(hub, "/api/v1/configmaps", KUBELET)
    t.check("offline: a list never cached is 404, not an empty list", s == 404, body[:200])
    # paging offline: limit and continue walk the same answer (namespaces: services
    # and EndpointSlices come whole from the multiplexer, which the API allows)
    pages, token, rounds = [], "", 0
    while rounds < 20:
        rounds += 1
        path = "/api/v1/namespaces?limit=1" + ("&continue=" + token if token else "")
        s, _, body = hub_get(hub, path, COREDNS)
        doc = json.loads(body)
        pages.append(summary(body) if doc["items"] else {})
        token = doc["metadata"].get("continue", "")
        if not token:
            break
    merged = {}
    for p in pages:
        merged.update(p)
    t.check("offline: limit=1 pages (%d) give the whole list" % len(pages),
            merged == online["coredns namespaces"] and all(len(p) <= 1 for p in pages) and
            len(pages) > 1, "%s vs %s" % (merged, online["coredns namespaces"]))
    s, _, body = hub_get(hub, "/api/v1/services?limit=1", COREDNS)
    doc = json.loads(body)
    t.check("offline: a pool-scope list with limit=1 comes whole, without a continue token",
            summary(body) == online["coredns services"] and
            not doc["metadata"].get("continue"), body[:300])
    # an offline watch from the list's rv: open, quiet, with a bookmark heartbeat
    sock, head, rest = open_watch(hub, READS[0][2] + "&watch=true&allowWatchBookmarks=true"
                                  "&resourceVersion=" + rv, KUBELET)
    t.check("offline watch: 200", head.startswith(b"HTTP/1.1 200"), head[:100])
    events, closed = read_events(sock, rest, lambda e: e, 5)
    t.check("offline watch: a bookmark arrives and the watch stays open",
            events and events[0]["type"] == "BOOKMARK" and not closed, str(events)[:300])

    # reboot while offline
    hub.stop(signal.SIGKILL)
    t0 = time.time()
    hub.start()
    took = time.time() - t0
    t.check("restarted offline, ready in %.2fs" % took, took < 5)
    wait_for(lambda: offline(hub), 10, what="offline after restart")
    same_answers("after a restart offline")

    # the link comes back: offline watches end, clients re-list
    sock2, head2, rest2 = open_watch(hub, READS[0][2] + "&watch=true&resourceVersion=" + rv,
                                     KUBELET)
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")
    t0 = time.time()
    _, closed = read_events(sock2, rest2, lambda e: False, 5)
    t.check("the offline watch ends within 2 s of the cloud being back (%.2fs)"
            % (time.time() - t0), closed and time.time() - t0 < 2.5)
    sock.close()
    sock2.close()
    s, _, body = hub_get(hub, READS[0][2], KUBELET)  # the kubelet re-lists
    t.check("online again: the re-list no longer has the deleted pod",
            victim not in summary(body))
    time.sleep(1)
    path = os.path.join(hub.cache, "kubelet", "pods.v1.core", ns, name)
    t.check("the pod deleted in the cloud while offline is gone from the cache",
            not os.path.exists(path))


def test_offline_writes(t, double, hub):
    # online: kubelet reads its lease and node (so they are cached)
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1"
    s, _, lease = hub_get(hub, lease_path, KUBELET)
    s, _, node = hub_get(hub, "/api/v1/nodes/node1", KUBELET)
    time.sleep(0.5)
    double.cut("refuse")
    hub_get(hub, "/version", KUBELET)
    wait_for(lambda: offline(hub), 5, what="offline")
    obj = json.loads(lease)
    obj["spec"]["renewTime"] = "2030-01-01T00:00:00.000000Z"
    s, _, body = request("127.0.0.1", hub.proxy_port, "PUT", lease_path, json.dumps(obj),
                         {"User-Agent": KUBELET, "Content-Type": "application/json"})
    t.check("offline: the kubelet renews its lease (PUT) - 200", s == 200, body[:200])
    s, _, body = hub_get(hub, lease_path, KUBELET)
    t.check("offline: the renewed lease reads back",
            s == 200 and b"2030-01-01" in body, body[:200])
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True",
                                        "lastHeartbeatTime": "2030-01-01T00:00:00Z"}],
                        "$setElementOrder/conditions": [{"type": "Ready"}]}}
    s, _, body = request("127.0.0.1", hub.proxy_port, "PATCH", "/api/v1/nodes/node1/status",
                         json.dumps(patch), {"User-Agent": KUBELET, "Content-Type":
                                             "application/strategic-merge-patch+json"})
    t.check("offline: node status patch (strategic) - 200 with the change",
            s == 200 and b"2030-01-01T00:00:00Z" in body and b"$setElementOrder" not in body,
            body[:300])
    s, _, body = request("127.0.0.1", hub.proxy_port, "DELETE",
                         "/api/v1/namespaces/default/pods/x", None, {"User-Agent": KUBELET})
    t.check("offline: delete is refused with 403", s == 403, body[:200])
    # events created offline
    names = []
    for i in range(3):
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "node1.offline-%d" % i, "namespace": "default"},
              "involvedObject": {"kind": "Node", "name": "node1"},
              "reason": "Offline%d" % i, "message": "made offline", "type": "Normal"}
        s, _, body = request("127.0.0.1", hub.proxy_port, "POST",
                             "/api/v1/namespaces/default/events", json.dumps(ev),
                             {"User-Agent": KUBELET, "Content-Type": "application/json"})
        t.check("offline: event %d created - 201 echoing it" % i,
                s == 201 and json.loads(body)["metadata"]["name"] == ev["metadata"]["name"])
        names.append(ev["metadata"]["name"])
    t.check("the events wait in the queue", hub.metric("yurthub_offline_events_queued_total") == 3)
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")

    def arrived():
        s, _, body = get("127.0.0.1", double.port, "/api/v1/namespaces/default/events")
        items = [i for i in json.loads(body)["items"]
                 if i["metadata"]["name"].startswith("node1.offline-")]
        return items if len(items) >= 3 else None
    try:
        items = wait_for(arrived, 15, step=0.2, what="the events")
    except TimeoutError:
        items = []
    got = sorted(items, key=lambda i: int(i["metadata"]["resourceVersion"]))
    t.check("events created offline arrive after the link returns, in order",
            [i["metadata"]["name"] for i in got] == names, str([i["metadata"]["name"]
                                                                  for i in got]))
    time.sleep(2)
    s, _, body = get("127.0.0.1", double.port, "/api/v1/namespaces/default/events")
    n = len([i for i in json.loads(body)["items"]
             if i["metadata"]["name"].startswith("node1.offline-")])
    t.check("...exactly once", n == 3 and hub.metric("yurthub_offline_events_sent_total") == 3,
            str(n))


KUBECTL_CMDS = [
    ("get pods -A", ["get", "pods", "-A"]),
    ("get pods -l", ["get", "pods", "-A", "-l", "app=web"]),
    ("get pods --field-selector", ["get", "pods", "-A", "--field-selector",
                                   "spec.nodeName=node1"]),
    ("get nodes", ["get", "nodes"]),
    ("get a CRD", ["get", "widgets", "-A"]),
]


def columns(out):
    """The NAME (and NAMESPACE) columns: AGE moves on between two runs."""
    rows = []
    for line in out.splitlines():
        parts = line.split()
        rows.append(" ".join(parts[:2] if parts and parts[0] != "NAME" and len(parts) > 2
                             and "NAMESPACE" in out.splitlines()[0] else parts[:1]))
    return rows


def test_kubectl_offline(t, double, hub):
    online = {}
    for label, args in KUBECTL_CMDS:
        rc, out, err = kubectl(hub.url, *args)
        t.check("kubectl online: " + label, rc == 0 and out.strip(), err)
        online[label] = out
    time.sleep(1)
    double.cut("refuse")
    hub_get(hub, "/version", "kubectl/v1.32")
    wait_for(lambda: offline(hub), 5, what="offline")
    for label, args in KUBECTL_CMDS:
        rc, out, err = kubectl(hub.url, *args)
        t.check("kubectl offline: %s gives the same answer" % label,
                rc == 0 and columns(out) == columns(online[label]),
                "\nonline:\n%s\noffline:\n%s\n%s" % (online[label], out, err))
    env = dict(os.environ, KUBECONFIG=os.devnull)
    w = subprocess.Popen(["kubectl", "--server", hub.url, "get", "pods", "-A", "-w"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(w.stdout.readline, b"")),
                              daemon=True)
    reader.start()
    time.sleep(4)
    t.check("kubectl get pods -w offline lists and stays open",
            w.poll() is None and len(lines) >= 2, str(lines) + str(w.poll()))
    w.kill()
    w.wait()
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")


PY_WATCH = r'''
import sys, json
from kubernetes import client, watch
cfg = client.Configuration()
cfg.host = sys.argv[1]
api = client.CoreV1Api(client.ApiClient(cfg))
w = watch.Watch()
seen = []
for ev in w.stream(api.list_namespaced_config_map, "kube-system", resource_version=sys.argv[2],
                   allow_watch_bookmarks=True, timeout_seconds=6):
    seen.append(ev["type"])
    if ev["type"] == "BOOKMARK":
        break
print(json.dumps(seen), flush=True)
'''


def test_python_and_watchlist(t, double, hub):
    s, _, body = hub_get(hub, "/api/v1/namespaces/kube-system/configmaps", "python-client/1.0")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    s, _, body = hub_get(hub, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1", KUBELET)
    want = set(summary(body))
    time.sleep(0.5)
    double.cut("refuse")
    hub_get(hub, "/version", KUBELET)
    wait_for(lambda: offline(hub), 5, what="offline")
    out = subprocess.run([PYTHON, "-c", PY_WATCH, hub.url, rv], capture_output=True,
                         timeout=30)
    seen = json.loads(out.stdout or b"[]")
    t.check("python3-kubernetes offline watch (resource_version, allow_watch_bookmarks) "
            "gets a bookmark", "BOOKMARK" in seen, out.stdout + out.stderr)
    # client-go's WatchList
    sock, head, rest = open_watch(
        hub, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1&watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", KUBELET)

    def has_end(events):
        return any(e["type"] == "BOOKMARK" for e in events)
    events, _ = read_events(sock, rest, has_end, 10)
    sock.close()
    added = {e["object"]["metadata"]["namespace"] + "/" + e["object"]["metadata"]["name"]
             for e in events if e["type"] == "ADDED"}
    marks = [e for e in events if e["type"] == "BOOKMARK"]
    t.check("WatchList offline: ADDED for every cached pod of the node", added == want,
            "%s vs %s" % (added, want))
    t.check("WatchList offline: then the initial-events-end bookmark",
            marks and marks[0]["object"]["metadata"].get("annotations", {})
            .get("k8s.io/initial-events-end") == "true", str(marks)[:300])
    t.check("WatchList offline: events carry kind and apiVersion",
            all(e["object"].get("kind") == "Pod" and e["object"].get("apiVersion") == "v1"
                for e in events if e["type"] == "ADDED"))
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")


def main():
    t = Suite("offline")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--node", "node2",
                                "--bookmark-interval", "1"])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url], extra=["--cache-agents=kubectl,python-client"])
    t.cleanups.append(hub.stop)
    t.run(test_node, double, hub)
    t.run(test_offline_writes, double, hub)
    t.run(test_kubectl_offline, double, hub)
    t.run(test_python_and_watchlist, double, hub)
    t.finish()


if __name__ == "__main__":
    main()
