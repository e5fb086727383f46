"""End to end, security of the running hub: secrets never reach the log at
any verbosity (the hub's token, a client's token, a Secret's data), the
cache is private (files 0600, directories 0700, the hub's user), and plain
HTTP away from loopback is logged as a warning; offline, a bearer token the
hub cannot check reads nothing (401; test_offline_tokens.py has the rest).
(That the secure port refuses clients without a certificate signed by
--client-ca-file is tested in test_tls.py.)
"""

import base64
import json
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
HUB_TOKEN = "hub-identity-TOKEN-7f3a9c"
CLIENT_TOKEN = "client-SECRET-b21e44"
SECRET_VALUE = b"s3cr3t"


def hub_get(hub, path, token=CLIENT_TOKEN):
    return get("127.0.0.1", hub.proxy_port, path,
               headers={"User-Agent": KUBELET, "Authorization": "Bearer " + token})


def test_no_secrets_in_log(t, double, hub):
    paths = ["/api/v1/namespaces/default/secrets/app-credentials",
             "/api/v1/namespaces/default/secrets", "/api/v1/secrets?fieldSelector=type%3DOpaque",
             "/api/v1/namespaces/default/secrets/not-there"]
    for p in paths:
        s, _, body = hub_get(hub, p)
        t.check("online %s: answered (%d)" % (p, s), s in (200, 404), body[:200])
    s, _, body = hub_get(hub, paths[0])
    secret = json.loads(body)
    t.check("the secret's data came through",
            base64.b64decode(secret["data"]["password"]) == SECRET_VALUE)
    # cached, then served offline
    wait_for(lambda: os.path.exists(os.path.join(hub.cache, "kubelet", "secrets.v1.core",
                                                 "default", "app-credentials")), 10,
             what="the secret cached")
    double.cut("refuse")
    hub_get(hub, paths[1])
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 10, what="offline")
    s, _, body = hub_get(hub, paths[0])
    t.check("offline: a bearer token nobody can check gets 401 and no secret (%d)" % s,
            s == 401 and b"password" not in body, body[:200])
    s, _, body = get("127.0.0.1", hub.proxy_port, paths[0], headers={"User-Agent": KUBELET})
    t.check("offline: kubelet, without a token, gets the secret from the cache",
            s == 200 and b"password" in body)
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
    with open(hub.logpath, "rb") as f:
        log = f.read()
    t.check("at -v 9 every request is logged (URL only)",
            all(p.encode() in log for p in paths), log[-500:])
    needles = {
        "the hub's token": HUB_TOKEN.encode(),
        "the client's token": CLIENT_TOKEN.encode(),
        "the secret's value": SECRET_VALUE,
        "the secret's value, base64": base64.b64encode(SECRET_VALUE),
    }
    for what, needle in needles.items():
        t.check("the log never shows %s" % what, needle not in log)


def test_cache_is_private(t, hub):
    bad = []
    uid = os.getuid()
    for root, dirs, files in os.walk(hub.cache):
        for d in dirs:
            st = os.lstat(os.path.join(root, d))
            if stat.S_IMODE(st.st_mode) != 0o700 or st.st_uid != uid:
                bad.append("%s/%s %o" % (root, d, stat.S_IMODE(st.st_mode)))
        for f in files:
            st = os.lstat(os.path.join(root, f))
            if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o600 \
                    or st.st_uid != uid:
                bad.append("%s/%s %o" % (root, f, stat.S_IMODE(st.st_mode)))
    count = sum(len(f) for _, _, f in os.walk(hub.cache))
    t.check("the cache has files (%d)" % count, count >= 3)
    t.check("every cache file is 0600 and every directory 0700, the hub's own", not bad,
            "; ".join(bad[:10]))
    st = os.stat(hub.cache)
    t.check("the cache directory itself is 0700", stat.S_IMODE(st.st_mode) == 0o700,
            "%o" % stat.S_IMODE(st.st_mode))


def test_bind_warning(t, double, hub):
    with open(hub.logpath, "rb") as f:
        t.check("on loopback: no warning", b"not on loopback" not in f.read())
    other = Hub(t.workdir, [double.url], extra=["--bind-proxy-address=0.0.0.0"], name="wide")
    try:
        with open(other.logpath, "rb") as f:
            t.check("bound to 0.0.0.0: a warning in the log", b"not on loopback" in f.read())
    finally:
        other.stop()


def main():
    t = Suite("security")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(double.stop)
    token_file = os.path.join(t.workdir, "token")
    with open(token_file, "w") as f:
        f.write(HUB_TOKEN + "\n")
    os.chmod(token_file, 0o600)
    hub = Hub(t.workdir, [double.url], extra=["--token-file=" + token_file, "-v", "9"])
    t.cleanups.append(hub.stop)
    t.run(test_no_secrets_in_log, double, hub)
    t.run(test_cache_is_private, hub)
    t.run(test_bind_warning, double, hub)
    t.finish()


if __name__ == "__main__":
    main()
