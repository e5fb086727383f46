"""Proxy benchmark: the same requests direct to the test double, through the
hub, and through nginx as a plain reverse proxy, measured side by side in one
run.

- a 10,000-pod LIST (16 requests, 8 concurrent)
- the same LIST 7 times back to back (one client)
- 2,000 small GETs (8 concurrent)

each once with a User-Agent the hub does not cache (pure proxying), once as
kubelet (proxying, its pod filter, and caching) and, for the lists, once as
kube-proxy (proxying and caching: no filter acts on its pods).  Prints throughput, the ratios to nginx and to
direct, the hub's CPU time per request (caching included: measured until
its queue is empty) and its idle and peak RSS.  A benchmark, not a test: it
never fails on a figure.

On a shared 2-core machine a target's throughput moves by tens of percent
from one minute to the next, whatever it is.  Each round measures the three
targets one right after the other (in a rotating order), so besides the
ratio of the medians the script prints the median of each round's own
ratio, which such drift moves much less.

usage: python3 bench/proxy_bench.py [BUILD_DIR]
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ["YURTHUB_BUILD"] = BUILD
from harness import Double, Hub, free_port, wait_for, get  # noqa: E402

LOAD = os.path.join(BUILD, "bench", "http_load")
KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
KUBE_PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
ROUNDS = 5
PLAIN = "bench-client/1.0"


def start_nginx(workdir, upstream_port):
    port = free_port()
    conf = os.path.join(workdir, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""
worker_processes auto;
daemon off;
pid %(w)s/nginx.pid;
error_log %(w)s/nginx-error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(w)s/nginx-body;
    proxy_temp_path %(w)s/nginx-proxy;
    fastcgi_temp_path %(w)s/nginx-fcgi;
    uwsgi_temp_path %(w)s/nginx-uwsgi;
    scgi_temp_path %(w)s/nginx-scgi;
    upstream apiserver { server 127.0.0.1:%(up)d; keepalive 32; }
    server {
        listen 127.0.0.1:%(port)d;
        location / {
            proxy_pass http://apiserver;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 3600s;
        }
    }
}
""" % {"w": workdir, "up": upstream_port, "port": port})
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", workdir], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def up():
        try:
            return get("127.0.0.1", port, "/version")[0] == 200
        except OSError:
            return False
    wait_for(up, 10, what="nginx")
    return proc, port


def load(port, path, n, c, ua):
    out = subprocess.run([LOAD, "http://127.0.0.1:%d%s" % (port, path), str(n), str(c), ua],
                         capture_output=True, text=True)
    fields = dict(kv.split("=") for kv in out.stdout.split())
    return float(fields.get("rps", 0)), float(fields.get("mbps", 0)), int(fields.get("ok", 0))


def cpu_seconds(pid):
    """User and system time of the process so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain(hub):
    wait_for(lambda: (hub.metric("yurthub_cache_queue_bytes") or 0) == 0, 300, step=0.2,
             what="the cache queue to drain")


def rss(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main():
    work = tempfile.mkdtemp(prefix="yurthub-proxy-bench-")
    os.chmod(work, 0o755)  # nginx workers run as another user and keep temp files here
    for d in ("nginx-body", "nginx-proxy", "nginx-fcgi", "nginx-uwsgi", "nginx-scgi"):
        os.mkdir(os.path.join(work, d))
        os.chmod(os.path.join(work, d), 0o777)
    double = Double(work, ["--seed", "sample", "--node", "node1", "--pods", "10000"])
    hub = None
    nginx = None
    try:
        hub = Hub(work, [double.url], extra=["-v", "0"])
        time.sleep(1)
        idle = rss(hub.proc.pid, "VmRSS")
        idle_anon = rss(hub.proc.pid, "RssAnon")
        nginx, nginx_port = start_nginx(work, double.port)
        targets = [("direct", double.port), ("hub", hub.proxy_port), ("nginx", nginx_port)]
        lists = (("uncached", PLAIN), ("kubelet", KUBELET), ("kube-proxy", KUBE_PROXY))
        cases = [("list 10k pods", "/api/v1/pods", 16, 8, "MB/s", 1, lists),
                 ("list 10k pods back to back", "/api/v1/pods", 7, 1, "MB/s", 1, lists),
                 ("2000 small GETs", "/api/v1/namespaces/kube-system/configmaps/"
                  "kube-root-ca.crt", 2000, 8, "req/s", 0, lists[:2])]
        results = {}
        cpu_ms = {}
        for case, path, n, c, unit, col, uas in cases:
            for ua_name, ua in uas:
                samples = {name: [] for name, _ in targets}
                oks = {name: 0 for name, _ in targets}
                for rnd in range(ROUNDS):
                    # rotate the order: no target always runs first or last
                    order = targets[rnd % 3:] + targets[:rnd % 3]
                    for name, port in order:
                        load(port, path, max(2, n // 8), c, ua)  # warm up connections
                        if name == "hub":
                            drain(hub)
                            cpu0 = cpu_seconds(hub.proc.pid)
                        rps, mbps, ok = load(port, path, n, c, ua)
                        samples[name].append(mbps if col else rps)
                        oks[name] += ok
                        if name == "hub":
                            # the cache's work ends when its queue is empty
                            drain(hub)
                            cpu_ms[(case, ua_name)] = cpu_ms.get((case, ua_name), 0) + \
                                (cpu_seconds(hub.proc.pid) - cpu0) * 1000 / (n * ROUNDS)
                for name, _ in targets:
                    v = sorted(samples[name])[ROUNDS // 2]
                    results[(case, ua_name, name)] = (v, oks[name], n * ROUNDS)
                per_round = sorted(h / x for h, x in zip(samples["hub"], samples["nginx"]) if x)
                results[(case, ua_name, "per-round")] = (per_round[len(per_round) // 2]
                                                         if per_round else 0)
        print("proxy benchmark: test double (Python) upstream, 8 concurrent clients unless "
              "back to back, median of %d rounds" % ROUNDS)
        for case, path, n, c, unit, col, uas in cases:
            for ua_name, _ in uas:
                row = {name: results[(case, ua_name, name)] for name, _ in targets}
                for name, _ in targets:
                    v, ok, total = row[name]
                    print("%s (%s) %s: %.1f %s (%d/%d ok)" % (case, ua_name, name, v, unit, ok,
                                                             total))
                h, d, x = row["hub"][0], row["direct"][0], row["nginx"][0]
                print("%s (%s) hub/nginx: %.2f x (median of each round's own: %.2f x)"
                      % (case, ua_name, h / x if x else 0, results[(case, ua_name, "per-round")]))
                print("%s (%s) hub/direct: %.2f x" % (case, ua_name, h / d if d else 0))
                print("%s (%s) hub CPU per request: %.1f ms" % (case, ua_name,
                                                                cpu_ms[(case, ua_name)]))
        err = os.path.join(work, "nginx-error.log")
        if os.path.exists(err):
            lines = open(err).read().splitlines()
            if lines:
                print("nginx errors (%d), last: %s" % (len(lines), lines[-1][:300]))
        print("hub idle RSS: %.1f MB (anonymous %.1f MB, the rest shared library pages)"
              % (idle, idle_anon))
        print("hub peak RSS: %.1f MB" % rss(hub.proc.pid, "VmHWM"))
        time.sleep(2)
        print("hub RSS after the load: %.1f MB (anonymous %.1f MB)"
              % (rss(hub.proc.pid, "VmRSS"), rss(hub.proc.pid, "RssAnon")))
    finally:
        if nginx:
            nginx.send_signal(signal.SIGQUIT)
            nginx.wait()
        if hub:
            hub.stop()
        double.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
