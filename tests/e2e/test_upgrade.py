"""End to end, protocol upgrades (exec, attach, port-forward) through the hub
to the test double's echoing endpoints (tests/double/README.md):

- kubectl exec -i POD -- cat, over WebSocket (RemoteCommand v5, kubectl's
  default): stdin comes back on stdout; kubectl exec -i POD -- echo ARGS prints
  ARGS; both exit 0
- a raw SPDY/3.1 upgrade: the cloud's 101 and its headers reach the client;
  bytes sent right behind the request and 1 MiB each way round-trip byte for
  byte; the client's half-close reaches the cloud, and the cloud's close
  reaches the client
- an upgrade the cloud refuses (a pod that does not exist) is passed on as
  it came: 404 with the cloud's Status
- an upgraded connection is not counted against --max-requests-in-flight
- the relay ends when the cloud is declared unhealthy, and an upgrade while
  offline is 503
- a hub stopping with an upgraded connection open closes it and exits 0
"""

import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, get, kubectl, wait_for  # noqa: E402
from watch_stream import read_head  # noqa: E402

POD = "exec-target"
EXEC = "/api/v1/namespaces/default/pods/%s/exec?command=cat&stdin=true&stdout=true" % POD


def make_pod(double):
    double.put_object({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": POD, "namespace": "default"},
                       "spec": {"nodeName": "node1",
                                "containers": [{"name": "c", "image": "busybox"}]},
                       "status": {"phase": "Running"}})


def spdy_open(port, path=EXEC, early=b""):
    """An upgrade request the way kubectl's SPDY executor makes it; returns
    (socket, status, headers, bytes that came after the head)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nUser-Agent: e2e-upgrade/1.0\r\n"
              b"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
              b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
              b"X-Stream-Protocol-Version: channel.k8s.io\r\nContent-Length: 0\r\n\r\n"
              % path.encode() + early)
    head, rest = read_head(s)
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/") else 0
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return s, status, hdrs, rest


def read_exactly(s, n, have=b""):
    data = have
    while len(data) < n:
        more = s.recv(65536)
        if not more:
            break
        data += more
    return data


def read_to_eof(s, timeout):
    """Everything until the peer closes: (bytes, closed in time)."""
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            more = s.recv(65536)
            if not more:
                return data, True
            data += more
    except socket.timeout:
        return data, False
    except ConnectionResetError:
        return data, True


def test_kubectl_exec(t, double, hub):
    rc, out, err = kubectl(hub.url, "exec", "-i", POD, "--", "cat",
                           stdin=b"hello through the hub\nline two\n")
    t.check("kubectl exec -i POD -- cat through the hub (WebSocket): stdin back on stdout",
            rc == 0 and out == "hello through the hub\nline two\n", "%s %r %s" % (rc, out, err))
    # -i: with no stdin, client-go may drop output that arrives before it has
    # made its streams; the double answers once stdin (empty here) is closed.
    rc, out, err = kubectl(hub.url, "exec", "-i", POD, "--", "echo", "a", "b", stdin=b"")
    t.check("kubectl exec -i POD -- echo a b through the hub", rc == 0 and out == "a b\n",
            "%s %r %s" % (rc, out, err))
    by_path = double.state()["requests_by_verb_path"]
    t.check("the exec went to the cloud as a WebSocket GET",
            by_path.get("get /api/v1/namespaces/default/pods/%s/exec" % POD, 0) >= 2, by_path)


def test_spdy_relay(t, double, hub):
    s, status, hdrs, rest = spdy_open(hub.proxy_port, early=b"early bytes|")
    t.check("SPDY/3.1: 101 from the cloud, with its headers",
            status == 101 and hdrs.get("upgrade") == "SPDY/3.1" and
            hdrs.get("x-stream-protocol-version") == "v4.channel.k8s.io" and
            "upgrade" in hdrs.get("connection", "").lower(), "%s %s" % (status, hdrs))
    got = read_exactly(s, len(b"early bytes|"), rest)
    t.check("bytes sent right behind the request come back", got == b"early bytes|", got)
    payload = bytes(range(256)) * 4096  # 1 MiB
    sender = threading.Thread(target=s.sendall, args=(payload,))
    sender.start()
    echoed = read_exactly(s, len(payload))
    sender.join()
    t.check("1 MiB each way round-trips byte for byte", echoed == payload,
            "%d bytes back" % len(echoed))
    s.shutdown(socket.SHUT_WR)  # the cloud's echo ends when its input does
    rest, closed = read_to_eof(s, 20)
    t.check("the client's half-close reaches the cloud, and the cloud's close the client",
            closed and rest == b"", rest[:100])
    s.close()


def test_refusal_passed_on(t, double, hub):
    s, status, hdrs, rest = spdy_open(hub.proxy_port, EXEC.replace(POD, "not-there"))
    body = read_exactly(s, int(hdrs.get("content-length", "0")), rest)
    s.close()
    doc = json.loads(body) if body else {}
    t.check("an upgrade the cloud refuses is passed on as it came (404 NotFound Status)",
            status == 404 and doc.get("reason") == "NotFound" and
            doc.get("details", {}).get("name") == "not-there", "%s %s" % (status, body[:200]))
    rc, out, err = kubectl(hub.url, "exec", "not-there", "--", "echo", "x")
    t.check("kubectl reports the cloud's NotFound", rc != 0 and "NotFound" in err, err)


def test_not_counted(t, double, workdir):
    hub = Hub(workdir, [double.url], name="limit1", extra=["--max-requests-in-flight=1"])
    try:
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 15, what="healthy")
        s, status, _, _ = spdy_open(hub.proxy_port)
        t.check("an upgraded connection is open", status == 101, status)
        s.sendall(b"ping")
        t.check("and relays", read_exactly(s, 4) == b"ping")
        t.check("it is not counted against --max-requests-in-flight",
                hub.metric("yurthub_requests_limited_in_flight") == 0)
        code = get("127.0.0.1", hub.proxy_port, "/api/v1/namespaces/default/pods")[0]
        t.check("a request still gets through with --max-requests-in-flight=1", code == 200,
                code)
        s.close()
    finally:
        hub.stop()


def test_unhealthy_and_offline(t, double, hub):
    s, status, _, _ = spdy_open(hub.proxy_port)
    t.check("an upgraded connection is open", status == 101, status)
    double.cut("blackhole")
    try:
        _, closed = read_to_eof(s, 40)
        t.check("its relay ends when the cloud is declared unhealthy", closed)
        s.close()
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 15, what="offline")
        s, status, _, _ = spdy_open(hub.proxy_port)
        t.check("an upgrade while the cloud is unreachable is 503", status == 503, status)
        s.close()
    finally:
        double.restore()
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")


def test_stop_with_open_relay(t, double, workdir):
    hub = Hub(workdir, [double.url], name="stopping")
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 15, what="healthy")
    s, status, _, _ = spdy_open(hub.proxy_port)
    t.check("an upgraded connection is open before the stop", status == 101, status)
    t0 = time.time()
    rc = hub.stop()
    took = time.time() - t0
    _, closed = read_to_eof(s, 5)
    s.close()
    t.check("the hub stops within 10 s with it open (%.1f s), exit 0" % took,
            took < 10 and rc == 0, "rc %s" % rc)
    t.check("and the client's connection is closed", closed)


def main():
    t = Suite("upgrade")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(double.stop)
    make_pod(double)
    hub = Hub(t.workdir, [double.url])
    t.cleanups.append(hub.stop)
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 15, what="healthy")
    t.run(test_kubectl_exec, double, hub)
    t.run(test_spdy_relay, double, hub)
    t.run(test_refusal_passed_on, double, hub)
    t.run(test_not_counted, double, t.workdir)
    t.run(test_unhealthy_and_offline, double, hub)
    t.run(test_stop_with_open_relay, double, t.workdir)
    t.finish()


if __name__ == "__main__":
    main()
