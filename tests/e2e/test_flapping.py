"""End to end, a flapping link: the cloud is cut (refused or black-holed) and
restored every few seconds for 5 minutes while kubelet-, kube-proxy- and
coredns-like informers list and watch through the hub and a client polls its
node, and while the cloud keeps changing.

Checked: no request hangs past its timeout, no watch stays open without data
or a heartbeat (bookmarks: every second from the cloud, every 30 s offline),
the hub stays up, and once the link is back for good the cache equals the
cloud for every view the informers hold.

FLAP_SECONDS overrides the 300 s of flapping (for a quick run by hand).
"""

import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, get, wait_for  # noqa: E402
from loadgen import (COREDNS, KUBELET, PROXY, REQUEST_LIMIT, Stats, churn,  # noqa: E402
                     informer, poller)

FLAP_SECONDS = float(os.environ.get("FLAP_SECONDS", "300"))
# what a view's cache holds, when it is not the informer's own selection
CACHE_QUERY = {"kube-proxy services": ""}
INFORMERS = [
    ("kubelet pods", KUBELET, "/api/v1/pods", "fieldSelector=spec.nodeName%3Dnode1",
     "kubelet/pods.v1.core"),
    # services are pool-scope: kube-proxy is served by the multiplexer, whose upstream
    # (all services, unfiltered) is what the hub caches
    ("kube-proxy services", PROXY, "/api/v1/services",
     "labelSelector=%21service.kubernetes.io%2Fheadless", "multiplexer-proxy-node1/services.v1.core"),
    ("coredns configmaps", COREDNS, "/api/v1/namespaces/kube-system/configmaps", "",
     "coredns/configmaps.v1.core"),
]


def cloud_view(double, path, query):
    s, _, body = get("127.0.0.1", double.port, path + ("?" + query if query else ""))
    return {(i["metadata"].get("namespace", ""), i["metadata"]["name"]):
            i["metadata"]["resourceVersion"] for i in json.loads(body)["items"]}


def cached_view(hub, rel):
    out = {}
    base = os.path.join(hub.cache, rel)
    for root, _, files in os.walk(base):
        for f in files:
            with open(os.path.join(root, f)) as fh:
                m = json.load(fh)["metadata"]
            out[(m.get("namespace", ""), m["name"])] = m["resourceVersion"]
    return out


def test_flapping(t, double, hub):
    stats = Stats()
    stop = threading.Event()
    relisted = {}
    threads = [threading.Thread(target=informer, args=(hub, stats, stop, *i[:4], relisted))
               for i in INFORMERS]
    threads.append(threading.Thread(target=poller, args=(hub, stats, stop)))
    stop_churn = threading.Event()
    churner = threading.Thread(target=churn, args=(double, stop_churn))
    for th in threads + [churner]:
        th.daemon = True
        th.start()
    rnd = random.Random(11)
    end = time.time() + FLAP_SECONDS
    cuts = 0
    while time.time() < end:
        time.sleep(rnd.uniform(2, 6))
        double.cut(rnd.choice(["refuse", "blackhole"]))
        cuts += 1
        time.sleep(rnd.uniform(2, 6))
        double.restore()
        if hub.proc.poll() is not None:
            break
    t.check("the hub stayed up through %d cuts" % cuts, hub.proc.poll() is None, hub.tail())
    # the link is back for good; the cloud stops changing; informers resync
    stop_churn.set()
    churner.join()
    back = time.time()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 30, what="online")
    wait_for(lambda: all(relisted.get(i[0], 0) > back for i in INFORMERS), 120, step=0.5,
             what="every informer to re-list")

    def cached_query(i):
        return CACHE_QUERY.get(i[0], i[3])

    def converged():
        return all(cached_view(hub, i[4]) == cloud_view(double, i[2], cached_query(i))
                   for i in INFORMERS)
    try:
        ok = wait_for(converged, 60, step=0.5, what="the cache to equal the cloud")
    except TimeoutError:
        ok = False
    for name, _, path, query, rel in INFORMERS:
        cache, cloud = cached_view(hub, rel), cloud_view(double, path, CACHE_QUERY.get(name, query))
        t.check("%s: the cache equals the cloud (%d objects)" % (name, len(cloud)),
                ok and cache == cloud,
                "only cached: %s; only in the cloud or other rv: %s" % (
                    sorted(set(cache.items()) - set(cloud.items()))[:5],
                    sorted(set(cloud.items()) - set(cache.items()))[:5]))
    stop.set()
    for th in threads:
        th.join(REQUEST_LIMIT + 5)
    print("counts: %s" % json.dumps(stats.counts, sort_keys=True), flush=True)
    t.check("no request hung past its timeout, no watch went silent",
            not stats.problems, "; ".join(stats.problems[:10]))
    t.check("the informers listed and watched all along",
            stats.counts.get("list ok", 0) > cuts and stats.counts.get("event BOOKMARK", 0) > 0)


def main():
    t = Suite("flapping")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--node", "node2",
                                "--bookmark-interval", "1"])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url])
    t.cleanups.append(hub.stop)
    t.run(test_flapping, double, hub)
    t.finish()


if __name__ == "__main__":
    main()
