"""How much of a proxied answer the hub should hold for a slow client
(LIMIT_PENDING, src/http/limits.h): hubs built with different values proxy
the same 10,000-pod list from a fast upstream, side by side in one run.

The upstream is nginx serving the list as a file (the Python test double
tops out near 120 MB/s on a busy machine and would hide any difference).
Each round runs every hub once, in rotating order; the figure is the
median of the rounds, with each hub's peak RSS.  A benchmark, not a test.

usage: python3 bench/pending_bench.py ROUNDS LABEL=BUILD_DIR [LABEL=BUILD_DIR ...]

Builds with another LIMIT_PENDING, e.g. 256 KiB:
    meson setup build-p256k --buildtype=release -Dc_args=-DLIMIT_PENDING=262144u
    ninja -C build-p256k src/yurthub
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from harness import Double, Hub, free_port, get, wait_for  # noqa: E402

PATH = "/api/v1/pods"


def load(load_bin, port, n, c):
    out = subprocess.run([load_bin, "http://127.0.0.1:%d%s" % (port, PATH), str(n), str(c),
                          "bench-client/1.0"], capture_output=True, text=True)
    fields = dict(kv.split("=") for kv in out.stdout.split())
    return float(fields.get("mbps", 0))


def peak_rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def static_upstream(work):
    """nginx serving the double's 10,000-pod list and /healthz as files."""
    double = Double(work, ["--seed", "sample", "--node", "node1", "--pods", "10000"])
    root = os.path.join(work, "root")
    os.makedirs(os.path.join(root, "api", "v1"))
    with open(os.path.join(root, "api", "v1", "pods"), "wb") as f:
        f.write(get("127.0.0.1", double.port, PATH)[2])
    double.stop()
    with open(os.path.join(root, "healthz"), "w") as f:
        f.write("ok")
    for d in (work, root, os.path.join(root, "api"), os.path.join(root, "api", "v1")):
        os.chmod(d, 0o755)  # nginx workers run as another user
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write("worker_processes 1; daemon off; pid %(w)s/nginx.pid; error_log %(w)s/err.log;\n"
                "events { worker_connections 1024; }\n"
                "http { access_log off; default_type application/json;\n"
                "  server { listen 127.0.0.1:%(p)d; root %(r)s; location / { } } }\n"
                % {"w": work, "p": port, "r": root})
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def up():
        try:
            return get("127.0.0.1", port, "/healthz")[0] == 200
        except OSError:
            return False
    wait_for(up, 10, what="nginx")
    return proc, port


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    builds = [a.split("=", 1) for a in sys.argv[2:]]
    load_bin = os.path.join(os.path.abspath(builds[0][1]), "bench", "http_load")
    work = tempfile.mkdtemp(prefix="yurthub-pending-bench-")
    nginx, hubs = None, {}
    try:
        nginx, port = static_upstream(work)
        url = "http://127.0.0.1:%d" % port
        for label, build in builds:
            hubs[label] = Hub(work, [url], name=label, extra=["-v", "0"],
                              binary=os.path.join(os.path.abspath(build), "src", "yurthub"))
        labels = [label for label, _ in builds]
        mbps = {label: [] for label in labels}
        direct = []
        for r in range(rounds):
            for label in labels[r % len(labels):] + labels[:r % len(labels)]:
                load(load_bin, hubs[label].proxy_port, 2, 8)  # warm up connections
                mbps[label].append(load(load_bin, hubs[label].proxy_port, 48, 8))
            direct.append(load(load_bin, port, 48, 8))
        print("10,000-pod list from nginx, 8 concurrent clients, median of %d rounds" % rounds)
        print("direct: %.1f MB/s" % sorted(direct)[rounds // 2])
        for label in labels:
            print("%s: %.1f MB/s (rounds: %s), peak RSS %.1f MB"
                  % (label, sorted(mbps[label])[rounds // 2],
                     " ".join("%.0f" % v for v in mbps[label]),
                     peak_rss_mb(hubs[label].proc.pid)))
    finally:
        for h in hubs.values():
            h.stop()
        if nginx:
            nginx.send_signal(signal.SIGQUIT)
            nginx.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
