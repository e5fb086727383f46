"""Real Kubernetes clients for the end-to-end suites: clients that nobody on
this project wrote, driven against the hub.

- kubectl120(server, *args): Debian's kubernetes-client 1.20, unpacked by
  scripts/clients.sh into build-clients/ (harness.kubectl is the image's).
- Informer: one informer of @kubernetes/client-node 1.x (its ListWatch, as
  makeInformer builds it), a Node process running tests/clients/node/
  informer.js; every event it reports is kept, wait_event() waits for one
  that matches, dump() asks for the informer cache's keys.
- PyWatch: one watch of python3-kubernetes (kubernetes.watch.Watch().stream)
  in its own process, tests/clients/py_watch.py; same interface.
- py_api(server): a python3-kubernetes API object for calls in the test
  process itself (lists, gets; ApiException carries the status).

Every client process is stopped by its PID.  Nothing here sleeps and hopes:
waits poll for a condition with a deadline.

    inf = Informer(t.workdir, hub.url, "/api/v1/pods")
    inf.wait_event(lambda e: e["event"] == "started", 30, "the informer listed")
    double.delete_object("v1", "Pod", "default", "web-0")
    inf.wait_event(lambda e: e["event"] == "delete" and e["name"] == "web-0", 10, "DELETED")
    keys = inf.dump()["keys"]          # ["default/web-1", ...]
    inf.stop()
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from harness import PYTHON, ROOT

KUBECTL120 = os.path.join(ROOT, "build-clients", "kubernetes-client", "usr", "bin", "kubectl")
NODE_DIR = os.path.join(ROOT, "tests", "clients", "node")
INFORMER_JS = os.path.join(NODE_DIR, "informer.js")
PY_WATCH = os.path.join(ROOT, "tests", "clients", "py_watch.py")
NODE = "node"


def missing():
    """What of the real clients is not installed, as one line each (empty:
    all there).  scripts/clients.sh installs them (make test runs it)."""
    out = []
    if not os.access(KUBECTL120, os.X_OK):
        out.append("kubectl 1.20 (%s): run scripts/clients.sh" % KUBECTL120)
    if not os.path.exists(os.path.join(NODE_DIR, "node_modules", "@kubernetes", "client-node",
                                       "package.json")):
        out.append("@kubernetes/client-node (tests/clients/node/node_modules): run "
                   "scripts/clients.sh")
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        out.append("python3-kubernetes: run scripts/deps.sh")
    return out


def kubectl120(server, *args, timeout=60, stdin=None, cache_dir=None):
    """kubectl 1.20 against a plain-HTTP server; (exit code, stdout, stderr).
    With cache_dir=None each call gets a fresh discovery cache, so every call
    asks the server for discovery as a first run on a node would."""
    env = dict(os.environ, KUBECONFIG=os.devnull)
    made = None
    if cache_dir is None:
        made = cache_dir = tempfile.mkdtemp(prefix="kubectl120-cache-")
    try:
        p = subprocess.run([KUBECTL120, "--server", server, "--cache-dir", cache_dir, *args],
                           input=stdin, capture_output=True, timeout=timeout, env=env)
    finally:
        if made:
            shutil.rmtree(made, ignore_errors=True)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def py_api(server, api="CoreV1Api", user_agent=None):
    """A python3-kubernetes API object (client.<api>) on a plain-HTTP server."""
    from kubernetes import client
    cfg = client.Configuration()
    cfg.host = server
    c = client.ApiClient(cfg)
    if user_agent:
        c.user_agent = user_agent
    return getattr(client, api)(c)


class ClientProcess:
    """A client in its own process that reports one JSON object per line on
    stdout (each with "event" and "t"); stderr goes to a log file in workdir.
    Lines that are not JSON are kept as {"event": "raw", "line": ...}."""

    # stop(): whether closing stdin asks the process to end (else SIGTERM)
    stops_on_eof = False

    def __init__(self, workdir, name, argv, cwd=None):
        self.name = name
        self.logpath = os.path.join(workdir, name + ".stderr")
        self._log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, cwd=cwd)
        self.events = []
        self._cond = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"event": "raw", "line": line}
            with self._cond:
                self.events.append(ev)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def mark(self):
        """An index into events: wait_event(..., since=mark) looks only later."""
        with self._cond:
            return len(self.events)

    def wait_event(self, pred, timeout, what="an event", since=0):
        """The first event from index `since` on for which pred(event) is true;
        raises TimeoutError (with the events seen) after timeout seconds or
        when the process has ended without one."""
        deadline = time.time() + timeout
        with self._cond:
            while True:
                for ev in self.events[since:]:
                    if pred(ev):
                        return ev
                left = deadline - time.time()
                if left <= 0 or self._eof:
                    raise TimeoutError("%s: no %s in %.0f s%s; events: %s; stderr: %s" % (
                        self.name, what, timeout, " (the process ended)" if self._eof else "",
                        json.dumps(self.events[since:][-15:]), self.stderr_tail()))
                self._cond.wait(min(left, 0.5))

    def select(self, pred, since=0):
        with self._cond:
            return [ev for ev in self.events[since:] if pred(ev)]

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def alive(self):
        return self.proc.poll() is None

    def stderr_tail(self, n=2000):
        try:
            with open(self.logpath, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout=10):
        """End the process by its PID: close stdin first when that asks it to
        stop (stops_on_eof), then SIGTERM, then SIGKILL; its exit status."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if self.proc.poll() is None and self.stops_on_eof:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(timeout)
        self._log.close()
        return self.proc.returncode


class Informer(ClientProcess):
    """@kubernetes/client-node's informer on path (a collection: /api/v1/pods,
    /api/v1/namespaces/NS/services, /apis/discovery.k8s.io/v1/endpointslices,
    ...) through server.  Events: started, connect, add, update, delete,
    error (message, status, code), dump, stopped; see informer.js.
    restart_ms: after an error the informer is started again in that many ms
    (as its users do: client-node stops an informer on any error but 410);
    -1 leaves it stopped.  stop() closes its stdin: it stops and exits 0."""

    stops_on_eof = True

    def __init__(self, workdir, server, path, label_selector=None, field_selector=None,
                 user_agent=None, restart_ms=500, name="informer"):
        argv = [NODE, INFORMER_JS, "--server", server, "--path", path,
                "--restart-ms", str(restart_ms)]
        if label_selector is not None:
            argv += ["--label-selector", label_selector]
        if field_selector is not None:
            argv += ["--field-selector", field_selector]
        if user_agent:
            argv += ["--user-agent", user_agent]
        super().__init__(workdir, name, argv, cwd=NODE_DIR)
        self._dumps = 0

    def wait_started(self, timeout=30, since=0):
        """Listed and watching without an error in between."""
        return self.wait_event(lambda e: e["event"] == "started", timeout,
                               "'started' (listed and watching)", since)

    def dump(self, timeout=10):
        """The informer cache now: {"keys": sorted ["ns/name"], "rv": {key: rv},
        "resourceVersion": the informer's last}."""
        self._dumps += 1
        ident = "%d" % self._dumps
        since = self.mark()
        self.send("dump " + ident)
        return self.wait_event(lambda e: e["event"] == "dump" and e.get("id") == ident,
                               timeout, "dump " + ident, since)

    def errors(self, since=0):
        return self.select(lambda e: e["event"] == "error", since)


class PyWatch(ClientProcess):
    """python3-kubernetes' watch: func is a list call of api (e.g.
    "list_pod_for_all_namespaces", or "list_namespaced_pod" with namespace).
    Events: ADDED, MODIFIED, DELETED, BOOKMARK (name, namespace,
    resourceVersion), error (status, reason), end."""

    def __init__(self, workdir, server, func, api="CoreV1Api", namespace=None,
                 resource_version=None, label_selector=None, field_selector=None,
                 timeout_seconds=None, bookmarks=False, user_agent=None, name="py-watch"):
        argv = [PYTHON, PY_WATCH, "--server", server, "--api", api, "--func", func]
        for flag, v in (("--namespace", namespace), ("--resource-version", resource_version),
                        ("--label-selector", label_selector),
                        ("--field-selector", field_selector),
                        ("--timeout-seconds", timeout_seconds), ("--user-agent", user_agent)):
            if v is not None:
                argv += [flag, str(v)]
        if bookmarks:
            argv.append("--bookmarks")
        super().__init__(workdir, name, argv)

    def wait_end(self, timeout):
        """The stream's last word: an "end" or "error" event."""
        return self.wait_event(lambda e: e["event"] in ("end", "error"), timeout,
                               "end of the watch")


def key(obj_or_event):
    """"namespace/name" of an object (dict with metadata) or of an event."""
    md = obj_or_event.get("metadata", obj_or_event)
    return "%s/%s" % (md.get("namespace") or "", md.get("name"))
