"""Outage benchmark: how long a link that drops packets takes to be called
dead, with the defaults a node uses (probes every 10 s, 2 s timeout, three
attempts), measured against the test double's /outage?mode=hang.

- a request in flight when the link hangs: seconds until it is answered
  from the cache (median of 5);
- no request at all: seconds from the first unanswered probe (read from
  the hub's log: the probe that was joined by the other attempts, minus
  the quarter timeout it waited) to the verdict (median of 5).

A benchmark, not a test: it prints figures and never fails on one.

usage: python3 bench/outage_bench.py [BUILD_DIR]
"""

import datetime
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ["YURTHUB_BUILD"] = BUILD
from harness import Double, Hub, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
MINE = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1"
DEFAULTS = ["--heartbeat-interval-seconds=10", "--heartbeat-timeout-seconds=2",
            "--heartbeat-failed-retry=3", "--heartbeat-healthy-threshold=2", "-v", "2"]
STAMP = re.compile(r"^\w (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z (.*)$")


def median(v):
    return sorted(v)[len(v) // 2]


def log_times(path, pattern, after):
    """Wall-clock times of the log lines matching pattern, after `after`."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = STAMP.match(line.strip())
            if not m or not re.search(pattern, m.group(2)):
                continue
            t = datetime.datetime.strptime(m.group(1)[:26], "%Y-%m-%dT%H:%M:%S.%f")
            ts = t.replace(tzinfo=datetime.timezone.utc).timestamp()
            if ts >= after:
                out.append(ts)
    return out


def main():
    work = tempfile.mkdtemp(prefix="yurthub-outage-bench-")
    double = Double(work, ["--node", "node1"])
    hub = None
    try:
        hub = Hub(work, [double.url], node="node1", extra=DEFAULTS)
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 10, what="healthy")
        get("127.0.0.1", hub.proxy_port, MINE, headers={"User-Agent": KUBELET})
        wait_for(lambda: (hub.metric("yurthub_cache_queue_bytes") or 0) == 0, 20, what="cached")
        in_flight, probe = [], []
        for _ in range(5):
            double.control("POST", "/outage?mode=hang")
            t0 = time.time()
            s, _, _ = get("127.0.0.1", hub.proxy_port, MINE, headers={"User-Agent": KUBELET},
                          timeout=30)
            in_flight.append(time.time() - t0)
            double.restore()
            wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 60, what="healthy")
        for _ in range(5):
            t0 = time.time()
            double.control("POST", "/outage?mode=hang")
            wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 30, what="unhealthy")
            verdict = log_times(hub.logpath, r"is unhealthy", t0)
            joined = log_times(hub.logpath, r"has not answered in \d+ ms", t0)
            if verdict and joined:
                probe.append(verdict[0] - (joined[0] - 0.5))
            double.restore()
            wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 60, what="healthy")
        print("outage benchmark: defaults (probe every 10 s, 2 s timeout, 3 attempts), "
              "link hanging")
        print("request_in_flight_answered_from_cache: %.2f s (median of 5; max %.2f)"
              % (median(in_flight), max(in_flight)))
        if probe:
            print("first_unanswered_probe_to_unhealthy: %.2f s (median of %d; max %.2f)"
                  % (median(probe), len(probe), max(probe)))
    finally:
        if hub:
            hub.stop()
        double.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
