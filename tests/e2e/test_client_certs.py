"""End to end: the secure port's client certificates (issue 23, item 3;
docs/contracts.md, "Client certificates").

For the sanitizer build and the release build each, a hub with
--client-ca-file on a file the test then replaces:

- a certificate of the client CA that may be used as a TLS client
  (extendedKeyUsage clientAuth) is served; one with serverAuth only gets
  401; one with no extendedKeyUsage at all is served, as kube-apiserver
  serves it;
- the CA file is replaced by a new CA: without a restart, a certificate of
  the new CA is served and one of the old CA gets 401;
- the file is then overwritten with something that does not parse: the
  hub says so in its log and keeps the CA it had;
- --pool-scope-resources naming Secrets: refused with a log line (the
  leader port's side is in test_pool.py);
- token bootstrap: the hub's client CA is the cluster CA that discovery
  found; cluster-info then names a new CA bundle and a new discovery runs
  (POST /v1/token): a client of the new CA is served, without a restart.
"""

import base64
import hashlib
import hmac
import http.client
import json
import os
import ssl
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import BUILD, ROOT, Double, Hub, Suite, free_port, request, wait_for  # noqa: E402
from test_tls import make_ca, openssl  # noqa: E402

BUILDS = [("sanitizer", os.path.join(BUILD, "src", "yurthub")),
          ("release", os.path.join(ROOT, "build", "src", "yurthub"))]


def make_client(d, ca, name, cn, eku, org="system:nodes"):
    """A certificate of ca for cn; eku: the extendedKeyUsage line's value,
    None for no such extension."""
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        if eku:
            f.write("extendedKeyUsage=%s\n" % eku)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s/O=%s" % (cn, org),
            "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", name + ".crt", cwd=d)
    return (os.path.join(d, name + ".crt"), os.path.join(d, name + ".key"))


def make_server(d, ca, name):
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name,
            "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", name + ".crt", cwd=d)


def status(port, cafile, cert):
    """The status of GET /api/v1/nodes on the secure port with cert, or
    "tls" when the handshake itself failed."""
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.load_cert_chain(*cert)
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=20)
    try:
        c.request("GET", "/api/v1/nodes", headers={"User-Agent": "kubelet/1.30"})
        r = c.getresponse()
        r.read()
        return r.status
    except (ssl.SSLError, ConnectionError):
        return "tls"
    finally:
        c.close()


def replace(path, src_bytes):
    """Replace path atomically (write beside, rename), as an operator's
    tooling or kubelet would."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(src_bytes)
    os.replace(tmp, path)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def log_has(hub, text):
    with open(hub.logpath, "rb") as f:
        return text in f.read().decode(errors="replace")


def pki(t):
    d = os.path.join(t.workdir, "pki")
    os.mkdir(d)
    make_ca(d, "serving-ca")
    make_server(d, "serving-ca", "hub")
    make_ca(d, "ca-1")
    make_ca(d, "ca-2")
    certs = {
        "client": make_client(d, "ca-1", "client", "kubelet", "clientAuth"),
        "server-only": make_client(d, "ca-1", "server-only", "kubelet", "serverAuth"),
        "no-eku": make_client(d, "ca-1", "no-eku", "kubelet", None),
        "both": make_client(d, "ca-1", "both", "kubelet", "serverAuth,clientAuth"),
        "new-client": make_client(d, "ca-2", "new-client", "kubelet", "clientAuth"),
    }
    return d, certs


def one_build(t, label, binary, d, certs, double):
    p = lambda n: os.path.join(d, n)  # noqa: E731
    ca_file = p("client-ca-%s.pem" % label)
    replace(ca_file, read(p("ca-1.crt")))
    port = free_port()
    hub = Hub(t.workdir, ["http://127.0.0.1:%d" % double.port], name="hub-" + label,
              binary=binary,
              extra=["--proxy-secure-port=%d" % port, "--tls-cert-file=" + p("hub.crt"),
                     "--tls-private-key-file=" + p("hub.key"), "--client-ca-file=" + ca_file,
                     "--pool-scope-resources=/v1/services,/v1/secrets"])
    t.cleanups.append(hub.stop)
    wait_for(lambda: log_has(hub, "secure port %d serving" % port), 15, what="the secure port")
    serving = p("serving-ca.crt")
    t.check("%s: --pool-scope-resources naming Secrets is refused with a log line" % label,
            log_has(hub, '"/v1/secrets" is refused as a pool-scope resource'), hub.tail(5))

    s = status(port, serving, certs["client"])
    t.check("%s: a clientAuth certificate of the client CA is served" % label, s == 200, s)
    s = status(port, serving, certs["server-only"])
    t.check("%s: a serverAuth-only certificate of the client CA gets 401" % label, s == 401, s)
    s = status(port, serving, certs["no-eku"])
    t.check("%s: a certificate without extendedKeyUsage is served (as by kube-apiserver)"
            % label, s == 200, s)
    s = status(port, serving, certs["both"])
    t.check("%s: serverAuth and clientAuth together is served" % label, s == 200, s)

    # a new CA, without a restart
    s = status(port, serving, certs["new-client"])
    t.check("%s: before the change, a certificate of the new CA is refused" % label,
            s in (401, "tls"), s)
    replace(ca_file, read(p("ca-2.crt")))
    s = status(port, serving, certs["new-client"])
    t.check("%s: after the CA file is replaced, a certificate of the new CA is served"
            % label, s == 200, s)
    s = status(port, serving, certs["client"])
    t.check("%s: ... and one of the old CA gets 401" % label, s in (401, "tls"), s)
    t.check("%s: the reload is logged" % label,
            log_has(hub, "client CA reloaded from " + ca_file), hub.tail(5))

    # a CA file that does not parse: the CA that was there is kept
    with open(ca_file, "wb") as f:
        f.write(b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    s = status(port, serving, certs["new-client"])
    t.check("%s: a CA file that does not parse keeps the CA the hub had" % label, s == 200, s)
    s = status(port, serving, certs["client"])
    t.check("%s: ... (the old CA's certificate is still refused)" % label,
            s in (401, "tls"), s)
    t.check("%s: ... with a clear error in the log" % label,
            log_has(hub, "the client CA %s changed but cannot be used" % ca_file),
            hub.tail(5))
    t.check("%s: the hub did not restart" % label, hub.proc.poll() is None)
    hub.stop()
    with open(hub.logpath, "rb") as f:
        log = f.read().decode(errors="replace")
    t.check("%s: the hub exits cleanly: no sanitizer report, no leak" % label,
            hub.proc.returncode == 0 and "Sanitizer" not in log and "runtime error" not in log,
            (hub.proc.returncode, log[-2000:]))


TOKEN_ID, TOKEN_SECRET = "abcdef", "0123456789abcdef"
TOKEN = TOKEN_ID + "." + TOKEN_SECRET


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def cluster_info(server, ca_pem):
    """kube-public/cluster-info naming ca_pem, signed for TOKEN as the
    bootstrap signer signs it (a detached HS256 JWS)."""
    kc = ("apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: "
          + base64.b64encode(ca_pem).decode() + "\n    server: " + server
          + '\n  name: ""\ncontexts: null\ncurrent-context: ""\nkind: Config\n'
          "preferences: {}\nusers: null\n")
    header = b64url(b'{"alg":"HS256","kid":"' + TOKEN_ID.encode() + b'"}')
    sig = hmac.new(TOKEN_SECRET.encode(), (header + "." + b64url(kc.encode())).encode(),
                   hashlib.sha256).digest()
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": kc,
                     "jws-kubeconfig-" + TOKEN_ID: header + ".." + b64url(sig)}}


def discovered_ca(t, label, binary, d):
    """Token bootstrap: the client CA is the discovered cluster CA, and a CA
    discovered again replaces it for new connections."""
    cluster = os.path.join(t.workdir, "cluster-pki-" + label)
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--pki-dir", cluster,
                                "--bootstrap-token", TOKEN, "--csr-auto-approve"])
    t.cleanups.append(double.stop)
    url = "https://127.0.0.1:%d" % double.port
    port = free_port()
    root = os.path.join(t.workdir, "root-" + label)
    hub = Hub(t.workdir, [url], name="boot-" + label, binary=binary, ready_timeout=60,
              extra=["--root-dir=" + root, "--join-token=" + TOKEN,
                     "--discovery-token-unsafe-skip-ca-verification",
                     "--proxy-secure-port=%d" % port, "--node-ip=127.0.0.1",
                     "--enable-dummy-if=false"])
    t.cleanups.append(hub.stop)
    wait_for(lambda: log_has(hub, "secure port %d serving" % port), 60, step=0.2,
             what="the secure port")
    cluster_ca = os.path.join(cluster, "ca.crt")
    make_ca(cluster, "next-ca")
    of_cluster = make_client(cluster, "ca", "kubelet-" + label, "kubelet", "clientAuth")
    of_next = make_client(cluster, "next-ca", "next-" + label, "kubelet", "clientAuth")
    s = status(port, cluster_ca, of_cluster)
    t.check("%s: token bootstrap: a client of the discovered cluster CA is served" % label,
            s == 200, s)
    s = status(port, cluster_ca, of_next)
    t.check("%s: ... one of another CA gets 401" % label, s in (401, "tls"), s)

    # the cluster's CA bundle grows (a CA rotation begins); discovery runs again
    bundle = read(cluster_ca) + read(os.path.join(cluster, "next-ca.crt"))
    double.put_object(cluster_info(url, bundle))
    st, _, body = request("127.0.0.1", hub.serve_port, "POST", "/v1/token",
                          body=json.dumps({"jointoken": TOKEN}).encode(),
                          headers={"Content-Type": "application/json"})
    t.check("%s: a new discovery (POST /v1/token) succeeds" % label, st == 200, (st, body))
    s = status(port, cluster_ca, of_next)
    t.check("%s: after the discovered CA changed, a client of the new CA is served "
            "(no restart)" % label, s == 200, s)
    s = status(port, cluster_ca, of_cluster)
    t.check("%s: ... and one of the first CA, still in the bundle, too" % label, s == 200, s)
    t.check("%s: ... the hub did not restart" % label, hub.proc.poll() is None)
    hub.stop()
    double.stop()


def main():
    t = Suite("client_certs")
    d, certs = pki(t)
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(double.stop)
    for label, binary in BUILDS:
        if not os.path.exists(binary):
            print("NOTE: %s build absent (%s): its half is skipped" % (label, binary))
            continue
        t.run(one_build, label, binary, d, certs, double)
        t.run(discovered_ca, label, binary, d)
    t.finish()


if __name__ == "__main__":
    main()
