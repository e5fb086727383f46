"""Offline benchmark: what the hub costs while the cloud is away.

- a 10,000-pod list served from the disk store, with fieldSelector
  spec.nodeName matching ~100 of them, and unfiltered (median of 9 runs)
- time to ready after a start with 10,000 cached objects and the cloud
  unreachable (median of 5 starts)
- peak RSS with 10,000 cached objects and 100 open offline watches (the
  lists above included)

A benchmark, not a test: it prints figures and never fails on one.

usage: python3 bench/offline_bench.py [BUILD_DIR]
"""

import json
import os
import shutil
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ["YURTHUB_BUILD"] = BUILD
from harness import Double, Hub, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
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
        runs_f, runs_u = [], []
        n_f = n_u = 0
        for _ in range(9):
            t, s, body = timed_get(hub, filtered)
            runs_f.append(t)
            n_f = len(json.loads(body)["items"]) if s == 200 else -1
            t, s, body = timed_get(hub, "/api/v1/pods")
            runs_u.append(t)
            n_u = len(json.loads(body)["items"]) if s == 200 else -1
        socks = []
        for _ in range(100):
            sk = socket.create_connection(("127.0.0.1", hub.proxy_port))
            sk.sendall(("GET %s&watch=true&resourceVersion=1 HTTP/1.1\r\nHost: x\r\n"
                        "User-Agent: %s\r\n\r\n" % (filtered, KUBELET)).encode())
            socks.append(sk)
        for sk in socks:
            sk.settimeout(10)
            sk.recv(4096)
        time.sleep(1)
        watches = hub.metric("yurthub_watches_open")
        print("offline benchmark: %d pods cached, release build" % total)
        print("offline_list_filtered (%d of %d pods): %.1f ms" % (n_f, total,
                                                                 median(runs_f) * 1000))
        print("offline_list_unfiltered (%d pods): %.1f ms" % (n_u, median(runs_u) * 1000))
        print("ready_after_start_offline: %.3f s (median of 5; from exec to /v1/readyz 200)"
              % median(ready))
        print("open_offline_watches: %d" % watches)
        print("peak_rss: %.1f MB (since the last start: lists and watches included)"
              % rss_mb(hub.proc.pid, "VmHWM"))
        print("rss_now: %.1f MB (anonymous %.1f MB)" % (rss_mb(hub.proc.pid, "VmRSS"),
                                                       rss_mb(hub.proc.pid, "RssAnon")))
        for sk in socks:
            sk.close()
    finally:
        if hub:
            hub.stop()
        double.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
