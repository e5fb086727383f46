"""End to end: offline, nobody may write what the node could not write
online (issue 23, item 1; docs/offline.md, "What may be written offline").

kubelet lists and watches its pods through the hub, and reads its Node,
its Lease and a Secret; the link is cut.  Then, offline:

- a pod's PATCH of kubelet's pod (as evil-pod/1.0 on the plain port, a
  strategic merge patch setting the image to attacker.example/evil:latest)
  is 403 Forbidden with the API server's words; with its own
  `Authorization: Bearer x`, a token the hub cannot check, 401; a merge
  patch of the cached Secret is 403;
- kubelet's own pods/status patch that also changes the spec is 200 with
  the status changed and the spec not: its open watch gets that one
  MODIFIED, with the old image, and nothing before it; the cached pod keeps
  its image, also after the hub restarts offline;
- its Node status patch and Lease update are 200; another node's Lease,
  Node status and pod status are 403;
- a TokenRequest for the service account of a pod of this node is 201, for
  another service account, or bound to another node's pod, 403;
- an Event created offline reaches the cloud once the link is back.

Then the repro on the etcd store with two hubs of a pool sharing one etcd:
hub A (node1) offline refuses the evil patch, and hub B (node2) and etcd's
key still hold the original image.

Each scenario runs with the sanitizer build and with the release build
(build/src/yurthub; skipped with a note when it is not built).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import (HUB_BIN, ROOT, Double, Etcd, Hub, Suite, get, request,  # noqa: E402
                     wait_for)
from watch_stream import open_watch, read_events  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
EVIL = "evil-pod/1.0"
EVIL_IMAGE = "attacker.example/evil:latest"
NODE, OTHER = "node1", "node2"
PODS = "/api/v1/pods?fieldSelector=spec.nodeName%3D" + NODE
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
SECRET = "/api/v1/namespaces/default/secrets/app-credentials"
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
RELEASE_BIN = os.path.join(ROOT, "build", "src", "yurthub")


def call(hub, method, path, body=None, ua=KUBELET, ct="application/json", extra=None):
    headers = {"User-Agent": ua, "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = ct
    headers.update(extra or {})
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    s, _, out = request("127.0.0.1", hub.proxy_port, method, path, body=data, headers=headers,
                        timeout=20)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = {}
    return s, doc, out


def offline(hub):
    return hub.metric("yurthub_upstream_healthy") == 0


def forbidden(s, doc, kind, name, group=""):
    """A 403 as the API server words it: Status, reason Forbidden, details."""
    d = doc.get("details") or {}
    qualified = kind + "." + group if group else kind
    return (s == 403 and doc.get("kind") == "Status" and doc.get("reason") == "Forbidden" and
            d.get("kind") == kind and d.get("name") == name and d.get("group", "") == group and
            doc["message"].startswith("%s \"%s\" is forbidden: " % (qualified, name)))


def unauthorized(s, doc):
    """A 401 as the API server words it: Status, reason Unauthorized."""
    return s == 401 and doc.get("kind") == "Status" and doc.get("reason") == "Unauthorized"


def image_of(pod):
    return pod["spec"]["containers"][0]["image"]


def pod_path(pod):
    return "/api/v1/namespaces/%s/pods/%s" % (pod["metadata"]["namespace"],
                                              pod["metadata"]["name"])


def evil_patch(pod):
    c = pod["spec"]["containers"][0]["name"]
    return {"spec": {"containers": [{"name": c, "image": EVIL_IMAGE}]}}


def cut(double, hubs):
    double.cut("refuse")
    for h in hubs:
        get("127.0.0.1", h.proxy_port, "/version", headers={"User-Agent": KUBELET}, timeout=20)
    wait_for(lambda: all(offline(h) for h in hubs), 15, what="offline")


def cached(hub, resource_dir, obj):
    """Whether kubelet's copy of obj is in the disk store."""
    m = obj.get("metadata", {})
    return os.path.exists(os.path.join(hub.cache, "kubelet", resource_dir,
                                       m.get("namespace", ""), m.get("name", "?")))


def web_pod(pods, node):
    return [p for p in pods if p["metadata"]["name"].startswith("web-") and
            p["spec"]["nodeName"] == node][0]


# ---- on the disk store: the whole contract ----

def test_writes(t, double, hub, tag):
    s, doc, _ = call(hub, "GET", PODS)
    t.check(tag + "online: kubelet lists its pods", s == 200)
    pods = doc.get("items", [])
    mine = web_pod(pods, NODE)
    list_rv = doc["metadata"]["resourceVersion"]
    # read online, so that the hub has them: kubelet's Node and Lease, a
    # Secret, another node's pod and lease (a client on the node may read them)
    s, cloud_pods, _ = call(hub, "GET", "/api/v1/pods")
    theirs = web_pod(cloud_pods["items"], OTHER)
    for path in ("/api/v1/nodes/" + NODE, LEASES + NODE, LEASES + OTHER, SECRET,
                 pod_path(theirs)):
        s, _, body = call(hub, "GET", path)
        t.check(tag + "online: kubelet reads " + path, s == 200, body[:200])
    _, secret, _ = call(hub, "GET", SECRET)
    _, lease, _ = call(hub, "GET", LEASES + NODE)
    # caching is off the client's path: cut only once every copy is on disk
    wanted = [("pods.v1.core", mine), ("pods.v1.core", theirs),
              ("secrets.v1.core", secret), ("leases.v1.coordination.k8s.io", lease)]
    t.check(tag + "what kubelet read is cached",
            wait_for(lambda: all(cached(hub, d, o) for d, o in wanted), 20,
                     what="the copies on disk"))
    cut(double, [hub])
    sock, head, rest = open_watch(hub, PODS + "&watch=1&resourceVersion=" + list_rv, KUBELET)
    t.check(tag + "offline: kubelet's watch opens", b" 200 " in head.split(b"\r\n")[0], head)

    # the repro: a pod patches kubelet's pod
    path = pod_path(mine)
    s, doc, body = call(hub, "PATCH", path, evil_patch(mine), ua=EVIL, ct=SMP)
    t.check(tag + "a pod's patch of kubelet's pod: 403 Forbidden, the API server's words",
            forbidden(s, doc, "pods", mine["metadata"]["name"]) and
            'User "system:node:node1" cannot patch resource "pods"' in doc["message"],
            body[:300])
    s, doc, body = call(hub, "PATCH", path, evil_patch(mine), ua=EVIL, ct=SMP,
                        extra={"Authorization": "Bearer x"})
    t.check(tag + "the same with a bearer token nobody can check: 401",
            unauthorized(s, doc), body[:300])
    s, doc, body = call(hub, "PATCH", path + "/status",
                        {"status": {"phase": "Failed"}, "spec": evil_patch(mine)["spec"]},
                        ua=EVIL, ct=SMP, extra={"Authorization": "Bearer x"})
    t.check(tag + "even a status patch with that token: 401",
            unauthorized(s, doc), body[:300])
    s, doc, body = call(hub, "PATCH", SECRET, {"data": {"password": "b3duZWQ="}}, ua=EVIL,
                        ct=MERGE)
    t.check(tag + "a merge patch of a cached Secret: 403",
            forbidden(s, doc, "secrets", "app-credentials"), body[:300])
    s, doc, _ = call(hub, "GET", SECRET)
    t.check(tag + "the Secret is as cached", s == 200 and doc.get("data") == secret.get("data"))

    # kubelet's own status patch, with a spec change it may not make
    status_patch = {"status": {"phase": "Running", "message": "patched offline"},
                    "spec": evil_patch(mine)["spec"]}
    s, doc, body = call(hub, "PATCH", path + "/status", status_patch, ct=SMP)
    t.check(tag + "kubelet's status patch that also changes spec: 200, status only",
            s == 200 and doc["status"].get("message") == "patched offline" and
            image_of(doc) == image_of(mine), body[:300])
    events, _ = read_events(sock, rest, lambda ev: any(e.get("type") == "MODIFIED"
                                                       for e in ev), 15)
    mods = [e["object"] for e in events if e.get("type") == "MODIFIED"]
    t.check(tag + "kubelet's watch: one MODIFIED, kubelet's status with the old image, "
            "nothing of the refused patches before it",
            len(mods) == 1 and mods[0]["metadata"]["name"] == mine["metadata"]["name"] and
            image_of(mods[0]) == image_of(mine) and
            mods[0]["status"].get("message") == "patched offline",
            str([(e.get("type"), (e.get("object") or {}).get("metadata", {}).get("name"))
                 for e in events]))
    sock.close()
    s, doc, _ = call(hub, "GET", path)
    t.check(tag + "the cached pod keeps its spec", s == 200 and doc["spec"] == mine["spec"],
            str(doc.get("spec"))[:200])

    # the node's own writes
    s, doc, body = call(hub, "PATCH", "/api/v1/nodes/%s/status" % NODE,
                        {"status": {"conditions": [{"type": "Ready", "status": "True",
                                                    "reason": "OfflineReport"}]}}, ct=SMP)
    t.check(tag + "its Node status patch: 200", s == 200 and "OfflineReport" in body.decode(),
            body[:200])
    lease["spec"]["renewTime"] = "2030-01-01T00:00:00.000000Z"
    s, doc, body = call(hub, "PUT", LEASES + NODE, lease)
    t.check(tag + "its Lease update: 200", s == 200 and
            doc.get("spec", {}).get("renewTime") == lease["spec"]["renewTime"], body[:200])
    other_lease = dict(lease, metadata=dict(lease["metadata"], name=OTHER))
    s, doc, body = call(hub, "PUT", LEASES + OTHER, other_lease)
    t.check(tag + "another node's Lease: 403", forbidden(s, doc, "leases", OTHER,
                                                          "coordination.k8s.io"), body[:300])
    s, doc, body = call(hub, "PATCH", "/api/v1/nodes/%s/status" % OTHER,
                        {"status": {"phase": "x"}}, ct=SMP)
    t.check(tag + "another node's Node status: 403", forbidden(s, doc, "nodes", OTHER),
            body[:300])
    s, doc, body = call(hub, "PATCH", pod_path(theirs) + "/status",
                        {"status": {"message": "not mine"}}, ct=SMP)
    t.check(tag + "another node's pod status: 403",
            forbidden(s, doc, "pods", theirs["metadata"]["name"]) and
            "can only update pod status for pods with spec.nodeName set to itself" in
            doc["message"], body[:300])

    # tokens for its pods' service accounts only
    def token_request(pod):
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": ["https://kubernetes.default.svc"],
                         "expirationSeconds": 3607,
                         "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                            "name": pod["metadata"]["name"],
                                            "uid": pod["metadata"]["uid"]}}}
    sa = "/api/v1/namespaces/default/serviceaccounts/%s/token"
    s, doc, body = call(hub, "POST", sa % mine["spec"]["serviceAccountName"], token_request(mine))
    t.check(tag + "TokenRequest for its pod's service account: 201 with a token",
            s == 201 and doc.get("status", {}).get("token", "").count(".") == 2, body[:200])
    s, doc, body = call(hub, "POST", sa % "admin", token_request(mine))
    t.check(tag + "TokenRequest for another service account: 403",
            forbidden(s, doc, "serviceaccounts", "admin"), body[:300])
    s, doc, body = call(hub, "POST", sa % theirs["spec"]["serviceAccountName"],
                        token_request(theirs))
    t.check(tag + "TokenRequest bound to another node's pod: 403",
            forbidden(s, doc, "serviceaccounts", theirs["spec"]["serviceAccountName"]),
            body[:300])

    # an Event, kept for later
    ev = {"apiVersion": "v1", "kind": "Event",
          "metadata": {"name": NODE + ".offline-authz", "namespace": "default"},
          "involvedObject": {"kind": "Node", "name": NODE},
          "reason": "OfflineAuthz", "message": "made offline", "type": "Normal"}
    s, doc, body = call(hub, "POST", "/api/v1/namespaces/default/events", ev)
    t.check(tag + "an Event created offline: 201", s == 201, body[:200])

    hub.stop()
    hub.start()
    t.check(tag + "restarted offline", wait_for(lambda: offline(hub), 15, what="offline"))
    s, doc, _ = call(hub, "GET", path)
    t.check(tag + "after the restart the cached pod has its image and kubelet's status",
            s == 200 and doc["spec"] == mine["spec"] and
            doc["status"].get("message") == "patched offline", str(doc)[:300])
    s, doc, _ = call(hub, "GET", SECRET)
    t.check(tag + "after the restart the Secret is as cached",
            s == 200 and doc.get("data") == secret.get("data"))

    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online again")

    def arrived():
        s, _, body = get("127.0.0.1", double.port,
                         "/api/v1/namespaces/default/events/" + ev["metadata"]["name"])
        return s == 200
    try:
        ok = wait_for(arrived, 20, step=0.2, what="the event")
    except TimeoutError:
        ok = False
    t.check(tag + "the Event created offline reaches the cloud", ok)
    s, _, body = get("127.0.0.1", double.port, path)
    t.check(tag + "the cloud's pod has its image", s == 200 and
            image_of(json.loads(body)) == image_of(mine))


def run_disk(t, binary, tag):
    double = Double(t.workdir, ["--seed", "sample", "--node", NODE, "--node", OTHER])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, [double.url], name="hub-" + tag.strip(": "), binary=binary)
    t.cleanups.append(hub.stop)
    t.run(test_writes, double, hub, tag)
    hub.stop()
    double.stop()


# ---- on the etcd store: two hubs of a pool share what they cache ----

def etcd_image(etcd, key):
    rc, out = etcd.ctl("get", key, "--print-value-only")
    try:
        return image_of(json.loads(out)) if rc == 0 and out.strip() else None
    except ValueError:
        return None


def test_pool(t, double, etcd, hub_a, hub_b, tag):
    s, doc, _ = call(hub_a, "GET", PODS)
    mine = web_pod(doc.get("items", []), NODE)
    path = pod_path(mine)
    key = "/registry/pods/%s/%s" % (mine["metadata"]["namespace"], mine["metadata"]["name"])
    s, _, _ = call(hub_b, "GET", path)  # node2's kubelet, say, reads node1's pod
    t.check(tag + "online: both hubs read node1's pod", s == 200)
    t.check(tag + "etcd holds it, with its image",
            wait_for(lambda: etcd_image(etcd, key) == image_of(mine), 20, what="the key"))
    cut(double, [hub_a, hub_b])
    s, doc, body = call(hub_a, "PATCH", path, evil_patch(mine), ua=EVIL, ct=SMP)
    t.check(tag + "hub A offline refuses the evil patch: 403",
            forbidden(s, doc, "pods", mine["metadata"]["name"]), body[:300])
    s, doc, body = call(hub_a, "PATCH", path, evil_patch(mine), ua=EVIL, ct=SMP,
                        extra={"Authorization": "Bearer x"})
    t.check(tag + "...and with a bearer token it cannot check: 401",
            unauthorized(s, doc), body[:300])
    s, doc, _ = call(hub_b, "GET", path)
    t.check(tag + "hub B still serves the original image",
            s == 200 and image_of(doc) == image_of(mine), str(doc.get("spec"))[:200])
    t.check(tag + "etcd's key still holds the original image",
            etcd_image(etcd, key) == image_of(mine), str(etcd_image(etcd, key)))
    s, doc, body = call(hub_a, "PATCH", path + "/status",
                        {"status": {"message": "from A"}, "spec": evil_patch(mine)["spec"]},
                        ct=SMP)
    t.check(tag + "kubelet's status patch on hub A: 200",
            s == 200 and image_of(doc) == image_of(mine), body[:200])
    t.check(tag + "etcd's key: kubelet's status, the original image",
            etcd_image(etcd, key) == image_of(mine))
    double.restore()
    wait_for(lambda: all(h.metric("yurthub_upstream_healthy") == 1 for h in (hub_a, hub_b)),
             20, what="online again")


def run_etcd(t, binary, tag):
    double = Double(t.workdir, ["--seed", "sample", "--node", NODE, "--node", OTHER])
    t.cleanups.append(double.stop)
    name = "etcd-" + tag.strip(": ")
    etcd = Etcd(t.workdir, name=name)
    t.cleanups.append(etcd.stop)
    extra = ["--storage=etcd", "--etcd-servers=" + etcd.url]
    hub_a = Hub(t.workdir, [double.url], extra=extra, name=name + "-a", binary=binary)
    t.cleanups.append(hub_a.stop)
    hub_b = Hub(t.workdir, [double.url], extra=extra, name=name + "-b", node=OTHER,
                binary=binary)
    t.cleanups.append(hub_b.stop)
    t.run(test_pool, double, etcd, hub_a, hub_b, tag)
    hub_a.stop()
    hub_b.stop()
    etcd.stop()
    double.stop()


def main():
    t = Suite("offline_writes")
    builds = [(HUB_BIN, "sanitizer: ")]
    if os.path.exists(RELEASE_BIN) and os.path.realpath(RELEASE_BIN) != os.path.realpath(HUB_BIN):
        builds.append((RELEASE_BIN, "release: "))
    else:
        print("note: no release build at %s; its half is skipped" % RELEASE_BIN, flush=True)
    only = sys.argv[1:] or ("disk", "etcd")
    for binary, tag in builds:
        if "disk" in only:
            run_disk(t, binary, tag)
        if "etcd" in only:
            run_etcd(t, binary, tag)
    t.finish()


if __name__ == "__main__":
    main()
