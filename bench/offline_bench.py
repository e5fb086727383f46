"""Offline benchmark: what the hub costs while the cloud is away.

- a 10,000-pod list served from the disk store, with fieldSelector
  spec.nodeName matching ~100 of them, and unfiltered (median of 9 runs)
- time to ready after a start with 10,000 cached objects and the cloud
  unreachable (median of 5 starts)
- RSS offline with 10,000 cached objects: idle, with 100 open offline
  watches (kube-proxy-like, one node's pods each, with initial events),
  and after they close; and the peak

A benchmark, not a test: it prints figures and never fails on one.

usage: python3 bench/offline_bench.py [BUILD_DIR]
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ["YURTHUB_BUILD"] = BUILD
from harness import Double, Hub, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
NODE = "worker-007"


def timed_get(hub, path):
    t = time.perf_counter()
    s, _, body = get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": KUBELET})
    return time.perf_counter() - t, s, body


def rss_mb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def median(v):
    return sorted(v)[len(v) // 2]


TRIM_WAIT = 6


def open_watches(hub, n=100):
    """n offline watches as kube-proxy-like informers, each of the pods of
    one node (a field selector of its own), with initial events; returns
    once every one has sent its initial-events-end bookmark."""
    socks = []
    for i in range(n):
        sk = socket.create_connection(("127.0.0.1", hub.proxy_port))
        q = ("fieldSelector=spec.nodeName%%3Dworker-%03d&watch=true&sendInitialEvents=true"
             "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan" % i)
        sk.sendall(("GET /api/v1/pods?%s HTTP/1.1\r\nHost: x\r\nUser-Agent: %s\r\n\r\n"
                    % (q, PROXY)).encode())
        socks.append(sk)
    for sk in socks:
        sk.settimeout(60)
        data = b""
        while b"initial-events-end" not in data:
            b = sk.recv(65536)
            if not b:
                break
            data += b
    return socks


def cat_files(cache):
    """Seconds to cat every pod file of kubelet's cache into a pipe: what
    reading the objects costs at the least, side by side with the hub."""
    root = os.path.join(cache, "kubelet", "pods.v1.core")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                   if not f.startswith("."))
    t0 = time.perf_counter()
    subprocess.run(["sh", "-c", 'cat "$@" | cat >/dev/null', "sh"] + files, check=True)
    return time.perf_counter() - t0, len(files)


def main():
    work = tempfile.mkdtemp(prefix="yurthub-offline-bench-")
    double = Double(work, ["--seed", "none", "--pods", "10000"])
    hub = None
    try:
        hub = Hub(work, [double.url], extra=["-v", "0"])
        filtered = "/api/v1/pods?fieldSelector=spec.nodeName%3D" + NODE
        s, _, body = get("127.0.0.1", hub.proxy_port, "/api/v1/pods",
                         headers={"User-Agent": KUBELET})
        total = len(json.loads(body)["items"])
        get("127.0.0.1", hub.proxy_port, filtered, headers={"User-Agent": KUBELET})
        wait_for(lambda: (hub.metric("yurthub_cache_queue_bytes") or 0) == 0, 120,
                 what="the cache")
        time.sleep(1)
        double.cut("refuse")
        ready = []
        for _ in range(5):
            hub.stop()
            t0 = time.perf_counter()
            hub.start()
            ready.append(time.perf_counter() - t0)
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 10, what="offline")
        runs_f, runs_u, runs_cat = [], [], []
        n_f = n_u = 0
        for _ in range(9):
            t, s, body = timed_get(hub, filtered)
            runs_f.append(t)
            n_f = len(json.loads(body)["items"]) if s == 200 else -1
            t, s, body = timed_get(hub, "/api/v1/pods")
            runs_u.append(t)
            t, n_files = cat_files(hub.cache)
            runs_cat.append(t)
            n_u = len(json.loads(body)["items"]) if s == 200 else -1
        idle = rss_mb(hub.proc.pid, "VmRSS")
        socks = open_watches(hub)
        time.sleep(TRIM_WAIT)  # the housekeeping gives freed heap back every 5 s
        watches = hub.metric("yurthub_watches_open")
        with_watches = rss_mb(hub.proc.pid, "VmRSS")
        peak = rss_mb(hub.proc.pid, "VmHWM")
        for sk in socks:
            sk.close()
        wait_for(lambda: hub.metric("yurthub_watches_open") == 0, 30, what="watches closed")
        time.sleep(TRIM_WAIT)
        after = rss_mb(hub.proc.pid, "VmRSS")
        print("offline benchmark: %d pods cached, release build" % total)
        print("offline_list_filtered (%d of %d pods): %.1f ms" % (n_f, total,
                                                                 median(runs_f) * 1000))
        print("offline_first_filtered_list_after_start: %.1f ms (builds the index)"
              % (runs_f[0] * 1000))
        print("offline_list_unfiltered (%d pods): %.1f ms" % (n_u, median(runs_u) * 1000))
        print("cat_same_files_into_a_pipe (%d files): %.1f ms" % (n_files,
                                                                 median(runs_cat) * 1000))
        print("unfiltered_vs_cat: %.2f x" % (median(runs_u) / median(runs_cat)))
        print("ready_after_start_offline: %.3f s (median of 5; from exec to /v1/readyz 200)"
              % median(ready))
        print("rss_idle_offline: %.1f MB (after the lists above)" % idle)
        print("open_offline_watches: %d (kube-proxy, spec.nodeName of one node each, with "
              "initial events)" % watches)
        print("rss_with_watches: %.1f MB (%.0f KB a watch)" % (
            with_watches, (with_watches - idle) * 1024 / max(watches, 1)))
        print("rss_after_watches_closed: %.1f MB" % after)
        print("peak_rss: %.1f MB (since the last start: lists and the watches' initial events)"
              % peak)
    finally:
        if hub:
            hub.stop()
        double.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
