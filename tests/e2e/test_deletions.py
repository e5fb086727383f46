"""End to end: what the cloud deletes never outlives its deletion in the
cache, whatever views of a resource a component holds - on the disk store
and on the etcd store, for a namespaced and a cluster-scoped resource.

The repro of a review: as kubelet, list all pods, then list and watch the
pods of node n1.  A pod made on n1 in the cloud and deleted there: its
DELETED passes through the filtered watch, and the cache must drop it for
both views (before the fix each view kept it because the other's selector
still matched it).  A second object deleted while no watch is open: the
relists of both views that lack it must drop it.  Offline, neither list
has them, nor does a watch's initial state.

On etcd also the leak found with a real etcd: kubelet and coredns list
app=web pods; one is relabelled app=moved in the cloud and kube-proxy's
unfiltered list rewrites the shared object; kubelet's and coredns's relists
lack it, so their holdings go; deleted in the cloud and relisted by all,
nothing of it is left in etcd, and `yurthub cache verify` agrees.
"""

import json
import os
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from harness import HUB_BIN, Double, Etcd, Hub, Suite, get, wait_for  # noqa: E402
from watch_stream import open_watch, read_events  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
COREDNS = "coredns/1.11.1 (linux/amd64)"


def q(sel):
    return urllib.parse.quote(sel, safe="")


# (what, resource path, namespace, object maker, field selector of "mine",
#  disk directory, etcd prefix)
def pod(name, node="n1", labels=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}


def node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


RESOURCES = [
    {"what": "pods", "path": "/api/v1/pods", "mine": "spec.nodeName=n1", "ns": "default",
     "make": pod, "kind": "Pod", "dir": "pods.v1.core/default", "etcd": "/registry/pods/default/"},
    {"what": "nodes", "path": "/api/v1/nodes", "mine": "metadata.name=ghost-node", "ns": "",
     "make": node, "kind": "Node", "dir": "nodes.v1.core", "etcd": "/registry/minions/"},
]


def names(body):
    return sorted(i["metadata"]["name"] for i in json.loads(body).get("items") or [])


def listing(hub, path, ua=KUBELET):
    s, _, body = get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": ua})
    return s, (names(body) if s == 200 else body[:200]), body


class Cache:
    """What the hub's store holds, on disk or in etcd."""

    def __init__(self, hub, etcd=None):
        self.hub = hub
        self.etcd = etcd

    def has(self, res, name):
        if self.etcd:
            return res["etcd"] + name in (self.etcd.keys(res["etcd"]) or [])
        return os.path.exists(os.path.join(self.hub.cache, "kubelet", res["dir"], name))

    def verify(self):
        if self.etcd:
            args = [HUB_BIN, "cache", "--etcd-servers=" + self.etcd.url, "--node-name=n1",
                    "verify"]
        else:
            args = [HUB_BIN, "cache", "verify", self.hub.cache]
        p = subprocess.run(args, capture_output=True, timeout=60)
        return p.returncode, (p.stdout + p.stderr).decode()


def deleted_through_filtered_watch(t, double, hub, cache, res, tag):
    all_path, mine_path = res["path"], res["path"] + "?fieldSelector=" + q(res["mine"])
    ghost = "ghost-node" if res["what"] == "nodes" else "ghost"
    t.check("%s: kubelet lists all %s" % (tag, res["what"]), listing(hub, all_path)[0] == 200)
    s, _, body = listing(hub, mine_path)
    rv = json.loads(body)["metadata"]["resourceVersion"]
    sock, head, rest = open_watch(hub, mine_path + "&watch=true&resourceVersion=" + rv, KUBELET)
    t.check("%s: and watches its own" % tag, b" 200 " in head.split(b"\r\n")[0], head[:80])
    double.put_object(res["make"](ghost))

    def saw(kind):
        return lambda evs: any(e.get("type") == kind and
                               e["object"]["metadata"]["name"] == ghost for e in evs)
    events, _ = read_events(sock, rest, saw("ADDED"), 10)
    t.check("%s: ADDED %s passes through" % (tag, ghost), saw("ADDED")(events))
    t.check("%s: and is cached" % tag,
            wait_for(lambda: cache.has(res, ghost), 10, what="the object cached"))
    double.delete_object("v1", res["kind"], res["ns"], ghost)
    events, _ = read_events(sock, rest, saw("DELETED"), 10)
    t.check("%s: DELETED passes through" % tag, saw("DELETED")(events))
    sock.close()
    gone = False
    try:
        gone = wait_for(lambda: not cache.has(res, ghost), 10, what="the object dropped")
    except TimeoutError:
        pass
    t.check("%s: the cache drops it for both views" % tag, gone)


def deleted_between_lists(t, double, hub, cache, res, tag):
    all_path, mine_path = res["path"], res["path"] + "?fieldSelector=" + q(res["mine"])
    name = "ghost-node" if res["what"] == "nodes" else "ghost2"
    if res["what"] == "nodes":
        mine_path = res["path"] + "?fieldSelector=" + q("metadata.name=" + name)
    double.put_object(res["make"](name))
    t.check("%s: both lists have %s" % (tag, name),
            name in listing(hub, all_path)[1] and name in listing(hub, mine_path)[1])
    t.check("%s: cached" % tag, wait_for(lambda: cache.has(res, name), 10, what="cached"))
    double.delete_object("v1", res["kind"], res["ns"], name)
    t.check("%s: relists of both views lack it" % tag,
            name not in listing(hub, all_path)[1] and name not in listing(hub, mine_path)[1])
    gone = False
    try:
        gone = wait_for(lambda: not cache.has(res, name), 10, what="the object dropped")
    except TimeoutError:
        pass
    t.check("%s: and the cache drops it" % tag, gone)
    return name


def offline_answers(t, double, hub, res, absent, tag):
    all_path, mine_path = res["path"], res["path"] + "?fieldSelector=" + q(res["mine"])
    s1, all_names, _ = listing(hub, all_path)
    s2, mine_names, _ = listing(hub, mine_path)
    t.check("%s offline: the list of all lacks %s" % (tag, absent),
            s1 == 200 and not set(absent) & set(all_names), str(all_names))
    t.check("%s offline: the node's list too" % tag,
            s2 == 200 and not set(absent) & set(mine_names), str(mine_names))
    sock, head, rest = open_watch(hub, all_path + "?watch=true&resourceVersion=0", KUBELET)
    events, _ = read_events(sock, rest, lambda e: len(e) >= len(all_names), 10)
    sock.close()
    added = sorted(e["object"]["metadata"]["name"] for e in events if e.get("type") == "ADDED")
    t.check("%s offline: a new watch's initial state lacks them" % tag,
            added == all_names, "%s vs %s" % (added, all_names))


def run_store(t, storage):
    double = Double(t.workdir, ["--node", "n1", "--node", "n2"])
    t.cleanups.append(double.stop)
    etcd = None
    extra = []
    if storage == "etcd":
        etcd = Etcd(t.workdir, name="etcd-" + storage)
        t.cleanups.append(etcd.stop)
        extra += ["--storage=etcd", "--etcd-servers=" + etcd.url]
    hub = Hub(t.workdir, [double.url], extra=extra, name="hub-" + storage, node="n1")
    t.cleanups.append(hub.stop)
    cache = Cache(hub, etcd)
    gone = {}
    for res in RESOURCES:
        tag = "%s %s" % (storage, res["what"])
        deleted_through_filtered_watch(t, double, hub, cache, res, tag)
        gone[res["what"]] = ["ghost-node" if res["what"] == "nodes" else "ghost"]
        if res["what"] == "pods":
            gone["pods"].append(deleted_between_lists(t, double, hub, cache, res, tag))
    if etcd:
        relabelled_leaves_the_views_that_lost_it(t, double, hub, etcd)
    rc, out = cache.verify()
    t.check("%s: yurthub cache verify finds nothing wrong" % storage, rc == 0, out[-600:])
    double.cut()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 20, what="offline")
    for res in RESOURCES:
        offline_answers(t, double, hub, res, gone[res["what"]], "%s %s" % (storage, res["what"]))
    double.restore()


def relabelled_leaves_the_views_that_lost_it(t, double, hub, etcd):
    web = "/api/v1/pods?labelSelector=" + q("app=web")
    double.put_object(pod("moving", "n2", {"app": "web"}))
    for ua in (KUBELET, COREDNS):
        t.check("etcd relabel: %s lists app=web" % ua.split("/")[0],
                "moving" in listing(hub, web, ua)[1])
    key = "/registry/pods/default/moving"
    wait_for(lambda: key in (etcd.keys(key) or []), 10, what="the pod in etcd")
    double.put_object(pod("moving", "n2", {"app": "moved"}))
    t.check("etcd relabel: kube-proxy's unfiltered list has it relabelled",
            "moving" in listing(hub, "/api/v1/pods", PROXY)[1])
    for ua in (KUBELET, COREDNS):
        t.check("etcd relabel: %s's relist lacks it" % ua.split("/")[0],
                "moving" not in listing(hub, web, ua)[1])

    def holders():
        rc, out = etcd.ctl("get", "--print-value-only", "/yurthub/registry/m" + key)
        # after the rv: the holders, then "@" tokens (a tombstone's time, the
        # summary of the copy), which are not holders
        return [h for h in out.split()[1:] if not h.startswith("@")] if rc == 0 else None
    try:
        wait_for(lambda: holders() == ["n1/kube-proxy"], 10, what="only kube-proxy holding")
    except TimeoutError:
        pass
    t.check("etcd relabel: only kube-proxy holds it now", holders() == ["n1/kube-proxy"],
            str(holders()))
    double.delete_object("v1", "Pod", "default", "moving")
    for ua, path in ((PROXY, "/api/v1/pods"), (KUBELET, web), (COREDNS, web)):
        listing(hub, path, ua)
    gone = False
    try:
        gone = wait_for(lambda: key not in (etcd.keys(key) or []), 10, what="the pod gone")
    except TimeoutError:
        pass
    t.check("etcd relabel: deleted and relisted by all, it is gone from etcd", gone,
            str(holders()))


def main():
    t = Suite("deletions")
    for storage in ("disk", "etcd"):
        t.run(run_store, storage)
    t.finish()


if __name__ == "__main__":
    main()
