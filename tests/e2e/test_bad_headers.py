"""End to end (issue 23, item 5): request headers that must not reach the cloud.

A header name or value with a bare CR, an LF or a NUL in it, passed on, ends a
line or a string somewhere else for the next parser on the way to the API
server (a load balancer, the API server's own): the request it sees is not the
one the hub saw. The hub refuses such a request with 400 (a Status saying
which header), before anything is sent, on the plain proxy path and on the
upgrade path (exec over WebSocket, port-forward over SPDY), both of which copy
the client's headers as they came.

Raw requests are sent on sockets of their own. What libmicrohttpd 0.9.75
(Debian's) does before the hub sees a header decides what there is to check:

- a bare CR is kept in a name or value: refused by the hub;
- an LF ends the line (so it is never inside a value): the header is sent on
  as its own CRLF line; a line that then starts with a CR is refused;
- an obs-fold (a line starting with a space or tab) is glued onto the previous
  header's *name*, not its value: refused when that name is no token;
- a NUL ends the value there (the rest of the line is dropped) or, in a name,
  makes libmicrohttpd answer 400 itself;
- other control characters (but tab) and DEL are kept: refused by the hub.

For every case the test double records each request head byte for byte as it
arrived (GET /heads on its control port): a refused request leaves none, and
no head it ever received holds a bare CR or LF, a NUL or another control
character but tab. A tab and obs-text (bytes over 0x7f) in a value still go
through. Run against the sanitizer build and, when it is there, the release
build (YURTHUB_RELEASE_BUILD, else <root>/build).
"""

import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, each_build, wait_for  # noqa: E402
from watch_stream import read_head  # noqa: E402

POD = "exec-target"
UA = b"e2e-headers/1.0"
MARK = b"X-E2e-Case"

# the request kinds: (method, path, headers of their own, the answer when let through)
KINDS = {
    "plain": (b"GET", b"/api/v1/namespaces/default/pods/" + POD.encode(),
              [b"Accept: application/json"], 200),
    "exec-websocket": (b"GET", b"/api/v1/namespaces/default/pods/" + POD.encode() +
                       b"/exec?command=cat&stdin=true&stdout=true",
                       [b"Connection: Upgrade", b"Upgrade: websocket",
                        b"Sec-WebSocket-Version: 13",
                        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                        b"Sec-WebSocket-Protocol: v5.channel.k8s.io"], 101),
    "portforward-spdy": (b"POST", b"/api/v1/namespaces/default/pods/" + POD.encode() +
                         b"/portforward",
                         [b"Connection: Upgrade", b"Upgrade: SPDY/3.1",
                          b"X-Stream-Protocol-Version: portforward.k8s.io",
                          b"Content-Length: 0"], 101),
}

# the hub answers 400: (case, the header lines as sent, CRLF added after them)
REFUSED = [
    ("cr-in-value", b"X-Test: foo\rbar"),
    ("cr-ending-value", b"X-Test: foo\r"),
    ("cr-in-name", b"X-T\rest: foo"),
    ("cr-starting-line", b"\rX-Test: foo"),
    ("cr-smuggling-a-header", b"Authorization: Bearer x\rImpersonate-User: system:admin"),
    ("lf-then-cr", b"X-Test: foo\n\rX-Injected: bar"),
    ("fold-into-no-token", b"X-Test: foo\r\n bar baz"),
    ("fold-with-cr", b"X-Test: foo\r\n \rbar"),
    ("soh-in-value", b"X-Test: foo\x01bar"),
    ("esc-in-value", b"X-Test: foo\x1b[31mbar"),
    ("del-in-value", b"X-Test: foo\x7fbar"),
]

# libmicrohttpd makes these harmless before the hub sees them: (case, lines, the
# status when it lets them through or None for the kind's, bytes the cloud must see)
HANDLED = [
    ("lf-ends-the-line", b"X-Test: foo\nX-Injected: bar", None,
     b"\r\nX-Test: foo\r\nX-Injected: bar\r\n"),
    ("nul-in-value", b"X-Test: foo\x00bar", None, b"\r\nX-Test: foo\r\n"),
    ("nul-in-name", b"X-T\x00est: foo", 400, None),
    ("tab-and-obs-text", b"X-Test: foo\tbar \xe9t\xe9", None, b"\r\nX-Test: foo\tbar \xe9t\xe9\r\n"),
]


def head_clean(head):
    """Every line ends with CRLF and holds no control character but tab."""
    if not head.endswith(b"\r\n\r\n"):
        return False
    for line in head[:-4].split(b"\r\n"):
        if any((c < 0x20 and c != 0x09) or c == 0x7f for c in line):
            return False
    return True


def send(port, kind, mark, lines):
    """One raw request; (status, head, body) of the answer (0 when none came)."""
    method, path, own, _ = KINDS[kind]
    head = (b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: %s\r\n%s: %s\r\n"
            % (method, path, UA, MARK, mark))
    head += b"".join(h + b"\r\n" for h in own) + lines + b"\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        s.sendall(head)
        top, body = read_head(s)
        first = top.split(b"\r\n")[0].split()
        status = int(first[1]) if len(first) > 1 and first[0].startswith(b"HTTP/") else 0
        length = 0
        for line in top.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        if status != 101:
            while len(body) < length:
                more = s.recv(65536)
                if not more:
                    break
                body += more
        return status, top, body[:length] if status != 101 else b""
    finally:
        s.close()


def heads_with(double, mark):
    heads = json.loads(double.control("GET", "/heads")[1])["heads"]
    line = (MARK + b": " + mark + b"\r\n").decode("latin-1")
    return [h.encode("latin-1") for h in heads if line in h]


def status_doc(body):
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def refused(t, double, hub, label):
    for kind in KINDS:
        for case, lines in REFUSED:
            mark = ("%s-%s-%s" % (label, kind, case)).encode()
            status, top, body = send(hub.proxy_port, kind, mark, lines)
            doc = status_doc(body)
            t.check("%s, %s, %s: 400 BadRequest Status naming the header" % (label, kind, case),
                    status == 400 and doc.get("kind") == "Status" and
                    doc.get("reason") == "BadRequest" and doc.get("code") == 400 and
                    doc.get("message", "").startswith("invalid header field"),
                    "%s %r" % (status, (top + b"\r\n\r\n" + body)[:400]))
            got = heads_with(double, mark)
            t.check("%s, %s, %s: nothing reached the cloud" % (label, kind, case), not got,
                    got[:1])


def handled(t, double, hub, label):
    for kind in KINDS:
        for case, lines, want, seen in HANDLED:
            mark = ("%s-%s-%s" % (label, kind, case)).encode()
            status, top, body = send(hub.proxy_port, kind, mark, lines)
            want = want or KINDS[kind][3]
            got = heads_with(double, mark)
            if seen is None:
                t.check("%s, %s, %s: %d, and nothing reached the cloud" % (label, kind, case,
                                                                            want),
                        status == want and not got, "%s %r" % (status, got[:1]))
                continue
            t.check("%s, %s, %s: %d, the cloud got it with %r" % (label, kind, case, want, seen),
                    status == want and len(got) == 1 and seen in got[0] and
                    head_clean(got[0]),
                    "%s %r" % (status, got[:1] or (top + body)[:300]))


def run_hub(t, double, label, binary):
    hub = Hub(t.workdir, [double.url], name="hub-" + label, binary=binary)
    try:
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 30, what="healthy")
        t.run(refused, double, hub, label)
        t.run(handled, double, hub, label)
        rc = hub.stop()
        t.check("%s: the hub stops cleanly (exit 0, nothing from the sanitizers)" % label,
                rc == 0, hub.tail())
    finally:
        hub.stop()


def every_head_clean(t, double):
    heads = [h.encode("latin-1") for h in json.loads(double.control("GET", "/heads")[1])["heads"]]
    bad = [h for h in heads if not head_clean(h)]
    t.check("none of the %d request heads the cloud received holds a bare CR or LF, a NUL "
            "or another control character but tab" % len(heads), heads and not bad, bad[:2])


def main():
    t = Suite("bad_headers")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(double.stop)
    double.put_object({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": POD, "namespace": "default"},
                       "spec": {"nodeName": "node1",
                                "containers": [{"name": "c", "image": "busybox"}]},
                       "status": {"phase": "Running"}})
    each_build(lambda label, binary: run_hub(t, double, label, binary))
    every_head_clean(t, double)
    t.finish()


if __name__ == "__main__":
    main()
