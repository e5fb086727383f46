"""Shared pieces of the end-to-end tests: start the test double and the hub on
free loopback ports with a temporary cache directory, stop them by PID, make
raw HTTP requests, and count checks.

Every suite prints one line at the end, "RESULT: N passed, M failed", which
scripts/run-tests.sh adds to the total.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.environ.get("YURTHUB_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("YURTHUB_BUILD") or os.path.join(ROOT, "build-san")
HUB_BIN = os.path.join(BUILD, "src", "yurthub")
RELEASE = os.environ.get("YURTHUB_RELEASE_BUILD") or os.path.join(ROOT, "build")
RELEASE_HUB = os.path.join(RELEASE, "src", "yurthub")
DOUBLE = os.path.join(ROOT, "tests", "double", "apiserver.py")
PYTHON = "/usr/bin/python3"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(cond, timeout, step=0.05, what="condition"):
    """Poll cond() until true; raises after timeout seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise TimeoutError("timed out waiting for " + what)


def within(cond, timeout, what):
    """wait_for, False instead of raising: the check then says what it saw."""
    try:
        return wait_for(cond, timeout, what=what)
    except TimeoutError:
        return False


class Double:
    """The kube-apiserver test double (tests/double/apiserver.py)."""

    def __init__(self, workdir, args=()):
        fd, self.ready = tempfile.mkstemp(prefix="double-ready-", dir=workdir)
        os.close(fd)
        os.unlink(self.ready)
        self.log = open(self.ready.replace("double-ready-", "double-log-"), "wb")
        self.proc = subprocess.Popen(
            [PYTHON, DOUBLE, "--port", "0", "--control-port", "0", "--ready-file", self.ready,
             *args], stdout=self.log, stderr=subprocess.STDOUT)
        info = wait_for(self._read_ready, 30, what="the test double")
        self.port = info["port"]
        self.control_port = info["control_port"]
        self.url = "http://127.0.0.1:%d" % self.port

    def _read_ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError("test double exited with %s" % self.proc.returncode)
        try:
            with open(self.ready) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def control(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.control_port, timeout=30)
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.read()
        c.close()
        return r.status, out

    def cut(self, mode="refuse"):
        return self.control("POST", "/cut?mode=" + mode)

    def restore(self):
        return self.control("POST", "/restore")

    def put_object(self, obj):
        return self.control("POST", "/objects", obj)

    def delete_object(self, api_version, kind, namespace, name):
        q = "apiVersion=%s&kind=%s&namespace=%s&name=%s" % (api_version, kind, namespace, name)
        return self.control("DELETE", "/objects?" + q)

    def state(self):
        return json.loads(self.control("GET", "/state")[1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Etcd:
    """A throw-away etcd (Debian's etcd-server) on two free loopback ports with
    a temporary data directory, stopped by PID."""

    def __init__(self, workdir, name="etcd", extra=()):
        self.dir = os.path.join(workdir, name)
        self.extra = list(extra)
        self.client_port = free_port()
        self.peer_port = free_port()
        self.url = "http://127.0.0.1:%d" % self.client_port
        self.logpath = self.dir + ".log"
        self.proc = None
        self.start()

    def start(self):
        peer = "http://127.0.0.1:%d" % self.peer_port
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(
            ["/usr/bin/etcd", "--name", "e2e", "--data-dir", self.dir,
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "e2e=" + peer, "--log-level", "error", *self.extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(self.healthy, 20, step=0.1, what="etcd")

    def healthy(self):
        if self.proc.poll() is not None:
            raise RuntimeError("etcd exited with %s" % self.proc.returncode)
        try:
            s, _, body = get("127.0.0.1", self.client_port, "/health", timeout=2)
            return s == 200 and json.loads(body).get("health") == "true"
        except (OSError, ValueError):
            return False

    def ctl(self, *args):
        """etcdctl against this etcd: (exit code, stdout)."""
        env = dict(os.environ, ETCDCTL_API="3")
        p = subprocess.run(["etcdctl", "--endpoints=" + self.url, *args], capture_output=True,
                           timeout=30, env=env)
        return p.returncode, p.stdout.decode()

    def keys(self, prefix):
        rc, out = self.ctl("get", "--prefix", "--keys-only", prefix)
        return [k for k in out.splitlines() if k] if rc == 0 else None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def without_net_admin():
    """The command prefix that runs a program without CAP_NET_ADMIN, so that
    a hub started by a test as root cannot make its dummy interface in the
    host's network (tests run side by side on one machine, and the interface
    is test_dummy_if.py's, in a namespace of its own): every hub then starts
    as it would without root, warning that it goes on without the interface.
    Empty when not root: the capability is not there to drop."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return []
    return ["setpriv", "--bounding-set=-net_admin", "--inh-caps=-net_admin", "--"]


class Hub:
    """The yurthub binary under test.  net_admin=True keeps CAP_NET_ADMIN
    (root's), with which the hub makes its dummy interface."""

    def __init__(self, workdir, servers, extra=(), cache=None, name="hub", node="node1",
                 binary=None, wrapper=(), ready_timeout=30, env=None, net_admin=False):
        self.workdir = workdir
        self.env = dict(os.environ, **(env or {}))
        self.cache = cache or os.path.join(workdir, name + "-cache")
        self.proxy_port = free_port()
        self.serve_port = free_port()
        self.url = "http://127.0.0.1:%d" % self.proxy_port
        self.logpath = os.path.join(workdir, name + ".log")
        self.ready_timeout = ready_timeout
        self.args = [*([] if net_admin else without_net_admin()), *wrapper, binary or HUB_BIN,
                     "--server-addr=" + ",".join(servers),
                     "--node-name=" + node, "--proxy-port=%d" % self.proxy_port, "--serve-port=%d" % self.serve_port,
                     "--proxy-secure-port=0", "--disk-cache-path=" + self.cache,
                     "--heartbeat-interval-seconds=1", "-v", "2", *extra]
        self.proc = None
        self.start()

    def start(self):
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env)
        wait_for(self.ready, self.ready_timeout, what="the hub to be ready")

    def ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError("hub exited with %s; log:\n%s" % (self.proc.returncode,
                                                                 self.tail()))
        try:
            return get("127.0.0.1", self.serve_port, "/v1/readyz")[0] == 200
        except OSError:
            return False

    def metrics(self):
        return get("127.0.0.1", self.serve_port, "/metrics")[2].decode()

    def metric(self, name):
        """Sum of the samples of one metric family (label sets added up)."""
        total = 0.0
        found = False
        for line in self.metrics().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return total if found else None

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def threads(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        return 0

    def tail(self, n=40):
        try:
            with open(self.logpath, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else 0
        self.log.close()
        return rc


def request(host, port, method, path, body=None, headers=None, timeout=60):
    """One HTTP request: (status, headers dict lower-cased, body bytes)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, hdrs, data


def get(host, port, path, headers=None, timeout=60):
    return request(host, port, "GET", path, headers=headers, timeout=timeout)


def proxy_json(hub, path, ua):
    """GET path on the hub's proxy port as ua: (status, the body as JSON, or
    its raw bytes when it is not JSON)."""
    s, _, body = get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": ua})
    try:
        return s, json.loads(body)
    except ValueError:
        return s, body


def each_build(run):
    """run(label, binary) with the sanitizer build, then with the release
    build when there is one (a note says so when there is none)."""
    run("sanitizer", HUB_BIN)
    if os.path.exists(RELEASE_HUB):
        run("release", RELEASE_HUB)
    else:
        print("note: no release build at %s: its half is skipped (make test builds it)"
              % RELEASE_HUB, flush=True)


def kubectl(server, *args, timeout=60, stdin=None):
    """Run kubectl against a plain-HTTP server; (exit code, stdout, stderr)."""
    env = dict(os.environ)
    env["KUBECONFIG"] = os.devnull
    p = subprocess.run(["kubectl", "--server", server, *args], input=stdin,
                       capture_output=True, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


class Suite:
    """Named checks; a check that raises counts as failed with the traceback."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        self.workdir = tempfile.mkdtemp(prefix="yurthub-e2e-%s-" % name)
        self.cleanups = []

    def check(self, what, cond, detail=""):
        if cond:
            self.passed += 1
            print("ok    %s" % what, flush=True)
        else:
            self.failed += 1
            print("FAIL  %s %s" % (what, detail), flush=True)
        return cond

    def run(self, fn, *args):
        try:
            fn(self, *args)
        except Exception:
            self.failed += 1
            print("FAIL  %s raised:" % fn.__name__, flush=True)
            traceback.print_exc(file=sys.stdout)

    def finish(self):
        for c in reversed(self.cleanups):
            try:
                c()
            except Exception:
                traceback.print_exc(file=sys.stdout)
        if self.failed == 0:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            print("logs kept in %s" % self.workdir)
        print("RESULT: %d passed, %d failed" % (self.passed, self.failed), flush=True)
        sys.exit(1 if self.failed else 0)
