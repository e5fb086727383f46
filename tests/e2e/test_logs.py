"""End to end, the hub's log: one line per event, with a level; the startup
line says the version, the storage (cache path, or etcd servers and prefix),
the upstream servers and the ports; --log-format=json gives one JSON object
per line with ts, level and msg, at -v 4 too and whatever bytes a client puts
in its URL; -v 0 is quiet: an online session with lists and watches logs the
lifecycle lines only (starting, ready, the upstream's first verdict,
stopping), and -v 4 adds a line per request.  (That no secret reaches the
log at any -v is test_security.py's.)
"""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import (HUB_BIN, Double, Hub, Suite, free_port, request, wait_for,  # noqa: E402
                     without_net_admin)

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
KUBE_PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
COREDNS = "coredns/v1.11.1 (linux/amd64) kubernetes/abcdef"

TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"
TEXT_LINE = re.compile(r"^[EWID] " + TS + r" \S[^\x00-\x1f\x7f]*$")
LEVELS = {"error", "warning", "info", "debug"}
LIFECYCLE = [re.compile(p) for p in (
    r"^yurthub \S+ starting: ", r"^yurthub ready$", r"^upstream \S+ is healthy \(first probe\)$",
    r"^yurthub stopping \(signal 15\)$")]


def version():
    return subprocess.run([HUB_BIN, "--version"], capture_output=True,
                          text=True).stdout.split()[-1]


def read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    return data, data.split(b"\n")


def traffic(hub, watch_seconds=2):
    """A normal online session: the node's agents list, get and watch."""
    hdr = {"Accept": "application/json"}
    for agent, paths in ((KUBELET, ["/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1",
                                    "/api/v1/nodes/node1", "/api/v1/namespaces/default/secrets",
                                    "/api/v1/services"]),
                         (KUBE_PROXY, ["/api/v1/services", "/api/v1/endpoints",
                                       "/apis/discovery.k8s.io/v1/endpointslices"]),
                         (COREDNS, ["/api/v1/namespaces", "/api/v1/services"])):
        for p in paths:
            request("127.0.0.1", hub.proxy_port, "GET", p, headers=dict(hdr, **{
                "User-Agent": agent}))
    res = []

    def watch(agent, path):
        res.append(request("127.0.0.1", hub.proxy_port, "GET",
                           path + "?watch=true&allowWatchBookmarks=true&timeoutSeconds=%d"
                           % watch_seconds, headers=dict(hdr, **{"User-Agent": agent}))[0])

    ths = [threading.Thread(target=watch, args=a) for a in (
        (KUBELET, "/api/v1/pods"), (KUBE_PROXY, "/api/v1/services"),
        (COREDNS, "/api/v1/namespaces"))]
    for th in ths:
        th.start()
    for th in ths:
        th.join(60)
    return res


def raw_get(port, path, agent=b"kubelet/1.0"):
    """A request whose URL holds bytes http.client would refuse."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: " + agent +
                  b"\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data.split(b" ", 2)[1] if data.startswith(b"HTTP/") else b"?"
    except OSError:
        return b"?"
    finally:
        s.close()


def check_startup(t, label, msg, parts):
    missing = [p for p in parts if p not in msg]
    t.check("%s: the startup line states %s" % (label, ", ".join(parts)), not missing,
            "missing %s in %r" % (missing, msg))


def test_text_startup(t, double):
    hub = Hub(t.workdir, [double.url], name="text")
    try:
        data, lines = read_lines(hub.logpath)
        first = lines[0].decode()
        t.check("text: the first line is the startup line, level I",
                re.match(r"^I " + TS + r" yurthub \S+ starting: ", first) is not None, first)
        check_startup(t, "text", first, [
            "yurthub %s starting" % version(), "node node1", "storage disk",
            "cache path " + hub.cache, "upstreams " + double.url, "lb rr",
            "proxy 127.0.0.1:%d" % hub.proxy_port, "secure proxy off",
            "serve 127.0.0.1:%d" % hub.serve_port, "log -v 2 text"])
    finally:
        hub.stop()


def test_etcd_startup(t, double):
    """With --storage=etcd: the etcd servers and prefix (etcd need not answer
    for the line to be written)."""
    log = os.path.join(t.workdir, "etcd-startup.log")
    e1, e2 = "http://127.0.0.1:%d" % free_port(), "http://127.0.0.1:%d" % free_port()
    serve = free_port()
    with open(log, "wb") as f:
        p = subprocess.Popen([*without_net_admin(), HUB_BIN,
                              "--server-addr=" + double.url, "--node-name=node1",
                              "--storage=etcd", "--etcd-servers=%s,%s" % (e1, e2),
                              "--etcd-prefix=/obs-registry", "--proxy-port=0",
                              "--serve-port=%d" % serve, "--proxy-secure-port=10268",
                              "--disk-cache-path=" + os.path.join(t.workdir, "etcd-local"),
                              "--log-format=json"], stdout=f, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: b"starting" in open(log, "rb").read() or p.poll() is not None, 20,
                 what="the startup line")
    finally:
        if p.poll() is None:
            p.terminate()
        p.wait(30)
    first = json.loads(open(log, "rb").read().split(b"\n")[0])
    check_startup(t, "etcd, json", first.get("msg", ""), [
        "yurthub %s starting" % version(), "storage etcd",
        "etcd servers %s,%s" % (e1, e2), "etcd prefix /obs-registry",
        "upstreams " + double.url, "proxy off",
        "secure proxy off",  # the port is set, but without certificates it stays closed
        "serve 127.0.0.1:%d" % serve, "log -v 0 json"])
    t.check("etcd, json: the startup line is level info", first.get("level") == "info", first)


def test_json_v4(t, double):
    hub = Hub(t.workdir, [double.url], extra=["--log-format=json", "-v", "4"], name="json")
    try:
        statuses = traffic(hub)
        t.check("json -v 4: the watches ended with 200", statuses == [200] * 3, str(statuses))
        # bytes that are not UTF-8, an escape sequence and a quote in a URL
        raw_get(hub.proxy_port, b"/api/v1/namespaces/d\xff\xfe%0A\x1b[31m\"x/pods")
        raw_get(hub.proxy_port, b"/api/v1/pods", agent=b"odd\xff\x1b]0;agent/1.0")
        # an offline period: warnings and lifecycle lines
        double.cut("refuse")
        try:
            request("127.0.0.1", hub.proxy_port, "GET", "/api/v1/nodes/node1",
                    headers={"User-Agent": KUBELET})
            wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 15, what="offline")
            request("127.0.0.1", hub.proxy_port, "GET", "/api/v1/services",
                    headers={"User-Agent": KUBELET})
        finally:
            double.restore()
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
    finally:
        rc = hub.stop()
    t.check("json -v 4: the hub stops cleanly", rc == 0, hub.tail())
    data, lines = read_lines(hub.logpath)
    t.check("json -v 4: the log ends with a newline, no empty line",
            data.endswith(b"\n") and b"" not in lines[:-1])
    recs, bad = [], []
    for n, raw in enumerate(lines[:-1], 1):
        try:
            r = json.loads(raw.decode("utf-8"))
            if not isinstance(r, dict):
                raise ValueError("not an object")
        except ValueError as e:
            bad.append("line %d: %s: %r" % (n, e, raw[:200]))
            continue
        recs.append(r)
    t.check("json -v 4: every line (%d) is one JSON object in UTF-8" % (len(lines) - 1), not bad,
            "; ".join(bad[:5]))
    fields = [r for r in recs if set(r) != {"ts", "level", "msg"} or
              not all(isinstance(r[k], str) for k in ("ts", "level", "msg"))]
    t.check("json -v 4: every record has ts, level and msg (strings), nothing else", not fields,
            str(fields[:3]))
    t.check("json -v 4: ts is RFC 3339 UTC with microseconds",
            all(re.match("^" + TS + "$", r.get("ts", "")) for r in recs))
    t.check("json -v 4: level is one of %s" % sorted(LEVELS),
            all(r.get("level") in LEVELS for r in recs), str({r.get("level") for r in recs}))
    ctl = [r["msg"] for r in recs if re.search(r"[\x00-\x1f\x7f]", r.get("msg", ""))]
    t.check("json -v 4: no control character in any message (one record, one line)", not ctl,
            str(ctl[:3]))
    t.check("json -v 4: the time goes forward",
            [r["ts"] for r in recs] == sorted(r["ts"] for r in recs))
    msgs = [r.get("msg", "") for r in recs]
    check_startup(t, "json", msgs[0] if msgs else "", [
        "yurthub %s starting" % version(), "storage disk", "cache path " + hub.cache,
        "upstreams " + double.url, "proxy 127.0.0.1:%d" % hub.proxy_port, "secure proxy off",
        "serve 127.0.0.1:%d" % hub.serve_port, "log -v 4 json"])
    t.check("json -v 4: one line per request",
            sum(m.startswith("request: kubelet list /api/v1/pods") for m in msgs) >= 1 and
            sum(m.startswith("request: ") for m in msgs) >= 12,
            str([m for m in msgs if m.startswith("request: ")][:5]))
    t.check("json -v 4: the URL with odd bytes is logged, on its line",
            any("/api/v1/namespaces/d\ufffd\ufffd%0A" in m for m in msgs),
            str([m for m in msgs if "namespaces/d" in m][:3]))
    lvl = {r["msg"]: r["level"] for r in recs}
    unhealthy = [m for m in lvl if re.match(r"upstream \S+ is unhealthy", m)]
    t.check("json -v 4: the upstream going away is a warning",
            unhealthy and all(lvl[m] == "warning" for m in unhealthy), str(unhealthy))
    t.check("json -v 4: ready and stopping are logged",
            "yurthub ready" in lvl and "yurthub stopping (signal 15)" in lvl)


def test_text_v4_lines(t, double):
    hub = Hub(t.workdir, [double.url], extra=["-v", "4"], name="text4")
    try:
        traffic(hub, watch_seconds=1)
        raw_get(hub.proxy_port, b"/api/v1/namespaces/d\xff\x1b[31m%0D%0Ax/pods")
    finally:
        rc = hub.stop()
    data, lines = read_lines(hub.logpath)
    bad = [l[:200] for l in lines[:-1] if not TEXT_LINE.match(l.decode("utf-8", "replace"))]
    t.check("text -v 4: every line (%d) is '<level> <time> <message>', no control byte"
            % (len(lines) - 1), rc == 0 and not bad and data.endswith(b"\n"), str(bad[:5]))
    try:
        data.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError as e:
        utf8 = str(e)
    t.check("text -v 4: the log is valid UTF-8", utf8 is True, str(utf8))
    t.check("text -v 4: request lines", data.count(b" request: ") >= 12)


def test_quiet_v0(t, double):
    # Without its dummy interface: a hub started by a test has no
    # CAP_NET_ADMIN (harness.without_net_admin) and would warn about it.
    hub = Hub(t.workdir, [double.url], extra=["-v", "0", "--enable-dummy-if=false"],
              name="quiet")
    try:
        statuses = traffic(hub)
        traffic(hub, watch_seconds=1)
        t.check("-v 0: the session's watches ended with 200", statuses == [200] * 3,
                str(statuses))
        rc = subprocess.run(["kubectl", "--server", hub.url, "get", "pods", "-A"],
                            capture_output=True, timeout=60,
                            env=dict(os.environ, KUBECONFIG=os.devnull)).returncode
        t.check("-v 0: kubectl through the hub works", rc == 0)
    finally:
        hub.stop()
    data, lines = read_lines(hub.logpath)
    msgs = [TEXT_LINE.match(l.decode()) and l.decode().split(" ", 2)[2] for l in lines[:-1]]
    other = [m for m in msgs if not m or not any(p.match(m) for p in LIFECYCLE)]
    t.check("-v 0: an online session logs the lifecycle lines only (%d lines)" % len(msgs),
            not other and len(msgs) == len(LIFECYCLE), "%d others: %s" % (len(other), other[:5]))
    t.check("-v 0: they come in order: starting, ready/first verdict, stopping",
            len(msgs) == 4 and LIFECYCLE[0].match(msgs[0]) and LIFECYCLE[3].match(msgs[-1]),
            str(msgs))


def test_v0_unreachable_upstream(t):
    """A hub that starts with its cloud unreachable says so at -v 0."""
    dead = "http://127.0.0.1:%d" % free_port()
    hub = Hub(t.workdir, [dead], extra=["-v", "0"], name="deadup")
    try:
        wait_for(lambda: b"unhealthy" in open(hub.logpath, "rb").read(), 10,
                 what="the first verdict")
    except TimeoutError:
        pass
    finally:
        hub.stop()
    data, lines = read_lines(hub.logpath)
    t.check("-v 0, cloud unreachable at start: a warning names the server",
            re.search(rb"^W " + TS.encode() + rb" upstream " + re.escape(dead.encode()) +
                      rb" is unhealthy \(first probe: ", data, re.M) is not None, data[-600:])


def main():
    t = Suite("logs")
    t0 = time.time()
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(double.stop)
    t.run(test_text_startup, double)
    t.run(test_etcd_startup, double)
    t.run(test_json_v4, double)
    t.run(test_text_v4_lines, double)
    t.run(test_quiet_v0, double)
    t.run(test_v0_unreachable_upstream)
    print("time: %.1f s" % (time.time() - t0))
    t.finish()


if __name__ == "__main__":
    main()
