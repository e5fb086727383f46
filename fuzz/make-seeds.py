#!/usr/bin/python3
"""make-seeds.py - the seed corpora of the fuzz targets, from real objects.

Starts the project's test API server (tests/double/apiserver.py) and a
throw-away etcd, records what they answer (lists, watch streams, discovery
documents, objects; etcd gateway ranges, txns, status, errors and watch
streams), and writes each target's seeds in that target's input format (see
the comment at the top of fuzz/<target>.c) into OUT/<target>/, named by
their SHA-1 as libFuzzer names its own.

    fuzz/make-seeds.py [OUT]        (default: fuzz/corpus)

The corpora kept in the repository are these seeds plus what the fuzzer
found, minimized with -merge=1 (scripts/run-fuzz.sh --keep).
"""
import base64
import gzip
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz", "corpus"))
SEEDS = {}


def add(target, data):
    if isinstance(data, str):
        data = data.encode()
    SEEDS.setdefault(target, set()).add(data)


def wait_file(path, proc, what):
    for _ in range(200):
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            sys.exit(f"make-seeds: {what} exited")
        time.sleep(0.05)
    sys.exit(f"make-seeds: {what} did not start")


def compact(obj):
    return json.dumps(obj, separators=(",", ":"))


# ---- the test API server ----

def http(base, path, method="GET", body=None, ctype=None, timeout=10):
    req = urllib.request.Request(base + path, data=body, method=method)
    if ctype:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        return e.read()


LISTS = [
    "/api/v1/pods", "/api/v1/namespaces/default/pods?limit=1", "/api/v1/nodes",
    "/api/v1/namespaces/kube-node-lease/pods", "/api/v1/services", "/api/v1/endpoints",
    "/api/v1/configmaps", "/api/v1/namespaces", "/api/v1/secrets?labelSelector=app%3Dnone",
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    "/apis/discovery.k8s.io/v1/endpointslices", "/apis/apps/v1/deployments",
    "/apis/example.com/v1/widgets", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1",
    "/api/v1/namespaces/nope/pods/missing",
]
WATCHES = [
    "/api/v1/pods?watch=1&timeoutSeconds=1&allowWatchBookmarks=true"
    "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
    "/api/v1/nodes?watch=true&timeoutSeconds=1",
    "/apis/coordination.k8s.io/v1/leases?watch=1&timeoutSeconds=1&resourceVersion=1",
]
DISCOVERY = ["/version", "/api", "/api/v1", "/apis", "/apis/apps/v1",
             "/apis/coordination.k8s.io/v1", "/apis/example.com/v1"]


def from_apiserver(tmp):
    ready = os.path.join(tmp, "api.json")
    proc = subprocess.Popen(
        ["/usr/bin/python3", os.path.join(ROOT, "tests/double/apiserver.py"), "--port", "0",
         "--control-port", "0", "--ready-file", ready, "--node", "node-1", "--node", "edge-2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_file(ready, proc, "apiserver.py")
        with open(ready) as f:
            base = "http://127.0.0.1:%d" % json.load(f)["port"]
        out = {"lists": [http(base, p) for p in LISTS],
               "discovery": [http(base, p) for p in DISCOVERY]}
        # a change during the watch, so that it carries MODIFIED and DELETED too
        cm = compact({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "seed", "namespace": "default"}, "data": {"a": "b"}})
        http(base, "/api/v1/namespaces/default/configmaps", "POST", cm.encode(),
             "application/json")
        out["watches"] = [http(base, p) for p in WATCHES]
        return out
    finally:
        proc.terminate()
        proc.wait()


# ---- etcd's JSON gateway ----

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def gw(base, path, body):
    return http(base, path, "POST", compact(body).encode(), "application/json")


def etcd_watch(base, key, puts):
    """A watch stream while puts and a delete happen (about 1.5 s of it)."""
    body = compact({"create_request": {"key": b64(key), "range_end": b64(key[:-1] + "0")}})
    req = urllib.request.Request(base + "/v3/watch", data=body.encode(), method="POST")

    def writer():
        time.sleep(0.3)
        for k, v in puts:
            gw(base, "/v3/kv/put", {"key": b64(k), "value": b64(v)})
        gw(base, "/v3/kv/deleterange", {"key": b64(puts[0][0])})
    threading.Thread(target=writer, daemon=True).start()
    data = b""
    try:
        with urllib.request.urlopen(req, timeout=1.5) as r:
            while True:
                line = r.readline()
                if not line:
                    break
                data += line
    except (socket.timeout, TimeoutError, OSError):
        pass
    return data


def from_etcd(tmp, objects):
    port, peer = free_port(), free_port()
    base = "http://127.0.0.1:%d" % port
    proc = subprocess.Popen(
        ["/usr/bin/etcd", "--name", "seed", "--data-dir", os.path.join(tmp, "etcd"),
         "--listen-client-urls", base, "--advertise-client-urls", base,
         "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
         "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
         "--initial-cluster", "seed=http://127.0.0.1:%d" % peer, "--logger", "zap",
         "--log-outputs", os.path.join(tmp, "etcd.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = {"range": [], "txn": [], "status": [], "error": [], "watch": []}
    try:
        for _ in range(100):
            try:
                if b"health" in http(base, "/health", timeout=1):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        puts = [("/registry/pods/default/" + o["metadata"]["name"], compact(o))
                for o in objects[:3]]
        puts.append(("/yurthub/registry/m/registry/pods/default/web-0",
                     "00000000000000001001 node-1/kubelet edge-2/kube-proxy"))
        for k, v in puts:
            gw(base, "/v3/kv/put", {"key": b64(k), "value": b64(v)})
        pre = {"key": b64("/registry/pods/"), "range_end": b64("/registry/pods0")}
        out["range"] += [gw(base, "/v3/kv/range", pre),
                         gw(base, "/v3/kv/range", dict(pre, limit=1)),
                         gw(base, "/v3/kv/range", dict(pre, keys_only=True)),
                         gw(base, "/v3/kv/range", dict(pre, count_only=True)),
                         gw(base, "/v3/kv/range", {"key": b64("/none")})]
        cmp = [{"key": b64(puts[0][0]), "target": "MOD", "result": "GREATER",
                "mod_revision": "1"}]
        rng = {"request_range": {"key": b64(puts[0][0])}}
        put = {"request_put": {"key": b64("/x"), "value": b64("y")}}
        out["txn"] += [(1, gw(base, "/v3/kv/txn", {"compare": cmp, "success": [rng, put]})),
                       (2, gw(base, "/v3/kv/txn", {"compare": cmp, "success": [rng, rng]})),
                       (1 << 2, gw(base, "/v3/kv/txn", {
                           "compare": [dict(cmp[0], result="LESS")], "failure": [rng]})),
                       (0, gw(base, "/v3/kv/txn", {"success": [put]}))]
        out["status"] += [gw(base, "/v3/maintenance/status", {}),
                          gw(base, "/v3/kv/deleterange", {"key": b64("/x")})]
        gw(base, "/v3/kv/compaction", {"revision": "3"})
        out["error"] += [gw(base, "/v3/kv/range", dict(pre, revision="2")),
                         http(base, "/v3/kv/range", "POST", b"{", "application/json"),
                         gw(base, "/v3/kv/txn", {"success": [put] * 200})]
        out["watch"].append(etcd_watch(base, "/registry/pods/", puts[:2]))
        return out
    finally:
        proc.terminate()
        proc.wait()


# ---- the seeds of each target ----

def items_of(lists):
    items = []
    for body in lists:
        try:
            items += json.loads(body).get("items") or []
        except ValueError:
            pass
    return items


def seed_streams(api):
    for i, body in enumerate(api["lists"]):
        add("fuzz_list_stream", bytes([i % 8]) + body)
        add("fuzz_gunzip", bytes([(i + 5) % 8]) + gzip.compress(body, mtime=0))
    for i, body in enumerate(api["watches"]):
        add("fuzz_watch_stream", bytes([(i * 3) % 8]) + body)
        add("fuzz_gunzip", bytes([i % 8]) + gzip.compress(body, mtime=0) +
            gzip.compress(b"\n", mtime=0))


# Objects the response filters act on, as the cloud would send them.
FILTERED = [
    {"metadata": {"name": "kubernetes", "namespace": "default"},
     "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
              "ports": [{"name": "https", "port": 443}]}},
    {"metadata": {"name": "lb", "namespace": "default",
                  "annotations": {"svc.openyurt.io/discard": "true"}},
     "spec": {"type": "LoadBalancer"}},
    {"metadata": {"name": "np", "namespace": "default",
                  "annotations": {"nodeport.openyurt.io/listen": "-pool-a,*"}},
     "spec": {"type": "NodePort"}},
    {"metadata": {"name": "h-abc", "namespace": "default",
                  "labels": {"kubernetes.io/service-name": "h"}},
     "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "node1"},
                                          {"addresses": ["10.0.0.2"], "nodeName": "node2"}]},
    {"metadata": {"name": "p", "namespace": "default"},
     "subsets": [{"addresses": [{"ip": "10.0.0.1", "nodeName": "node-a"},
                                {"ip": "10.0.0.2", "nodeName": "node9"}]}]},
    {"metadata": {"name": "kube-proxy", "namespace": "kube-system"},
     "data": {"config.conf": "clientConnection:\n  kubeconfig: /var/lib/kp.conf\n"}},
    {"metadata": {"name": "pod", "namespace": "default"},
     "spec": {"containers": [{"name": "c", "env": [
         {"name": "KUBERNETES_SERVICE_HOST", "value": "api.example.com"}]}]}},
]


def seed_rewrite():
    for i, o in enumerate(FILTERED):
        target = [0, 0, 0, 1, 2, 4, 3][i]
        add("fuzz_rewrite", bytes([i % 8, 2 + 3 * target, 0x7f]) + compact(o).encode())
        add("fuzz_rewrite", bytes([(i + 3) % 8, 1 + 3 * target, 0x7f]) +
            b'{"type":"ADDED","object":' + compact(o).encode() + b'}\n{"type":"BOOKMARK","object":'
            b'{"metadata":{"resourceVersion":"7"}}}\n')
        add("fuzz_rewrite", bytes([(i + 5) % 8, 3 * target, 0x7f]) +
            b'{"kind":"List","metadata":{"resourceVersion":"9"},"items":[' + compact(o).encode() +
            b',' + compact(FILTERED[0]).encode() + b']}')


def seed_objects(api, items):
    for o in items[:12]:
        add("fuzz_meta", compact(o))
    for body in api["discovery"]:
        add("fuzz_meta", body)


REQUESTS = [
    ("GET", "/api/v1/nodes/node-1?resourceVersion=0"),
    ("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&limit=500&resourceVersion=0"),
    ("GET", "/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dnode-1"
            "&resourceVersion=1001&timeoutSeconds=420&watch=true"),
    ("GET", "/api/v1/watch/namespaces/default/pods?labelSelector=app+in+%28web%2Cdb%29"),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1"),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1"),
    ("PATCH", "/api/v1/nodes/node-1/status"),
    ("POST", "/api/v1/namespaces/default/events"),
    ("DELETE", "/api/v1/namespaces/default/pods"),
    ("GET", "/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io"
            "%2Fheadless%2Cservice.kubernetes.io%2Fservice-proxy-name&limit=500"),
    ("GET", "/api/v1/namespaces/default/pods?sendInitialEvents=true&watch=1"
            "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=1&continue=MTAwMQpkZWZhdWx0L3dlYi0w"),
    ("GET", "/api/v1/proxy/namespaces/default/pods/web-0:8080/healthz"),
    ("GET", "/apis/apps/v1"), ("GET", "/version"), ("GET", "/openapi/v3/api/v1"),
    ("GET", "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dweb-0%2Cstatus.phase%21%3DFailed"),
    ("GET", "/api/v1/namespaces/kube-system/configmaps?limit=1&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"),
]
AGENTS = [("kubelet/v1.32.4 (linux/amd64) kubernetes/abc", "application/vnd.kubernetes.protobuf,"
           "application/json"),
          ("kubectl/v1.32.4", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
          ("kube-proxy/v1.32.4", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
          ("coredns", "*/*")]
CTYPES = ["application/json", "application/strategic-merge-patch+json",
          "application/merge-patch+json; charset=utf-8", "application/json-patch+json",
          "application/apply-patch+yaml"]


def seed_requests():
    for i, (m, uri) in enumerate(REQUESTS):
        ua, acc = AGENTS[i % len(AGENTS)]
        add("fuzz_request", "\0".join([m, uri, ua, acc, CTYPES[i % len(CTYPES)]]))
    add("fuzz_request", "/api/v1/namespaces/default/pods/web-0/log?follow=true")


SELECTORS = [
    (0, "app=web"), (0, "app in (web,db),tier!=backend"), (0, "!job,k8s-app"),
    (0, "example.com/weight>3,version notin (v1)"), (0, "app==kube-proxy"),
    (1, "spec.nodeName=node-1"), (1, "metadata.name=web-0,status.phase!=Failed"),
    (1, "metadata.namespace==default"), (1, "spec.unschedulable=false"),
    (1, "type=kubernetes.io/service-account-token"), (1, r"metadata.name=a\,b\=c"),
]


def seed_selectors(items):
    for i, (kind, sel) in enumerate(SELECTORS):
        obj = compact(items[i % len(items)]) if items else "{}"
        add("fuzz_selector", bytes([kind]) + sel.encode() + b"\0" + obj.encode())


def seed_patches(items):
    node = next((o for o in items if o.get("kind") == "Node"), {"metadata": {"name": "n"}})
    pod = next((o for o in items if o.get("kind") == "Pod"), {"metadata": {"name": "p"}})
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "node-1", "namespace": "kube-node-lease",
                          "resourceVersion": "1001"},
             "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40,
                      "renewTime": "2024-01-01T00:00:00.000000Z"}}
    conds = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-01-01T00:01:00Z"}]
    smp = [
        {"$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
         "status": {"conditions": conds}},
        {"metadata": {"labels": {"a": None, "b": "c"}, "$retainKeys": ["labels"]}},
        {"spec": {"containers": [{"name": pod.get("spec", {}).get("containers", [{}])[0]
                                  .get("name", "c"), "image": "nginx:2"}]}},
        {"metadata": {"finalizers": ["x"], "$deleteFromPrimitiveList/finalizers": ["y"]}},
        {"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}},
        {"spec": {"$patch": "replace", "taints": []}},
    ]
    merge = [{"spec": {"renewTime": "2024-01-01T00:00:10.000000Z"}},
             {"metadata": {"annotations": {"x": "1"}, "labels": None}}, {"status": None}]
    jsonp = [[{"op": "replace", "path": "/spec/renewTime", "value": "2024-01-01T00:00:20Z"},
              {"op": "test", "path": "/spec/holderIdentity", "value": "node-1"}],
             [{"op": "add", "path": "/metadata/labels/a~1b", "value": "c"},
              {"op": "remove", "path": "/metadata/resourceVersion"},
              {"op": "copy", "from": "/spec", "path": "/status"},
              {"op": "move", "from": "/status", "path": "/x"}],
             [{"op": "add", "path": "/spec/conditions/-", "value": {"type": "A"}}]]
    for i, p in enumerate(smp):
        add("fuzz_patch", bytes([1]) + compact([node, pod][i % 2]).encode() + b"\0" +
            compact(p).encode())
    for p in merge:
        add("fuzz_patch", bytes([0]) + compact(lease).encode() + b"\0" + compact(p).encode())
    for p in jsonp:
        add("fuzz_patch", bytes([2]) + compact(lease).encode() + b"\0" + compact(p).encode())


# fuzz_offline_authz: flags (bit 0 an Authorization header, bits 1-2 the
# Content-Type), method, URI, User-Agent, body; the node is node1, and the
# target's cached pods are default/mine (on node1) and default/theirs.
OFFLINE_WRITES = [
    (0, "PATCH", "/api/v1/namespaces/default/pods/mine", "evil-pod/1.0",
     {"spec": {"containers": [{"name": "web", "image": "attacker.example/evil:latest"}]}}),
    (1, "PATCH", "/api/v1/namespaces/default/pods/mine", "evil-pod/1.0",
     {"spec": {"containers": [{"name": "web", "image": "attacker.example/evil:latest"}]}}),
    (0, "PATCH", "/api/v1/namespaces/default/pods/mine/status", "kubelet/v1.30.2",
     {"status": {"podIP": "10.0.0.9", "$setElementOrder/podIPs": [{"ip": "10.0.0.9"}],
                 "podIPs": [{"ip": "10.0.0.9"}, {"$patch": "delete", "ip": "10.0.0.1"}]},
      "spec": {"containers": [{"name": "web", "image": "evil"}]}}),
    (2, "PATCH", "/api/v1/namespaces/default/pods/mine/status", "kubelet/v1.30.2",
     {"metadata": {"labels": {"app": "evil"}}, "status": {"phase": "Failed"}}),
    (4, "PATCH", "/api/v1/namespaces/default/pods/theirs/status", "kubelet/v1.30.2",
     [{"op": "replace", "path": "/status/phase", "value": "Failed"}]),
    (6, "PUT", "/api/v1/namespaces/default/pods/mine/status", "kubelet/v1.30.2",
     {"metadata": {"name": "mine", "namespace": "default", "labels": {"app": "web"},
                   "resourceVersion": "10"}, "spec": {"nodeName": "node9"},
      "status": {"phase": "Succeeded"}}),
    (2, "PATCH", "/api/v1/namespaces/default/secrets/app-credentials", "evil-pod/1.0",
     {"data": {"password": "b3duZWQ="}}),
    (0, "PATCH", "/api/v1/nodes/node1/status", "kubelet/v1.30.2",
     {"status": {"conditions": [{"type": "Ready", "status": "False"}]},
      "spec": {"taints": []}}),
    (2, "PATCH", "/api/v1/nodes/node1", "kubelet/v1.30.2",
     {"metadata": {"labels": {"node.kubernetes.io/exclude": "true",
                              "node-role.kubernetes.io/master": ""}}}),
    (2, "PATCH", "/api/v1/nodes/node2/status", "kubelet/v1.30.2", {"status": {}}),
    (6, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1",
     "kubelet/v1.30.2", {"metadata": {"name": "node1", "namespace": "kube-node-lease",
                                      "resourceVersion": "7"},
                         "spec": {"renewTime": "2030-01-01T00:00:00.000000Z"}}),
    (6, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node2",
     "kubelet/v1.30.2", {"metadata": {"name": "node2"}}),
    (6, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
     "kubelet/v1.30.2", {"metadata": {"name": "node1"}}),
    (6, "POST", "/api/v1/namespaces/default/events", "kubelet/v1.30.2",
     {"metadata": {"name": "e2"}, "reason": "Started"}),
    (0, "PATCH", "/api/v1/namespaces/default/events/e1", "kubelet/v1.30.2", {"count": 2}),
    (6, "POST", "/api/v1/nodes", "kubelet/v1.30.2",
     {"metadata": {"name": "node1", "labels": {"kubernetes.io/os": "linux"}}}),
    (6, "POST", "/api/v1/namespaces/default/serviceaccounts/web-sa/token", "kubelet/v1.30.2",
     {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "mine",
                                  "uid": "u-mine"}}}),
    (6, "POST", "/api/v1/namespaces/default/serviceaccounts/admin/token", "kubelet/v1.30.2",
     {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "theirs",
                                  "uid": "u-theirs"}}}),
    (6, "POST", "/api/v1/namespaces/default/pods", "kubelet/v1.30.2",
     {"metadata": {"name": "mirror"}}),
    (6, "DELETE", "/api/v1/namespaces/default/pods/mine", "kubelet/v1.30.2", {}),
    (1, "PATCH", "/api/v1/namespaces/default/pods/mine/status", "evil-pod/1.0",
     {"status": {"phase": "Failed"}}),
    (7, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1",
     "evil-pod/1.0", {"metadata": {"name": "node1"}}),
    (7, "POST", "/api/v1/namespaces/default/events", "evil-pod/1.0", {"reason": "x"}),
]


def seed_offline_writes():
    for flags, method, uri, ua, body in OFFLINE_WRITES:
        add("fuzz_offline_authz", bytes([flags]) + "\0".join(
            [method, uri, ua, compact(body)]).encode())


def seed_podendpoints(items):
    """Pods with the endpoints that target them, and the changes kubelet
    reports offline: a new IP, NotReady, terminating."""
    pods = [o for o in items if o.get("kind") == "Pod"]
    ends = [o for o in items if o.get("kind") in ("EndpointSlice", "Endpoints")]
    variants = []
    for pod in pods[:6]:
        for ip, ready, gone in (("10.244.9.9", True, False), (None, False, False),
                                (None, True, True), ("fd00::9", True, False)):
            p = json.loads(compact(pod))
            st = p.setdefault("status", {})
            if ip:
                st["podIP"], st["podIPs"] = ip, [{"ip": ip}]
            st["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
            if gone:
                p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
            variants.append(p)
    for i, p in enumerate(variants):
        for e in ends:
            add("fuzz_podendpoints", compact(p).encode() + b"\0" + compact(e).encode())
    add("fuzz_podendpoints", b'{"metadata":{"name":"p","namespace":"n"}}\0{"subsets":[{}]}')


def views_json(views):
    return compact({"views": [{"namespace": ns, "labelSelector": ls, "fieldSelector": fs,
                               "resourceVersion": rv} for ns, ls, fs, rv in views]}) + "\n"


VIEWS = [[("", "", "", "1001")], [],
         [("", "", "spec.nodeName=node-1", "1200"), ("default", "app=web", "", "999"),
          ("kube-system", "k8s-app in (kube-dns),tier!=x", "metadata.name=coredns", "")]]


def seed_records():
    for v in VIEWS:
        add("fuzz_view", views_json(v))
        add("fuzz_journal", compact({
            "op": "replace", "tree": "r17", "target": "kubelet/pods.v1.core/default",
            "ino": "1234567", "component": "kubelet", "resdir": "pods.v1.core",
            "views": views_json(v)}))
    add("fuzz_journal", compact({
        "op": "replace", "tree": "r3", "target": "kube-proxy/endpointslices.v1.discovery.k8s.io",
        "ino": "99", "component": "kube-proxy", "resdir": "endpointslices.v1.discovery.k8s.io",
        "views": views_json(VIEWS[0])}))
    add("fuzz_journal", compact({
        "op": "replace", "tree": "r4", "target": "coredns/services", "ino": "7",
        "component": "coredns", "resdir": "services", "views": views_json([])}))
    event = compact({"apiVersion": "v1", "kind": "Event",
                     "metadata": {"name": "node-1.17a", "namespace": "default"},
                     "involvedObject": {"kind": "Node", "name": "node-1"},
                     "reason": "NodeReady", "message": "Node node-1 status is now: NodeReady"})
    for uri, ct in [("/api/v1/namespaces/default/events", "application/json"),
                    ("/apis/events.k8s.io/v1/namespaces/default/events",
                     "application/vnd.kubernetes.protobuf")]:
        add("fuzz_outbox", compact({"uri": uri, "contentType": ct, "body": event}))
    for rv, start in [(1001, "default/web-0"), (18446744073709551615, "node-1"), (7, "")]:
        add("fuzz_continue", b64("%d\n%s" % (rv, start)))
    add("fuzz_continue", "MTAwMQ==")
    for v in ["00000000000000001001 node-1/kubelet edge-2/kube-proxy",
              "00000000000000001200 @1700000000", "00000000000000000042  edge-1/kubelet ",
              "junk edge-1/coredns"]:
        add("fuzz_etcd_records", v)
    for k in ["pods.v1.core", "leases.v1.coordination.k8s.io", "widgets.v1.example.com", "pods",
              "/apis/apps/v1", "/version", "/openapi/v3/apis/apps/v1", "kubelet", "web-0"]:
        add("fuzz_key", k)


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: ca.crt
    server: https://10.0.0.1:6443
    tls-server-name: kubernetes
  name: default-cluster
contexts:
- context:
    cluster: default-cluster
    namespace: default
    user: default-auth
  name: default-context
current-context: default-context
preferences: {}
users:
- name: default-auth
  user:
    client-certificate: client.crt
    client-key: client.key
"""


def seed_kubeconfigs():
    add("fuzz_kubeconfig", KUBECONFIG)
    data = KUBECONFIG.replace("certificate-authority: ca.crt",
                              "certificate-authority-data: " + b64("-----BEGIN CERTIFICATE-----"
                                                                   "\nMIIB\n-----END CERTIFICATE-----\n"))
    add("fuzz_kubeconfig", data.replace("    client-certificate: client.crt\n"
                                        "    client-key: client.key\n",
                                        "    token: abc.def\n"))
    add("fuzz_kubeconfig", KUBECONFIG.replace("    client-certificate: client.crt\n"
                                              "    client-key: client.key\n",
                                              "    tokenFile: token\n").replace(
        "current-context: default-context", "current-context: \"\""))
    add("fuzz_kubeconfig", "clusters:\n- &c {name: a, cluster: {server: 'http://x', "
        "insecure-skip-tls-verify: true}}\ncontexts: [{name: a, context: {cluster: a, user: u}}]\n"
        "current-context: a\nusers: [{name: u, user: {client-certificate-data: " + b64("cert") +
        ", client-key-data: " + b64("key") + "}}]\n")


def seed_etcd(etcd):
    for body in etcd["range"]:
        add("fuzz_etcd_client", b"\x00" + body)
        add("fuzz_base64", json.loads(body).get("kvs", [{}])[0].get("value", "") or "")
    for spec, body in etcd["txn"]:
        add("fuzz_etcd_client", bytes([1 + 6 * spec]) + body)
    for body in etcd["status"]:
        add("fuzz_etcd_client", b"\x02" + body)
    for i, body in enumerate(etcd["error"]):
        add("fuzz_etcd_client", bytes([3 + 6 * (i * 3 % 16)]) + body)
    add("fuzz_etcd_client", b"\x03<html>502 Bad Gateway</html>")
    for i, body in enumerate(etcd["watch"]):
        add("fuzz_etcd_client", bytes([4 + 6 * (i + 3)]) + body)
        add("fuzz_etcd_client", bytes([5 + 6 * (i + 6)]) + body)
    add("fuzz_base64", b64("x" * 100)[:60] + "\n" + b64("x" * 100)[60:])


def write():
    for target, seeds in sorted(SEEDS.items()):
        d = os.path.join(OUT, target)
        os.makedirs(d, exist_ok=True)
        for s in seeds:
            with open(os.path.join(d, hashlib.sha1(s).hexdigest()), "wb") as f:
                f.write(s)
        print(f"{target}: {len(seeds)} seeds")


def main():
    tmp = tempfile.mkdtemp(prefix="yurthub-seeds-")
    try:
        api = from_apiserver(tmp)
        items = items_of(api["lists"])
        etcd = from_etcd(tmp, [o for o in items if o.get("kind") == "Pod"] or items)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seed_streams(api)
    seed_rewrite()
    seed_objects(api, items)
    seed_requests()
    seed_selectors(items)
    seed_patches(items)
    seed_podendpoints(items)
    seed_offline_writes()
    seed_records()
    seed_kubeconfigs()
    seed_etcd(etcd)
    write()


if __name__ == "__main__":
    main()
