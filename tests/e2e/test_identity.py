"""End to end, the hub's identity (docs/install.md): a hub given only a
bootstrap token finds the cluster CA by token discovery (the CA pinned by
--discovery-token-ca-cert-hash), obtains a client certificate by CSR
(system:node:<node>, organizations openyurt:yurthub and system:nodes) and
proxies with it, obtains a serving certificate for its secure port (signed
by the cluster CA, with the kubernetes Service's names and cluster IP),
passes a pod's bearer token through without its own certificate, rotates
both certificates, starts offline at once from what is on disk, keeps
serving from its cache while an expired certificate is renewed, refuses a
wrong pin with a clear message, takes a new token through POST /v1/token,
sets the old identity aside when --server-addr names another host, and
follows kubelet's certificate in --bootstrap-mode=kubeletcertificate.
Pods' clients are real ones: kubectl (the image's and Debian's 1.20, Go's
TLS stack) and python3-kubernetes, each with a token and the cluster CA only.

The test double plays the cluster: its own CA (--pki-dir), a bootstrap
token, cluster-info signed for it, and CSRs approved by yurt-manager's
rules and signed with a lifetime of 60 s, so that rotations happen within
the test.  What is checked about certificates is read with
python3-cryptography and openssl, not with the hub's code.
"""

import datetime
import hashlib
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

sys.path.insert(0, os.path.dirname(__file__))
from harness import HUB_BIN, ROOT, Double, Hub, Suite, free_port, get, request, wait_for  # noqa: E402
from clients import KUBECTL120  # noqa: E402

TOKEN = "abcdef.0123456789abcdef"
TOKEN2 = "ghijkl.0123456789ghijkl"
KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
LIFETIME = 60
NODE_PATH = "/api/v1/nodes/node1"
RELEASE = os.environ.get("YURTHUB_RELEASE_BUILD") or os.path.join(ROOT, "build")
RELEASE_HUB = os.path.join(RELEASE, "src", "yurthub")


class StartingHub(Hub):
    """A hub whose start does not wait for /v1/readyz (it may be bootstrapping)."""

    def start(self):
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env)

    def readyz(self):
        try:
            return get("127.0.0.1", self.serve_port, "/v1/readyz", timeout=5)
        except OSError:
            return None

    def log_text(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")


def pin_of(ca_pem):
    cert = x509.load_pem_x509_certificate(ca_pem)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def leaf(path):
    with open(path, "rb") as f:
        return x509.load_pem_x509_certificate(f.read())


def expiry(cert):
    """not_valid_after as seconds since the epoch (cryptography gives naive UTC)."""
    return cert.not_valid_after.replace(tzinfo=datetime.timezone.utc).timestamp()


def names(cert, oid):
    return [a.value for a in cert.subject.get_attributes_for_oid(oid)]


def sans(cert):
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return (sorted(ext.get_values_for_type(x509.DNSName)),
            sorted(str(i) for i in ext.get_values_for_type(x509.IPAddress)))


def verified_by(ca_file, pem_file):
    p = subprocess.run(["openssl", "verify", "-CAfile", ca_file, pem_file],
                       capture_output=True, text=True)
    return p.returncode == 0


def link_target(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def tls_request(port, path, ca_file, headers=None, cert=None):
    """(status, body, the server's leaf certificate DER) over TLS trusting only ca_file."""
    ctx = ssl.create_default_context(cafile=ca_file)
    if cert:
        ctx.load_cert_chain(*cert)
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=20)
    c.request("GET", path, headers=dict({"User-Agent": "pod-client/1.0"}, **(headers or {})))
    r = c.getresponse()
    body = r.read()
    der = c.sock.getpeercert(binary_form=True) if c.sock else None
    c.close()
    return r.status, body, der


def file_leaf_der(path):
    return leaf(path).public_bytes(serialization.Encoding.DER)


class Cluster:
    def __init__(self, t):
        self.pki = os.path.join(t.workdir, "cluster-pki")
        self.double = Double(t.workdir, ["--pki-dir", self.pki, "--bootstrap-token", TOKEN,
                                         "--csr-auto-approve", "--cert-lifetime", str(LIFETIME)])
        t.cleanups.append(self.double.stop)
        self.ca_file = os.path.join(self.pki, "ca.crt")
        with open(self.ca_file, "rb") as f:
            self.ca_pem = f.read()
        self.url = "https://127.0.0.1:%d" % self.double.port
        self.pin = pin_of(self.ca_pem)
        for n in ("node1", "node2", "node3"):
            self.double.put_object({"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": n, "labels": {"role": "edge"}}})

    def state(self):
        return self.double.state()

    def by_cn(self, cn):
        return self.state().get("requests_by_client_cn", {}).get(cn, 0)


def token_hub(t, cl, name, root, extra=(), servers=None, secure_port=None, binary=None):
    secure_port = secure_port or free_port()
    h = StartingHub(t.workdir, servers or [cl.url], name=name, binary=binary,
                    extra=["--root-dir=" + root, "--join-token=" + TOKEN,
                           "--discovery-token-ca-cert-hash=" + cl.pin,
                           "--proxy-secure-port=%d" % secure_port,
                           "--enable-dummy-if=false", *extra])
    h.secure_port = secure_port
    t.cleanups.append(h.stop)
    return h


def wait_ready(h, timeout=60):
    wait_for(lambda: (h.readyz() or (0,))[0] == 200, timeout, step=0.2,
             what="%s to be ready" % h.logpath)


# ---- the checks ----


def wrong_pin(t, cl):
    root = os.path.join(t.workdir, "root-wrongpin")
    h = StartingHub(t.workdir, [cl.url], name="wrongpin",
                    extra=["--root-dir=" + root, "--join-token=" + TOKEN,
                           "--discovery-token-ca-cert-hash=sha256:" + "00" * 32,
                           "--enable-dummy-if=false"])
    t.cleanups.append(h.stop)
    csrs_before = cl.state().get("csr", {}).get("created", 0)
    msg = "does not match --discovery-token-ca-cert-hash"
    try:
        wait_for(lambda: msg in h.log_text(), 30, step=0.2, what="the pin refusal")
    except Exception:
        pass
    log = h.log_text()
    t.check("a wrong CA pin is refused with a clear message", msg in log, log[-2000:])
    t.check("... naming the CA's own pin", cl.pin in log)
    t.check("... and no CSR is sent with an unverified CA",
            cl.state().get("csr", {}).get("created", 0) == csrs_before)
    t.check("... no certificate is written",
            not os.path.exists(os.path.join(root, "pki", "yurthub-current.pem")))
    st = h.readyz()
    t.check("... /v1/readyz says the hub is bootstrapping (503)",
            st is not None and st[0] == 503 and b"bootstrapping" in st[2], st)
    t.check("... and the hub keeps running (it serves its cache meanwhile)",
            h.proc.poll() is None)
    t0 = time.time()
    st = get("127.0.0.1", h.proxy_port, NODE_PATH, headers={"User-Agent": KUBELET},
             timeout=60)[0]
    t.check("... kubelet's request waits for the first probe at most 10 s, then gets the "
            "cache's answer (404: nothing cached) after %.1f s" % (time.time() - t0),
            st == 404, st)
    t.check("... and the log says that the certificate is late",
            "no client certificate after 10 s" in h.log_text(), h.log_text()[-1500:])
    h.stop()


def bad_token(t, cl):
    secret = "0123456789abcdeX"
    p = subprocess.run([HUB_BIN,
                        "--server-addr=" + cl.url, "--node-name=node1",
                        "--join-token=abcdef." + secret, "--discovery-token-unsafe-skip-ca-verification",
                        "--root-dir=" + os.path.join(t.workdir, "root-bad"),
                        "--disk-cache-path=" + os.path.join(t.workdir, "cache-bad"),
                        "--proxy-port=%d" % free_port(), "--serve-port=%d" % free_port(),
                        "--proxy-secure-port=0", "--enable-dummy-if=false"],
                       capture_output=True, text=True, timeout=60)
    t.check("a malformed --join-token stops the hub with a clear error",
            p.returncode != 0 and "--join-token" in p.stderr, p.stderr[-500:])
    t.check("... that does not repeat the token's secret", secret not in p.stderr)


def bootstrap(t, cl, ctx):
    root = os.path.join(t.workdir, "root")
    h = token_hub(t, cl, "hub", root)
    ctx["hub"], ctx["root"] = h, root
    wait_ready(h)
    pki = os.path.join(root, "pki")
    cur = os.path.join(pki, "yurthub-current.pem")
    t.check("the client certificate is stored as pki/yurthub-current.pem, a link",
            os.path.islink(cur) and link_target(cur).startswith("yurthub-2"), link_target(cur))
    with open(os.path.join(pki, "ca.crt"), "rb") as f:
        t.check("pki/ca.crt is the cluster CA found by discovery", f.read() == cl.ca_pem)
    c = leaf(cur)
    t.check("client certificate: CN system:node:node1",
            names(c, NameOID.COMMON_NAME) == ["system:node:node1"])
    t.check("client certificate: O openyurt:yurthub and system:nodes",
            sorted(names(c, NameOID.ORGANIZATION_NAME)) == ["openyurt:yurthub", "system:nodes"],
            names(c, NameOID.ORGANIZATION_NAME))
    t.check("client certificate: signed by the cluster CA", verified_by(cl.ca_file, cur))
    t.check("client certificate: an ECDSA P-256 key",
            getattr(c.public_key(), "curve", None) is not None and
            c.public_key().curve.name == "secp256r1")
    for f in ("bootstrap-hub.conf", "yurthub.conf"):
        t.check("%s is written, readable by root only" % f,
                os.path.exists(os.path.join(root, f)) and
                (os.stat(os.path.join(root, f)).st_mode & 0o077) == 0)
    with open(os.path.join(root, "yurthub.conf")) as f:
        conf = f.read()
    t.check("yurthub.conf names the current certificate and the server",
            cur in conf and cl.url in conf, conf)
    p = subprocess.run(["kubectl", "--kubeconfig", os.path.join(root, "yurthub.conf"),
                        "get", "node", "node1", "-o", "name"], capture_output=True, text=True,
                       timeout=60)
    t.check("kubectl with yurthub.conf reaches the cluster as the hub",
            p.returncode == 0 and "node/node1" in p.stdout, p.stderr)
    boot = cl.state().get("requests_by_bearer_user", {}).get("system:bootstrap:abcdef", 0)
    t.check("the CSR was sent with the bootstrap token", boot > 0, cl.state())
    before = cl.by_cn("system:node:node1")
    # the health probes call the cloud reachable within a few seconds of the certificate
    wait_for(lambda: get("127.0.0.1", h.proxy_port, NODE_PATH,
                         headers={"User-Agent": KUBELET})[0] == 200, 20, step=0.2,
             what="kubelet's request to go through")
    t.check("kubelet's request goes through the hub: 200", True)
    t.check("... with the hub's certificate (the cloud saw system:node:node1)",
            cl.by_cn("system:node:node1") > before)


def serving(t, cl, ctx):
    h, root = ctx["hub"], ctx["root"]
    cur = os.path.join(root, "pki", "yurthub-server-current.pem")
    wait_for(lambda: os.path.exists(cur), 60, step=0.2, what="the serving certificate")
    c = leaf(cur)
    dns, ips = sans(c)
    t.check("serving certificate: the kubernetes Service's DNS names",
            dns == sorted(["kubernetes", "kubernetes.default", "kubernetes.default.svc",
                           "kubernetes.default.svc.cluster.local"]), dns)
    t.check("serving certificate: the cluster IP and the bind address",
            "10.96.0.1" in ips and "127.0.0.1" in ips, ips)
    t.check("serving certificate: CN system:node:node1, O system:nodes",
            names(c, NameOID.COMMON_NAME) == ["system:node:node1"] and
            names(c, NameOID.ORGANIZATION_NAME) == ["system:nodes"])
    t.check("serving certificate: signed by the cluster CA", verified_by(cl.ca_file, cur))
    wait_for(lambda: _tls_up(h.secure_port), 30, step=0.2, what="the secure port")
    for _ in range(100):  # until the hub calls the cloud reachable, its cache answers
        st, body, der = tls_request(h.secure_port, "/api/v1/namespaces/default/services",
                                    cl.ca_file, headers={"Authorization": "Bearer pod-token-1"})
        if st == 200:
            break
        time.sleep(0.2)
    t.check("a client trusting only the cluster CA gets a bearer request through: 200",
            st == 200, body[:200])
    t.check("... the secure port shows the certificate on disk", der == file_leaf_der(cur))
    s = cl.state()
    t.check("... the cloud saw the pod's token",
            s.get("requests_by_bearer_user", {}).get("token:pod-token-1", 0) >= 1, s)
    t.check("... without the hub's client certificate",
            s.get("requests_bearer_without_client_cert", {}).get(
                "/api/v1/namespaces/default/services", 0) >= 1)
    # client-go's TLS and HTTP stack (ALPN offers h2; the port speaks HTTP/1.1), as a
    # pod's in-cluster client has it: the service account's token and ca.crt
    kc = os.path.join(t.workdir, "pod.kubeconfig")
    with open(kc, "w") as f:
        f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                "    server: https://127.0.0.1:%d\n    certificate-authority: %s\n"
                "users:\n- name: u\n  user:\n    token: pod-token-kubectl\n"
                "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                "current-context: x\n" % (h.secure_port, cl.ca_file))
    p = subprocess.run(["kubectl", "--kubeconfig", kc, "get", "services", "-A", "-o", "name"],
                       capture_output=True, text=True, timeout=60)
    t.check("kubectl with a token and only the cluster CA lists services through the secure "
            "port", p.returncode == 0 and "service/kubernetes" in p.stdout, p.stderr[-500:])
    t.check("... as the pod (its token reached the cloud)",
            cl.state().get("requests_by_bearer_user", {}).get("token:pod-token-kubectl", 0) >= 1)
    p = subprocess.run([KUBECTL120, "--kubeconfig", kc, "get", "services", "-A", "-o", "name"],
                       capture_output=True, text=True, timeout=60)
    t.check("Debian's kubectl 1.20 does the same", p.returncode == 0 and
            "service/kubernetes" in p.stdout, p.stderr[-500:])
    # python3-kubernetes configured as in a pod: host, token, the CA
    import kubernetes
    conf = kubernetes.client.Configuration()
    conf.host = "https://127.0.0.1:%d" % h.secure_port
    conf.ssl_ca_cert = cl.ca_file
    conf.api_key = {"authorization": "pod-token-python"}
    conf.api_key_prefix = {"authorization": "Bearer"}
    with kubernetes.client.ApiClient(conf) as api:
        svcs = kubernetes.client.CoreV1Api(api).list_service_for_all_namespaces()
    t.check("python3-kubernetes with a token and the cluster CA lists services through it",
            any(i.metadata.name == "kubernetes" for i in svcs.items) and
            cl.state().get("requests_by_bearer_user", {}).get("token:pod-token-python", 0) >= 1)
    st, body, _ = tls_request(h.secure_port, "/api/v1/namespaces/default/services",
                              cl.ca_file)
    t.check("a client with neither a certificate nor a token: 401", st == 401, body[:200])
    admin = (os.path.join(cl.pki, "admin.crt"), os.path.join(cl.pki, "admin.key"))
    st, body, _ = tls_request(h.secure_port, NODE_PATH, cl.ca_file, cert=admin)
    t.check("a client with a certificate of the cluster CA: 200", st == 200, body[:200])


def _tls_up(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def rotation(t, cl, ctx):
    h, root = ctx["hub"], ctx["root"]
    pki = os.path.join(root, "pki")
    client, server = (os.path.join(pki, "yurthub-current.pem"),
                      os.path.join(pki, "yurthub-server-current.pem"))
    first_client, first_server = link_target(client), link_target(server)
    leaf_of_first = leaf(client)
    first_expiry = leaf_of_first.not_valid_after
    # a lifetime of 60 s is renewed at 42 to 54 s
    wait_for(lambda: link_target(client) != first_client and
             link_target(server) != first_server, LIFETIME + 15, step=0.5,
             what="both certificates to rotate")
    t.check("the client certificate rotated before it expired",
            leaf(client).not_valid_after > first_expiry)
    t.check("the serving certificate rotated", link_target(server) != first_server)
    der = None
    for _ in range(50):  # the listener takes the new certificate at the next handshake
        _, _, der = tls_request(h.secure_port, NODE_PATH, cl.ca_file,
                                headers={"Authorization": "Bearer pod-token-2"})
        if der == file_leaf_der(server):
            break
        time.sleep(0.1)
    t.check("the secure port serves the new certificate without a restart",
            der == file_leaf_der(server))
    kept = [f for f in os.listdir(pki) if f.startswith("yurthub-2")]
    t.check("old certificates are kept a while, not forever", 2 <= len(kept) <= 3, kept)
    # The first certificate expires: requests still go through as the node.
    while time.time() < expiry(leaf_of_first) + 1:
        time.sleep(0.5)
    before = cl.by_cn("system:node:node1")
    st, _, _ = get("127.0.0.1", h.proxy_port, NODE_PATH, headers={"User-Agent": KUBELET})
    t.check("after the first certificate expired the hub still speaks as the node",
            st == 200 and cl.by_cn("system:node:node1") > before)


def offline_restart(t, cl, ctx):
    h, root = ctx["hub"], ctx["root"]
    client = os.path.join(root, "pki", "yurthub-current.pem")
    target = link_target(client)
    # right after a rotation, so that the certificates on disk are fresh
    wait_for(lambda: link_target(client) != target, LIFETIME + 15, step=0.2,
             what="a rotation")
    h.stop()
    cl.double.cut("refuse")
    log_before = len(h.log_text())
    t0 = time.time()
    h.start()
    wait_ready(h, 20)
    took = time.time() - t0
    t.check("offline, with valid certificates on disk, the hub is ready at once",
            took < 10, "%.1f s" % took)
    st, _, _ = get("127.0.0.1", h.proxy_port, NODE_PATH, headers={"User-Agent": KUBELET})
    t.check("... and answers kubelet from its cache", st == 200)
    st, body, der = tls_request(h.secure_port, NODE_PATH, cl.ca_file,
                                headers={"Authorization": "Bearer pod-token-3"})
    t.check("... and serves its secure port with the certificate on disk",
            der == file_leaf_der(os.path.join(root, "pki", "yurthub-server-current.pem")),
            st)
    new_log = h.log_text()[log_before:]
    t.check("... without running token discovery again", "token discovery" not in new_log)
    cl.double.restore()


def expired_offline(t, cl, ctx):
    """node2 gets 5-second certificates, is stopped, and starts offline after they expired."""
    root = os.path.join(t.workdir, "root2")
    cl.double.control("POST", "/signer?cert_lifetime=5")
    h = token_hub(t, cl, "hub2", root, extra=["--node-name=node2"])
    wait_ready(h)
    h.stop()
    cur = os.path.join(root, "pki", "yurthub-current.pem")
    ends = expiry(leaf(cur))
    cl.double.cut("refuse")
    cl.double.control("POST", "/signer?cert_lifetime=%d" % LIFETIME)
    while time.time() < ends + 1:
        time.sleep(0.2)
    h.start()
    wait_ready(h, 20)
    t.check("offline with an expired certificate the hub still starts and is ready "
            "(it answers from its cache)", True)
    log = h.log_text()
    t.check("... and says clearly that the certificate expired",
            "client certificate in" in log and "expired at" in log)
    st, _, _ = get("127.0.0.1", h.proxy_port, "/api/v1/nodes/node2",
                   headers={"User-Agent": KUBELET})
    t.check("... kubelet is answered from the cache (404 or 200, not an error)",
            st in (200, 404), st)
    cl.double.restore()
    wait_for(lambda: expiry(leaf(cur)) > time.time(), 60, step=0.5,
             what="a new certificate once the cloud is back")
    t.check("when the cloud is back the hub gets a new certificate (with the bootstrap "
            "token)", True)
    before = cl.by_cn("system:node:node2")
    wait_for(lambda: get("127.0.0.1", h.proxy_port, "/api/v1/nodes/node2",
                         headers={"User-Agent": KUBELET})[0] == 200 and
             cl.by_cn("system:node:node2") > before, 30, step=0.5,
             what="requests as node2 again")
    t.check("... and speaks as system:node:node2 again", True)
    h.stop()


def token_endpoint(t, cl, ctx):
    h, root = ctx["hub"], ctx["root"]
    port = h.serve_port

    def post(body, method="POST"):
        return request("127.0.0.1", port, method, "/v1/token", body=body,
                       headers={"Content-Type": "application/json"})

    st, _, body = post(b"{not json")
    t.check("POST /v1/token with a body that is not JSON: 400", st == 400, body)
    st, _, body = post(b'{"jointoken": ""}')
    t.check("... without a token: 400 no join token", st == 400 and b"no join token" in body,
            body)
    st, _, body = post(b'{"jointoken": "nope"}')
    t.check("... with a malformed token: 400", st == 400, body)
    st, _, body = request("127.0.0.1", port, "GET", "/v1/token")
    t.check("GET /v1/token: 405", st == 405, body)
    cl.double.control("POST", "/bootstrap-token?token=" + TOKEN2)
    st, _, body = post(json.dumps({"jointoken": TOKEN2}).encode(), "PUT")
    t.check("PUT /v1/token with a token the cluster knows: 200",
            st == 200 and body == b"update bootstrap token successfully", body)
    with open(os.path.join(root, "bootstrap-hub.conf")) as f:
        t.check("... and bootstrap-hub.conf now holds it", TOKEN2 in f.read())


def server_moved(t, cl, ctx):
    h, root = ctx["hub"], ctx["root"]
    h.stop()
    old = leaf(os.path.join(root, "pki", "yurthub-current.pem")).serial_number
    moved = "https://localhost:%d" % cl.double.port
    h2 = token_hub(t, cl, "hub-moved", root, servers=[moved])
    wait_ready(h2)
    aside = [d for d in os.listdir(root) if d.startswith("replaced-")]
    t.check("a new --server-addr host: the old identity is set aside, not deleted",
            len(aside) == 1 and
            os.path.exists(os.path.join(root, aside[0], "yurthub.conf")) and
            os.path.isdir(os.path.join(root, aside[0], "pki")), aside)
    wait_for(lambda: os.path.exists(os.path.join(root, "pki", "yurthub-current.pem")), 30,
             step=0.2, what="a new certificate")
    t.check("... and the hub bootstraps afresh",
            leaf(os.path.join(root, "pki", "yurthub-current.pem")).serial_number != old)
    rc = h2.stop()
    t.check("a token hub stops cleanly (exit 0, nothing from the sanitizers)", rc == 0,
            h2.tail())


def kubelet_mode(t, cl, ctx):
    d = os.path.join(t.workdir, "kubelet-pki")
    os.makedirs(d)
    pem = os.path.join(d, "kubelet-client-current.pem")
    root = os.path.join(t.workdir, "root3")
    secure = free_port()
    h = StartingHub(t.workdir, [cl.url], name="hub-kubelet", node="node3",
                    extra=["--bootstrap-mode=kubeletcertificate", "--client-cert-file=" + pem,
                           "--client-key-file=" + pem, "--ca-file=" + cl.ca_file,
                           "--root-dir=" + root, "--proxy-secure-port=%d" % secure,
                           "--enable-dummy-if=false"])
    t.cleanups.append(h.stop)
    wait_ready(h, 30)
    t.check("kubelet mode: the hub starts before kubelet has its certificate", True)
    before = cl.by_cn("system:node:node3")
    st, _, _ = get("127.0.0.1", h.proxy_port, "/api/v1/nodes/node3",
                   headers={"User-Agent": KUBELET})
    t.check("... and sends nothing to the cloud without it", cl.by_cn("system:node:node3") ==
            before and cl.state().get("requests_unauthorized", {}) == {}, st)
    # kubelet's certificate appears (signed by the cluster CA with openssl)
    key, csr, crt = (os.path.join(d, n) for n in ("k.pem", "c.csr", "c.pem"))
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-subj", "/O=system:nodes/CN=system:node:node3", "-keyout", key,
                    "-out", csr], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", cl.ca_file, "-CAkey",
                    os.path.join(cl.pki, "ca.key"), "-CAcreateserial", "-days", "1",
                    "-out", crt], check=True, capture_output=True)
    with open(pem + ".tmp", "wb") as out:
        for p in (crt, key):
            with open(p, "rb") as f:
                out.write(f.read())
    os.replace(pem + ".tmp", pem)
    wait_for(lambda: get("127.0.0.1", h.proxy_port, "/api/v1/nodes/node3",
                         headers={"User-Agent": KUBELET})[0] == 200 and
             cl.by_cn("system:node:node3") > before, 30, step=0.5,
             what="requests with kubelet's certificate")
    t.check("... once kubelet's certificate is there the hub speaks as system:node:node3",
            True)
    cur = os.path.join(root, "pki", "yurthub-server-current.pem")
    wait_for(lambda: os.path.exists(cur), 60, step=0.2, what="the serving certificate")
    t.check("... and gets its serving certificate by CSR with it",
            names(leaf(cur), NameOID.COMMON_NAME) == ["system:node:node3"] and
            verified_by(cl.ca_file, cur))
    t.check("... and no client certificate of its own",
            not os.path.exists(os.path.join(root, "pki", "yurthub-current.pem")))
    rc = h.stop()
    t.check("... and stops cleanly (exit 0, nothing from the sanitizers)", rc == 0, h.tail())


def first_probe(t, cl, label, binary):
    """A token bootstrap from nothing: the first health probe is made with the CA that
    discovery found (and the CSR's certificate), so the cloud is healthy from it; the
    requests that came meanwhile waited for it and none was answered from the (empty)
    cache. On a33a7ef the first probe went out before the CA was known, failed TLS, and
    the first requests, the hub's informers' included, were answered offline (404)."""
    root = os.path.join(t.workdir, "root-first-" + label)
    h = token_hub(t, cl, "first-" + label, root, extra=["--node-name=node3"], binary=binary)
    answers, done = [], threading.Event()

    def kubelet():  # from the start on, as kubelet does, until the hub is ready
        while not done.is_set() and h.proc.poll() is None:
            try:
                answers.append(get("127.0.0.1", h.proxy_port, "/api/v1/nodes/node3",
                                   headers={"User-Agent": KUBELET}, timeout=30)[0])
            except OSError:
                time.sleep(0.02)  # not listening yet

    th = threading.Thread(target=kubelet)
    th.start()
    try:
        wait_ready(h)
        wait_for(lambda: answers, 30, step=0.05, what="an answer to kubelet")
    finally:
        done.set()
        th.join()
    t.check("%s: every request from the start on was answered by the cloud (200), none from "
            "the empty cache (%d answers)" % (label, len(answers)),
            answers and all(a == 200 for a in answers), answers)
    log = h.log_text()
    unhealthy = [line for line in log.splitlines() if "is unhealthy" in line]
    t.check("%s: no failed health probe in the log (no TLS failure before the CA was known)"
            % label, not unhealthy, unhealthy[:3])
    t.check("%s: the cloud is healthy from the first probe" % label,
            "is healthy (first probe)" in log and
            h.metric("yurthub_upstream_healthy") == 1 and
            not h.metric("yurthub_upstream_failures_total"),
            (h.metric("yurthub_upstream_failures_total"), log[-1500:]))
    offline = [line for line in log.splitlines() if "not served" in line]
    t.check("%s: the hub's informers were never answered offline" % label, not offline,
            offline[:3])
    rc = h.stop()
    t.check("%s: the hub stops cleanly" % label, rc == 0, h.tail())


def main():
    t = Suite("identity")
    cl = Cluster(t)
    ctx = {}
    t.run(bad_token, cl)
    t.run(wrong_pin, cl)
    t.run(bootstrap, cl, ctx)
    if "hub" in ctx:
        t.run(serving, cl, ctx)
        t.run(rotation, cl, ctx)
        t.run(offline_restart, cl, ctx)
        t.run(token_endpoint, cl, ctx)
        t.run(server_moved, cl, ctx)
    t.run(expired_offline, cl, ctx)
    t.run(kubelet_mode, cl, ctx)
    t.run(first_probe, cl, "sanitizer", HUB_BIN)
    if os.path.exists(RELEASE_HUB):
        t.run(first_probe, cl, "release", RELEASE_HUB)
    else:
        print("note: no release build at %s: the first probe is not checked with it"
              % RELEASE_HUB, flush=True)
    t.finish()


if __name__ == "__main__":
    main()
