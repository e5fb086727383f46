"""End to end: offline, the hub refuses what kube-apiserver refuses, with
the same status and words, and never claims what it cannot know.

- A watch from a resourceVersion older than the cached view's asks for
  changes the hub never kept: the API server answers an ERROR event with a
  410 Expired Status (its history does not reach back), and so does the
  hub, so that the client lists again; a watch from the view's own
  resourceVersion or a newer one stays open.  python3-kubernetes (a client
  nobody here wrote) sees the same 410 from the hub offline as from the
  cloud online after a compaction.
- A field the API server cannot select on (spec.foo of pods) is a 400
  "field label not supported", online (the test double checks as the API
  server does) and offline; the same for kubectl.
- A label selector that does not parse is a 400 in the API server's words.
"""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from clients import PyWatch, missing  # noqa: E402
from harness import Double, Hub, Suite, kubectl, proxy_json, wait_for  # noqa: E402
from watch_stream import open_watch, read_events  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
MINE = "/api/v1/pods?fieldSelector=" + urllib.parse.quote("spec.nodeName=node1", safe="")


def go_offline(double, hub):
    double.cut()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 20, what="offline")


def status_of(event):
    obj = event.get("object") or {}
    return obj.get("code"), obj.get("reason"), obj.get("message")


def test_watch_from_old_rv(t, double, hub, view_rv):
    old = str(view_rv - 1)
    sock, head, rest = open_watch(hub, MINE + "&watch=true&resourceVersion=" + old, KUBELET)
    events, closed = read_events(sock, rest, lambda e: e, 10)
    sock.close()
    t.check("old rv: 200 with one event", b" 200 " in head.split(b"\r\n")[0] and len(events) == 1,
            "%r %r" % (head[:40], events))
    ev = events[0] if events else {}
    want = (410, "Expired", "too old resource version: %s (%d)" % (old, view_rv))
    t.check("old rv: an ERROR event, 410 Expired, the API server's message",
            ev.get("type") == "ERROR" and status_of(ev) == want, "%r vs %r" % (ev, want))
    t.check("old rv: and the watch ends", closed or len(events) == 1)
    for rv in (view_rv, view_rv + 5):
        sock, head, rest = open_watch(
            hub, MINE + "&watch=true&allowWatchBookmarks=true&resourceVersion=%d" % rv, KUBELET)
        events, closed = read_events(sock, rest, lambda e: e, 5)
        sock.close()
        t.check("rv %s (the view's %d): the watch stays open, a bookmark, no error" % (
            "equal" if rv == view_rv else "newer", view_rv),
            not closed and events and all(e.get("type") == "BOOKMARK" for e in events),
            "%r closed=%s" % (events[:2], closed))


def test_python_client_sees_410(t, double, hub, view_rv, online):
    """python3-kubernetes: the hub's 410 offline is what the cloud's is
    online (after a compaction, its history does not reach the rv)."""
    if missing():
        for m in missing():
            print("SKIPPED: %s" % m)
        return
    where = "online" if online else "offline"
    w = PyWatch(t.workdir, hub.url, "list_pod_for_all_namespaces", resource_version=str(view_rv - 1),
                field_selector="spec.nodeName=node1", timeout_seconds=30, user_agent=KUBELET,
                name="py-watch-" + where)
    try:
        ev = w.wait_end(20)
        t.check("python3-kubernetes %s: ApiException 410 (it relists)" % where,
                ev.get("event") == "error" and ev.get("status") == 410, str(ev))
    finally:
        w.stop()


def test_field_labels(t, double, hub, online):
    where = "online" if online else "offline"
    path = "/api/v1/pods?fieldSelector=" + urllib.parse.quote("spec.foo=x", safe="")
    s, body = proxy_json(hub, path, KUBELET)
    t.check("%s: pods by spec.foo: 400 field label not supported" % where,
            s == 400 and isinstance(body, dict) and body.get("reason") == "BadRequest" and
            body.get("message") == "field label not supported: spec.foo", "%s %r" % (s, body))
    s, body = proxy_json(hub, "/api/v1/configmaps?fieldSelector=" +
                         urllib.parse.quote("data.x=y", safe=""), KUBELET)
    t.check("%s: configmaps by data.x: 400 not a known field selector" % where,
            s == 400 and isinstance(body, dict) and body.get("message") ==
            '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
            "%s %r" % (s, body))
    s, body = proxy_json(hub, MINE, KUBELET)
    t.check("%s: spec.nodeName is fine" % where, s == 200, "%s %r" % (s, str(body)[:200]))
    rc, out, err = kubectl(hub.url, "get", "pods", "-A", "--field-selector", "spec.foo=x")
    t.check("%s: kubectl --field-selector spec.foo=x fails with the API server's words" % where,
            rc != 0 and "field label not supported: spec.foo" in err, err[-300:])


def test_label_selector_words(t, hub):
    s, body = proxy_json(hub, "/api/v1/pods?labelSelector=" + urllib.parse.quote("a in (b", safe=""),
                         KUBELET)
    t.check("offline: a label selector that does not parse: 400 in the API server's words",
            s == 400 and isinstance(body, dict) and body.get("message") ==
            "unable to parse requirement: found '', expected: ',' or ')'", "%s %r" % (s, body))


def main():
    t = Suite("offline_api")
    double = Double(t.workdir, ["--node", "node1"])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url], node="node1")
    t.cleanups.append(hub.stop)
    s, body = proxy_json(hub, MINE, KUBELET)
    view_rv = int(body["metadata"]["resourceVersion"])
    proxy_json(hub, "/api/v1/configmaps", KUBELET)
    t.run(test_field_labels, double, hub, True)
    double.control("POST", "/compact")
    t.run(test_python_client_sees_410, double, hub, view_rv, True)
    wait_for(lambda: hub.metric("yurthub_cache_writes_total") and
             hub.metric("yurthub_cache_writes_total") >= 2, 10, what="the lists cached")
    go_offline(double, hub)
    t.run(test_watch_from_old_rv, double, hub, view_rv)
    t.run(test_python_client_sees_410, double, hub, view_rv, False)
    t.run(test_field_labels, double, hub, False)
    t.run(test_label_selector_words, hub)
    t.finish()


if __name__ == "__main__":
    main()
