"""End to end: the start-up rule of the response filters (docs/filters.md).

kube-proxy asks for its EndpointSlices the moment the hub's proxy port
accepts, as it does when a node boots.  The test double serves a pool
"pool-a" (node1 and node2; the hub runs as node1) and a Service with
hostname topology whose slice has an endpoint on node1, node2 and node-x.

- online, in each of N starts: the first list is filtered (node1's endpoint
  only) and a watch opened as early gets filtered ADDED events; the time
  from the start to that first answer is printed;
- with the NodePools' list failing at the double, the request is held and
  then answered 503 with Retry-After, naming what is missing, never
  unfiltered; a request no filter touches is answered at once meanwhile;
  /v1/readyz says not ready and names the NodePools; once the list goes
  through, the same request is answered filtered;
- offline (the cloud cut), a start from the cache answers filtered at once;
- the log says which pool the node is in, never "leader-hub- absent" with
  no name, and "yurthub ready" only once the filters' view is synced.

Both the sanitizer build (YURTHUB_BUILD) and the release build (build/ in
the tree, when there) are run.
"""

import os
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import HUB_BIN, ROOT, Double, Hub, Suite, get, wait_for  # noqa: E402
from test_filters import KUBE_PROXY, endpoints_for, service, slice_for  # noqa: E402
from watch_stream import open_watch, read_events  # noqa: E402

STARTS = 5
BOUND_S = 10  # proxy.c FILTER_SYNC_WAIT_MS
EPS = [("10.244.0.5", "node1"), ("10.244.1.5", "node2"), ("10.244.9.5", "node-x")]
SLICES = "/apis/discovery.k8s.io/v1/endpointslices"
NODEPOOLS = "/apis/apps.openyurt.io/v1beta2/nodepools"
RELEASE_BIN = os.path.join(ROOT, "build", "src", "yurthub")


class EarlyHub(Hub):
    """A hub taken as started the moment its proxy port accepts."""

    def start(self):
        self.started_at = time.monotonic()
        super().start()

    def ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError("hub exited with %s; log:\n%s" % (self.proc.returncode,
                                                                 self.tail()))
        try:
            socket.create_connection(("127.0.0.1", self.proxy_port), timeout=1).close()
            return True
        except OSError:
            return False


def start_early(workdir, double, binary, name, extra=(), cache=None):
    return EarlyHub(workdir, [double.url], name=name, binary=binary, extra=list(extra),
                    cache=cache)


def seed(double):
    for o in (service("app-host", annotations={"openyurt.io/topologyKeys":
                                               "kubernetes.io/hostname"}),
              slice_for("app-host", EPS), endpoints_for("app-host", EPS)):
        double.put_object(o)


def slice_nodes(sl):
    return sorted(e.get("nodeName", "") for e in sl.get("endpoints") or [])


def app_host(items):
    for i in items:
        if i.get("metadata", {}).get("name") == "app-host-abcde":
            return i
    return None


def list_slices(hub, timeout=60):
    import json
    s, h, body = get("127.0.0.1", hub.proxy_port, SLICES,
                     headers={"User-Agent": KUBE_PROXY, "Accept": "application/json"},
                     timeout=timeout)
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    return s, h, doc


def log_text(hub):
    with open(hub.logpath, "rb") as f:
        return f.read().decode(errors="replace")


def check_log(t, hub, label):
    log = log_text(hub)
    t.check("%s: no \"leader-hub- absent\" with an empty pool name" % label,
            not re.search(r"leader-hub- absent", log) and "leader-hub-\"" not in log,
            [ln for ln in log.splitlines() if "leader-hub" in ln][:3])
    synced = log.find("the filters' view is synced")
    ready = log.find("yurthub ready")
    t.check("%s: the log says the node's pool when the view is synced" % label,
            synced >= 0 and "node node1 is in pool \"pool-a\"" in log[synced:synced + 200],
            log[synced:synced + 200] if synced >= 0 else "no synced line")
    t.check("%s: \"yurthub ready\" comes after the view is synced" % label,
            ready > synced >= 0, "synced at %d, ready at %d" % (synced, ready))


def test_early_starts(t, double, binary, label):
    """The first list and watch, asked the moment the port accepts."""
    latencies = []
    bad_lists, bad_watches = [], []
    for i in range(STARTS):
        hub = start_early(t.workdir, double, binary, "%s-early%d" % (label, i))
        t.cleanups.append(hub.stop)
        got = {}

        def do_list():
            got["list"] = list_slices(hub)
            got["at"] = time.monotonic()
        lister = threading.Thread(target=do_list)
        lister.start()
        sock, head, rest = open_watch(hub, SLICES + "?watch=1", KUBE_PROXY)
        events, _ = read_events(sock, rest, lambda ev: any(
            e.get("object", {}).get("metadata", {}).get("name") == "app-host-abcde"
            for e in ev), 15)
        sock.close()
        lister.join(60)
        s, _, doc = got.get("list", (0, None, None))
        sl = app_host((doc or {}).get("items") or [])
        filtered = s == 200 and sl and slice_nodes(sl) == ["node1"]
        if not filtered:
            bad_lists.append((i, s, slice_nodes(sl) if sl else doc))
        if s == 200:  # "*": an unfiltered answer
            latencies.append("%.0f%s" % ((got["at"] - hub.started_at) * 1000,
                                         "" if filtered else "*"))
        added = [e for e in events if e.get("type") == "ADDED" and
                 e["object"]["metadata"]["name"] == "app-host-abcde"]
        if not head.startswith(b"HTTP/1.1 200") or not added or \
                slice_nodes(added[0]["object"]) != ["node1"]:
            bad_watches.append((i, head[:40], [slice_nodes(e["object"]) for e in added]))
        if i == 0:
            check_log(t, hub, label)
        hub.stop()
    t.check("%s: the first EndpointSlice list is filtered in each of %d starts" %
            (label, STARTS), not bad_lists, bad_lists)
    t.check("%s: a watch opened at the start gets filtered ADDED events, %d starts" %
            (label, STARTS), not bad_watches, bad_watches)
    print("  %s: from the start to the first answer, ms (*: unfiltered): %s" % (
        label, " ".join(latencies)))


def test_held_back(t, double, binary, label):
    """The NodePools' list fails for longer than the bound: 503, then filtered."""
    # the informer's lists fail at about 0, 1, 3 and 7 s (its pauses double
    # from 1 s), the fifth goes through at 15 s or later: past the bound
    double.control("POST", "/fail?code=500&count=4&path=" + NODEPOOLS)
    hub = start_early(t.workdir, double, binary, label + "-held")
    t.cleanups.append(hub.stop)
    try:
        got = {}

        def do_list():
            t0 = time.monotonic()
            got["list"] = list_slices(hub)
            got["took"] = time.monotonic() - t0
        lister = threading.Thread(target=do_list)
        lister.start()
        # meanwhile: a request no filter touches is not held
        t0 = time.monotonic()
        s, _, _ = get("127.0.0.1", hub.proxy_port, "/api/v1/nodes/node1",
                      headers={"User-Agent": KUBE_PROXY, "Accept": "application/json"})
        took = time.monotonic() - t0
        t.check("%s: a request no filter touches is answered at once (%.2f s)" % (label, took),
                s == 200 and took < 3, s)
        rs, _, body = get("127.0.0.1", hub.serve_port, "/v1/readyz?verbose")
        text = body.decode(errors="replace")
        t.check("%s: /v1/readyz?verbose is 503 and names the NodePools" % label,
                rs == 503 and "[-]filters" in text and "NodePools" in text, (rs, text))
        lister.join(60)
        s, h, doc = got.get("list", (0, {}, None))
        took = got.get("took", 0)
        msg = (doc or {}).get("message", "") if isinstance(doc, dict) else ""
        t.check("%s: held past the bound, the list is answered 503 with Retry-After "
                "(after %.1f s)" % (label, took),
                s == 503 and h.get("retry-after") == "1" and BOUND_S - 0.5 <= took < BOUND_S + 5
                and "NodePools" in msg and (doc or {}).get("kind") == "Status", (s, h, doc))
        t.check("%s: ... and the 503 is logged" % label,
                "answered 503: the filters' view is missing" in log_text(hub))
        t.check("%s: \"yurthub ready\" is not logged while the view is not synced" % label,
                "yurthub ready" not in log_text(hub))
        wait_for(hub_ready(hub), 40, step=0.1, what="the NodePools to be listed")
        s, _, doc = list_slices(hub)
        sl = app_host((doc or {}).get("items") or [])
        t.check("%s: once the NodePools are listed, the list is filtered" % label,
                s == 200 and sl and slice_nodes(sl) == ["node1"], (s, sl))
    finally:
        hub.stop()
        double.control("POST", "/restore")


def hub_ready(hub):
    def ready():
        try:
            return get("127.0.0.1", hub.serve_port, "/v1/readyz")[0] == 200
        except OSError:
            return False
    return ready


def test_offline_start(t, double, binary, label):
    """A start with the cloud cut answers from the cache, filtered."""
    # sharing off: kube-proxy's answers are its own, cached as it saw them
    # (the multiplexer's offline start is its own matter, docs/sharing.md)
    own = ["--pool-scope-resources="]
    hub = Hub(t.workdir, [double.url], name=label + "-off", binary=binary, extra=own)
    t.cleanups.append(hub.stop)
    s, _, doc = list_slices(hub)  # kube-proxy's answer, cached filtered
    t.check("%s: online, the list is filtered" % label,
            s == 200 and slice_nodes(app_host(doc["items"])) == ["node1"], s)
    wait_for(lambda: (hub.metric("yurthub_cache_queue_bytes") or 0) == 0, 20, what="the cache")
    hub.stop()
    double.cut()
    hub = start_early(t.workdir, double, binary, label + "-off2", cache=hub.cache, extra=own)
    t.cleanups.append(hub.stop)
    try:
        s, _, doc = list_slices(hub)
        sl = app_host((doc or {}).get("items") or [])
        t.check("%s: offline, the first list after a start is filtered, from the cache" % label,
                s == 200 and sl and slice_nodes(sl) == ["node1"], (s, doc))
        wait_for(hub_ready(hub), 20, step=0.1, what="ready offline")
        check_log(t, hub, label + " offline")
    finally:
        hub.stop()
        double.restore()


def run_all(t, double, binary, label):
    t.run(test_early_starts, double, binary, label)
    t.run(test_held_back, double, binary, label)
    t.run(test_offline_start, double, binary, label)


def main():
    t = Suite("filter_startup")
    double = Double(t.workdir, ["--node", "node1", "--node", "node2", "--pool", "pool-a"])
    t.cleanups.append(double.stop)
    seed(double)
    run_all(t, double, HUB_BIN, "san")
    if os.path.exists(RELEASE_BIN) and os.path.realpath(RELEASE_BIN) != os.path.realpath(HUB_BIN):
        run_all(t, double, RELEASE_BIN, "release")
    else:
        print("  note: no release build at %s: its half is skipped" % RELEASE_BIN)
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
