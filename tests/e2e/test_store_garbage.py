"""Garbage written at the hub's keys, on the disk store and on the etcd
store, with the sanitizer and the release build: offline, a list leaves the
damaged objects out and stays valid JSON, a get of one answers 500 (not 404:
kubelet would take the pod for gone), the metric counts the reads, the log
names each key once, `yurthub cache verify` names them, and the next list
from the cloud rewrites them although nothing changed there (same
resourceVersions).  And the same for damage no client ever read: written
while the hub was stopped, it is found by the scrub at the hub's start
(yurthub_store_scrubs_total), and the cloud's relist at the same
resourceVersions rewrites it without any read of it.  docs/contracts.md
section 2, "Damaged objects are never served".
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Etcd, Hub, Suite, each_build, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
PODS = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1"


def kubelet_get(hub, path):
    s, _, body = get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": KUBELET})
    return s, body


class DiskPlace:
    """Where the disk store keeps kubelet's pods: one file each."""

    def __init__(self, hub, binary):
        self.hub, self.binary = hub, binary

    def path(self, ns, name):
        return os.path.join(self.hub.cache, "kubelet", "pods.v1.core", ns, name)

    def read(self, ns, name):
        try:
            with open(self.path(ns, name), "rb") as f:
                return f.read()
        except OSError:
            return None

    def write(self, ns, name, data):
        with open(self.path(ns, name), "r+b") as f:  # in place, as a bad block would
            f.truncate(0)
            f.write(data)

    def verify(self):
        p = subprocess.run([self.binary, "cache", "verify", self.hub.cache],
                           capture_output=True, timeout=60)
        return p.returncode, p.stdout.decode() + p.stderr.decode()


class EtcdPlace:
    """Where the etcd store keeps them: kube-apiserver's keys."""

    def __init__(self, hub, binary, etcd, prefix):
        self.hub, self.binary, self.etcd, self.prefix = hub, binary, etcd, prefix

    def key(self, ns, name):
        return "%s/pods/%s/%s" % (self.prefix, ns, name)

    def read(self, ns, name):
        rc, out = self.etcd.ctl("get", "--print-value-only", self.key(ns, name))
        return out.rstrip("\n").encode() if rc == 0 and out else None

    def write(self, ns, name, data):
        rc, _ = self.etcd.ctl("put", self.key(ns, name), data.decode())
        assert rc == 0

    def verify(self):
        p = subprocess.run([self.binary, "cache", "--etcd-servers=" + self.etcd.url,
                            "--etcd-prefix=" + self.prefix, "--node-name=node1", "verify"],
                           capture_output=True, timeout=60)
        return p.returncode, p.stdout.decode() + p.stderr.decode()


def names_of(body):
    return sorted(i["metadata"]["namespace"] + "/" + i["metadata"]["name"]
                  for i in json.loads(body)["items"])


def is_object(data, name):
    try:
        return json.loads(data)["metadata"]["name"] == name
    except (ValueError, TypeError, KeyError):
        return False


def scenario(t, label, double, hub, place):
    try:
        damage_and_repair(t, label, double, hub, place)
    finally:
        double.restore()  # whatever failed, the next hub starts online


def damage_and_repair(t, label, double, hub, place):
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
    s, body = kubelet_get(hub, PODS)
    t.check(label + ": online list", s == 200, body[:200])
    pods = names_of(body)
    t.check(label + ": node1 has at least 3 pods", len(pods) >= 3, pods)
    (pns, p), (qns, q) = pods[0].split("/"), pods[1].split("/")
    wait_for(lambda: all(place.read(*x.split("/")) for x in pods), 20, what="the pods cached")
    original_p = place.read(pns, p)
    # garbage at p; at q, p's own JSON: an object under another's name
    place.write(pns, p, b"not json {")
    place.write(qns, q, original_p)

    double.cut("refuse")
    kubelet_get(hub, "/api/v1/namespaces/default/pods")
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 10, what="offline")
    for attempt in (1, 2):
        s, body = kubelet_get(hub, PODS)
        try:
            got = names_of(body)
        except ValueError:
            got = "not JSON: %r" % body[:120]
        t.check(label + ": offline list %d is valid JSON without the damaged pods" % attempt,
                s == 200 and got == [x for x in pods if x not in (pods[0], pods[1])],
                "%s %s" % (s, got))
    for ns, name in ((pns, p), (qns, q)):
        s, body = kubelet_get(hub, "/api/v1/namespaces/%s/pods/%s" % (ns, name))
        t.check(label + ": offline get of a damaged pod: 500 saying so, not 404 (%s)" % name,
                s == 500 and b"damaged" in body, "%s %s" % (s, body[:200]))
    n = hub.metric("yurthub_store_damaged_reads_total")
    t.check(label + ": yurthub_store_damaged_reads_total counts the reads (%s)" % n,
            n is not None and n >= 4)
    with open(hub.logpath, "rb") as f:
        log = f.read()
    for name in (p, q):
        lines = [ln for ln in log.splitlines() if b"is damaged" in ln and
                 ln.rstrip().split(b" is damaged")[0].endswith(b"/" + name.encode())]
        t.check(label + ": logged once for %s (%d lines)" % (name, len(lines)), len(lines) == 1,
                log[-600:])
    rc, out = place.verify()
    t.check(label + ": yurthub cache verify names both keys",
            rc == 1 and p in out and q in out, out[-600:])

    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")
    s, body = kubelet_get(hub, PODS)  # the cloud's list: unchanged, same resourceVersions
    t.check(label + ": online relist", s == 200 and names_of(body) == pods, body[:200])
    t.check(label + ": the relist rewrote both at the same resourceVersion",
            wait_for(lambda: is_object(place.read(pns, p), p) and
                     is_object(place.read(qns, q), q), 20, what="the pods rewritten"))
    rc, out = place.verify()
    t.check(label + ": verify no longer names them", p not in out and q not in out, out[-600:])


def impostor_of(data, name):
    """The object's own JSON under another name, at its resourceVersion:
    nothing in it tells a relist (nor the disk store's index, rebuilt from
    the files at start) that it changed."""
    obj = json.loads(data)
    obj["metadata"]["name"] = name + "-impostor"
    return json.dumps(obj).encode()


def scrub_unread(t, label, double, hub, place):
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
    s, body = kubelet_get(hub, PODS)
    t.check(label + ": online list", s == 200, body[:200])
    pods = names_of(body)
    (pns, p), (qns, q) = pods[0].split("/"), pods[1].split("/")
    wait_for(lambda: all(is_object(place.read(*x.split("/")), x.split("/")[1]) for x in pods),
             20, what="the pods cached")
    hub.stop()
    place.write(pns, p, impostor_of(place.read(pns, p), p))
    place.write(qns, q, b"not json {")
    hub.start()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
    try:
        scrubbed = wait_for(lambda: (hub.metric("yurthub_store_scrubs_total") or 0) >= 1, 20,
                            what="a scrub")
    except TimeoutError:
        scrubbed = False
    t.check(label + ": the hub scrubbed its store at start", scrubbed,
            hub.metric("yurthub_store_scrubs_total"))
    n = hub.metric("yurthub_store_damaged_reads_total")
    t.check(label + ": the scrub counted both damaged pods (%s)" % n, n is not None and n >= 2)
    s, body = kubelet_get(hub, PODS)  # the cloud's list: unchanged, same resourceVersions
    t.check(label + ": online relist", s == 200 and names_of(body) == pods, body[:200])
    try:
        rewritten = wait_for(lambda: is_object(place.read(pns, p), p) and
                             is_object(place.read(qns, q), q), 20, what="the pods rewritten")
    except TimeoutError:
        rewritten = False
    t.check(label + ": the relist rewrote both, never read, at the same resourceVersion",
            rewritten, [(place.read(*x) or b"")[:80] for x in ((pns, p), (qns, q))])


def main():
    t = Suite("store-garbage")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--node", "node2",
                                "--bookmark-interval", "1"])
    t.cleanups.append(double.stop)
    etcd = Etcd(t.workdir)
    t.cleanups.append(etcd.stop)

    def run(label, binary):
        hub = Hub(t.workdir, [double.url], name="disk-" + label, binary=binary)
        try:
            t.run(scenario, "disk, " + label, double, hub, DiskPlace(hub, binary))
            t.run(scrub_unread, "disk, unread, " + label, double, hub, DiskPlace(hub, binary))
        finally:
            hub.stop()
        prefix = "/garbage-%s/registry" % label
        hub = Hub(t.workdir, [double.url], name="etcd-" + label, binary=binary,
                  extra=["--storage=etcd", "--etcd-servers=" + etcd.url,
                         "--etcd-prefix=" + prefix])
        try:
            place = EtcdPlace(hub, binary, etcd, prefix)
            t.run(scenario, "etcd, " + label, double, hub, place)
            t.run(scrub_unread, "etcd, unread, " + label, double, hub, place)
        finally:
            hub.stop()
    each_build(run)
    t.finish()


if __name__ == "__main__":
    main()
