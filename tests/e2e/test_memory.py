"""End to end: what offline watches cost in memory, on the release build
(the sanitizer build's allocator keeps freed memory on purpose, so only the
release build says what a node pays).

With 10,000 pods cached, 100 offline watches as kube-proxy-like informers
(the pods of one node each, with initial events) must stay within a bound,
and when they close the hub must come back near its idle size: before,
each watch kept the store's list of every name of the collection for its
whole life (81 MB with 100 watches, 50 MB after they closed).

The bounds are generous figures, not timings: what is waited for is
polled with a deadline (the hub gives freed heap back every 5 s).
"""

import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import ROOT, Double, Hub, Suite, get, wait_for  # noqa: E402

RELEASE = os.environ.get("YURTHUB_RELEASE_BUILD") or os.path.join(ROOT, "build")
HUB = os.path.join(RELEASE, "src", "yurthub")
PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
WATCHES = 100
WITH_WATCHES_MB = 16  # above idle, for the 100 watches (measured: about 9)
AFTER_CLOSE_MB = 4  # above idle, once they closed (measured: about 1.5)


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def open_watches(hub):
    socks = []
    for i in range(WATCHES):
        sk = socket.create_connection(("127.0.0.1", hub.proxy_port))
        q = ("fieldSelector=spec.nodeName%%3Dworker-%03d&watch=true&sendInitialEvents=true"
             "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan" % i)
        sk.sendall(("GET /api/v1/pods?%s HTTP/1.1\r\nHost: x\r\nUser-Agent: %s\r\n\r\n"
                    % (q, PROXY)).encode())
        socks.append(sk)
    ended = 0
    for sk in socks:
        sk.settimeout(60)
        data = b""
        while b"initial-events-end" not in data:
            b = sk.recv(65536)
            if not b:
                break
            data += b
        ended += b"initial-events-end" in data
    return socks, ended


def settled_below(hub, limit):
    """Poll until RSS is at most limit (MB); the last reading either way."""
    try:
        wait_for(lambda: rss_mb(hub.proc.pid) <= limit, 30, step=0.5, what="RSS to settle")
    except TimeoutError:
        pass
    return rss_mb(hub.proc.pid)


def test_offline_watches(t):
    double = Double(t.workdir, ["--seed", "none", "--pods", "10000"])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url], binary=HUB, extra=["-v", "0"])
    t.cleanups.append(hub.stop)
    s, _, body = get("127.0.0.1", hub.proxy_port, "/api/v1/pods", headers={"User-Agent": PROXY})
    t.check("10,000 pods listed and cached", s == 200 and len(json.loads(body)["items"]) == 10000)
    wait_for(lambda: (hub.metric("yurthub_cache_queue_bytes") or 0) == 0, 120, what="the cache")
    double.cut("refuse")
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 20, what="offline")
    time.sleep(6)  # a reading of idle after the housekeeping's next trim (every 5 s)
    idle = rss_mb(hub.proc.pid)
    socks, ended = open_watches(hub)
    t.check("%d offline watches sent their initial events" % WATCHES, ended == WATCHES,
            "%d of %d" % (ended, WATCHES))
    with_watches = settled_below(hub, idle + WITH_WATCHES_MB)
    t.check("with %d watches open: %.1f MB, at most %d MB above idle (%.1f MB)" % (
        WATCHES, with_watches, WITH_WATCHES_MB, idle), with_watches <= idle + WITH_WATCHES_MB)
    for sk in socks:
        sk.close()
    wait_for(lambda: hub.metric("yurthub_watches_open") == 0, 30, what="the watches closed")
    after = settled_below(hub, idle + AFTER_CLOSE_MB)
    t.check("after they closed: %.1f MB, back within %d MB of idle" % (after, AFTER_CLOSE_MB),
            after <= idle + AFTER_CLOSE_MB)


def main():
    t = Suite("memory")
    if not os.access(HUB, os.X_OK):
        print("SKIPPED: no release build at %s (make test builds it)" % HUB)
    else:
        t.run(test_offline_watches)
    t.finish()


if __name__ == "__main__":
    main()
