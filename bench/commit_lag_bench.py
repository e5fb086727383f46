"""Commit lag benchmark: from a list's last byte reaching the client to its
view committed in the hub's disk store (issue 25 item 6), through the real
hub, on a fresh cache folder and on a churned one.

The test double serves 10,000 pods; kubelet lists them through the hub.
Fresh: the first list, into an empty cache folder.  Churned: the double
changes every pod (a new resourceVersion each), kubelet lists again, so
that each relist writes a new tree and retires the old one; four times, the
median of the last three reported.

Measured from outside, the same way for any build: the client's clock from
the list's last byte to the first /metrics scrape (every 10 ms) that shows
yurthub_cache_writes_total{op="list"} one higher.  A build that has it also
reports yurthub_store_commit_lag_seconds (its own clock, from the hub's
last byte to the commit).  With a second build (a baseline, e.g. the
version before the spare pool) the same runs follow for it, in a folder of
its own; the build under test runs first, as the baseline's removals would
slow what comes after them.

A benchmark, not a test: it prints figures and never fails on one.

usage: python3 bench/commit_lag_bench.py BUILD [BASELINE_BUILD] [--dir DIR]
       (DIR: where the cache folders go, default $TMPDIR or /var/tmp)
"""

import json
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
args = [a for a in sys.argv[1:]]
WORKDIR = None
if "--dir" in args:
    i = args.index("--dir")
    WORKDIR = args[i + 1]
    del args[i:i + 2]
BUILDS = [os.path.abspath(a) for a in args] or [os.path.join(HERE, "..", "build")]
os.environ["YURTHUB_BUILD"] = BUILDS[0]
from harness import Double, Hub, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
PODS = 10000
CHURNS = 4
LIST_WRITES = re.compile(r'^yurthub_cache_writes_total\{op="list"\} (\S+)$', re.M)
LAG_SUM = re.compile(r"^yurthub_store_commit_lag_seconds_sum (\S+)$", re.M)


def scrape(hub):
    text = hub.metrics()
    m, lag = LIST_WRITES.search(text), LAG_SUM.search(text)
    return float(m.group(1)) if m else 0.0, float(lag.group(1)) if lag else None


def one_list(hub):
    """(lag seen from outside, the hub's own lag or None, items)."""
    before, lag0 = scrape(hub)
    s, _, body = get("127.0.0.1", hub.proxy_port, "/api/v1/pods", headers={"User-Agent": KUBELET})
    t_end = time.perf_counter()
    deadline = t_end + 120
    seen, lag = float("nan"), None
    while time.perf_counter() < deadline:
        after, lag1 = scrape(hub)
        if after > before:
            seen = time.perf_counter() - t_end
            lag = lag1 - lag0 if lag1 is not None and lag0 is not None else None
            break
        time.sleep(0.01)
    # parsed only now: 25 MB of JSON takes a while, which is not the hub's
    n = len(json.loads(body)["items"]) if s == 200 else -1
    return seen, lag, n


def touch_all(double):
    """Every pod changed: the same objects again, each with a new rv."""
    s, out = double.control("GET", "/objects?apiVersion=v1&kind=Pod")
    items = json.loads(out)["items"]
    for o in items:
        o["metadata"].pop("resourceVersion", None)
        o.setdefault("metadata", {}).setdefault("annotations", {})["bench/touched"] = str(
            time.time())
    double.control("POST", "/objects", items)


def median(v):
    return sorted(v)[len(v) // 2]


def run(build, double, base):
    binary = os.path.join(build, "src", "yurthub")
    cache = tempfile.mkdtemp(prefix="cache-", dir=base)
    hub = Hub(base, [double.url], extra=["-v", "0"], cache=cache, binary=binary,
              name="hub-%d" % os.getpid())
    try:
        fresh = one_list(hub)
        churned = []
        for _ in range(CHURNS):
            touch_all(double)
            churned.append(one_list(hub))
    finally:
        hub.stop()
    return fresh, churned[1:]


def show(label, fresh, churned):
    seen = median([c[0] for c in churned])
    own = [c[1] for c in churned if c[1] is not None]
    print("%s: commit_lag_fresh_folder: %.3f s seen from outside%s" % (
        label if fresh[2] == PODS else label + " (the list had %d items!)" % fresh[2],
        fresh[0], "" if fresh[1] is None else
        ", %.3f s by yurthub_store_commit_lag_seconds" % fresh[1]))
    print("%s: commit_lag_churned_folder: %.3f s seen from outside%s (median of the last %d of "
          "%d relists that changed every pod)" % (
              label, seen, ", %.3f s by yurthub_store_commit_lag_seconds" % median(own)
              if len(own) == len(churned) else "", len(churned), CHURNS))


def main():
    top = WORKDIR or os.environ.get("TMPDIR") or "/var/tmp"
    work = tempfile.mkdtemp(prefix="yurthub-lag-bench-", dir=top)
    double = Double(work, ["--seed", "none", "--pods", str(PODS)])
    try:
        results = []
        for build in BUILDS:
            results.append((build, run(build, double, work)))
        print("commit lag benchmark: %d pods listed by kubelet through the hub, cache on %s"
              % (PODS, top))
        for i, (build, (fresh, churned)) in enumerate(results):
            show("this" if i == 0 else "baseline", fresh, churned)
            print("  (%s: %s)" % ("this" if i == 0 else "baseline", build))
    finally:
        double.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
