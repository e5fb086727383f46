"""End to end on the etcd store: the hub with --storage=etcd caches what the
node reads into a real etcd, laid out as kube-apiserver lays out its own;
answers from it offline, also after a restart; shares the etcd with a second
node's hub; keeps proxying while etcd is down and caches again when it is
back.  `yurthub cache --etcd-servers` reads the same store.
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import HUB_BIN, Double, Etcd, Hub, Suite, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
COREDNS = "coredns/1.11.1 (linux/amd64)"
READS = [
    ("kubelet pods", KUBELET, "/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"),
    ("kubelet node", KUBELET, "/api/v1/nodes?fieldSelector=metadata.name%3D{node}"),
    ("coredns services", COREDNS, "/api/v1/services"),
    ("coredns endpointslices", COREDNS, "/apis/discovery.k8s.io/v1/endpointslices"),
]


def hub_get(hub, path, ua, timeout=30):
    return get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": ua}, timeout=timeout)


def summary(body):
    """Each object's key and resourceVersion; a Node's without: the hub
    itself patches its Node's AutonomyState condition, which moves the
    Node's resourceVersion in the cloud between two reads."""
    doc = json.loads(body)
    items = doc.get("items", [doc]) or []
    return {(i["metadata"].get("namespace", "") + "/" + i["metadata"]["name"]):
            None if i.get("kind") == "Node" or doc.get("kind") == "NodeList"
            else i["metadata"].get("resourceVersion") for i in items}


def read_all(hub, node):
    out = {}
    for name, ua, path in READS:
        s, _, body = hub_get(hub, path.format(node=node), ua)
        out[name] = (s, summary(body) if s == 200 else body[:200])
    return out


def cache_cmd(etcd, node, *args):
    p = subprocess.run([HUB_BIN, "cache", "--etcd-servers=" + etcd.url, "--node-name=" + node,
                        *args], capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def offline(hub):
    return hub.metric("yurthub_upstream_healthy") == 0


def test_online_then_offline(t, double, etcd, hub):
    online = read_all(hub, "node1")
    for name, (s, summ) in online.items():
        t.check("online: " + name, s == 200 and summ, str(summ)[:200])
    pods = sorted(online["kubelet pods"][1])

    def cached():
        keys = etcd.keys("/registry/pods/") or []
        return all("/registry/pods/" + p in keys for p in pods) and keys
    keys = wait_for(cached, 20, what="the pods in etcd")
    t.check("the node's pods are at kube-apiserver's keys (%d)" % len(pods), bool(keys))
    t.check("and no other node's pods (a filtered list caches only what it listed)",
            len(keys) == len(pods), str(keys))
    t.check("nodes are under /registry/minions/",
            wait_for(lambda: etcd.keys("/registry/minions/node1"), 10, what="the node"))
    t.check("services under /registry/services/specs/",
            wait_for(lambda: etcd.keys("/registry/services/specs/"), 10, what="services"))
    t.check("endpointslices under /registry/endpointslices/",
            wait_for(lambda: etcd.keys("/registry/endpointslices/"), 10, what="slices"))
    ns, name = pods[0].split("/")
    rc, out = etcd.ctl("get", "--print-value-only", "/registry/pods/%s/%s" % (ns, name))
    doc = json.loads(out)
    t.check("the value is the pod's JSON", doc["metadata"]["name"] == name and
            doc["metadata"]["resourceVersion"] == online["kubelet pods"][1][pods[0]])

    rc, out, err = cache_cmd(etcd, "node1", "ls")
    # coredns's services and slices come from the multiplexer, cached once as its upstream
    t.check("yurthub cache ls: the node's components", rc == 0 and "kubelet" in out.split()
            and "multiplexer-proxy-node1" in out.split(), out + err)
    rc, out, err = cache_cmd(etcd, "node1", "ls", "kubelet", "pods.v1.core")
    t.check("yurthub cache ls kubelet pods", rc == 0 and sorted(out.split()) == pods, out + err)
    rc, out, err = cache_cmd(etcd, "node1", "get", "kubelet", "pods.v1.core", ns, name)
    t.check("yurthub cache get", rc == 0 and json.loads(out)["metadata"]["name"] == name, err)
    rc, out, err = cache_cmd(etcd, "node1", "views", "kubelet", "pods.v1.core")
    t.check("yurthub cache views", rc == 0 and "spec.nodeName=node1" in out, out + err)
    rc, out, err = cache_cmd(etcd, "node1", "verify")
    t.check("yurthub cache verify: no problem", rc == 0, out + err)
    rc, out, err = cache_cmd(etcd, "node1", "get", "kubelet", "pods.v1.core", ns, "nope")
    t.check("yurthub cache get of a missing object: exit 1", rc == 1 and "not found" in err, err)
    rc, out, err = cache_cmd(etcd, "node1", "recover")
    t.check("yurthub cache recover on etcd: a usage error", rc == 2, err)
    p = subprocess.run([HUB_BIN, "cache", "--etcd-servers=" + etcd.url, "ls"],
                       capture_output=True, timeout=30)
    t.check("yurthub cache on etcd without --node-name: a usage error",
            p.returncode == 2 and b"--node-name" in p.stderr, p.stderr)
    p = subprocess.run([HUB_BIN, "cache", "--etcd-servers=http://127.0.0.1:1", "--node-name=n",
                        "ls"], capture_output=True, timeout=30)
    t.check("yurthub cache on an etcd that is not there: exit 1, says so",
            p.returncode == 1 and b"unavailable" in p.stderr, p.stderr)

    double.cut("refuse")
    hub_get(hub, "/api/v1/namespaces/default/pods", KUBELET)
    wait_for(lambda: offline(hub), 10, what="offline")
    t.check("offline: the same answers from etcd", read_all(hub, "node1") == online)
    hub.stop()
    hub.start()
    wait_for(lambda: offline(hub), 10, what="offline after restart")
    t.check("restarted offline: the same answers", read_all(hub, "node1") == online)
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")


def test_second_node(t, double, etcd, hub, hub2):
    mine = read_all(hub, "node1")
    theirs = read_all(hub2, "node2")
    t.check("node2 online", all(s == 200 for s, _ in theirs.values()))

    def both_cached():
        keys = set(etcd.keys("/registry/pods/") or [])
        want = {"/registry/pods/" + p for p in list(mine["kubelet pods"][1]) +
                list(theirs["kubelet pods"][1])}
        return want <= keys
    t.check("both nodes' pods in the shared etcd", wait_for(both_cached, 20, what="pods"))
    rc, out, err = cache_cmd(etcd, "node2", "ls", "kubelet", "pods.v1.core")
    t.check("node2's kubelet holds its own pods only",
            rc == 0 and sorted(out.split()) == sorted(theirs["kubelet pods"][1]), out + err)
    # node2 relists services (shared with node1): nothing of node1's goes
    for _ in range(2):
        hub_get(hub2, "/api/v1/services", COREDNS)
    rc, out, err = cache_cmd(etcd, "node1", "verify")
    t.check("records consistent with two nodes", rc == 0, out + err)
    double.cut("refuse")
    hub_get(hub, "/api/v1/namespaces/default/pods", KUBELET)
    wait_for(lambda: offline(hub) and offline(hub2), 10, what="both offline")
    t.check("offline: node1 answers as before", read_all(hub, "node1") == mine)
    t.check("offline: node2 answers as before", read_all(hub2, "node2") == theirs)
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")


def test_etcd_down(t, double, etcd, hub):
    etcd.stop()
    t0 = time.time()
    online = read_all(hub, "node1")
    took = time.time() - t0
    t.check("etcd down: proxying answers from the cloud (%.2fs)" % took,
            all(s == 200 for s, _ in online.values()) and took < 5, str(online)[:300])
    # the cloud changes while etcd is down
    double.put_object({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": "while-etcd-down", "namespace": "default"},
                       "spec": {"ports": [{"port": 80}]}})
    t.check("the hub is still up", hub.proc.poll() is None)
    etcd.start()

    def cached():
        hub_get(hub, "/api/v1/services", COREDNS)  # coredns relists
        return "/registry/services/specs/default/while-etcd-down" in (
            etcd.keys("/registry/services/specs/") or [])
    t.check("etcd back: the hub caches again by itself",
            wait_for(cached, 30, step=0.5, what="the new service in etcd"))
    rc, out, err = cache_cmd(etcd, "node1", "verify")
    t.check("records consistent after etcd came back", rc == 0, out + err)


def main():
    t = Suite("etcd-hub")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--node", "node2",
                                "--bookmark-interval", "1"])
    t.cleanups.append(double.stop)
    etcd = Etcd(t.workdir)
    t.cleanups.append(etcd.stop)
    extra = ["--storage=etcd", "--etcd-servers=" + etcd.url]
    hub = Hub(t.workdir, [double.url], extra=extra)
    t.cleanups.append(hub.stop)
    t.run(test_online_then_offline, double, etcd, hub)
    hub2 = Hub(t.workdir, [double.url], extra=extra, name="hub2", node="node2")
    t.cleanups.append(hub2.stop)
    t.run(test_second_node, double, etcd, hub, hub2)
    t.run(test_etcd_down, double, etcd, hub)
    t.finish()


if __name__ == "__main__":
    main()
