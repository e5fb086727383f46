"""End to end, the request path (issue 11): how requests come in and how
their answers end, read off the raw socket.

- integers from the URL: a watch with timeoutSeconds=2^63-1 neither kills the
  hub (offline) nor ends at once (online)
- --max-requests-in-flight: with two requests held by the cloud, a third gets
  429 TooManyRequests with Retry-After: 1 at once, a watch is still served,
  and the metrics show it; the limit frees when the requests end
- the request-body budget: bodies over 16 MiB get 413 before they are read;
  while 64 MiB of bodies are held, another body gets 429
- a proxied watch that the hub ends (its cloud declared unhealthy), or whose
  cloud closes it between events, ends with the final chunk: the kept-alive
  connection carries the next request, and with Connection: close the hub
  closes it cleanly; a watch cut inside an event is broken off
- JSON the hub writes offline around names from the URL: the offline token's
  claims for a service account named with a quote, and a Status quoting a
  name that is not UTF-8, parse as JSON and read back as sent
"""

import base64
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, get, wait_for, within  # noqa: E402

UA = "e2e-reqpath/1.0"
HUGE = "9223372036854775807"


class Raw:
    """One HTTP/1.1 exchange on a socket of its own, read strictly: the head,
    then the body chunk by chunk, telling a final chunk from a cut."""

    def __init__(self, port, method, path, headers=None, body=b"", tls=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if tls:
            self.sock = tls.wrap_socket(self.sock, server_hostname="127.0.0.1")
        hdrs = {"Host": "127.0.0.1", "User-Agent": UA, "Accept": "application/json"}
        hdrs.update(headers or {})
        if body:
            hdrs["Content-Length"] = str(len(body))
        head = "%s %s HTTP/1.1\r\n" % (method, path)
        head += "".join("%s: %s\r\n" % kv for kv in hdrs.items()) + "\r\n"
        self.sock.sendall(head.encode() + body)
        self.buf = b""

    def _fill(self, timeout):
        """More bytes into buf; False at EOF (or a reset: also an end)."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return False
        if not data:
            return False
        self.buf += data
        return True

    def _line(self, timeout):
        deadline = time.time() + timeout
        while b"\r\n" not in self.buf:
            if not self._fill(max(0.01, deadline - time.time())):
                raise EOFError("connection closed in a line")
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def head(self, timeout=30):
        """(status, {lower-case name: value})."""
        status = int(self._line(timeout).split()[1])
        hdrs = {}
        while True:
            line = self._line(timeout)
            if not line:
                return status, hdrs
            k, _, v = line.decode().partition(":")
            hdrs[k.strip().lower()] = v.strip()

    def chunk(self, timeout):
        """The next chunk's bytes; b"" for the final chunk (trailers read);
        raises EOFError when the connection ends without one (a cut),
        socket.timeout when nothing comes in time."""
        size = int(self._line(timeout).split(b";")[0], 16)
        if size == 0:
            while self._line(timeout):
                pass
            return b""
        deadline = time.time() + timeout
        while len(self.buf) < size + 2:
            if not self._fill(max(0.01, deadline - time.time())):
                raise EOFError("connection closed in a chunk")
        data, self.buf = self.buf[:size], self.buf[size + 2:]
        return data

    def events_until_end(self, timeout):
        """Watch events up to the final chunk: (events, "final" | "cut" | "open")."""
        events, text = [], b""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                data = self.chunk(max(0.05, deadline - time.time()))
            except EOFError:
                return events, "cut"
            except socket.timeout:
                break
            if data == b"":
                return events, "final"
            text += data
            while b"\n" in text:
                line, _, text = text.partition(b"\n")
                if line.strip():
                    events.append(json.loads(line))
        return events, "open"

    def closed_cleanly(self, timeout=10):
        """Does the peer close the connection (FIN, no reset, no more bytes)?"""
        try:
            return not self.buf and not self._fill(timeout) and not self.buf
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


def hub_healthy(hub):
    try:
        return get("127.0.0.1", hub.serve_port, "/v1/healthz", timeout=5)[0] == 200
    except OSError:
        return False


def online(hub):
    return hub.metric("yurthub_upstream_healthy") == 1


def offline(hub):
    return hub.metric("yurthub_upstream_healthy") == 0


def pod(name, phase="Running"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "node1", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": phase}}


# ---- item 5: integers from the URL ----

def test_huge_timeout_online(t, double, hub):
    w = Raw(hub.proxy_port, "GET", "/api/v1/namespaces/default/pods?watch=1&resourceVersion="
            "0&timeoutSeconds=" + HUGE)
    status, _ = w.head()
    t.check("online watch with timeoutSeconds=2^63-1: 200", status == 200, status)
    w.events_until_end(1)  # the initial ADDED events
    double.put_object(pod("huge-timeout"))
    events, end = w.events_until_end(10)
    t.check("it stays open and passes the next event on",
            any(e["object"]["metadata"]["name"] == "huge-timeout" for e in events),
            "%s %s" % (end, [e["type"] for e in events]))
    w.close()


def test_huge_timeout_offline(t, double, hub):
    rv = json.loads(get("127.0.0.1", double.port, "/api/v1/namespaces/default/pods")[2])
    rv = rv["metadata"]["resourceVersion"]
    double.cut("refuse")
    wait_for(lambda: offline(hub), 15, what="the hub to see the cloud gone")
    w = Raw(hub.proxy_port, "GET", "/api/v1/namespaces/default/pods?watch=1&resourceVersion=%s"
            "&timeoutSeconds=%s" % (rv, HUGE))
    try:
        status, _ = w.head(10)
    except EOFError:
        status = None
    t.check("offline watch with timeoutSeconds=2^63-1: 200", status == 200, status)
    t.check("the hub is alive after it", hub_healthy(hub) and hub.proc.poll() is None,
            hub.tail())
    _, end = w.events_until_end(1.5)
    t.check("the offline watch stays open (no deadline in the past)", end == "open", end)
    double.restore()
    wait_for(lambda: online(hub), 15, what="the hub to see the cloud back")
    _, end = w.events_until_end(10)
    t.check("it ends, with its final chunk, once the cloud is back", end == "final", end)
    w.close()


# ---- item 6: --max-requests-in-flight and the body budget ----

def hang(double, path, count):
    """The next count requests under path get headers, then nothing (the
    test double's hostile mode), until their client goes."""
    s, body = double.control("POST", "/hostile?mode=hang&seconds=60&count=%d&path=%s"
                             % (count, path))
    assert s == 200, body


def scrape(hub, name):
    return hub.metric(name) or 0


def test_in_flight_limit(t, double, workdir):
    hub = Hub(workdir, [double.url], name="limited", extra=["--max-requests-in-flight=2"])
    try:
        in_flight_limit(t, double, hub)
    finally:
        hub.stop()


def in_flight_limit(t, double, hub):
    path = "/api/v1/namespaces/default/configmaps"
    hang(double, path, 2)
    held = [Raw(hub.proxy_port, "GET", path) for _ in range(2)]
    t.check("two requests are held by the cloud", all(h.head()[0] == 200 for h in held))
    wait_for(lambda: scrape(hub, "yurthub_requests_limited_in_flight") == 2, 10,
             what="two requests counted")
    r = Raw(hub.proxy_port, "GET", "/api/v1/namespaces/default/pods")
    status, hdrs = r.head(10)
    body = r.buf
    while len(body) < int(hdrs.get("content-length", "0")) and r._fill(5):
        body = r.buf
    r.close()
    doc = json.loads(body) if body else {}
    t.check("a third request is answered 429 TooManyRequests at once",
            status == 429 and doc.get("reason") == "TooManyRequests" and doc.get("code") == 429,
            "%s %s" % (status, body[:200]))
    t.check("with Retry-After: 1 (header and details)", hdrs.get("retry-after") == "1" and
            doc.get("details", {}).get("retryAfterSeconds") == 1, hdrs)
    w = Raw(hub.proxy_port, "GET", "/api/v1/namespaces/default/pods?watch=1&resourceVersion=0")
    t.check("a watch is not counted: it is served", w.head(10)[0] == 200)
    w.close()
    t.check("yurthub_requests_rejected_total{reason=\"in_flight\"} is 1",
            scrape(hub, 'yurthub_requests_rejected_total{reason="in_flight"}') == 1)
    t.check("yurthub_requests_max_in_flight is the flag",
            scrape(hub, "yurthub_requests_max_in_flight") == 2)
    for h in held:
        h.close()
    wait_for(lambda: scrape(hub, "yurthub_requests_limited_in_flight") == 0, 10,
             what="the held requests to end")
    s, _, _ = get("127.0.0.1", hub.proxy_port, "/api/v1/namespaces/default/pods")
    t.check("once they end, requests are served again", s == 200, s)


def test_body_budget(t, double, hub):
    big = Raw(hub.proxy_port, "PUT", "/api/v1/namespaces/default/configmaps/big",
              headers={"Content-Type": "application/json",
                       "Content-Length": str(16 * 1024 * 1024 + 1)})
    status, _ = big.head(10)
    t.check("a body over 16 MiB gets 413 before any of it is sent", status == 413, status)
    big.close()
    # four bodies of 16 MiB, held while the cloud holds their requests
    path = "/api/v1/namespaces/default/configmaps"
    hang(double, path, 4)
    body = b"{" + b" " * (16 * 1024 * 1024 - 2) + b"}"
    held = [Raw(hub.proxy_port, "POST", path, headers={"Content-Type": "application/json"},
                body=body) for _ in range(4)]
    t.check("four 16 MiB bodies are taken", all(h.head(60)[0] == 200 for h in held))
    t.check("yurthub_request_body_bytes shows them",
            scrape(hub, "yurthub_request_body_bytes") == 4 * len(body),
            scrape(hub, "yurthub_request_body_bytes"))
    more = Raw(hub.proxy_port, "POST", path, headers={"Content-Type": "application/json"},
               body=b'{"kind":"ConfigMap"}')
    status, hdrs = more.head(10)
    t.check("a fifth body gets 429 with Retry-After while they are held",
            status == 429 and hdrs.get("retry-after") == "1", status)
    more.close()
    t.check("yurthub_requests_rejected_total{reason=\"body_memory\"} is 1",
            scrape(hub, 'yurthub_requests_rejected_total{reason="body_memory"}') == 1)
    for h in held:
        h.close()
    wait_for(lambda: scrape(hub, "yurthub_request_body_bytes") == 0, 10,
             what="the bodies to be let go")
    s, _, _ = get("127.0.0.1", hub.proxy_port, "/api/v1/namespaces/default/pods")
    t.check("then requests are served again", s == 200, s)


# ---- item 4: how a proxied watch ends ----

WATCH = "/api/v1/namespaces/default/pods?watch=1&resourceVersion=0"


def opened_watch(t, hub, what, headers=None):
    w = Raw(hub.proxy_port, "GET", WATCH, headers=headers)
    status, _ = w.head()
    events, end = w.events_until_end(2)
    t.check("%s: the watch is open with its initial events" % what,
            status == 200 and events and end == "open", "%s %s" % (status, end))
    return w


def back_online(double, hub):
    double.restore()
    wait_for(lambda: online(hub), 20, what="the hub to see the cloud back")


def test_watch_end(t, double, workdir):
    hub = Hub(workdir, [double.url], name="watchend")
    try:
        wait_for(lambda: online(hub), 15, what="the cloud healthy")
        watch_end_unhealthy(t, double, hub)
        watch_end_connection_close(t, double, hub)
        watch_end_cloud_closes(t, double, hub)
        watch_cut_inside_event(t, double, hub)
    finally:
        hub.stop()


def watch_end_unhealthy(t, double, hub):
    w = opened_watch(t, hub, "unhealthy")
    double.cut("blackhole")  # the stream goes silent; probes time out
    _, end = w.events_until_end(40)
    t.check("when its cloud is declared unhealthy the watch ends with the final chunk",
            end == "final", end)
    # the response ended properly, so the kept-alive connection goes on
    w.sock.sendall(b"GET /api/v1/namespaces/default/pods/not-there HTTP/1.1\r\nHost: x\r\n"
                   b"User-Agent: e2e-reqpath/1.0\r\nAccept: application/json\r\n\r\n")
    status, _ = w.head(20)
    t.check("the same connection carries the next request (answered offline)", status == 404,
            status)
    w.close()
    back_online(double, hub)


def watch_end_connection_close(t, double, hub):
    w = opened_watch(t, hub, "Connection: close", headers={"Connection": "close"})
    double.cut("blackhole")
    _, end = w.events_until_end(40)
    t.check("Connection: close: the final chunk", end == "final", end)
    t.check("then the hub closes the connection cleanly (FIN, nothing more)",
            w.closed_cleanly())
    w.close()
    back_online(double, hub)


def watch_end_cloud_closes(t, double, hub):
    w = opened_watch(t, hub, "cloud closes")
    double.cut("refuse")  # shuts the cloud's side of every connection, between events
    _, end = w.events_until_end(40)
    t.check("a watch whose cloud closes it between events ends with the final chunk",
            end == "final", end)
    w.close()
    back_online(double, hub)


def watch_cut_inside_event(t, double, hub):
    path = "/api/v1/namespaces/default/configmaps"
    s, body = double.control("POST", "/hostile?mode=cut&count=1&path=" + path)
    assert s == 200, body
    w = Raw(hub.proxy_port, "GET", path + "?watch=1")
    status, _ = w.head()
    events, end = w.events_until_end(20)
    t.check("a watch its cloud cuts inside an event is broken off, not ended cleanly "
            "(after the whole event before it)",
            status == 200 and end == "cut" and len(events) == 1, "%s %s %s" % (status, end,
                                                                             events))
    w.close()


# ---- JSON escaping of names in offline answers ----

QUOTED_SA = 'x","admin":true,"y'


def test_offline_json(t, double, hub):
    # offline, a token is made only for the service account of a pod of
    # this node (docs/offline.md): one with a quoted name, cached by kubelet
    double.put_object({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "quoted-sa", "namespace": "default"},
                       "spec": {"nodeName": "node1", "serviceAccountName": QUOTED_SA,
                                "containers": [{"name": "c", "image": "c:1"}]}})
    def listed():
        s, _, body = get("127.0.0.1", hub.proxy_port,
                         "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1",
                         headers={"User-Agent": "kubelet/v1.30.2", "Accept": "application/json"})
        return [p for p in json.loads(body)["items"] if p["metadata"]["name"] == "quoted-sa"] \
            if s == 200 else []

    # the link may still be settling from the test before: list until the
    # cloud's answer has the pod, then wait for it on disk (caching is off
    # the client's path) before the link is cut
    pods = within(listed, 20, "kubelet's list with the pod") or []
    stored = os.path.join(hub.cache, "kubelet", "pods.v1.core", "default", "quoted-sa")
    t.check("kubelet caches the pod whose service account has quotes in its name",
            pods and within(lambda: os.path.exists(stored), 20, "the pod on disk"))
    double.cut("refuse")
    wait_for(lambda: offline(hub), 15, what="the hub to see the cloud gone")
    try:
        offline_json(t, hub, pods[0]["metadata"]["uid"] if pods else "")
    finally:
        double.restore()
        wait_for(lambda: online(hub), 20, what="the hub to see the cloud back")


def offline_json(t, hub, uid):
    tr = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                     "spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                                 "name": "quoted-sa", "uid": uid}}}).encode()
    r = Raw(hub.proxy_port, "POST", "/api/v1/namespaces/default/serviceaccounts/"
            "x%22,%22admin%22:true,%22y/token", headers={"Content-Type": "application/json"},
            body=tr)
    status, hdrs = r.head()
    while len(r.buf) < int(hdrs.get("content-length", "0")) and r._fill(5):
        pass
    r.close()
    token = json.loads(r.buf)["status"]["token"] if status == 201 else ""
    claims = token.split(".")[1] if token.count(".") == 2 else ""
    try:
        claims = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    except ValueError:
        claims = None
    t.check("offline token for a name with quotes: its claims are JSON with that name",
            isinstance(claims, dict) and claims.get("sub") ==
            'system:serviceaccount:default:x","admin":true,"y' and "admin" not in claims,
            "%s %s" % (status, claims))
    s, _, body = get("127.0.0.1", hub.proxy_port, "/api/v1/namespaces/default/pods/a%FFb%22",
                     headers={"User-Agent": UA, "Accept": "application/json"})
    try:
        doc = json.loads(body.decode("utf-8"))
    except ValueError:
        doc = None
    t.check("a Status quoting a name that is not UTF-8 is valid JSON",
            s == 404 and doc and doc["details"]["name"] == 'a\ufffdb"', body[:200])


def main():
    t = Suite("request-path")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url])
    t.cleanups.append(hub.stop)
    t.run(test_huge_timeout_online, double, hub)
    t.run(test_huge_timeout_offline, double, hub)
    t.run(test_in_flight_limit, double, t.workdir)
    t.run(test_body_budget, double, hub)
    t.run(test_watch_end, double, t.workdir)
    t.run(test_offline_json, double, hub)
    t.finish()


if __name__ == "__main__":
    main()
