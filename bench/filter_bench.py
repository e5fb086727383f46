"""Filter benchmark: lists as kube-proxy gets them through the hub, filtered
object by object as they stream, against the same lists unfiltered through
the hub, through nginx as a plain reverse proxy, and direct - side by side in
one run.

The upstream is nginx serving the lists as files, so that the upstream is not
what is measured (the Python test double would be):

- 10,000 Services (1,000 LoadBalancers that discardcloudservice drops, 1,000
  NodePorts listening in another pool that nodeportisolation drops, 8,000
  kept as they are);
- 100 EndpointSlices of 100 endpoints each (10,000 endpoints), each of a
  Service with hostname topology, so that servicetopology parses and rewrites
  every slice, keeping the 1 % on this node.

The filtered client is "bench-proxy", which the served yurt-hub-cfg
configmap adds to kube-proxy's filters: filtered as kube-proxy, not cached,
so the figures are the filtering alone (kube-proxy itself is also cached).
Then the hub's peak RSS (VmHWM) after serving a filtered 1,000-Service list
and after a 10,000-Service list, each in a fresh hub: streaming means the peak
does not grow with the list.  A benchmark, not a test: it never fails on a
figure.

usage: python3 bench/filter_bench.py [BUILD_DIR]
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ["YURTHUB_BUILD"] = BUILD
from harness import Hub, free_port, get, wait_for  # noqa: E402

LOAD = os.path.join(BUILD, "bench", "http_load")
ROUNDS = 3
FILTERED = "bench-proxy/1.0"
PLAIN = "bench-plain/1.0"
NODES = ["edge-%03d" % i for i in range(100)]  # this hub is edge-000


def service(i, annotations=None, svc_type="ClusterIP", ns="bench"):
    ip = "10.96.%d.%d" % (i // 250, i % 250 + 1)
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    if svc_type != "ClusterIP":
        ports[0]["nodePort"] = 30000 + i % 2000
    return {"metadata": {"name": "svc-%05d" % i, "namespace": ns,
                         "uid": "00000000-0000-0000-0000-%012d" % i,
                         "resourceVersion": str(1000 + i),
                         "creationTimestamp": "2026-11-01T00:00:00Z",
                         "labels": {"app": "svc-%05d" % i, "tier": "backend"},
                         "annotations": annotations or {}},
            "spec": {"type": svc_type, "clusterIP": ip, "clusterIPs": [ip],
                     "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                     "sessionAffinity": "None", "ports": ports,
                     "selector": {"app": "svc-%05d" % i}},
            "status": {"loadBalancer": {}}}


def services(n, ns="bench"):
    out = []
    for i in range(n):
        if i < 100:  # the slices' services
            out.append(service(i, {"openyurt.io/topologyKeys": "kubernetes.io/hostname"},
                               ns=ns))
        elif i % 10 == 1:
            out.append(service(i, {"svc.openyurt.io/discard": "true"}, "LoadBalancer", ns))
        elif i % 10 == 2:
            out.append(service(i, {"nodeport.openyurt.io/listen": "pool-b"}, "NodePort", ns))
        else:
            out.append(service(i, ns=ns))
    return out


def slices():
    out = []
    for s in range(100):
        eps = [{"addresses": ["10.244.%d.%d" % (s, e + 1)], "nodeName": NODES[e],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "targetRef": {"kind": "Pod", "namespace": "bench", "name": "pod-%d-%d" % (s, e),
                              "uid": "00000000-0000-0000-%04d-%012d" % (s, e)},
                "zone": "zone-a"} for e in range(100)]
        out.append({"metadata": {"name": "svc-%05d-abcde" % s, "namespace": "bench",
                                 "resourceVersion": str(50000 + s),
                                 "labels": {"kubernetes.io/service-name": "svc-%05d" % s,
                                            "endpointslice.kubernetes.io/managed-by":
                                            "endpointslice-controller.k8s.io"}},
                    "addressType": "IPv4", "endpoints": eps,
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
    return out


def write_list(root, path, kind, api_version, items):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        json.dump({"kind": kind, "apiVersion": api_version,
                   "metadata": {"resourceVersion": "99999"}, "items": items}, f,
                  separators=(",", ":"))
    return os.path.getsize(full)


def static_upstream(work):
    """nginx serving the lists, the configmap and /healthz as files; a watch
    (?watch=...) is answered with an empty 200 (it ends at once)."""
    root = os.path.join(work, "root")
    sizes = {
        "services": write_list(root, "/api/v1/services", "ServiceList", "v1", services(10000)),
        "small": write_list(root, "/api/v1/namespaces/small/services", "ServiceList", "v1",
                            services(1000, "small")),
        "slices": write_list(root, "/apis/discovery.k8s.io/v1/endpointslices",
                             "EndpointSliceList", "discovery.k8s.io/v1", slices()),
    }
    who = "bench-proxy"
    write_list(root, "/api/v1/namespaces/kube-system/configmaps", "ConfigMapList", "v1", [{
        "metadata": {"name": "yurt-hub-cfg", "namespace": "kube-system",
                     "resourceVersion": "7",
                     "labels": {"openyurt.io/configmap-name": "yurt-hub-cfg"}},
        "data": {"servicetopology": who, "discardcloudservice": who,
                 "nodeportisolation": who, "forwardkubesvctraffic": who}}])
    write_list(root, "/apis/apps.openyurt.io/v1beta2/nodepools", "NodePoolList",
               "apps.openyurt.io/v1beta2", [{
                   "metadata": {"name": "pool-a", "resourceVersion": "8"},
                   "status": {"nodes": NODES[:10]}}])
    with open(os.path.join(root, "healthz"), "w") as f:
        f.write("ok")
    for dirpath, dirs, files in os.walk(work):
        os.chmod(dirpath, 0o755)  # nginx workers run as another user
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write("worker_processes 1; daemon off; pid %(w)s/nginx.pid; error_log %(w)s/err.log;\n"
                "events { worker_connections 1024; }\n"
                "http { access_log off; default_type application/json;\n"
                "  server { listen 127.0.0.1:%(p)d; root %(r)s;\n"
                "    location / { if ($arg_watch) { return 200; } } } }\n"
                % {"w": work, "p": port, "r": root})
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def up():
        try:
            return get("127.0.0.1", port, "/healthz")[0] == 200
        except OSError:
            return False
    wait_for(up, 10, what="nginx")
    return proc, port, sizes


def proxy_nginx(work, upstream_port):
    port = free_port()
    conf = os.path.join(work, "proxy.conf")
    with open(conf, "w") as f:
        f.write("worker_processes auto; daemon off; pid %(w)s/proxy.pid; "
                "error_log %(w)s/proxy-err.log;\nevents { worker_connections 1024; }\n"
                "http { access_log off; proxy_buffering on;\n"
                "  upstream up { server 127.0.0.1:%(u)d; keepalive 32; }\n"
                "  server { listen 127.0.0.1:%(p)d; location / { proxy_pass http://up;\n"
                "    proxy_http_version 1.1; proxy_set_header Connection \"\"; } } }\n"
                % {"w": work, "u": upstream_port, "p": port})
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for(lambda: _up(port), 10, what="the proxying nginx")
    return proc, port


def _up(port):
    try:
        return get("127.0.0.1", port, "/healthz")[0] == 200
    except OSError:
        return False


def load(port, path, n, c, ua):
    out = subprocess.run([LOAD, "http://127.0.0.1:%d%s" % (port, path), str(n), str(c), ua],
                         capture_output=True, text=True)
    fields = dict(kv.split("=") for kv in out.stdout.split())
    return float(fields.get("seconds", 0)), int(fields.get("ok", 0)), int(fields.get("bytes", 0))


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def start_hub(work, upstream, name):
    hub = Hub(work, ["http://127.0.0.1:%d" % upstream], node=NODES[0], name=name,
              extra=["-v", "0", "--nodepool-name=pool-a"])
    # ready means the informers listed: the configmap and the services are known
    sl = json.loads(get("127.0.0.1", hub.proxy_port, "/apis/discovery.k8s.io/v1/endpointslices",
                        headers={"User-Agent": FILTERED})[2])
    kept = sum(len(s["endpoints"]) for s in sl["items"])
    if kept != 100:
        raise RuntimeError("the hub did not filter the slices (%d endpoints kept)" % kept)
    return hub


def main():
    work = tempfile.mkdtemp(prefix="yurthub-filter-bench-")
    os.chmod(work, 0o755)
    procs, hubs = [], []
    try:
        up, up_port, sizes = static_upstream(work)
        procs.append(up)
        px, px_port = proxy_nginx(work, up_port)
        procs.append(px)
        hub = start_hub(work, up_port, "hub")
        hubs.append(hub)
        cases = [("10,000 Services", "/api/v1/services", sizes["services"], 16, 4),
                 ("100 EndpointSlices, 10,000 endpoints", "/apis/discovery.k8s.io/v1/"
                  "endpointslices", sizes["slices"], 32, 4)]
        targets = [("hub, filtered", hub.proxy_port, FILTERED),
                   ("hub, unfiltered", hub.proxy_port, PLAIN),
                   ("nginx", px_port, PLAIN), ("direct", up_port, PLAIN)]
        print("filter benchmark: nginx serving the lists as files, 4 concurrent clients, "
              "median of %d rounds" % ROUNDS)
        for case, path, size, n, c in cases:
            res = {}
            for name, port, ua in targets:
                load(port, path, 4, c, ua)  # warm up connections
                runs = sorted(load(port, path, n, c, ua) for _ in range(ROUNDS))
                secs, ok, nbytes = runs[ROUNDS // 2]
                res[name] = (secs / n * 1000.0, ok, nbytes / n)
            print("%s (%.1f MB as the cloud sends it):" % (case, size / 1e6))
            for name, _, _ in targets:
                ms, ok, avg = res[name]
                print("  %-16s %7.1f ms per list  (%d/%d ok, %.2f MB each)"
                      % (name, ms, ok, n, avg / 1e6))
            f, u, x = (res[k][0] for k in ("hub, filtered", "hub, unfiltered", "nginx"))
            print("  filtered/unfiltered: %.2f x time;  filtered/nginx: %.2f x;  "
                  "unfiltered/nginx: %.2f x" % (f / u, f / x, u / x))
        hub.stop()
        hubs.remove(hub)
        print("hub peak RSS (VmHWM), fresh hub, 8 filtered lists, 4 at a time:")
        for label, path in (("1,000 Services (%.1f MB)" % (sizes["small"] / 1e6),
                             "/api/v1/namespaces/small/services"),
                            ("10,000 Services (%.1f MB)" % (sizes["services"] / 1e6),
                             "/api/v1/services")):
            h = start_hub(work, up_port, "hub-rss-%d" % len(label))
            hubs.append(h)
            before = status_kb(h.proc.pid, "VmHWM")
            secs, ok, _ = load(h.proxy_port, path, 8, 4, FILTERED)
            after = status_kb(h.proc.pid, "VmHWM")
            print("  %-28s before %.1f MB, after %.1f MB (%d/8 ok)"
                  % (label, before / 1024.0, after / 1024.0, ok))
            h.stop()
            hubs.remove(h)
    finally:
        for h in hubs:
            h.stop()
        for p in procs:
            p.send_signal(signal.SIGQUIT)
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
