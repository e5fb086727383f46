"""End to end: a store that cannot take a write, or cannot be read.

Issue 25, items 1 and 2, on both stores:

- etcd: a real etcd paused with SIGSTOP for just past the store's call
  timeout (5 s) while the cloud deletes two of the node's pods;
- the disk store, a failing device: the fault injector (tests/fault/inject.c)
  failing every change under the kubelet's cache with EIO, then every read;
- the disk store, a full disk: the cache on a 4 MiB tmpfs, filled up while
  the cloud changes a pod and adds one (a deletion frees room and is
  applied; a change that needs room is what a full disk loses).

What must hold (docs/contracts.md, "What a failed write does to a view"):

1. the DELETED events the store could not take do not vanish: the view is
   marked behind (yurthub_store_views_behind, a Warning header on offline
   answers of that resource), the mark survives a restart of the hub, and
   once the store and the cloud are back the hub lists the view again
   itself, so that offline the deleted pods are gone and the warning too;
2. offline, a store that cannot be read answers 503 ServiceUnavailable with
   Retry-After - never 404 "never cached", which clients take for "gone".

Each half runs with the sanitizer build, then the release build when there is
one.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Etcd, Hub, Suite, each_build, get, kubectl, within  # noqa: E402
from test_disk_faults import INJECT, asan_runtime, fill, mount_tmpfs  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
NODE = "node1"
PODS = "/api/v1/pods?fieldSelector=spec.nodeName%3D" + NODE
DOOMED = ("doomed-0", "doomed-1")
KEPT = ("kept-0",)


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "lost"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]}}


def hub_get(hub, path, timeout=40):
    return get("127.0.0.1", hub.proxy_port, path,
               headers={"User-Agent": KUBELET, "Accept": "application/json"}, timeout=timeout)


def names(body):
    return {i["metadata"]["name"] for i in json.loads(body)["items"]}


def ours(body):
    return names(body) & set(DOOMED + KEPT)


def sample(hub, name, op):
    prefix = '%s{op="%s"} ' % (name, op)
    for line in hub.metrics().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return 0.0


def behind(hub):
    return hub.metric("yurthub_store_views_behind") or 0


class Watch:
    """A kubelet's watch through the hub, read in a thread."""

    def __init__(self, hub, rv):
        self.events = []
        self.conn = http.client.HTTPConnection("127.0.0.1", hub.proxy_port, timeout=120)
        self.conn.request("GET", PODS + "&watch=true&resourceVersion=" + rv,
                          headers={"User-Agent": KUBELET, "Accept": "application/json"})
        self.resp = self.conn.getresponse()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        try:
            for line in self.resp:
                if line.strip().startswith(b"{"):
                    ev = json.loads(line)
                    self.events.append((ev["type"], ev["object"]["metadata"].get("name")))
        except (OSError, ValueError, http.client.HTTPException):
            pass

    def deleted(self):
        return {n for t, n in self.events if t == "DELETED"}

    def close(self):
        try:
            if self.conn.sock:
                self.conn.sock.shutdown(2)
        except OSError:
            pass
        self.conn.close()


def go_offline(double, hub):
    double.cut("refuse")
    hub_get(hub, "/api/v1/namespaces/default/configmaps", timeout=40)  # the hub probes at once
    return within(lambda: hub.metric("yurthub_upstream_healthy") == 0, 20, "offline")


def go_online(double, hub):
    double.restore()
    return within(lambda: hub.metric("yurthub_upstream_healthy") == 1, 30, "online")


def listed_and_watched(t, double, hub, label):
    """The kubelet lists its pods through the hub and watches from there;
    returns the watch once the list is in the store."""
    for name in DOOMED + KEPT:
        double.put_object(pod(name))
    before = sample(hub, "yurthub_cache_writes_total", "list")
    s, _, body = hub_get(hub, PODS)
    t.check("%s: online, the kubelet's list has its pods" % label,
            s == 200 and ours(body) == set(DOOMED + KEPT), body[:200])
    t.check("%s: the list is stored" % label,
            within(lambda: sample(hub, "yurthub_cache_writes_total", "list") > before, 20,
                   "the list stored"))
    # kubectl online once: its discovery documents are cached for offline
    rc, _, err = kubectl(hub.url, "get", "pods", "-n", "default", "-o", "name")
    t.check("%s: kubectl online" % label, rc == 0, err[-300:])
    return Watch(hub, json.loads(body)["metadata"]["resourceVersion"])


def deletions_lost(t, double, hub, watch, label, fail_store):
    """The cloud deletes DOOMED while the store cannot write; the client
    sees the events, the store cannot take at least one."""
    failed = sample(hub, "yurthub_cache_failures_total", "watch_event")
    fail_store()
    for name in DOOMED:
        double.delete_object("v1", "Pod", "default", name)
    t.check("%s: the kubelet's watch delivers both DELETED events" % label,
            within(lambda: watch.deleted() >= set(DOOMED), 20, "the DELETED events"),
            str(watch.events))
    t.check("%s: the store could not take a DELETED event (counted)" % label,
            within(lambda: sample(hub, "yurthub_cache_failures_total", "watch_event") > failed,
                   30, "a failed event"))
    t.check("%s: the view is marked behind (yurthub_store_views_behind)" % label,
            within(lambda: behind(hub) >= 1, 10, "the mark"), str(behind(hub)))


def store_unreadable_503(t, hub, label):
    s, h, body = hub_get(hub, PODS)
    t.check("%s: offline, a list the store cannot read is 503, not 404" % label,
            s == 503, "%s %s" % (s, body[:300]))
    doc = json.loads(body) if body.startswith(b"{") else {}
    t.check("%s: ... a Status ServiceUnavailable saying the store is unavailable, with "
            "Retry-After" % label,
            doc.get("kind") == "Status" and doc.get("reason") == "ServiceUnavailable" and
            "store" in doc.get("message", "") and h.get("retry-after", "").isdigit(),
            "%s %s" % (h, body[:300]))
    s, h, body = hub_get(hub, "/api/v1/namespaces/default/pods/" + KEPT[0])
    t.check("%s: offline, a get the store cannot read is 503 with Retry-After" % label,
            s == 503 and h.get("retry-after", "").isdigit(), "%s %s" % (s, body[:300]))


def stale_warned(t, hub, label):
    s, h, body = hub_get(hub, PODS)
    warning = h.get("warning", "")
    t.check("%s: offline, the list of a view behind carries a Warning (299) that it may be "
            "stale" % label,
            s == 200 and warning.startswith('299 - "') and "stale" in warning,
            "%s %s %s" % (s, h, body[:200]))
    s, h, _ = hub_get(hub, "/api/v1/namespaces/default/pods/" + KEPT[0])
    t.check("%s: ... and so does a get of that resource" % label,
            s == 200 and "stale" in h.get("warning", ""), "%s %s" % (s, h))
    rc, out, err = kubectl(hub.url, "get", "pods", "-A", "--field-selector",
                           "spec.nodeName=" + NODE, "-o", "name", timeout=60)
    t.check("%s: ... which kubectl prints (\"Warning: ...\")" % label,
            rc == 0 and "Warning:" in err and "may be stale" in err, "%s %s %s" % (rc, out, err))


def verify_names(t, binary, hub, label, behind_expected):
    """`yurthub cache verify` of the hub's directory names the view behind
    (with the etcd store too: the marks are on the node's disk)."""
    p = subprocess.run([binary, "cache", "verify", hub.cache], capture_output=True, timeout=60)
    out = p.stdout.decode(errors="replace")
    says = "behind the cloud" in out and "kubelet" in out and "spec.nodeName=" + NODE in out
    if behind_expected:
        t.check("%s: yurthub cache verify names the view behind, exit 1" % label,
                says and p.returncode == 1, out[-600:])
    else:
        t.check("%s: yurthub cache verify no longer names it" % label,
                "behind the cloud" not in out, out[-600:])


def repaired(t, double, hub, label):
    """Store and cloud back: the hub lists the view again itself; offline,
    the deleted pods are gone, the kept one is there, no warning."""
    t.check("%s: back online" % label, go_online(double, hub))
    t.check("%s: the hub lists the view again itself and the mark goes" % label,
            within(lambda: behind(hub) == 0, 40, "the mark to go"), hub.tail(15))
    t.check("%s: offline" % label, go_offline(double, hub))
    s, h, body = hub_get(hub, PODS)
    t.check("%s: offline, the deleted pods do not come back, the others are there" % label,
            s == 200 and ours(body) == set(KEPT), "%s %s" % (s, body[:300]))
    t.check("%s: ... and the answer has no Warning" % label, "warning" not in h, str(h))
    go_online(double, hub)


def run_etcd(t, label, binary):
    label = "etcd, " + label
    double = Double(t.workdir, ["--seed", "sample", "--node", NODE])
    t.cleanups.append(double.stop)
    etcd = Etcd(t.workdir, name="etcd-" + label.split()[-1])

    def resume():
        if etcd.proc.poll() is None:
            etcd.proc.send_signal(signal.SIGCONT)
    t.cleanups.append(etcd.stop)
    t.cleanups.append(resume)
    hub = Hub(t.workdir, [double.url], binary=binary, name="hub-" + label.split()[-1],
              extra=["--storage=etcd", "--etcd-servers=" + etcd.url])
    t.cleanups.append(hub.stop)
    watch = listed_and_watched(t, double, hub, label)
    t.cleanups.append(watch.close)
    # paused just past the store's 5 s call timeout: until an event failed
    deletions_lost(t, double, hub, watch, label,
                   lambda: etcd.proc.send_signal(signal.SIGSTOP))
    t.check("%s: offline with etcd still paused" % label, go_offline(double, hub))
    store_unreadable_503(t, hub, label)
    resume()
    t.check("%s: etcd answers again" % label, within(etcd.healthy, 20, "etcd"))
    stale_warned(t, hub, label)
    restarted_and_repaired(t, binary, double, hub, watch, label)


def restarted_and_repaired(t, binary, double, hub, watch, label):
    """The end of every scenario: a restart offline keeps the mark, verify names
    the view until the hub's own relist repairs it, and the hub stops cleanly."""
    watch.close()
    hub.stop()
    hub.start()
    t.check("%s: restarted (offline), the mark is still there" % label,
            within(lambda: behind(hub) >= 1, 10, "the mark"), str(behind(hub)))
    stale_warned(t, hub, label + ", restarted")
    verify_names(t, binary, hub, label, True)
    repaired(t, double, hub, label)
    verify_names(t, binary, hub, label, False)
    t.check("%s: the hub stops cleanly" % label, hub.stop() == 0, hub.tail())


def set_faults(ctl, rules, path):
    with open(ctl + ".tmp", "w") as f:
        f.write(rules + "\n" + path + "\n")
    os.rename(ctl + ".tmp", ctl)


def run_disk(t, label, binary):
    label = "disk, " + label
    if not os.path.exists(INJECT):
        print("SKIPPED: %s not built" % INJECT)
        return
    double = Double(t.workdir, ["--seed", "sample", "--node", NODE])
    t.cleanups.append(double.stop)
    tag = label.split()[-1]
    cache = os.path.join(t.workdir, "disk-cache-" + tag)
    ctl = os.path.join(t.workdir, "fault-ctl-" + tag)
    asan = asan_runtime(binary)
    env = dict(YH_FAULT_CTL=ctl, LD_PRELOAD=" ".join(p for p in (asan, INJECT) if p))
    hub = Hub(t.workdir, [double.url], binary=binary, cache=cache, env=env,
              name="disk-hub-" + tag)
    t.cleanups.append(hub.stop)
    watch = listed_and_watched(t, double, hub, label)
    t.cleanups.append(watch.close)
    # a failing device under the kubelet's cache: every change there fails
    # with EIO; the marks' file (allocated beforehand elsewhere in the cache
    # directory) is spared, as a full disk would spare it
    deletions_lost(t, double, hub, watch, label, lambda: set_faults(
        ctl, "write:*:EIO:/kubelet/,sync:*:EIO:/kubelet/,rename:*:EIO:/kubelet/,"
        "open:*:EIO:/kubelet/,mkdir:*:EIO:/kubelet/,link:*:EIO:/kubelet/,"
        "unlink:*:EIO:/kubelet/", cache))
    t.check("%s: offline" % label, go_offline(double, hub))
    set_faults(ctl, "read:*:EIO:/kubelet/", cache)
    store_unreadable_503(t, hub, label)
    os.unlink(ctl)
    stale_warned(t, hub, label)
    restarted_and_repaired(t, binary, double, hub, watch, label)


def big_pod(name):
    p = pod(name)
    p["metadata"]["annotations"] = {"big": "x" * 200000}
    return p


def run_full_disk(t, label, binary):
    """A real full disk: the cache directory on a 4 MiB tmpfs, filled up
    once the view is cached (needs root to mount; skipped, and said so,
    otherwise).  A deletion frees space and is applied; what is lost is a
    change that needs room: the cloud changes a pod and adds one.  The
    marks' file was allocated at start, and is rewritten in place with no
    room left."""
    label = "full disk, " + label
    tag = label.split()[-1]
    cache = os.path.join(t.workdir, "full-cache-" + tag)
    if not mount_tmpfs(cache, "4m"):
        return
    t.cleanups.append(lambda: subprocess.run(["umount", "-l", cache]))
    double = Double(t.workdir, ["--seed", "sample", "--node", NODE])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url], binary=binary, cache=cache, name="full-hub-" + tag)
    t.cleanups.append(hub.stop)
    watch = listed_and_watched(t, double, hub, label)
    t.cleanups.append(watch.close)
    failed = sample(hub, "yurthub_cache_failures_total", "watch_event")
    filler = fill(cache)
    double.put_object(big_pod(KEPT[0]))
    double.put_object(big_pod("added-0"))
    t.check("%s: the kubelet's watch delivers the change and the new pod" % label,
            within(lambda: {("MODIFIED", KEPT[0]), ("ADDED", "added-0")} <= set(watch.events),
                   20, "the events"), str(watch.events))
    t.check("%s: the store could not take them (counted)" % label,
            within(lambda: sample(hub, "yurthub_cache_failures_total", "watch_event") > failed,
                   30, "a failed event"))
    t.check("%s: the view is marked behind" % label,
            within(lambda: behind(hub) >= 1, 10, "the mark"), str(behind(hub)))
    t.check("%s: offline" % label, go_offline(double, hub))
    stale_warned(t, hub, label)
    watch.close()
    hub.stop()
    hub.start()
    t.check("%s: restarted (offline, disk still full), the mark is still there" % label,
            within(lambda: behind(hub) >= 1, 10, "the mark"), str(behind(hub)))
    stale_warned(t, hub, label + ", restarted")
    os.unlink(filler)
    t.check("%s: back online" % label, go_online(double, hub))
    t.check("%s: the hub lists the view again itself and the mark goes" % label,
            within(lambda: behind(hub) == 0, 40, "the mark to go"), hub.tail(15))
    t.check("%s: offline" % label, go_offline(double, hub))
    s, h, body = hub_get(hub, PODS)
    items = {i["metadata"]["name"]: i for i in json.loads(body)["items"]} if s == 200 else {}
    t.check("%s: offline, the changed pod is the cloud's new copy and the new pod is there, "
            "with no Warning" % label,
            "big" in items.get(KEPT[0], {}).get("metadata", {}).get("annotations", {}) and
            "added-0" in items and "warning" not in h, "%s %s" % (s, body[:200]))
    go_online(double, hub)
    t.check("%s: the hub stops cleanly" % label, hub.stop() == 0, hub.tail())


def main():
    t = Suite("store-lost-writes")
    each_build(lambda label, binary: t.run(run_etcd, label, binary))
    each_build(lambda label, binary: t.run(run_disk, label, binary))
    each_build(lambda label, binary: t.run(run_full_disk, label, binary))
    t.finish()


if __name__ == "__main__":
    main()
