"""End to end: the etcd store when etcd is full (issue 25 item 5,
docs/etcd-store.md "When etcd is full").  A real etcd with a tiny
--quota-backend-bytes is filled until it raises its NOSPACE alarm; the hub
then writes on: kubelet's list and hundreds of watch events, each refused.

- the log names it ("etcd is out of space (NOSPACE alarm)") with what the
  operator does (compact, defrag, --quota-backend-bytes, `etcdctl alarm
  disarm`), once a minute, not once per refused write; never "request too
  large";
- /v1/readyz?verbose says it, the hub staying ready; yurthub_store_nospace is
  1 and yurthub_store_nospace_refused_total counts the refused writes;
- after the operator compacts, defrags and disarms, the next write goes in:
  the gauge is 0, readyz says "[+]store-space ok", the log says so once.

Run against the sanitizer build and, when it is there, the release build.
"""

import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from harness import HUB_BIN, RELEASE_HUB, Double, Etcd, Hub, Suite, get, wait_for  # noqa: E402
from watch_stream import open_watch, read_events  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
NODE_PODS = "/api/v1/pods?fieldSelector=" + urllib.parse.quote("spec.nodeName=node1")
QUOTA = 3 * 1024 * 1024
FILLER = "x" * (100 * 1024)
NAMED = "etcd is out of space (NOSPACE alarm"
CHURN = 300


def pod(name, n=0):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"n": str(n)}},
            "spec": {"nodeName": "node1", "containers": [{"name": "c", "image": "busybox"}]}}


def log_lines(hub, text):
    with open(hub.logpath, "rb") as f:
        return [ln for ln in f.read().decode(errors="replace").splitlines() if text in ln]


def warnings(hub):
    with open(hub.logpath, "rb") as f:
        return [ln for ln in f.read().decode(errors="replace").splitlines()
                if ln.startswith("W ")]


def readyz(hub):
    return get("127.0.0.1", hub.serve_port, "/v1/readyz?verbose")


def fill(etcd):
    """Put 100 KiB values until etcd refuses one: its NOSPACE alarm."""
    for i in range(200):
        rc, _ = etcd.ctl("put", "/filler/%d" % i, FILLER)
        if rc != 0:
            return i
    return None


def run(t, double, binary, tag):
    etcd = Etcd(t.workdir, name="etcd-" + tag, extra=["--quota-backend-bytes=%d" % QUOTA])
    t.cleanups.append(etcd.stop)
    hub = Hub(t.workdir, [double.url], name="hub-" + tag, binary=binary,
              extra=["--storage=etcd", "--etcd-servers=" + etcd.url])
    t.cleanups.append(hub.stop)
    s, _, body = get("127.0.0.1", hub.proxy_port, NODE_PODS, headers={"User-Agent": KUBELET})
    t.check("%s: kubelet lists its pods" % tag, s == 200, s)
    wait_for(lambda: etcd.keys("/registry/pods/"), 20, what="the pods in etcd")
    t.check("%s: before, readyz says the store has space and the gauge is 0" % tag,
            b"[+]store-space ok" in readyz(hub)[2] and hub.metric("yurthub_store_nospace") == 0,
            readyz(hub)[2].decode(errors="replace"))

    warned_before = len(warnings(hub))
    t0 = time.monotonic()
    filled = fill(etcd)
    _, alarms = etcd.ctl("alarm", "list")
    t.check("%s: etcd is full (NOSPACE alarm after %s puts)" % (tag, filled),
            filled is not None and "NOSPACE" in alarms, alarms)

    # kubelet's watch: every event is a write etcd refuses
    rv = json.loads(body)["metadata"]["resourceVersion"]
    sock, head, rest = open_watch(hub, NODE_PODS + "&watch=true&resourceVersion=" + rv, KUBELET)
    try:
        for i in range(CHURN):
            double.put_object(pod("churn-%s" % tag, i))
        read_events(sock, rest, lambda ev: any(
            e["object"]["metadata"]["labels"].get("n") == str(CHURN - 1) for e in ev), 60)
    finally:
        sock.close()
    # and a relist
    get("127.0.0.1", hub.proxy_port, NODE_PODS, headers={"User-Agent": KUBELET})
    wait_for(lambda: (hub.metric("yurthub_store_nospace_refused_total") or 0) >= CHURN, 60,
             what="the refused writes counted")
    refused = hub.metric("yurthub_store_nospace_refused_total")
    t.check("%s: yurthub_store_nospace is 1, the refused writes counted (%s)" % (tag, refused),
            hub.metric("yurthub_store_nospace") == 1 and refused >= CHURN, refused)
    named = log_lines(hub, NAMED)
    # once a minute: once, unless this machine took more than a minute
    minutes = int((time.monotonic() - t0) / 60)
    t.check("%s: the log names it once a minute (not once per write: %d refused)"
            % (tag, refused), 1 <= len(named) <= 1 + minutes, "\n".join(named))
    t.check("%s: ... with what to do" % tag,
            named and all(w in named[0] for w in ("etcdctl compact", "etcdctl defrag",
                                                  "--quota-backend-bytes",
                                                  "etcdctl alarm disarm")), named)
    t.check("%s: never as \"request too large\"" % tag,
            not log_lines(hub, "request too large"), log_lines(hub, "request too large")[:3])
    warned = warnings(hub)[warned_before:]
    # the cache's own warning: at most one per kind of write (3) every 10 s;
    # and a few others may come (the cloud's health, autonomy)
    bound = 5 + minutes + 3 * (int((time.monotonic() - t0) / 10) + 1)
    t.check("%s: the whole log stays short (%d warnings for %d refused writes, at most %d)"
            % (tag, len(warned), refused, bound), len(warned) <= bound, "\n".join(warned[:30]))
    s, _, ready = readyz(hub)
    t.check("%s: readyz?verbose says it, the hub staying ready" % tag,
            s == 200 and b"[-]store-space etcd is out of space (NOSPACE alarm)" in ready and
            b"etcdctl alarm disarm" in ready, ready.decode(errors="replace"))

    # the operator's remedy: drop the filler, compact, defrag, disarm
    etcd.ctl("del", "--prefix", "/filler/")
    _, st = etcd.ctl("endpoint", "status", "-w", "json")
    rev = json.loads(st)[0]["Status"]["header"]["revision"]
    etcd.ctl("compact", str(rev))
    etcd.ctl("defrag")
    rc, out = etcd.ctl("alarm", "disarm")
    t.check("%s: the operator disarms the alarm" % tag, rc == 0, out)
    double.put_object(pod("after-" + tag))
    get("127.0.0.1", hub.proxy_port, NODE_PODS, headers={"User-Agent": KUBELET})
    wait_for(lambda: hub.metric("yurthub_store_nospace") == 0, 30, what="the store writing")
    s, _, ready = readyz(hub)
    t.check("%s: then the gauge is 0 and readyz says the store has space" % tag,
            s == 200 and b"[+]store-space ok" in ready, ready.decode(errors="replace"))
    t.check("%s: and the log says so once" % tag,
            len(log_lines(hub, "etcd takes writes again")) == 1, hub.tail())
    t.check("%s: the new pod is cached" % tag,
            wait_for(lambda: "/registry/pods/default/after-" + tag in (
                etcd.keys("/registry/pods/") or []), 30, what="the new pod in etcd"))
    hub.stop()
    etcd.stop()


def main():
    t = Suite("etcd-nospace")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(double.stop)
    t.run(run, double, HUB_BIN, "san")
    if os.path.exists(RELEASE_HUB):
        t.run(run, double, RELEASE_HUB, "release")
    else:
        print("note: %s is absent: the release build's half is skipped" % RELEASE_HUB,
              flush=True)
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
