"""A serving certificate for the hub's secure port, for suites whose hub must
serve --proxy-secure-port (the filters point pods at it only while it serves:
docs/filters.md).  A CA and a server certificate for 127.0.0.1 and the dummy
address, made with openssl once per directory."""

import os
import subprocess


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def secure_flags(workdir, port):
    """The flags that make the hub serve port with a certificate of its own."""
    d = os.path.join(workdir, "serving-cert")
    if not os.path.exists(os.path.join(d, "hub.crt")):
        os.makedirs(d, exist_ok=True)
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                 "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
        with open(os.path.join(d, "hub.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,IP:169.254.2.1\n"
                    "extendedKeyUsage=serverAuth\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=yurthub",
                 "-keyout", "hub.key", "-out", "hub.csr", cwd=d)
        _openssl("x509", "-req", "-in", "hub.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", "hub.ext", "-out", "hub.crt",
                 cwd=d)
    return ["--proxy-secure-port=%d" % port, "--tls-cert-file=" + os.path.join(d, "hub.crt"),
            "--tls-private-key-file=" + os.path.join(d, "hub.key"),
            "--client-ca-file=" + os.path.join(d, "ca.crt")]
