"""Multiplexer benchmark: what sharing the pool-scope resources saves
upstream, what it costs in memory, and what it adds to an event's delivery -
without and with the multiplexer, side by side in one run.

The upstream is the Python test double (tests/double/apiserver.py), seeded
with 2,000 Services and 100 EndpointSlices of 100 endpoints each (10,000
endpoints), and counting the bytes it writes (headers, bodies, every streamed
watch event) by User-Agent.  Two runs, each with a fresh hub (release build):

- A, without the multiplexer: --pool-scope-resources= (each client is
  proxied on its own: its own upstream list and watch);
- B, with it: the default (one upstream list+watch per resource, as
  multiplexer-proxy-<node>, every local client served from memory).

In each, 8 local clients with distinct User-Agents (kubelet, kube-proxy,
coredns, flanneld - cache agents - and agent-1..agent-4, which are not) list
services and EndpointSlices through the hub, then watch both from the lists'
resourceVersion with bookmarks.  Then 1,000 updates go through the double's
control port, alternately a Service's label and an EndpointSlice endpoint's
ready condition, one at a time: each waits until every watcher has the event
(at most 30 s), so the latency is that of an unloaded pipeline.

Figures:
- upstream bytes and requests of everything the hub asked the double for
  (every User-Agent but this bench's own), from the hub's start to the last
  update, A, B and A/B (the issue's target: >= 7x fewer bytes); the double's
  bookmarks (one a second per watch) are in it;
- delivery latency, from just before the control-port write to a watcher's
  recv() of the event, for the 16 watchers through the hub and for 2 watchers
  connected to the double directly (the baseline); p50/p99 of each, and of
  the per-event difference (through the hub minus direct).  In A the double
  writes each event 9 times, so the direct baseline is slower there;
- the hub's VmRSS: idle against a double without the bench's objects (a
  separate hub, same flags), idle against the seeded double (once the hub's
  own informers have listed: with the multiplexer its services cache is
  already full then), after the lists and watches, after the updates; and KB
  per 1,000 objects, (after the lists - idle) / 2,100 * 1,000, from each idle.

Then a pool of three hubs (node1..node3 of pool1, each bootstrapping its
identity with a token against a double that plays the cluster's CA), each
with the same 8 local clients, and the same 1,000 updates:

- C, no leader: each hub's multiplexer lists and watches from the cloud;
- D, node1 leads (the leader-hub-pool1 configmap): node2's and node3's
  multiplexers list and watch from node1's multiplexer port.

Figure: the double's bytes and pool-scope requests from the hubs' start to
the last update, C, D and C/D (the issue's target: >= 2.5x fewer).

A benchmark, not a test: it never fails on a figure.

usage: python3 bench/mux_bench.py [BUILD_DIR]
"""

import http.client
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ["YURTHUB_BUILD"] = BUILD
from harness import Double, Hub, free_port, get, wait_for  # noqa: E402

NODE = "node1"
N_SERVICES, N_SLICES, N_ENDPOINTS, N_UPDATES = 2000, 100, 100, 1000
N_OBJECTS = N_SERVICES + N_SLICES
NAMESPACES = ["bench-%02d" % i for i in range(10)]
SERVICES = "/api/v1/services"
SLICES = "/apis/discovery.k8s.io/v1/endpointslices"
CLIENTS = ["kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef",
           "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef",
           "coredns/1.11.3 (linux/amd64) kubernetes/abcdef",
           "flanneld/0.25.1"] + ["agent-%d/1.0" % i for i in range(1, 5)]
DIRECT_UA = "mux-bench-direct/1.0"      # the baseline watchers, not counted as the hub's
UPDATE_TIMEOUT = 30.0
RV_RE = re.compile(rb'"resourceVersion":"(\d+)"')
TYPE_RE = re.compile(rb'"type":"(\w+)"')


# -- the objects ------------------------------------------------------------------------------

def service(i):
    ip = "10.96.%d.%d" % (i // 250, i % 250 + 1)
    name = "svc-%05d" % i
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NAMESPACES[i % 10],
                         "labels": {"app": name, "tier": "backend"}},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
                     "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                     "sessionAffinity": "None", "selector": {"app": name},
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP",
                                "targetPort": 8080}]},
            "status": {"loadBalancer": {}}}


def endpoint(s, e):
    return {"addresses": ["10.244.%d.%d" % (s, e + 1)], "nodeName": "edge-%03d" % e,
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "targetRef": {"kind": "Pod", "namespace": NAMESPACES[s % 10],
                          "name": "svc-%05d-pod-%d" % (s, e),
                          "uid": "00000000-0000-0000-%04d-%012d" % (s, e)},
            "zone": "zone-a"}


def endpoint_slice(s):
    svc = "svc-%05d" % s
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": svc + "-abcde", "namespace": NAMESPACES[s % 10],
                         "labels": {"kubernetes.io/service-name": svc,
                                    "endpointslice.kubernetes.io/managed-by":
                                    "endpointslice-controller.k8s.io"}},
            "addressType": "IPv4",
            "endpoints": [endpoint(s, e) for e in range(N_ENDPOINTS)],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def seed(double):
    """Namespaces, services and slices, a few hundred objects per control request;
    returns the objects, which the updates change."""
    ns = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
          for n in NAMESPACES]
    svcs = [service(i) for i in range(N_SERVICES)]
    slices = [endpoint_slice(s) for s in range(N_SLICES)]
    objs = ns + svcs + slices
    for i in range(0, len(objs), 250):
        status, body = double.control("POST", "/objects", objs[i:i + 250])
        if status != 200:
            raise RuntimeError("seeding the double: %s %s" % (status, body[:200]))
    return svcs, slices


def update(svcs, slices, k):
    """The k-th update: (path it shows on, object). Even: a Service's label;
    odd: one endpoint's ready condition of an EndpointSlice."""
    if k % 2 == 0:
        o = svcs[(k // 2 * 7) % N_SERVICES]
        o["metadata"]["labels"]["bench-update"] = str(k)
        return SERVICES, o
    o = slices[(k // 2) % N_SLICES]
    c = o["endpoints"][(k // 2) % N_ENDPOINTS]["conditions"]
    c["ready"] = c["serving"] = not c["ready"]
    return SLICES, o


# -- watch streams ----------------------------------------------------------------------------

class Watcher(threading.Thread):
    """One watch on a raw socket, read by its own thread: each event's
    resourceVersion with the time.monotonic() of the recv() that completed it."""

    def __init__(self, port, path, ua, progress):
        super().__init__(daemon=True)
        self.path, self.ua, self.progress = path, ua.split("/")[0], progress
        self.seen, self.errors, self.ended = {}, [], False
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nUser-Agent: %s\r\n"
                           "Accept: application/json\r\n\r\n" % (path, ua)).encode())
        self.sock.settimeout(30)
        self.raw = self._head()
        self.sock.settimeout(None)  # close() wakes the reader

    def _head(self):
        data = b""
        while b"\r\n\r\n" not in data:
            b = self.sock.recv(65536)
            if not b:
                raise RuntimeError("watch %s as %s: closed before its head" % (self.path, self.ua))
            data += b
        head, _, rest = data.partition(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("watch %s as %s: %r" % (self.path, self.ua, head[:100]))
        return bytearray(rest)

    def run(self):
        body = bytearray()
        stamp = time.monotonic()
        try:
            while not self.ended:
                self._lines(self._dechunk(body), stamp)
                b = self.sock.recv(1 << 18)
                stamp = time.monotonic()
                if not b:
                    break
                self.raw += b
        except (OSError, ValueError):  # closed, or not a chunked stream
            pass
        self.ended = True
        with self.progress:
            self.progress.notify_all()

    def _dechunk(self, body):
        """Moves whole chunks from raw to body; returns the complete lines of body."""
        while True:
            eol = self.raw.find(b"\r\n")
            if eol < 0:
                break
            n = int(bytes(self.raw[:eol]).split(b";")[0], 16)
            if n == 0:
                self.ended = True
                break
            if len(self.raw) < eol + 2 + n + 2:
                break
            body += self.raw[eol + 2:eol + 2 + n]
            del self.raw[:eol + 2 + n + 2]
        cut = body.rfind(b"\n")
        if cut < 0:
            return []
        lines = bytes(body[:cut]).split(b"\n")
        del body[:cut + 1]
        return lines

    def _lines(self, lines, stamp):
        if not lines:
            return
        for line in lines:
            t = TYPE_RE.search(line, 0, 40)
            kind = t.group(1) if t else b"?"
            if kind == b"ERROR":
                self.errors.append(line[:200])
            elif kind != b"BOOKMARK":
                m = RV_RE.search(line)
                if m:
                    self.seen[int(m.group(1))] = stamp
        with self.progress:
            self.progress.notify_all()

    def close(self):
        self.ended = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


# -- one run ----------------------------------------------------------------------------------

def hub_list(hub, path, ua):
    status, _, body = get("127.0.0.1", hub.proxy_port, path,
                          headers={"User-Agent": ua, "Accept": "application/json"})
    if status != 200:
        raise RuntimeError("%s lists %s through the hub: %s %r" % (ua, path, status, body[:200]))
    lst = json.loads(body)
    return lst["metadata"]["resourceVersion"], len(lst["items"])


def open_watchers(hub, double, progress, direct=True, extra_services=0):
    """Every client lists both resources then watches them from the lists'
    resourceVersion; then the two direct watchers (unless direct is
    False).  (through hub, direct)."""
    through = []
    for ua in CLIENTS:
        for path in (SERVICES, SLICES):
            rv, n = hub_list(hub, path, ua)
            want = N_SERVICES + extra_services if path == SERVICES else N_SLICES
            if n != want:
                print("  note: %s listed %d of %d from %s" % (ua.split("/")[0], n, want, path))
            through.append(Watcher(hub.proxy_port, path + "?watch=true&allowWatchBookmarks="
                                   "true&resourceVersion=" + rv, ua, progress))
    rv = str(double.state()["rv"])
    direct = [Watcher(double.port, path + "?watch=true&allowWatchBookmarks=true&"
                      "resourceVersion=" + rv, DIRECT_UA, progress)
              for path in ((SERVICES, SLICES) if direct else ())]
    for w in through + direct:
        w.start()
    return through, direct


class Control:
    """A kept-alive connection to the double's control port, for the updates."""

    def __init__(self, double):
        self.c = http.client.HTTPConnection("127.0.0.1", double.control_port, timeout=30)

    def put(self, body):
        self.c.request("POST", "/objects", body=body,
                       headers={"Content-Type": "application/json"})
        r = self.c.getresponse()
        out = r.read()
        if r.status != 200:
            raise RuntimeError("control POST /objects: %s %r" % (r.status, out[:200]))
        return int(json.loads(out)["items"][0]["metadata"]["resourceVersion"])


def apply_updates(double, svcs, slices, through, direct, progress):
    """The updates, one at a time; [(rv, t0, path)] of those every watcher got."""
    ctl = Control(double)
    done = []
    for k in range(N_UPDATES):
        path, obj = update(svcs, slices, k)
        body = json.dumps(obj, separators=(",", ":")).encode()
        group = [w for w in through + direct if w.path.startswith(path + "?")]
        t0 = time.monotonic()
        rv = ctl.put(body)
        with progress:
            ok = progress.wait_for(lambda: all(rv in w.seen or w.ended for w in group),
                                   UPDATE_TIMEOUT)
        if not ok or any(w.ended for w in group):
            print("  note: update %d (rv %d) not seen by every watcher: %s" % (
                k, rv, ", ".join("%s %s" % (w.ua, w.path.split("?")[0]) for w in group
                                 if rv not in w.seen)))
            break
        done.append((rv, t0, path))
    ctl.c.close()
    return done


def upstream(state):
    """Bytes and requests counted by the double, the bench's own watchers left out."""
    skip = DIRECT_UA.split("/")[0]
    by_bytes = {k: v for k, v in state["bytes_by_user_agent"].items() if k != skip}
    by_reqs = {k: v for k, v in state["requests_by_user_agent"].items() if k != skip}
    vp = state["requests_by_verb_path"]
    pool = sum(vp.get("%s %s" % (verb, p), 0) for verb in ("list", "watch")
               for p in (SERVICES, SLICES))
    pool -= sum(v for k, v in state["requests_by_user_agent"].items() if k == skip)
    return {"bytes": sum(by_bytes.values()), "requests": sum(by_reqs.values()),
            "pool_requests": pool, "by_ua": by_bytes}


def latencies(done, through, direct):
    """Milliseconds, by series: through the hub (one per hub watcher and event),
    direct, and through minus direct for the same event (also by resource)."""
    out = {"through": [], "direct": [], "added": [], SERVICES: [], SLICES: []}
    for rv, t0, path in done:
        d = [w.seen[rv] for w in direct if w.path.startswith(path + "?")][0]
        out["direct"].append((d - t0) * 1000.0)
        for w in through:
            if w.path.startswith(path + "?"):
                out["through"].append((w.seen[rv] - t0) * 1000.0)
                out["added"].append((w.seen[rv] - d) * 1000.0)
                out[path].append((w.seen[rv] - d) * 1000.0)
    return out


def start_hub(work, double, name, extra):
    """A hub once its own informers have listed and watch (the services one
    starts the multiplexer's upstream of services when it is on)."""
    hub = Hub(work, [double.url], node=NODE, name=name, extra=["-v", "0", *extra])
    try:
        wait_for(lambda: "watch " + SERVICES in double.state()["requests_by_verb_path"], 15,
                 what="the hub's services informer")
    except TimeoutError:
        print("  note: %s: no upstream watch of services 15 s after the start" % name)
    return hub


def empty_idle_rss(work, label, extra):
    """VmRSS of an idle hub whose cloud has none of the bench's objects."""
    double = Double(work, ["--seed", "none", "--node", NODE])
    hub = None
    try:
        hub = start_hub(work, double, "hub-empty-" + label, extra)
        return hub.rss_kb()
    finally:
        if hub:
            hub.stop()
            shutil.rmtree(hub.cache, ignore_errors=True)
        double.stop()


def run(work, double, svcs, slices, label, extra):
    wait_for(lambda: double.state()["watches_open"] == 0, 15,
             what="the previous run's watches to end")
    double.control("POST", "/reset-counters")
    res = {"rss_empty": empty_idle_rss(work, label, extra)}
    hub = start_hub(work, double, "hub-" + label, extra)
    progress = threading.Condition()
    through, direct = [], []
    try:
        res["rss_idle"] = hub.rss_kb()
        t = time.monotonic()
        through, direct = open_watchers(hub, double, progress)
        res["setup_s"] = time.monotonic() - t
        res["rss_watching"] = hub.rss_kb()
        res["after_setup"] = upstream(double.state())
        t = time.monotonic()
        done = apply_updates(double, svcs, slices, through, direct, progress)
        res["updates_s"] = time.monotonic() - t
        res["updates"] = len(done)
        res["rss_updated"] = hub.rss_kb()
        res["total"] = upstream(double.state())
        res["latency"] = latencies(done, through, direct)
        res["errors"] = sum(len(w.errors) for w in through + direct)
        return res
    finally:
        for w in through + direct:
            w.close()
        hub.stop()
        shutil.rmtree(hub.cache, ignore_errors=True)


# -- a pool of three hubs ----------------------------------------------------------------------

POOL = "pool1"
TOKEN = "abcdef.0123456789abcdef"
POOL_IPS = {"node1": "127.0.0.21", "node2": "127.0.0.22", "node3": "127.0.0.23"}
LEADER = "node1"


def pool_double(work, label, with_leader):
    """A double playing a cluster with a CA (the hubs bootstrap with a token:
    a leader serves with its serving certificate, followers present their
    node certificates), seeded like the single-hub runs, with the pool's
    nodes, default/kubernetes (its cluster IP goes into serving
    certificates) and, with_leader, leader-hub-pool1 naming node1."""
    double = Double(work, ["--seed", "none", "--pki-dir", os.path.join(work, "pki-" + label),
                           "--bootstrap-token", TOKEN, "--csr-auto-approve"])
    svcs, slices = seed(double)
    extra = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": n, "labels": {"apps.openyurt.io/nodepool": POOL}}}
             for n in POOL_IPS]
    kube = service(0)
    kube["metadata"] = {"name": "kubernetes", "namespace": "default"}
    kube["spec"]["clusterIP"], kube["spec"]["clusterIPs"] = "10.96.0.1", ["10.96.0.1"]
    extra.append(kube)
    if with_leader:
        extra.append({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "leader-hub-" + POOL, "namespace": "kube-system",
                                   "labels": {"openyurt.io/configmap-name":
                                              "leader-hub-" + POOL}},
                      "data": {"leaders": "%s/%s" % (LEADER, POOL_IPS[LEADER]),
                               "enable-leader-election": "true",
                               "pool-scoped-metadata":
                               "/v1/services,discovery.k8s.io/v1/endpointslices"}})
    status, body = double.control("POST", "/objects", extra)
    if status != 200:
        raise RuntimeError("seeding the pool's double: %s %s" % (status, body[:200]))
    return double, svcs, slices


def log_has(hub, text):
    with open(hub.logpath, "rb") as f:
        return text.encode() in f.read()


def start_pool(work, double, label, with_leader):
    port = free_port()
    hubs = []
    for n, ip in POOL_IPS.items():
        hubs.append(Hub(work, ["https://127.0.0.1:%d" % double.port], node=n, ready_timeout=60,
                        name="pool-%s-%s" % (label, n),
                        extra=["-v", "1", "--root-dir=" + os.path.join(work, label + "-" + n),
                               "--join-token=" + TOKEN,
                               "--discovery-token-unsafe-skip-ca-verification",
                               "--node-ip=" + ip, "--nodepool-name=" + POOL,
                               "--multiplexer-port=%d" % port, "--enable-dummy-if=false"]))
    if with_leader:
        url = "https://%s:%d" % (POOL_IPS[LEADER], port)
        wait_for(lambda: all(log_has(h, "leader hub %s: answers" % url) for h in hubs[1:]), 60,
                 step=0.2, what="the followers to reach their leader")
    return hubs


def run_pool(work, label, with_leader):
    """Three hubs of one pool, each with the 8 local clients; the double's
    bytes from the hubs' start to the last update."""
    double, svcs, slices = pool_double(work, label, with_leader)
    double.control("POST", "/reset-counters")
    hubs, through = [], []
    progress = threading.Condition()
    try:
        hubs = start_pool(work, double, label, with_leader)
        for hub in hubs:
            # default/kubernetes is one more service
            through += open_watchers(hub, double, progress, direct=False, extra_services=1)[0]
        done = apply_updates(double, svcs, slices, through, [], progress)
        res = upstream(double.state())
        res["updates"], res["watchers"] = len(done), len(through)
        return res
    finally:
        for w in through:
            w.close()
        for hub in hubs:
            hub.stop()
        double.stop()


def report_pool(c, d):
    print("a pool of 3 hubs, 8 local clients each, as counted by the double (whole run: "
          "bootstrap, lists, watches, %d updates):" % N_UPDATES)
    print("  %-44s %14s %14s %9s" % ("", "C: no leader", "D: leader", "C/D"))
    print("  %-44s %11.2f MB %11.2f MB %9s" % ("bytes", c["bytes"] / 1e6, d["bytes"] / 1e6,
                                               ratio(c["bytes"], d["bytes"])))
    print("  %-44s %14d %14d %9s" % ("  of which list/watch services+slices requests",
                                     c["pool_requests"], d["pool_requests"],
                                     ratio(c["pool_requests"], d["pool_requests"])))
    print("  updates every one of the %d watchers got: C %d, D %d of %d"
          % (c["watchers"], c["updates"], d["updates"], N_UPDATES))
    print("  target: >= 2.5x fewer upstream bytes for a pool of 3 with a leader; measured %s"
          % ratio(c["bytes"], d["bytes"]))
    for label, r in (("C", c), ("D", d)):
        parts = sorted(r["by_ua"].items(), key=lambda kv: -kv[1])
        print("  %s bytes by User-Agent: %s" % (label, ", ".join(
            "%s %s" % (k or "(none)", size(v)) for k, v in parts)))


# -- the report -------------------------------------------------------------------------------

def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def size(n):
    return "%.2f MB" % (n / 1e6) if n >= 100000 else "%.1f KB" % (n / 1e3)


def ratio(a, b):
    return "%.2fx" % (a / b) if b else "-"


def report_upstream(a, b):
    print("upstream, as counted by the double (every User-Agent but the bench's own):")
    print("  %-44s %14s %14s %9s" % ("", "A: without", "B: with", "A/B"))
    rows = [("bytes, lists + watches set up", lambda r: r["after_setup"]["bytes"], 1e6, "MB"),
            ("bytes, whole run (+ %d updates)" % N_UPDATES, lambda r: r["total"]["bytes"],
             1e6, "MB"),
            ("requests, whole run", lambda r: r["total"]["requests"], 1, ""),
            ("  of which list/watch services+slices", lambda r: r["total"]["pool_requests"],
             1, "")]
    for name, f, unit, suffix in rows:
        va, vb = f(a), f(b)
        fmt = "%11.2f %s" if unit != 1 else "%14d%s"
        print("  %-44s %s %s %9s" % (name, fmt % (va / unit, suffix), fmt % (vb / unit, suffix),
                                      ratio(va, vb)))
    print("  target: >= 7x fewer upstream bytes for 8 clients; measured %s"
          % ratio(a["total"]["bytes"], b["total"]["bytes"]))
    for label, r in (("A", a), ("B", b)):
        parts = sorted(r["total"]["by_ua"].items(), key=lambda kv: -kv[1])
        print("  %s bytes by User-Agent: %s" % (label, ", ".join(
            "%s %s" % (k or "(none)", size(v)) for k, v in parts)))


def report_latency(a, b):
    print("event delivery, ms from just before the control-port write to the watcher's "
          "recv();")
    print("  each update waited for by every watcher (8 of each resource through the hub, "
          "1 direct):")
    print("  %-50s %8s %8s %8s" % ("", "p50", "p99", "max"))
    series = [("through the hub", "through"), ("direct to the double", "direct"),
              ("added: through - direct, same event", "added"),
              ("  Services (%d events)" % ((N_UPDATES + 1) // 2), SERVICES),
              ("  EndpointSlices (%d events)" % (N_UPDATES // 2), SLICES)]
    for label, r in (("A: without", a), ("B: with", b)):
        print("  %s" % label)
        for name, key in series:
            vals = r["latency"][key] or [float("nan")]
            print("    %-48s %8.2f %8.2f %8.2f" % (name, pct(vals, 50), pct(vals, 99),
                                                   max(vals)))


def report_rss(a, b, json_bytes):
    print("hub RSS (VmRSS, KB); the %d objects are %.2f MB of JSON (%.0f bytes each on "
          "average):" % (N_OBJECTS, json_bytes / 1e6, json_bytes / float(N_OBJECTS)))
    print("  %-12s %11s %11s %11s %11s   %s" % ("", "idle,", "idle,", "lists +", "after",
                                               "KB per 1,000 objects,"))
    print("  %-12s %11s %11s %11s %11s   %s" % ("", "no objects", "seeded", "watches",
                                               "updates", "lists+watches minus idle:"))
    print("  %-12s %11s %11s %11s %11s   %12s %12s" % ("", "", "", "", "", "seeded",
                                                       "no objects"))
    for label, r in (("A: without", a), ("B: with", b)):
        per = [(r["rss_watching"] - r[k]) / float(N_OBJECTS) * 1000.0
               for k in ("rss_idle", "rss_empty")]
        print("  %-12s %11d %11d %11d %11d   %12.1f %12.1f" % (
            label, r["rss_empty"], r["rss_idle"], r["rss_watching"], r["rss_updated"], *per))


def report(a, b, json_bytes):
    for label, r in (("A (without)", a), ("B (with)", b)):
        print("  run %s: lists and watches set up in %.1f s, %d/%d updates delivered in "
              "%.1f s, %d ERROR events" % (label, r["setup_s"], r["updates"], N_UPDATES,
                                           r["updates_s"], r["errors"]))
    report_upstream(a, b)
    report_latency(a, b)
    report_rss(a, b, json_bytes)


def main():
    sys.setswitchinterval(0.0005)  # the readers' stamps wait less for the GIL
    work = tempfile.mkdtemp(prefix="yurthub-mux-bench-")
    double = None
    try:
        double = Double(work, ["--seed", "none", "--node", NODE])
        t = time.monotonic()
        svcs, slices = seed(double)
        json_bytes = sum(len(json.dumps(o, separators=(",", ":"))) for o in svcs + slices)
        print("multiplexer benchmark: %d Services, %d EndpointSlices of %d endpoints "
              "(%d endpoints), %d local clients, %d updates; seeded in %.1f s"
              % (N_SERVICES, N_SLICES, N_ENDPOINTS, N_SLICES * N_ENDPOINTS, len(CLIENTS),
                 N_UPDATES, time.monotonic() - t), flush=True)
        a = run(work, double, svcs, slices, "a", ["--pool-scope-resources="])
        b = run(work, double, svcs, slices, "b", [])
        report(a, b, json_bytes)
        double.stop()
        double = None
        c = run_pool(work, "c", False)
        d = run_pool(work, "d", True)
        report_pool(c, d)
    finally:
        if double:
            double.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
