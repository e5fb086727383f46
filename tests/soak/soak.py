"""The soak (`make soak`, not part of `make test`): many clients mixing
gets, lists and watches through one hub for a long while, the link to the
cloud flapping all along and the cloud changing.  Once the load stops, the idle
hub's RSS, open descriptors and threads must be back within 10% of their
idle level after the warm-up (the same load for --warmup seconds), with no
unexpected error: no request past its timeout, no silent watch, no failed
list or get.

    python3 tests/soak/soak.py [--build build-san] [--seconds 600] [--clients 64]
    python3 tests/soak/soak.py --build build --valgrind --seconds 120 --clients 16

With --valgrind the hub runs under memcheck, and its report must have no
error and no definitely lost block.  RSS is compared for plain builds only
(ASan's quarantine and valgrind keep freed memory on purpose).
Prints a table for docs/soak.md and "RESULT: N passed, M failed".
"""

import argparse
import json
import os
import random
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from harness import ROOT, Double, Hub, Suite, wait_for  # noqa: E402
from loadgen import COREDNS, KUBELET, PROXY, Stats, churn, informer, poller  # noqa: E402

MIX = [
    ("kubelet pods", KUBELET, "/api/v1/pods", "fieldSelector=spec.nodeName%3Dnode1"),
    ("kube-proxy services", PROXY, "/api/v1/services",
     "labelSelector=%21service.kubernetes.io%2Fheadless"),
    ("coredns endpointslices", COREDNS, "/apis/discovery.k8s.io/v1/endpointslices", ""),
    None,  # a poller
]


def sample(hub):
    pid = hub.proc.pid
    fds = len(os.listdir("/proc/%d/fd" % pid))
    rss = threads = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return {"rss_kb": rss, "fds": fds, "threads": threads}


def flap(double, stop, counter):
    rnd = random.Random(5)
    while not stop.is_set():
        if stop.wait(rnd.uniform(3, 8)):
            break
        double.cut(rnd.choice(["refuse", "blackhole"]))
        counter[0] += 1
        stop.wait(rnd.uniform(2, 6))
        double.restore()


def is_unexpected(key):
    """Counts that mean something went wrong (see loadgen.py for the keys)."""
    if key in ("list error", "get error", "watch broken"):
        return True
    m = re.match(r"^(list|get|watch) (\d+)$", key)
    return bool(m) and m.group(2) != "200"


def quiet_sample(hub):
    """The hub's level once it is idle: no request in flight, the cache
    queue drained."""
    wait_for(lambda: hub.metric("yurthub_requests_in_flight") == 0 and
             hub.metric("yurthub_cache_queue_bytes") == 0, 60, step=0.5, what="the hub idle")
    time.sleep(2)
    return sample(hub)


def load(hub, double, clients, seconds, stats, label):
    """Clients, churn and flapping for `seconds`; then all stopped, the link up."""
    stop, stop_side, relisted, cuts = threading.Event(), threading.Event(), {}, [0]
    threads = []
    for i in range(clients):
        m = MIX[i % len(MIX)]
        if m:
            th = threading.Thread(target=informer, args=(hub, stats, stop, m[0] + " %d" % i,
                                                         m[1], m[2], m[3], relisted))
        else:
            th = threading.Thread(target=poller, args=(hub, stats, stop))
        threads.append(th)
    side = [threading.Thread(target=churn, args=(double, stop_side)),
            threading.Thread(target=flap, args=(double, stop_side, cuts))]
    for th in threads + side:
        th.daemon = True
        th.start()
    t0 = time.time()
    while time.time() - t0 < seconds:
        time.sleep(min(30, max(1, seconds - (time.time() - t0))))
        s = sample(hub)
        print("%s t=%4ds rss %6d kB  fds %4d  threads %4d" % (
            label, time.time() - t0, s["rss_kb"], s["fds"], s["threads"]), flush=True)
    stop_side.set()
    for th in side:
        th.join()
    double.restore()
    stop.set()
    for th in threads:
        th.join(100)
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 30, what="online")
    return cuts[0]


def run(t, args):
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--node", "node2",
                                "--bookmark-interval", "1"])
    t.cleanups.append(double.stop)
    binary = os.path.join(os.path.abspath(args.build), "src", "yurthub")
    wrapper = ()
    vglog = os.path.join(t.workdir, "valgrind.log")
    if args.valgrind:
        wrapper = ("valgrind", "--tool=memcheck", "--leak-check=full",
                   "--errors-for-leak-kinds=definite", "--error-exitcode=99",
                   "--log-file=" + vglog)
    hub = Hub(t.workdir, [double.url], binary=binary, wrapper=wrapper,
              ready_timeout=120 if args.valgrind else 30)
    t.cleanups.append(hub.stop)
    start = sample(hub)
    stats = Stats()
    load(hub, double, args.clients, args.warmup, stats, "warm-up")
    warm = quiet_sample(hub)
    cuts = load(hub, double, args.clients, args.seconds, stats, "soak")
    end = quiet_sample(hub)
    unexpected = {k: v for k, v in stats.counts.items() if is_unexpected(k)}
    print("counts: %s" % json.dumps(stats.counts, sort_keys=True))
    print("\n| idle hub | at start | after the %d s warm-up | after the %d s soak |" % (
        args.warmup, args.seconds))
    print("|---|---|---|---|")
    for k in ("rss_kb", "fds", "threads"):
        print("| %s | %d | %d | %d |" % (k, start[k], warm[k], end[k]))
    print("\n%d clients, %d cuts of the link in the soak, %d lists, %d gets, %d watch events "
          "(warm-up and soak)\n" % (args.clients, cuts, stats.counts.get("list ok", 0),
                                     stats.counts.get("get 200", 0),
                                     sum(v for k, v in stats.counts.items()
                                         if k.startswith("event "))))
    t.check("no request past its timeout, no silent watch", not stats.problems,
            "; ".join(stats.problems[:10]))
    t.check("no unexpected error", not unexpected, str(unexpected))
    # RSS is compared only for a plain build: ASan's quarantine and valgrind
    # keep freed memory on purpose
    keys = ("rss_kb", "fds", "threads") if args.measure_rss else ("fds", "threads")
    for k in keys:
        t.check("%s after the soak within 10%% of after the warm-up (%d vs %d)" % (
            k, end[k], warm[k]), end[k] <= warm[k] * 1.1 + (2 if k != "rss_kb" else 0))
    rc = hub.stop()
    if args.valgrind:
        with open(vglog) as f:
            report = f.read()
        summary = re.search(r"ERROR SUMMARY: (\d+) errors", report)
        lost = re.search(r"definitely lost: ([\d,]+) bytes", report)
        print("valgrind: %s; %s" % (summary.group(0) if summary else "no summary",
                                     lost.group(0) if lost else "definitely lost: 0 bytes"))
        t.check("valgrind: no error", summary and summary.group(1) == "0" and rc == 0,
                report[-3000:])
        t.check("valgrind: nothing definitely lost",
                not lost or lost.group(1).replace(",", "") == "0")
    else:
        t.check("the hub exited cleanly (exit %s)" % rc, rc == 0, hub.tail())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build-san"))
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--valgrind", action="store_true")
    args = ap.parse_args()
    args.measure_rss = not args.valgrind and "san" not in os.path.basename(
        os.path.abspath(args.build))
    t = Suite("soak")
    t.run(run, args)
    t.finish()


if __name__ == "__main__":
    main()
