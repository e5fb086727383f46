"""End to end, migration: the hub takes over a cache directory the Go YurtHub wrote.

The test builds, by hand, the cache directory a Go YurtHub leaves on an edge node
(its disk storage's layout, as docs/contracts.md section 3 and docs/migrating.md describe it):

    <cache>/<component>/<resource>.<version>.<group|core>/[<namespace>/]<name>
        one JSON object per file, kind and apiVersion set, no suffix, mode 0600
        (directories 0755)
    <cache>/version, <cache>/_apis_<group>_<version>    discovery documents, raw bodies
    <cache>/_internal/restmapper/cache-crd-restmapper.conf   the CRD kind map
    tmp_<name>                                          backups of interrupted writes

for a node "edge-node-1": kubelet's pods (two namespaces), node, lease, configmaps,
secrets, services, events and two listed-but-empty collections; kube-proxy's services,
endpointslices and node; coredns's services, endpointslices and namespaces; flanneld's
nodes; raven-agent-ds's gateways (a CRD); the pool-scope lists of a newer YurtHub's
multiplexer; and two writes the Go YurtHub was killed in the middle of (a lease update and
a list replace), with their tmp_ backups.

Then our hub starts on it with the cloud unreachable from the first moment (the test
double is cut before the hub starts), and the node's components query it: every answer
must be what the files hold.  The files must be left as they were (except the two
interrupted writes, which must be settled exactly as the Go YurtHub's own recovery settles
them), `yurthub cache verify` must find nothing wrong and `yurthub cache ls` must show
the components.  Last, the cloud comes back with the same objects, a little changed, one
pod deleted and one added: kubelet's next list is the cloud's, and the cache follows it.
"""

import copy
import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from harness import HUB_BIN, Double, Hub, Suite, get, kubectl, wait_for  # noqa: E402

from watch_stream import dechunk, open_watch  # noqa: E402
NODE = "edge-node-1"
KUBELET = "kubelet/v1.30.4 (linux/amd64) kubernetes/9bf3ed3"
PROXY = "kube-proxy/v1.30.4 (linux/amd64) kubernetes/9bf3ed3"
COREDNS = "coredns/1.11.1 (linux/amd64) kubernetes/v1.30.4"
RAVEN = "raven-agent-ds/v1.4.0 (linux/amd64) openyurt/0a5d3c1"
JSON_ACCEPT = "application/json"
PROTO_JSON = "application/vnd.kubernetes.protobuf,application/json"
PROXY_SEL = ("labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io"
             "%2Fservice-proxy-name")
NODE_PODS = "/api/v1/pods?fieldSelector=spec.nodeName%3D" + NODE
CREATED = "2025-09-14T07:21:09Z"


# --------------------------------------------------------------------------------------------
# The Go YurtHub's cache directory, by hand
# --------------------------------------------------------------------------------------------

def uid(*parts):
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "migrate/" + "/".join(parts)))


def meta(name, ns=None, rv=0, labels=None, annotations=None, owner=None, created=CREATED):
    m = {"name": name}
    if ns is not None:
        m["namespace"] = ns
    m["uid"] = uid(ns or "", name)
    m["resourceVersion"] = str(rv)
    m["creationTimestamp"] = created
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    if owner:
        kind, oname = owner
        m["ownerReferences"] = [{"apiVersion": "v1" if kind == "Node" else "apps/v1",
                                 "kind": kind, "name": oname, "uid": uid("owner", kind, oname),
                                 "controller": True, "blockOwnerDeletion": True}]
    return m


def go_json(obj):
    """The bytes the Go YurtHub's storage wrapper writes: kind and apiVersion first (TypeMeta
    is the first field), compact, one trailing newline (json.Encoder)."""
    head = {"kind": obj["kind"], "apiVersion": obj["apiVersion"]}
    rest = {k: v for k, v in obj.items() if k not in head}
    return (json.dumps(dict(head, **rest), separators=(",", ":")) + "\n").encode()


def pod(ns, name, rv, app_labels, owner, image, ip, host_network=False, restarts=0,
        annotations=None, ports=()):
    container = {"name": image.rsplit("/", 1)[-1].split(":")[0], "image": image, "imagePullPolicy": "IfNotPresent",
                 "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                 "terminationMessagePath": "/dev/termination-log",
                 "terminationMessagePolicy": "File"}
    if ports:
        container["ports"] = [{"containerPort": p, "protocol": "TCP"} for p in ports]
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": meta(name, ns, rv, app_labels, annotations, owner),
        "spec": {"containers": [container], "restartPolicy": "Always",
                 "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "serviceAccountName": "default", "nodeName": NODE,
                 "hostNetwork": host_network, "schedulerName": "default-scheduler",
                 "priority": 0, "enableServiceLinks": True,
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "hostIP": "192.168.10.21", "podIP": ip,
                   "podIPs": [{"ip": ip}], "startTime": CREATED, "qosClass": "Burstable",
                   "conditions": [{"type": t, "status": "True",
                                   "lastTransitionTime": "2025-09-14T07:21:30Z"}
                                  for t in ("PodReadyToStartContainers", "Initialized",
                                            "Ready", "ContainersReady", "PodScheduled")],
                   "containerStatuses": [{
                       "name": container["name"], "ready": True, "started": True,
                       "restartCount": restarts, "image": image,
                       "imageID": image.split(":")[0] + "@sha256:" +
                       hashlib.sha256(image.encode()).hexdigest(),
                       "containerID": "containerd://" +
                       hashlib.sha256((ns + name).encode()).hexdigest(),
                       "state": {"running": {"startedAt": "2025-09-14T07:21:28Z"}}}]},
    }


def node_obj(name, rv, pool, edge=True, ip="192.168.10.21"):
    labels = {"beta.kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux",
              "kubernetes.io/arch": "arm64", "kubernetes.io/hostname": name,
              "kubernetes.io/os": "linux", "apps.openyurt.io/nodepool": pool,
              "openyurt.io/is-edge-worker": "true" if edge else "false"}
    return {
        "kind": "Node", "apiVersion": "v1",
        "metadata": meta(name, None, rv, labels, {
            "node.alpha.kubernetes.io/ttl": "0",
            "node.beta.openyurt.io/autonomy": "true",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true"}),
        "spec": {"podCIDR": "10.244.%d.0/24" % (int(hashlib.md5(name.encode()).hexdigest(),
                                                      16) % 200),
                 "podCIDRs": ["10.244.%d.0/24" % (int(hashlib.md5(name.encode()).hexdigest(),
                                                      16) % 200)]},
        "status": {
            "capacity": {"cpu": "4", "memory": "8002612Ki", "pods": "110",
                         "ephemeral-storage": "61255492Ki"},
            "allocatable": {"cpu": "4", "memory": "7900212Ki", "pods": "110",
                            "ephemeral-storage": "56453061201"},
            "conditions": [{"type": "Ready", "status": "True",
                            "lastHeartbeatTime": "2025-11-02T21:48:05Z",
                            "lastTransitionTime": "2025-09-14T07:20:51Z",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}],
            "addresses": [{"type": "InternalIP", "address": ip},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": hashlib.md5(name.encode()).hexdigest(),
                         "systemUUID": uid("sys", name), "bootID": uid("boot", name),
                         "kernelVersion": "6.1.0-26-arm64",
                         "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "containerRuntimeVersion": "containerd://1.7.22",
                         "kubeletVersion": "v1.30.4", "kubeProxyVersion": "v1.30.4",
                         "operatingSystem": "linux", "architecture": "arm64"}},
    }


def service(ns, name, rv, cluster_ip, ports, selector=None, labels=None):
    spec = {"clusterIP": cluster_ip, "clusterIPs": [cluster_ip], "type": "ClusterIP",
            "sessionAffinity": "None", "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster",
            "ports": [{"name": n, "port": p, "protocol": pr, "targetPort": t}
                      for n, p, pr, t in ports]}
    if selector:
        spec["selector"] = selector
    return {"kind": "Service", "apiVersion": "v1", "metadata": meta(name, ns, rv, labels),
            "spec": spec, "status": {"loadBalancer": {}}}


def slice_obj(ns, name, rv, svc, addrs, ports, headless=False):
    labels = {"kubernetes.io/service-name": svc,
              "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    if headless:
        labels["service.kubernetes.io/headless"] = ""
    return {"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": meta(name, ns, rv, labels, {
                "endpoints.kubernetes.io/last-change-trigger-time": "2025-10-30T10:02:11Z"}),
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True, "serving": True,
                                                             "terminating": False},
                           "nodeName": node, "targetRef": {"kind": "Pod", "namespace": ns,
                                                           "name": pod_name,
                                                           "uid": uid(ns, pod_name)}}
                          for ip, node, pod_name in addrs],
            "ports": [{"name": n, "port": p, "protocol": pr} for n, p, pr in ports]}


def configmap(ns, name, rv, data, labels=None):
    return {"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta(name, ns, rv, labels),
            "data": data}


CA = "-----BEGIN CERTIFICATE-----\n" + "\n".join(
    hashlib.sha512(b"ca%d" % i).hexdigest()[:64] for i in range(8)) + \
    "\n-----END CERTIFICATE-----\n"

DNS_PORTS = [("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"), ("metrics", 9153, "TCP")]


def cluster_objects():
    """The cluster as the node's components last saw it, by kind."""
    pods = [
        pod("kube-system", "kube-proxy-8xk2m", 412, {"k8s-app": "kube-proxy",
                                                     "controller-revision-hash": "66f9b8c4d7",
                                                     "pod-template-generation": "1"},
            ("DaemonSet", "kube-proxy"), "registry.k8s.io/kube-proxy:v1.30.4",
            "192.168.10.21", host_network=True),
        pod("kube-system", "kube-flannel-ds-7w9qz", 418, {"app": "flannel", "tier": "node",
                                                          "controller-revision-hash":
                                                          "5c8d9f7b6d"},
            ("DaemonSet", "kube-flannel-ds"), "docker.io/flannel/flannel:v0.25.6",
            "192.168.10.21", host_network=True),
        pod("kube-system", "coredns-6f6b679f8f-tq7zn", 431, {"k8s-app": "kube-dns",
                                                             "pod-template-hash": "6f6b679f8f"},
            ("ReplicaSet", "coredns-6f6b679f8f"), "registry.k8s.io/coredns/coredns:v1.11.1",
            "10.244.17.2", ports=(53, 9153)),
        pod("kube-system", "yurt-hub-" + NODE, 447, {"k8s-app": "yurt-hub"},
            ("Node", NODE), "openyurt/yurthub:v1.4.4", "192.168.10.21", host_network=True,
            annotations={"kubernetes.io/config.hash": "7be5bd2c6a0f3d0e4a44b8f3a5c1e0b2",
                         "kubernetes.io/config.mirror": "7be5bd2c6a0f3d0e4a44b8f3a5c1e0b2",
                         "kubernetes.io/config.source": "file"}),
        pod("default", "nginx-7c5ddbdf54-2xq9v", 655, {"app": "nginx",
                                                       "pod-template-hash": "7c5ddbdf54"},
            ("ReplicaSet", "nginx-7c5ddbdf54"), "docker.io/library/nginx:1.27.2",
            "10.244.17.8", ports=(80,)),
        pod("default", "nginx-7c5ddbdf54-hb4kd", 661, {"app": "nginx",
                                                       "pod-template-hash": "7c5ddbdf54"},
            ("ReplicaSet", "nginx-7c5ddbdf54"), "docker.io/library/nginx:1.27.2",
            "10.244.17.9", ports=(80,), restarts=2),
        pod("default", "web-0", 702, {"app": "web", "apps.kubernetes.io/pod-index": "0",
                                      "statefulset.kubernetes.io/pod-name": "web-0"},
            ("StatefulSet", "web"), "registry.example.com/shop/web:2.3.1", "10.244.17.12",
            ports=(8080,)),
    ]
    nodes = [node_obj(NODE, 921, "hangzhou"),
             node_obj("edge-node-2", 917, "hangzhou", ip="192.168.10.22"),
             node_obj("master-1", 905, "cloud", edge=False, ip="10.0.0.11")]
    lease = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
             "metadata": dict(meta(NODE, "kube-node-lease", 940, owner=("Node", NODE))),
             "spec": {"holderIdentity": NODE, "leaseDurationSeconds": 40,
                      "renewTime": "2025-11-02T21:48:11.402118Z"}}
    services = [
        service("default", "kubernetes", 198, "10.96.0.1", [("https", 443, "TCP", 6443)],
                labels={"component": "apiserver", "provider": "kubernetes"}),
        service("kube-system", "kube-dns", 236, "10.96.0.10",
                [(n, p, pr, p) for n, p, pr in DNS_PORTS], {"k8s-app": "kube-dns"},
                {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true",
                 "kubernetes.io/name": "CoreDNS"}),
        service("default", "nginx", 590, "10.101.44.7", [("http", 80, "TCP", 80)],
                {"app": "nginx"}, {"app": "nginx"}),
        service("default", "web-headless", 688, "None", [("http", 8080, "TCP", 8080)],
                {"app": "web"}, {"app": "web"}),
    ]
    slices = [
        slice_obj("default", "kubernetes", 199, "kubernetes", [("10.0.0.11", "master-1",
                                                                "kube-apiserver-master-1")],
                  [("https", 6443, "TCP")]),
        slice_obj("kube-system", "kube-dns-7rhtl", 433, "kube-dns",
                  [("10.244.17.2", NODE, "coredns-6f6b679f8f-tq7zn")], DNS_PORTS),
        slice_obj("default", "nginx-x8d2k", 663, "nginx",
                  [("10.244.17.8", NODE, "nginx-7c5ddbdf54-2xq9v"),
                   ("10.244.17.9", NODE, "nginx-7c5ddbdf54-hb4kd")], [("http", 80, "TCP")]),
        slice_obj("default", "web-headless-q5fzn", 705, "web-headless",
                  [("10.244.17.12", NODE, "web-0")], [("http", 8080, "TCP")], headless=True),
    ]
    configmaps = [
        configmap("kube-system", "kube-proxy", 221, {
            "config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
                           "kind: KubeProxyConfiguration\nmode: iptables\n"
                           "clusterCIDR: 10.244.0.0/16\n"},
            {"app": "kube-proxy"}),
        configmap("kube-system", "coredns", 230, {
            "Corefile": ".:53 {\n    errors\n    health\n    ready\n    kubernetes cluster.local "
                        "in-addr.arpa ip6.arpa {\n       pods insecure\n    }\n    forward . "
                        "/etc/resolv.conf\n    cache 30\n    loop\n    reload\n}\n"}),
        configmap("kube-system", "kube-flannel-cfg", 242, {
            "net-conf.json": '{\n  "Network": "10.244.0.0/16",\n  "Backend": {"Type": '
                             '"vxlan"}\n}\n'}, {"app": "flannel", "tier": "node"}),
        configmap("kube-system", "kube-root-ca.crt", 37, {"ca.crt": CA}),
        configmap("default", "kube-root-ca.crt", 35, {"ca.crt": CA}),
        configmap("default", "nginx-conf", 588, {
            "default.conf": "server {\n  listen 80;\n  location / { root /usr/share/nginx/html; "
                            "}\n}\n"}, {"app": "nginx"}),
    ]
    secrets = [
        {"kind": "Secret", "apiVersion": "v1",
         "metadata": meta("registry-pull", "default", 571),
         "type": "kubernetes.io/dockerconfigjson",
         "data": {".dockerconfigjson": "eyJhdXRocyI6eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6eyJhdXRoIjoi"
                                       "ZFhObGNqcHdZWE56In19fQ=="}},
        {"kind": "Secret", "apiVersion": "v1", "metadata": meta("web-tls", "default", 690),
         "type": "kubernetes.io/tls",
         "data": {"tls.crt": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
                  "tls.key": "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCg=="}},
    ]
    namespaces = [{"kind": "Namespace", "apiVersion": "v1",
                   "metadata": meta(n, None, rv, {"kubernetes.io/metadata.name": n}),
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
                  for n, rv in (("default", 21), ("kube-system", 9), ("kube-public", 13),
                                ("kube-node-lease", 17))]
    events = [
        {"kind": "Event", "apiVersion": "v1",
         "metadata": meta("nginx-7c5ddbdf54-hb4kd.1804a3c2d1e4b5a6", "default", 663),
         "involvedObject": {"kind": "Pod", "namespace": "default",
                            "name": "nginx-7c5ddbdf54-hb4kd",
                            "uid": uid("default", "nginx-7c5ddbdf54-hb4kd"), "apiVersion": "v1",
                            "fieldPath": "spec.containers{nginx}"},
         "reason": "BackOff", "message": "Back-off restarting failed container nginx",
         "source": {"component": "kubelet", "host": NODE}, "type": "Warning", "count": 3,
         "firstTimestamp": "2025-11-02T20:11:02Z", "lastTimestamp": "2025-11-02T20:13:40Z",
         "reportingComponent": "kubelet", "reportingInstance": NODE},
        {"kind": "Event", "apiVersion": "v1",
         "metadata": meta(NODE + ".1804a1f0aa3c9e12", "default", 933),
         "involvedObject": {"kind": "Node", "name": NODE, "uid": uid("", NODE)},
         "reason": "NodeReady", "message": "Node %s status is now: NodeReady" % NODE,
         "source": {"component": "kubelet", "host": NODE}, "type": "Normal", "count": 1,
         "firstTimestamp": "2025-11-02T21:40:00Z", "lastTimestamp": "2025-11-02T21:40:00Z",
         "reportingComponent": "kubelet", "reportingInstance": NODE},
    ]
    gateway = {"kind": "Gateway", "apiVersion": "raven.openyurt.io/v1beta1",
               "metadata": meta("gw-hangzhou", None, 811, {"raven.openyurt.io/gateway":
                                                           "gw-hangzhou"}),
               "spec": {"proxyConfig": {"Replicas": 1, "proxyHTTPPort": "10255,9445"},
                        "tunnelConfig": {"Replicas": 1},
                        "endpoints": [{"nodeName": NODE, "underNAT": True, "port": 4500,
                                       "type": "tunnel", "publicIP": "203.0.113.7"}]},
               "status": {"activeEndpoints": [{"nodeName": NODE, "underNAT": True,
                                               "port": 4500, "type": "tunnel",
                                               "publicIP": "203.0.113.7"}]}}
    return {"pods": pods, "nodes": nodes, "lease": lease, "services": services,
            "slices": slices, "configmaps": configmaps, "secrets": secrets,
            "namespaces": namespaces, "events": events, "gateway": gateway}


RESDIR = {"Pod": "pods.v1.core", "Node": "nodes.v1.core", "Service": "services.v1.core",
          "EndpointSlice": "endpointslices.v1.discovery.k8s.io",
          "ConfigMap": "configmaps.v1.core", "Secret": "secrets.v1.core",
          "Namespace": "namespaces.v1.core", "Event": "events.v1.core",
          "Lease": "leases.v1.coordination.k8s.io",
          "Gateway": "gateways.v1beta1.raven.openyurt.io"}


def rel_path(component, obj):
    """Where the Go YurtHub's KeyFunc puts obj of component (namespaces ignore the ns)."""
    md = obj["metadata"]
    parts = [component, RESDIR[obj["kind"]]]
    if md.get("namespace") and obj["kind"] != "Namespace":
        parts.append(md["namespace"])
    parts.append(md["name"])
    return "/".join(parts)


def write_go_file(root, rel, data):
    """fs.CreateFile: mkdir -p 0755 of the parent, file 0600 (O_SYNC, no rename)."""
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_SYNC, 0o600)
    os.write(fd, data)
    os.close(fd)


VERSION_DOC = (b'{\n  "major": "1",\n  "minor": "30",\n  "gitVersion": "v1.30.4",\n'
               b'  "gitCommit": "a51b3b711150f57ffc1f526a640ec058514ed596",\n'
               b'  "gitTreeState": "clean",\n  "buildDate": "2024-08-14T18:46:04Z",\n'
               b'  "goVersion": "go1.22.5",\n  "compiler": "gc",\n'
               b'  "platform": "linux/amd64"\n}')
DISCOVERY_V1 = json.dumps({
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "discovery.k8s.io/v1",
    "resources": [{"name": "endpointslices", "singularName": "endpointslice",
                   "namespaced": True, "kind": "EndpointSlice",
                   "verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
                             "update", "watch"], "storageVersionHash": "Nx3SIv6I0mE="}]},
    separators=(",", ":")).encode() + b"\n"
RAVEN_V1BETA1 = json.dumps({
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "raven.openyurt.io/v1beta1",
    "resources": [{"name": "gateways", "singularName": "gateway", "namespaced": False,
                   "kind": "Gateway", "shortNames": ["gw"],
                   "verbs": ["delete", "deletecollection", "get", "list", "patch", "create",
                             "update", "watch"], "storageVersionHash": "8yW1bGxU6dM="},
                  {"name": "gateways/status", "singularName": "", "namespaced": False,
                   "kind": "Gateway", "verbs": ["get", "patch", "update"]}]},
    separators=(",", ":")).encode() + b"\n"
RESTMAPPER = b'{"raven.openyurt.io/v1beta1/gateway":"Gateway",' \
             b'"raven.openyurt.io/v1beta1/gateways":"Gateway"}'


def build_go_cache(root, objs):
    """Lay out the Go YurtHub's cache; returns (files, dirs, settled): what a clean stop of
    the Go YurtHub would have left, path -> bytes; every directory; and the paths the two
    interrupted writes are settled into by the Go YurtHub's own recovery, path -> bytes
    (None: the path must be gone)."""
    files = {}

    def put(rel, data):
        write_go_file(root, rel, data)
        files[rel] = data

    def put_obj(component, obj):
        put(rel_path(component, obj), go_json(obj))

    # kubelet: its pods (list with fieldSelector spec.nodeName=<node>: ReplaceComponentList of
    # kubelet/pods.v1.core), its node, lease, the configmaps and secrets its pods use
    # (name-selector lists: one object each), all services (environment variables), events
    # it created, and two collections it listed empty (the root directory is made, nothing
    # in it)
    for p in objs["pods"]:
        put_obj("kubelet", p)
    put_obj("kubelet", objs["nodes"][0])
    put_obj("kubelet", objs["lease"])
    for c in objs["configmaps"]:
        put_obj("kubelet", c)
    for s in objs["secrets"]:
        put_obj("kubelet", s)
    for s in objs["services"]:
        put_obj("kubelet", s)
    for e in objs["events"]:
        put_obj("kubelet", e)
    for empty in ("csidrivers.v1.storage.k8s.io", "runtimeclasses.v1.node.k8s.io"):
        os.makedirs(os.path.join(root, "kubelet", empty), mode=0o755)
    # kube-proxy: services and endpointslices with its label selector (headless slices
    # excluded; services do not carry that label), and its node (name-selector list)
    for s in objs["services"]:
        put_obj("kube-proxy", s)
    for s in objs["slices"]:
        if "service.kubernetes.io/headless" not in s["metadata"]["labels"]:
            put_obj("kube-proxy", s)
    put_obj("kube-proxy", objs["nodes"][0])
    # coredns: everything it watches, unfiltered
    for s in objs["services"]:
        put_obj("coredns", s)
    for s in objs["slices"]:
        put_obj("coredns", s)
    for n in objs["namespaces"]:
        put_obj("coredns", n)
    # flanneld lists every node
    for n in objs["nodes"]:
        put_obj("flanneld", n)
    # raven-agent-ds: a CRD, recorded in the restmapper file
    put_obj("raven-agent-ds", objs["gateway"])
    # a newer YurtHub's multiplexer caches the pool-scope lists under its own component
    mux = "multiplexer-proxy-" + NODE
    for s in objs["services"]:
        put_obj(mux, s)
    for s in objs["slices"]:
        put_obj(mux, s)
    # cluster info (raw bodies of GET /version and the cached api-resources paths) and
    # the CRD restmapper file
    put("version", VERSION_DOC)
    put("_apis_discovery.k8s.io_v1", DISCOVERY_V1)
    put("_apis_raven.openyurt.io_v1beta1", RAVEN_V1BETA1)
    put("_internal/restmapper/cache-crd-restmapper.conf", RESTMAPPER)

    # Two writes the Go YurtHub was killed in the middle of.
    settled = {}
    # 1. Update of the node lease (the health checker renews it every 10 s), cut after
    #    "rename name -> tmp_name" and "create name" but before "delete tmp_name": recovery
    #    puts the backup back over the new file.
    lease_rel = rel_path("kubelet", objs["lease"])
    newer = copy.deepcopy(objs["lease"])
    newer["metadata"]["resourceVersion"] = "951"
    newer["spec"]["renewTime"] = "2025-11-02T21:48:21.417730Z"
    d, n = os.path.split(lease_rel)
    os.rename(os.path.join(root, lease_rel), os.path.join(root, d, "tmp_" + n))
    write_go_file(root, lease_rel, go_json(newer))
    settled[lease_rel] = files[lease_rel]
    settled[d + "/tmp_" + n] = None
    # 2. ReplaceComponentList of kube-proxy's endpointslices (all namespaces), cut while the
    #    new tree was being written: the root was renamed to tmp_<root>, and only one object
    #    of the new list is in the new root yet.  Recovery removes the partial root and
    #    renames the backup back.
    eps = "kube-proxy/endpointslices.v1.discovery.k8s.io"
    os.rename(os.path.join(root, eps), os.path.join(root, "kube-proxy",
                                                    "tmp_endpointslices.v1.discovery.k8s.io"))
    partial = copy.deepcopy(objs["slices"][0])
    partial["metadata"]["resourceVersion"] = "960"
    write_go_file(root, eps + "/default/kubernetes", go_json(partial))
    for rel in list(files):
        if rel.startswith(eps + "/"):
            settled[rel] = files[rel]
            settled["kube-proxy/tmp_endpointslices.v1.discovery.k8s.io" +
                    rel[len(eps):]] = None
    dirs = set()
    for base, ds, _ in os.walk(root):
        for x in ds:
            dirs.add(os.path.relpath(os.path.join(base, x), root))
    dirs = {x for x in dirs if "tmp_" not in x}
    return files, dirs, settled


def snapshot(root, skip_prefix="_internal/yurthub-c"):
    """path -> bytes of every file; and every directory; below root, without the C hub's
    own state."""
    files, dirs = {}, set()
    for base, ds, fs in os.walk(root):
        rel_base = os.path.relpath(base, root)
        for x in ds:
            rel = os.path.normpath(os.path.join(rel_base, x))
            if not (rel + "/").startswith(skip_prefix + "/"):
                dirs.add(rel)
        for x in fs:
            rel = os.path.normpath(os.path.join(rel_base, x))
            if rel.startswith(skip_prefix + "/"):
                continue
            with open(os.path.join(root, rel), "rb") as f:
                files[rel] = f.read()
    return files, dirs


# --------------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------------

def hub_get(hub, path, ua, accept=PROTO_JSON, timeout=30):
    return get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": ua, "Accept": accept},
               timeout=timeout)


def strip_type(obj):
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def by_key(items):
    return {(i["metadata"].get("namespace", ""), i["metadata"]["name"]): i for i in items}


def files_of(root, prefix):
    """{(namespace, name): parsed object} of the files below <root>/<prefix>."""
    out = {}
    base = os.path.join(root, prefix)
    for dirpath, _, fs in os.walk(base):
        for f in fs:
            try:
                with open(os.path.join(dirpath, f), "rb") as fh:
                    obj = json.loads(fh.read())
            except FileNotFoundError:
                continue  # swapped out by a list replace meanwhile: read again later
            out[(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj
    return out


def list_matches_files(t, what, status, body, expect, kind):
    """The list answer holds exactly the objects of expect (parsed files), each equal."""
    if not t.check("%s: 200" % what, status == 200, body[:300]):
        return
    doc = json.loads(body)
    got = by_key(doc.get("items") or [])
    t.check("%s: a %s" % (what, kind), doc.get("kind") == kind, doc.get("kind"))
    t.check("%s: exactly the %d cached objects" % (what, len(expect)),
            set(got) == set(expect), "%s vs %s" % (sorted(got), sorted(expect)))
    diff = [k for k in expect if k in got and strip_type(got[k]) != strip_type(expect[k])]
    t.check("%s: every object as in its file" % what, not diff, str(diff))


def read_events(sock, buf, seconds):
    """Read a chunked watch for up to seconds: (events, closed, buf)."""
    deadline = time.time() + seconds
    closed = False
    sock.settimeout(0.2)
    while time.time() < deadline:
        try:
            b = sock.recv(65536)
            if not b:
                closed = True
                break
            buf += b
        except socket.timeout:
            pass
        except OSError:
            closed = True
            break
        if b"\r\n0\r\n\r\n" in buf or buf.startswith(b"0\r\n\r\n"):
            closed = True
            break
    events = []
    for line in dechunk(buf).split(b"\n"):
        try:
            events.append(json.loads(line))
        except ValueError:
            pass  # blank, or not complete yet
    return events, closed, buf


def cache_cmd(*args):
    p = subprocess.run([HUB_BIN, "cache", *args], capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------

def check_verify_before(t, cache):
    rc, out, err = cache_cmd("verify", cache)
    problems = [line for line in out.splitlines() if not line.startswith("verify:")]
    t.check("before: cache verify on the Go cache reports only the two interrupted writes",
            rc != 0 and len(problems) == 2 and all("tmp_" in p for p in problems),
            out + err)


def test_offline(t, st):
    hub, cache, objs = st["hub"], st["cache"], st["objs"]
    t.check("the hub is ready on the Go cache with the cloud unreachable", hub.ready())
    t.check("...and knows it is offline", hub.metric("yurthub_upstream_healthy") == 0,
            str(hub.metric("yurthub_upstream_healthy")))
    pods = files_of(cache, "kubelet/pods.v1.core")
    t.check("the fixture has %d pods of %s in 2 namespaces" % (len(pods), NODE),
            len(pods) >= 6 and len({k[0] for k in pods}) == 2)

    # kubelet: its pods, as its reflector lists them
    s, _, body = hub_get(hub, NODE_PODS + "&limit=500&resourceVersion=0", KUBELET)
    list_matches_files(t, "kubelet lists its pods", s, body, pods, "PodList")
    rv = json.loads(body)["metadata"].get("resourceVersion", "") if s == 200 else ""
    t.check("...with a list resourceVersion (%s)" % rv, rv.isdigit() and int(rv) > 0)
    s, _, body = hub_get(hub, "/api/v1/pods?fieldSelector=spec.nodeName%3Dedge-node-2", KUBELET)
    t.check("another node's pods: none (200 empty, or 404)",
            s == 404 or (s == 200 and not json.loads(body)["items"]), body[:200])

    # single objects
    for what, path, rel in [
        ("a pod", "/api/v1/namespaces/default/pods/web-0", "kubelet/pods.v1.core/default/web-0"),
        ("a kube-system pod", "/api/v1/namespaces/kube-system/pods/coredns-6f6b679f8f-tq7zn",
         "kubelet/pods.v1.core/kube-system/coredns-6f6b679f8f-tq7zn"),
        ("its node", "/api/v1/nodes/%s?resourceVersion=0" % NODE,
         "kubelet/nodes.v1.core/" + NODE),
        ("a configmap", "/api/v1/namespaces/kube-system/configmaps/kube-proxy",
         "kubelet/configmaps.v1.core/kube-system/kube-proxy"),
        ("a secret", "/api/v1/namespaces/default/secrets/registry-pull",
         "kubelet/secrets.v1.core/default/registry-pull"),
        ("its lease (the backup the Go YurtHub would restore)",
         "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + NODE,
         "kubelet/leases.v1.coordination.k8s.io/kube-node-lease/" + NODE),
    ]:
        s, _, body = hub_get(hub, path, KUBELET)
        want = json.loads(st["files"][rel])
        t.check("kubelet gets %s: 200, as in its file" % what,
                s == 200 and strip_type(json.loads(body)) == strip_type(want), body[:300])
    # kubelet's configmap and node informers (name-selector lists)
    s, _, body = hub_get(hub, "/api/v1/namespaces/kube-system/configmaps?fieldSelector="
                         "metadata.name%3Dkube-flannel-cfg&limit=500&resourceVersion=0", KUBELET)
    list_matches_files(t, "kubelet's configmap informer (metadata.name=)", s, body,
                       {("kube-system", "kube-flannel-cfg"): json.loads(
                           st["files"]["kubelet/configmaps.v1.core/kube-system/"
                                       "kube-flannel-cfg"])}, "ConfigMapList")
    s, _, body = hub_get(hub, "/api/v1/nodes?fieldSelector=metadata.name%3D" + NODE +
                         "&limit=500&resourceVersion=0", KUBELET)
    list_matches_files(t, "kubelet's node informer", s, body,
                       {("", NODE): objs["nodes"][0]}, "NodeList")
    s, _, body = hub_get(hub, "/apis/storage.k8s.io/v1/csidrivers?limit=500&resourceVersion=0",
                         KUBELET)
    t.check("kubelet's CSIDrivers, listed empty by the Go YurtHub: 200 with no items",
            s == 200 and json.loads(body).get("items") == [], body[:200])

    # the watch kubelet opens from its list's resourceVersion
    sock, head, rest = open_watch(
        hub, NODE_PODS + "&allowWatchBookmarks=true&resourceVersion=%s&timeout=7m12s"
        "&timeoutSeconds=432&watch=true" % rv, KUBELET)
    t.check("kubelet's watch from the list's rv: 200", head.startswith(b"HTTP/1.1 200"),
            head[:200])
    events, closed, rest = read_events(sock, rest, 3)
    t.check("...stays open 3 s with nothing but bookmarks",
            not closed and all(e.get("type") == "BOOKMARK" for e in events),
            str(events)[:300])
    st["kubelet_watch"] = (sock, rest)

    # kube-proxy: its services and endpointslices with its selector
    s, _, body = hub_get(hub, "/api/v1/services?" + PROXY_SEL + "&limit=500&resourceVersion=0",
                         PROXY)
    list_matches_files(t, "kube-proxy lists its services", s, body,
                       files_of(cache, "kube-proxy/services.v1.core"), "ServiceList")
    s, _, body = hub_get(hub, "/apis/discovery.k8s.io/v1/endpointslices?" + PROXY_SEL +
                         "&limit=500&resourceVersion=0", PROXY)
    # pool-scope: served by the multiplexer from the newer YurtHub's multiplexer-proxy
    # lists, through kube-proxy's filters, which point default/kubernetes at the hub
    # (forwardkubesvctraffic; kube-proxy's own file has the cloud's copy)
    want = {k: v for k, v in by_key(objs["slices"]).items()
            if "service.kubernetes.io/headless" not in v["metadata"]["labels"]}
    got = by_key(json.loads(body).get("items") or []) if s == 200 else {}
    t.check("kube-proxy lists its endpointslices: the cached ones, its selector applied",
            s == 200 and set(got) == set(want), "%s vs %s" % (sorted(got), sorted(want)))
    t.check("...each as cached, default/kubernetes through kube-proxy's filters",
            all(strip_type(got[k]) == strip_type(want[k]) for k in want
                if k in got and k != ("default", "kubernetes")), sorted(got))
    # coredns
    s, _, body = hub_get(hub, "/apis/discovery.k8s.io/v1/endpointslices?limit=500&"
                         "resourceVersion=0", COREDNS)
    list_matches_files(t, "coredns lists endpointslices (headless too)", s, body,
                       by_key(objs["slices"]), "EndpointSliceList")
    s, _, body = hub_get(hub, "/api/v1/namespaces?limit=500&resourceVersion=0", COREDNS)
    list_matches_files(t, "coredns lists namespaces", s, body, by_key(objs["namespaces"]),
                       "NamespaceList")
    # a CRD
    s, _, body = hub_get(hub, "/apis/raven.openyurt.io/v1beta1/gateways", RAVEN, JSON_ACCEPT)
    list_matches_files(t, "raven-agent-ds lists its gateways (a CRD)", s, body,
                       by_key([objs["gateway"]]), "GatewayList")
    # discovery documents the Go YurtHub cached, served byte for byte
    for path, data in [("/version", VERSION_DOC), ("/apis/discovery.k8s.io/v1", DISCOVERY_V1)]:
        s, _, body = hub_get(hub, path, PROXY, JSON_ACCEPT)
        t.check("GET %s: the cached document, byte for byte" % path,
                s == 200 and body == data, "%s %s" % (s, body[:200]))

    # discovery the Go YurtHub never cached (it keeps /version and a few /apis/<g>/<v> only):
    # nothing to answer with until a client reads it through this hub online
    s, _, body = hub_get(hub, "/api", "kubectl/v1.32.4 (linux/amd64) kubernetes/59526cd",
                         JSON_ACCEPT)
    t.check("GET /api offline on the Go cache: 404 (never cached by YurtHub)", s == 404,
            "%s %s" % (s, body[:200]))

    # the files: as YurtHub left them, the interrupted writes settled as YurtHub would
    files, dirs = snapshot(cache)
    want = dict(st["files"])
    for rel, data in st["settled"].items():
        if data is None:
            want.pop(rel, None)
        else:
            want[rel] = data
    changed = sorted(r for r in want if r in files and files[r] != want[r])
    missing = sorted(r for r in want if r not in files)
    added = sorted(r for r in files if r not in want)
    t.check("after the offline session: no file YurtHub wrote changed", not changed,
            str(changed))
    t.check("...none deleted", not missing, str(missing))
    t.check("...nothing added outside _internal/yurthub-c/", not added, str(added))
    t.check("...every directory still there (empty lists included)",
            st["dirs"] <= dirs, str(sorted(st["dirs"] - dirs)))
    t.check("...the interrupted writes settled as the Go YurtHub's recovery settles them",
            all((files.get(r) == d) for r, d in st["settled"].items()))
    modes = [r for r in want if r in files and
             stat.S_IMODE(os.stat(os.path.join(cache, r)).st_mode) != 0o600]
    t.check("...file modes untouched (0600)", not modes, str(modes))

    rc, out, err = cache_cmd("verify", cache)
    t.check("yurthub cache verify: clean", rc == 0 and " 0 problems" in out, out + err)
    rc, out, err = cache_cmd("ls", cache)
    comps = set(out.split())
    want_comps = {"kubelet", "kube-proxy", "coredns", "flanneld", "raven-agent-ds",
                  "multiplexer-proxy-" + NODE}
    t.check("yurthub cache ls: the components", rc == 0 and want_comps <= comps, out + err)
    rc, out, err = cache_cmd("ls", cache, "kubelet", "pods.v1.core")
    t.check("yurthub cache ls kubelet pods.v1.core: the pods",
            rc == 0 and all(k[1] in out for k in pods), out + err)


def cloud_objects(objs):
    """The same cluster a little later: pods restarted or relabelled, one pod gone, one
    new; every object through the double gets a newer resourceVersion."""
    out = []
    for p in objs["pods"]:
        p = copy.deepcopy(p)
        name = p["metadata"]["name"]
        if name == "nginx-7c5ddbdf54-hb4kd":
            continue                                         # deleted in the cloud
        if name == "nginx-7c5ddbdf54-2xq9v":
            p["status"]["containerStatuses"][0]["restartCount"] = 1
        p["metadata"].setdefault("annotations", {})["migrate.example.com/seen"] = "cloud"
        out.append(p)
    new = copy.deepcopy(objs["pods"][4])
    new["metadata"]["name"] = "nginx-7c5ddbdf54-k8s7d"
    new["metadata"]["uid"] = uid("default", "nginx-7c5ddbdf54-k8s7d")
    new["status"]["podIP"] = "10.244.17.14"
    new["status"]["podIPs"] = [{"ip": "10.244.17.14"}]
    out.append(new)
    for group in ("nodes", "services", "slices", "configmaps", "secrets"):
        for o in objs[group]:
            o = copy.deepcopy(o)
            o["metadata"].setdefault("labels", {})["migrate.example.com/epoch"] = "2"
            out.append(o)
    lease = copy.deepcopy(objs["lease"])
    out.append(lease)
    for o in out:
        o["metadata"].pop("resourceVersion", None)
    return out


def test_online(t, st):
    hub, cache, double = st["hub"], st["cache"], st["double"]
    status, body = double.put_object(cloud_objects(st["objs"]))
    t.check("the cloud is seeded (while still cut)", status == 200, body[:200])
    double.restore()
    t0 = time.time()
    try:
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
    except TimeoutError:
        pass
    t.check("the hub sees the cloud (%.1fs)" % (time.time() - t0),
            hub.metric("yurthub_upstream_healthy") == 1)
    sock, rest = st.pop("kubelet_watch")
    events, closed, _ = read_events(sock, rest, 5)
    sock.close()
    t.check("kubelet's offline watch ends once the cloud is back (%.1fs after the link), with "
            "nothing but bookmarks" % (time.time() - t0),
            closed and all(e.get("type") == "BOOKMARK" for e in events), str(events)[:300])

    # kubelet re-lists: the cloud's answer
    s, _, body = hub_get(hub, NODE_PODS + "&limit=500&resourceVersion=0", KUBELET)
    cloud = json.loads(double.control("GET", "/objects?apiVersion=v1&kind=Pod")[1])["items"]
    cloud = {k: v for k, v in by_key(cloud).items() if v["spec"].get("nodeName") == NODE}
    got = by_key(json.loads(body).get("items") or []) if s == 200 else {}
    t.check("online: kubelet's list is the cloud's (%d pods)" % len(cloud),
            s == 200 and set(got) == set(cloud) and
            all(strip_type(got[k]) == strip_type(cloud[k]) for k in cloud),
            "%s vs %s" % (sorted(got), sorted(cloud)))
    t.check("...the pod deleted in the cloud is not in it",
            ("default", "nginx-7c5ddbdf54-hb4kd") not in got)

    def cache_follows():
        f = files_of(cache, "kubelet/pods.v1.core")
        return set(f) == set(cloud) and all(strip_type(f[k]) == strip_type(cloud[k])
                                            for k in cloud)
    try:
        wait_for(cache_follows, 10, step=0.1, what="the cache to follow the cloud")
    except TimeoutError:
        pass
    f = files_of(cache, "kubelet/pods.v1.core")
    t.check("the cache follows: kubelet's pod files are the cloud's pods",
            cache_follows(), "%s vs %s" % (sorted(f), sorted(cloud)))
    t.check("...the deleted pod's file is gone", not os.path.exists(
        os.path.join(cache, "kubelet/pods.v1.core/default/nginx-7c5ddbdf54-hb4kd")))
    t.check("...the new pod's file is there", os.path.exists(
        os.path.join(cache, "kubelet/pods.v1.core/default/nginx-7c5ddbdf54-k8s7d")))
    # kube-proxy re-lists its services: the cloud's, once the multiplexer has caught up
    # (its upstream's offline watch ends when the cloud is back, and it relists)
    last = {}

    def proxy_relists_cloud():
        s, _, body = hub_get(hub, "/api/v1/services?" + PROXY_SEL + "&limit=500", PROXY)
        got = by_key(json.loads(body).get("items") or []) if s == 200 else {}
        last["body"] = body
        return s == 200 and got and all(
            v["metadata"]["labels"].get("migrate.example.com/epoch") == "2"
            for v in got.values())
    try:
        wait_for(proxy_relists_cloud, 15, step=0.2, what="kube-proxy's services from the cloud")
    except TimeoutError:
        pass
    t.check("online: kube-proxy's services are the cloud's", proxy_relists_cloud(),
            last.get("body", b"")[:300])

    def proxy_cache_follows():
        # kube-proxy's services come from the multiplexer, whose upstream is cached
        f = files_of(cache, "multiplexer-proxy-%s/services.v1.core" % NODE)
        return f and all(v["metadata"]["labels"].get("migrate.example.com/epoch") == "2"
                         for v in f.values())
    try:
        wait_for(proxy_cache_follows, 10, step=0.1, what="kube-proxy's cache")
    except TimeoutError:
        pass
    t.check("...and in the multiplexer's cache", proxy_cache_follows())
    rc, out, err = cache_cmd("verify", cache)
    t.check("yurthub cache verify after the take-over: clean", rc == 0 and " 0 problems" in out,
            out + err)
    st["cloud_pods"] = cloud


def kubectl_names(out, col):
    return {line.split()[col] for line in out.splitlines()[1:] if line.strip()}


def test_kubectl_offline_again(t, st):
    """After the take-over: kubectl once online (its discovery gets cached), then the link
    goes again, and kubectl keeps working from the cache."""
    hub, double = st["hub"], st["double"]
    if not shutil.which("kubectl"):
        print("note  kubectl not installed: its checks skipped")
        return
    cloud = st["cloud_pods"]
    nodes = {n["metadata"]["name"] for n in st["objs"]["nodes"]}
    rc, out, err = kubectl(hub.url, "get", "pods", "-A")
    t.check("kubectl get pods -A online", rc == 0 and
            kubectl_names(out, 1) == {k[1] for k in cloud}, out + err)
    double.cut("refuse")
    hub_get(hub, "/version", KUBELET)
    try:
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 10, what="offline")
    except TimeoutError:
        pass
    t.check("cut again: offline", hub.metric("yurthub_upstream_healthy") == 0)
    rc, out, err = kubectl(hub.url, "get", "pods", "-A", "--field-selector",
                           "spec.nodeName=" + NODE)
    t.check("kubectl get pods -A --field-selector spec.nodeName=%s offline: the node's pods"
            % NODE, rc == 0 and kubectl_names(out, 1) == {k[1] for k in cloud}, out + err)
    rc, out, err = kubectl(hub.url, "get", "nodes")
    t.check("kubectl get nodes offline: flanneld's nodes (still the Go YurtHub's files)",
            rc == 0 and kubectl_names(out, 0) == nodes, out + err)
    # kubelet's list is of its node's pods only: all pods of all namespaces were never cached
    rc, out, err = kubectl(hub.url, "get", "pods", "-A")
    t.check("kubectl get pods -A offline: %s" % ("the node's pods" if rc == 0 else
                                                 "NotFound (no cached list covers it)"),
            kubectl_names(out, 1) == {k[1] for k in cloud} if rc == 0 else
            "NotFound" in err, out + err)
    double.restore()


def check_go_can_read(t, st):
    """Rolling back: what the Go YurtHub would make of the directory now."""
    cache = st["cache"]
    files, _ = snapshot(cache)
    added = sorted(r for r in files if r not in st["files"])
    print("note  added by this hub outside _internal/yurthub-c/: %s" % ", ".join(added))
    tmp = [r for r in files if any(seg.startswith("tmp_") for seg in r.split("/"))]
    t.check("rollback: no tmp_ name anywhere (the Go YurtHub's recovery would take it for a "
            "backup)", not tmp, str(tmp))
    legacy = [c + "/" + d for c in os.listdir(cache) if c != "_internal" and
              os.path.isdir(os.path.join(cache, c))
              for d in os.listdir(os.path.join(cache, c))
              if os.path.isdir(os.path.join(cache, c, d)) and "." not in d]
    t.check("rollback: every resource directory has a dot (the Go YurtHub keeps its "
            "current layout, not the legacy one)", not legacy, str(legacy))
    top = [r for r in files if "/" not in r and not (r in ("version", "apis") or
                                                     r.startswith("_"))]
    t.check("rollback: top-level files are cluster info only", not top, str(top))
    comps = [r for r in os.listdir(cache) if r.startswith("_") and r != "_internal" and
             os.path.isdir(os.path.join(cache, r))]
    t.check("rollback: no new top-level directory besides _internal", not comps, str(comps))


def main():
    t = Suite("migrate")
    t0 = time.time()
    cache = os.path.join(t.workdir, "cache")
    objs = cluster_objects()
    files, dirs, settled = build_go_cache(cache, objs)
    st = {"cache": cache, "objs": objs, "files": files, "dirs": dirs, "settled": settled}
    t.run(lambda t: check_verify_before(t, cache))
    # the cloud: the test double, cut before the hub ever sees it
    double = Double(t.workdir, ["--seed", "none", "--node", NODE, "--bookmark-interval", "1"])
    t.cleanups.append(double.stop)
    double.cut("refuse")
    st["double"] = double
    try:
        hub = Hub(t.workdir, [double.url], cache=cache, node=NODE)
    except Exception as e:  # noqa: BLE001
        t.check("the hub starts on the Go cache", False, str(e))
        t.finish()
    t.cleanups.append(hub.stop)
    st["hub"] = hub
    t.run(test_offline, st)
    t.run(test_online, st)
    t.run(test_kubectl_offline_again, st)
    t.run(check_go_can_read, st)
    rc = hub.stop()
    with open(hub.logpath, "rb") as f:
        log = f.read()
    t.check("the hub stops cleanly, no sanitizer report", rc == 0 and b"Sanitizer" not in log
            and b"runtime error" not in log, hub.tail())
    if os.environ.get("MIGRATE_SHOW_LOG"):
        print(log.decode(errors="replace"))
    print("took %.1fs" % (time.time() - t0))
    t.finish()


if __name__ == "__main__":
    main()
