"""End to end, TLS: the hub's identity towards a cloud that requires client
certificates (from a kubelet-style kubeconfig with inline data, and from the
explicit flags), and the hub's secure port, which refuses clients without a
certificate signed by --client-ca-file; and offline, answers a bearer token
it cannot check 401 (test_offline_tokens.py has the tokens it can check).
"""

import base64
import os
import socket
import ssl
import subprocess
import sys
import time
import http.client

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, free_port, get, wait_for  # noqa: E402
from watch_stream import read_head  # noqa: E402


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=" + name, "-keyout", name + ".key", "-out", name + ".crt", cwd=d)


def make_cert(d, ca, name, cn, server=False):
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        if server:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        else:
            f.write("extendedKeyUsage=clientAuth\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + cn + "/O=system:nodes",
            "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", name + ".crt", cwd=d)


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def tls_get(port, path, cafile, cert=None, key=None, auth=None):
    ctx = ssl.create_default_context(cafile=cafile)
    if cert:
        ctx.load_cert_chain(cert, key)
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=20)
    headers = {"User-Agent": "tls-test/1.0"}
    if auth:
        headers["Authorization"] = auth
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def refused_before_body(t, port, cafile):
    """A client without a certificate gets its 401 as soon as its headers are
    in: the hub does not wait for (nor buffer) a body it will refuse.  The
    request announces 8 MiB and sends none of it; the 401 must come anyway,
    and the connection then closes (the body is never read)."""
    ctx = ssl.create_default_context(cafile=cafile)
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                           server_hostname="127.0.0.1")
    sock.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 8388608\r\n\r\n")
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            b = sock.recv(65536)
            if not b:
                break
            data += b
    except socket.timeout:
        pass
    t.check("the secure port refuses a client without a certificate before its body",
            data.startswith(b"HTTP/1.1 401"), data[:100])
    closed = False
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                closed = True
                break
    except (ssl.SSLEOFError, ConnectionResetError):
        closed = True  # closed without a TLS close_notify: closed all the same
    except (socket.timeout, ssl.SSLError, OSError):
        pass
    t.check("and closes the connection instead of reading the body", closed)
    sock.close()


def offline_bearer(t, double, hub, port, p):
    """Offline, the secure port's bearer token is the hub's to judge: `Bearer x` gets 401 and
    none of kubelet's cached Secret; a client certificate is still served."""
    path = "/api/v1/namespaces/default/secrets/app-credentials"
    s, _, body = get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": "kubelet/1.30"})
    assert s == 200, body[:200]
    wait_for(lambda: os.path.exists(os.path.join(hub.cache, "kubelet", "secrets.v1.core",
                                                 "default", "app-credentials")), 10,
             what="the secret cached")
    double.cut("refuse")
    try:
        get("127.0.0.1", hub.proxy_port, "/api/v1/nodes", headers={"User-Agent": "kubelet/1.30"})
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 15, what="offline")
        s, body = tls_get(port, path, p("hub-ca.crt"), auth="Bearer x")
        t.check("offline, the secure port answers Bearer x 401, without the Secret (%d)" % s,
                s == 401 and b"password" not in body, body[:200])
        s, body = tls_get(port, path, p("hub-ca.crt"), p("local-client.crt"),
                          p("local-client.key"))
        t.check("offline, a client certificate still reads it (%d)" % s,
                s == 200 and b"password" in body, body[:200])
    finally:
        double.restore()
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")


def upgrade_over_tls(t, double, port, p):
    """An exec upgrade on the secure port, to a cloud that wants the node's
    client certificate: both sides of the relay are TLS (libmicrohttpd's on
    the client's side, libcurl's towards the cloud)."""
    double.put_object({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "tls-exec", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    ctx = ssl.create_default_context(cafile=p("hub-ca.crt"))
    ctx.load_cert_chain(p("local-client.crt"), p("local-client.key"))
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20),
                           server_hostname="127.0.0.1")
    sock.sendall(b"POST /api/v1/namespaces/default/pods/tls-exec/exec?command=cat HTTP/1.1\r\n"
                 b"Host: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                 b"Content-Length: 0\r\n\r\n")
    head, rest = read_head(sock)
    t.check("an exec upgrade on the secure port to a TLS cloud: 101",
            head.startswith(b"HTTP/1.1 101"), head[:200])
    payload = b"over TLS, both ways\n" * 1000
    sock.sendall(payload)
    while len(rest) < len(payload):
        more = sock.recv(65536)
        if not more:
            break
        rest += more
    t.check("bytes round-trip through both TLS connections", rest == payload, len(rest))
    sock.close()


def main():
    t = Suite("tls")
    d = os.path.join(t.workdir, "pki")
    os.mkdir(d)
    make_ca(d, "cloud-ca")       # signs the cloud's server cert and the node's client cert
    make_cert(d, "cloud-ca", "apiserver", "kube-apiserver", server=True)
    make_cert(d, "cloud-ca", "node", "system:node:node1")
    make_ca(d, "hub-ca")         # signs the hub's server cert and its local clients
    make_cert(d, "hub-ca", "hub", "yurthub", server=True)
    make_cert(d, "hub-ca", "local-client", "kubelet")
    make_ca(d, "other-ca")
    make_cert(d, "other-ca", "stranger", "stranger")
    p = lambda n: os.path.join(d, n)  # noqa: E731

    double = Double(t.workdir, ["--seed", "sample", "--node", "node1",
                                "--tls-cert", p("apiserver.crt"), "--tls-key", p("apiserver.key"),
                                "--client-ca", p("cloud-ca.crt")])
    t.cleanups.append(double.stop)
    url = "https://127.0.0.1:%d" % double.port

    # 1. identity from a kubelet-style kubeconfig with inline data
    kc = os.path.join(t.workdir, "kubelet.conf")
    with open(kc, "w") as f:
        f.write("""apiVersion: v1
kind: Config
clusters:
- name: default-cluster
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: default-context
  context: {cluster: default-cluster, user: default-auth, namespace: default}
current-context: default-context
users:
- name: default-auth
  user:
    client-certificate-data: %s
    client-key-data: %s
""" % (url, b64(p("cloud-ca.crt")), b64(p("node.crt")), b64(p("node.key"))))
    secure_port = free_port()
    hub = Hub(t.workdir, [url], name="kchub",
              extra=["--kubeconfig=" + kc, "--proxy-secure-port=%d" % secure_port,
                     "--tls-cert-file=" + p("hub.crt"), "--tls-private-key-file=" + p("hub.key"),
                     "--client-ca-file=" + p("hub-ca.crt")])
    t.cleanups.append(hub.stop)
    # the Hub helper passes --proxy-secure-port=0 first; the later flag wins
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 15, what="healthy upstream")
    s, _, body = get("127.0.0.1", hub.proxy_port, "/api/v1/nodes",
                                           headers={"User-Agent": "kubelet/1.30"})
    t.check("the hub reaches a client-cert cloud with a kubeconfig's inline identity",
            s == 200 and b"node1" in body, body[:200])

    # 2. the secure port
    s, body = tls_get(secure_port, "/api/v1/nodes", p("hub-ca.crt"), p("local-client.crt"),
                      p("local-client.key"))
    t.check("the secure port serves a client with a certificate from --client-ca-file",
            s == 200 and b"node1" in body, body[:200])
    s, body = tls_get(secure_port, "/api/v1/nodes", p("hub-ca.crt"))
    t.check("the secure port refuses a client without a certificate (%d)" % s, s == 401)
    try:
        s, body = tls_get(secure_port, "/api/v1/nodes", p("hub-ca.crt"), p("stranger.crt"),
                          p("stranger.key"))
        refused = s in (401, 403)
    except (ssl.SSLError, OSError, http.client.HTTPException):
        refused = True
    t.check("the secure port refuses a certificate from another CA", refused)
    t.run(refused_before_body, secure_port, p("hub-ca.crt"))
    t.run(upgrade_over_tls, double, secure_port, p)
    t.run(offline_bearer, double, hub, secure_port, p)
    hub.stop()

    # 3. identity from the explicit flags
    hub2 = Hub(t.workdir, [url], name="flaghub",
               extra=["--client-cert-file=" + p("node.crt"), "--client-key-file=" + p("node.key"),
                      "--ca-file=" + p("cloud-ca.crt")])
    t.cleanups.append(hub2.stop)
    wait_for(lambda: hub2.metric("yurthub_upstream_healthy") == 1, 15, what="healthy upstream")
    s, _, body = get("127.0.0.1", hub2.proxy_port, "/api/v1/nodes")
    t.check("the hub reaches a client-cert cloud with --client-cert-file/--ca-file",
            s == 200 and b"node1" in body, body[:200])
    # 4. a wrong CA: the cloud is not trusted, so it is never called healthy
    hub3 = Hub(t.workdir, [url], name="badca",
               extra=["--client-cert-file=" + p("node.crt"), "--client-key-file=" + p("node.key"),
                      "--ca-file=" + p("other-ca.crt")])
    t.cleanups.append(hub3.stop)
    time.sleep(2)
    t.check("a cloud whose certificate does not verify is not trusted",
            hub3.metric("yurthub_upstream_healthy") == 0)
    hub2.stop()
    hub3.stop()
    double.stop()

    # 5. certificate rotation, kubelet's way
    t.run(rotation, d)
    t.finish()


def cat(d, out, *parts):
    with open(os.path.join(d, out), "wb") as f:
        for part in parts:
            with open(os.path.join(d, part), "rb") as src:
                f.write(src.read())


def repoint(link, target):
    """Re-point a symlink atomically, as kubelet does with kubelet-client-current.pem."""
    tmp = link + ".tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def rotation(t, d):
    """The hub's identity is kubelet's client certificate: one cert+key file behind the
    kubelet-client-current.pem symlink, given as both --client-cert-file and
    --client-key-file.  kubelet rotates it; the old one expires (here: the cloud stops
    trusting the CA that signed it).  The hub must pick up the new pair by itself, and
    keep the pair it has when the file it is pointed at is broken."""
    make_ca(d, "rot-ca1")        # signs A, the certificate the hub starts with
    make_ca(d, "rot-ca2")        # signs B, its successor, and C, whose key goes missing
    make_cert(d, "rot-ca1", "node-a", "system:node:node-a")
    make_cert(d, "rot-ca2", "node-b", "system:node:node-b")
    make_cert(d, "rot-ca2", "node-c", "system:node:node-c")
    cat(d, "kubelet-client-a.pem", "node-a.crt", "node-a.key")
    cat(d, "kubelet-client-b.pem", "node-b.crt", "node-b.key")
    cat(d, "kubelet-client-c.pem", "node-c.crt", "node-b.key")   # B's key: no pair
    p = lambda n: os.path.join(d, n)  # noqa: E731
    current = p("kubelet-client-current.pem")
    repoint(current, p("kubelet-client-a.pem"))

    double = Double(t.workdir, ["--seed", "sample", "--node", "node1",
                                "--tls-cert", p("apiserver.crt"), "--tls-key", p("apiserver.key"),
                                "--client-ca", p("rot-ca1.crt")])
    t.cleanups.append(double.stop)
    hub = Hub(t.workdir, ["https://127.0.0.1:%d" % double.port], name="rothub",
              extra=["--client-cert-file=" + current, "--client-key-file=" + current,
                     "--ca-file=" + p("cloud-ca.crt")])
    t.cleanups.append(hub.stop)

    def by_cn():
        return double.state()["requests_by_client_cn"]

    def reaches_cloud():
        """A request through the hub answered by the cloud (not from the cache)."""
        before = double.state()["requests_by_path"].get("/api/v1/nodes", 0)
        try:
            s, _, body = get("127.0.0.1", hub.proxy_port, "/api/v1/nodes",
                             headers={"User-Agent": "kubelet/1.30"}, timeout=20)
        except OSError:
            return False
        after = double.state()["requests_by_path"].get("/api/v1/nodes", 0)
        return s == 200 and b"node1" in body and after > before

    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 15, what="healthy upstream")
    t.check("the hub reaches the cloud with certificate A from the symlinked file",
            wait_for(reaches_cloud, 15, step=0.2, what="a request with A")
            and by_cn().get("system:node:node-a", 0) > 0, by_cn())

    # kubelet rotates to B, and A stops working: the cloud now trusts only rot-ca2, and the
    # connections made with A are closed.  The count read once /client-ca has returned is
    # exact: the double has then closed every connection made before the switch, those
    # still in their TLS handshake included, and counts nothing more that came over them.
    # (The hub presents A until it notices the new file, within seconds; the cloud must
    # refuse it from the switch on.)
    t0 = time.monotonic()
    repoint(current, p("kubelet-client-b.pem"))
    double.control("POST", "/client-ca?path=" + p("rot-ca2.crt"))
    a_after_switch = by_cn().get("system:node:node-a", 0)
    try:
        ok = wait_for(reaches_cloud, 45, step=0.5, what="a request with B")
    except TimeoutError:
        ok = False
    t.check("after rotation the hub reaches the cloud with certificate B (%.1f s)"
            % (time.monotonic() - t0),
            ok and by_cn().get("system:node:node-b", 0) > 0, by_cn())
    t.check("certificate A is not presented after the switch",
            by_cn().get("system:node:node-a", 0) == a_after_switch, by_cn())
    with open(hub.logpath, "rb") as f:
        log = f.read().decode(errors="replace")
    t.check("the reload is logged", "client certificate reloaded from " + current in log)
    t.check("no key material in the log", "PRIVATE KEY" not in log)

    # A broken rotation: C's certificate with B's key.  The hub keeps B, says so once.
    repoint(current, p("kubelet-client-c.pem"))
    warning = "client certificate and key in %s changed but are not usable" % current

    def warned():
        with open(hub.logpath, "rb") as f:
            return warning in f.read().decode(errors="replace")

    try:
        warned_ok = wait_for(warned, 30, step=0.2, what="the warning")
    except TimeoutError:
        warned_ok = False
    t.check("a certificate whose key does not match is refused with a warning", warned_ok,
            hub.tail(10))
    # new connections (all old ones closed) must still be made with B
    b_before = by_cn().get("system:node:node-b", 0)
    double.control("POST", "/client-ca?path=" + p("rot-ca2.crt"))
    try:
        ok = wait_for(reaches_cloud, 30, step=0.5, what="a request with B after the broken one")
    except TimeoutError:
        ok = False
    cns = by_cn()
    t.check("after a broken rotation the hub keeps certificate B",
            ok and cns.get("system:node:node-b", 0) > b_before
            and "system:node:node-c" not in cns, cns)
    with open(hub.logpath, "rb") as f:
        log = f.read().decode(errors="replace")
    t.check("the broken rotation is warned about once (%d)" % log.count(warning),
            log.count(warning) == 1)
    t.check("no key material in the log after the broken rotation", "PRIVATE KEY" not in log)
    hub.stop()


if __name__ == "__main__":
    main()
