"""End to end, bearer tokens while the cloud is unreachable (docs/offline.md, "Bearer tokens
offline"; issue 23, item 2).

Online, the hub reads the cluster's service-account issuer discovery (the test double's
/.well-known/openid-configuration and /openid/v1/jwks) with its own identity and keeps both
documents in its cache. Offline - also after a restart offline - a request that carries a bearer
token is answered only when the token is a pod's, verified against those keys, with the pod
cached on this node; and even then it reads only the Secrets its pod mounts:

- a valid token of a pod of node1 reads each Secret its pod names (a secret volume, a projected
  secret source, an env secretKeyRef, an initContainer's envFrom): 200; an unmounted Secret, a
  list of secrets, a list by name of an unmounted one, another namespace's: 403 Forbidden; a
  list by name (fieldSelector metadata.name) of a mounted one: 200; other reads: served;
- `Bearer x`, another scheme, an expired token, one signed by another key, one of another
  issuer or audience, one of a pod on another node, one of a pod being deleted: 401
  Unauthorized, and no Secret's bytes;
- a client without Authorization (kubelet) is served as before;
- when the cloud answers the hub's GET of the keys 403 (kube-apiserver's default RBAC), the hub
  logs one warning naming the binding to add, and offline every bearer token gets 401;
- on the etcd store the keys are kept in etcd and serve after a restart offline;
- after the cluster rotates its key, the new key's first token seen online makes the hub fetch
  the keys again (at most once a minute), so that token is checked offline.

Each scenario runs against the sanitizer build and, when it is there, the release build. No
token ever reaches the hub's log.
"""

import base64
import json
import os
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from harness import BUILD, HUB_BIN, ROOT, Double, Etcd, Hub, Suite, get, request, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
APP = "app-client/1.0"
NS = "default"
MOUNTED = ["app-credentials", "db-password", "tls-bundle", "init-env"]
UNMOUNTED = "unmounted"
RELEASE_BIN = os.path.join(ROOT, "build", "src", "yurthub")


def data_of(name):
    """The bytes of Secret name's one value, as its JSON carries them (base64)."""
    return base64.b64encode(("value-of-" + name).encode())


def secret(name):
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": NS}, "data": {"value": data_of(name).decode()}}


def no_secret_in(body):
    return not any(data_of(n) in body for n in MOUNTED + [UNMOUNTED])


def pod(name, node, uid, deleting=False):
    """A pod that names every mounted Secret, each in another way."""
    md = {"name": name, "namespace": NS, "uid": uid}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        md["deletionGracePeriodSeconds"] = 30
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": {
        "nodeName": node, "serviceAccountName": "default",
        "volumes": [{"name": "creds", "secret": {"secretName": "app-credentials"}},
                    {"name": "bundle", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "token"}},
                        {"secret": {"name": "tls-bundle"}}]}}],
        "initContainers": [{"name": "init", "image": "busybox",
                            "envFrom": [{"secretRef": {"name": "init-env"}}]}],
        "containers": [{"name": "app", "image": "app:1", "env": [
            {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-password",
                                                                   "key": "value"}}}]}]},
        "status": {"phase": "Running"}}


def seed(double):
    for name in MOUNTED + [UNMOUNTED]:
        s, body = double.put_object(secret(name))
        assert s == 200, body
    for obj in (pod("app-1", "node1", "11111111-1111-4111-8111-111111111111"),
                pod("far-1", "node2", "22222222-2222-4222-8222-222222222222"),
                pod("going-1", "node1", "33333333-3333-4333-8333-333333333333", deleting=True)):
        s, body = double.put_object(obj)
        assert s == 200, body


def mint(double, pod_name, **q):
    q = dict(q, namespace=NS, pod=pod_name)
    s, body = double.control("POST", "/sa-token?" + urllib.parse.urlencode(q))
    assert s == 200, body
    return json.loads(body)["token"]


def req(hub, path, auth=None, ua=APP):
    headers = {"User-Agent": ua}
    if auth is not None:
        headers["Authorization"] = auth
    s, _, body = get("127.0.0.1", hub.proxy_port, path, headers=headers)
    return s, body


def reason(body):
    try:
        return json.loads(body).get("reason")
    except ValueError:
        return None


def fill_cache(hub, etcd=None):
    """What kubelet reads online: its pods, the Secrets, the list of them; and another node's
    pod, so that its token is refused for where the pod runs, not for a missing copy."""
    for path in ["/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1",
                 "/api/v1/namespaces/default/pods/far-1",
                 "/api/v1/namespaces/default/secrets"] + \
            ["/api/v1/namespaces/default/secrets/" + n for n in MOUNTED + [UNMOUNTED]]:
        s, body = req(hub, path, ua=KUBELET)
        assert s == 200, (path, s, body[:200])
    if etcd:
        wait_for(lambda: etcd.keys("/registry/secrets/%s/%s" % (NS, UNMOUNTED)), 10,
                 what="the secrets in etcd")
        return
    cached = os.path.join(hub.cache, "kubelet", "secrets.v1.core", NS, UNMOUNTED)
    wait_for(lambda: os.path.exists(cached), 10, what="the secrets cached")


def keys_cached(hub):
    return all(os.path.exists(os.path.join(hub.cache, n))
               for n in ("_openid_v1_jwks", "_.well-known_openid-configuration"))


def go_offline(double, hub):
    double.cut("refuse")
    req(hub, "/api/v1/namespaces/default/pods/app-1", ua=KUBELET)
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 15, what="offline")


def offline_reads(t, tag, hub, tokens):
    """The offline contract for a hub with the keys stored."""
    good = "Bearer " + tokens["good"]
    base = "/api/v1/namespaces/default/secrets"
    for name in MOUNTED:
        s, body = req(hub, base + "/" + name, good)
        t.check("%s: a pod's valid token reads the Secret it mounts, %s (%d)" % (tag, name, s),
                s == 200 and data_of(name) in body and json.loads(body)["metadata"]["name"] == name,
                body[:200])
    for what, path in [("an unmounted Secret", base + "/" + UNMOUNTED),
                       ("the list of secrets", base),
                       ("a watch of secrets", base + "?watch=1&timeoutSeconds=2"),
                       ("a list by name of an unmounted Secret",
                        base + "?fieldSelector=metadata.name%3D" + UNMOUNTED),
                       ("every namespace's secrets", "/api/v1/secrets"),
                       ("another namespace's Secret",
                        "/api/v1/namespaces/kube-system/secrets/app-credentials")]:
        s, body = req(hub, path, good)
        t.check("%s: a pod's valid token is refused %s: 403 Forbidden (%d)" % (tag, what, s),
                s == 403 and reason(body) == "Forbidden" and no_secret_in(body),
                body[:300])
    s, body = req(hub, base + "?fieldSelector=metadata.name%3Dapp-credentials", good)
    items = json.loads(body).get("items") if s == 200 else None
    t.check("%s: a list by name of a mounted Secret is served (%d)" % (tag, s),
            items is not None and [i["metadata"]["name"] for i in items] == ["app-credentials"],
            body[:300])
    s, body = req(hub, "/api/v1/namespaces/default/pods/app-1", good)
    t.check("%s: other reads of a checked token are served (%d)" % (tag, s),
            s == 200 and b"app-1" in body, body[:200])
    secret_path = base + "/app-credentials"
    for what, auth in [("Bearer x", "Bearer x"),
                       ("another scheme", "Basic " + base64.b64encode(b"a:b").decode()),
                       ("an empty bearer token", "Bearer "),
                       ("an expired token", "Bearer " + tokens["expired"]),
                       ("a token signed by another key", "Bearer " + tokens["other_key"]),
                       ("a token of another issuer", "Bearer " + tokens["other_iss"]),
                       ("a token for another audience", "Bearer " + tokens["other_aud"]),
                       ("a token of a pod on another node", "Bearer " + tokens["far"]),
                       ("a token of a pod being deleted", "Bearer " + tokens["going"]),
                       ("a token of a pod replaced since (another uid)",
                        "Bearer " + tokens["old_uid"]),
                       ("a valid token with its payload changed", "Bearer " + tokens["tampered"])]:
        s, body = req(hub, secret_path, auth)
        t.check("%s: %s gets 401 Unauthorized and no Secret (%d)" % (tag, what, s),
                s == 401 and reason(body) == "Unauthorized" and no_secret_in(body),
                body[:200])
    # a checked token may read, but offline nobody can judge what it may write
    s, _, body = request("127.0.0.1", hub.proxy_port, "PATCH",
                         "/api/v1/namespaces/default/pods/app-1",
                         body=b'{"metadata":{"labels":{"owned":"yes"}}}',
                         headers={"User-Agent": APP, "Authorization": good,
                                  "Content-Type": "application/merge-patch+json"})
    t.check("%s: a checked token's patch of its own pod: 403 Forbidden (%d)" % (tag, s),
            s == 403 and reason(body) == "Forbidden", body[:300])
    s, body = req(hub, "/api/v1/namespaces/default/pods/app-1", good)
    t.check("%s: ...and the pod is as cached" % tag,
            s == 200 and b'"owned"' not in body, body[:200])
    s, body = req(hub, "/api/v1/namespaces/default/pods/app-1", "Bearer x")
    t.check("%s: Bearer x reads no pod either (%d)" % (tag, s), s == 401, body[:200])
    s, body = req(hub, secret_path, ua=KUBELET)
    t.check("%s: kubelet, without Authorization, is served as before (%d)" % (tag, s),
            s == 200 and data_of("app-credentials") in body,
            body[:200])


def make_tokens(double):
    good = mint(double, "app-1")
    header, payload, sig = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["kubernetes.io"]["namespace"] = "kube-system"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return {"good": good,
            "expired": mint(double, "app-1", exp=-3600),
            "other_key": mint(double, "app-1", key="other"),
            "other_iss": mint(double, "app-1", iss="https://evil.example"),
            "other_aud": mint(double, "app-1", aud="vault"),
            "far": mint(double, "far-1"),
            "going": mint(double, "going-1"),
            "old_uid": mint(double, "app-1", uid="44444444-4444-4444-8444-444444444444"),
            "tampered": ".".join([header, forged, sig])}


def scenario(t, tag, binary, double):
    """Online the keys are stored; offline the contract holds; after a restart offline too."""
    hub = Hub(t.workdir, [double.url], name="hub-" + tag, binary=binary)
    try:
        fill_cache(hub)
        try:
            cached = wait_for(lambda: keys_cached(hub), 20, what="the keys cached")
        except TimeoutError:
            cached = False
        # the rest runs either way: a hub without the keys must still refuse every token
        if t.check("%s: online, the hub keeps the cluster's keys in its cache" % tag, cached):
            with open(os.path.join(hub.cache, "_openid_v1_jwks")) as f:
                t.check("%s: the stored JWK Set is the cloud's" % tag,
                        json.load(f) == json.loads(get("127.0.0.1", double.port,
                                                       "/openid/v1/jwks")[2]))
        tokens = make_tokens(double)
        s, body = req(hub, "/api/v1/namespaces/default/secrets/" + UNMOUNTED,
                      "Bearer " + tokens["good"])
        t.check("%s: online, a token's request is the cloud's to judge (%d)" % (tag, s),
                s == 200, body[:200])
        go_offline(double, hub)
        offline_reads(t, tag, hub, tokens)
        hub.stop()
        hub.start()  # the cloud is still away: a restart offline
        offline_reads(t, tag + " after a restart offline", hub, tokens)
        with open(hub.logpath, "rb") as f:
            log = f.read()
        t.check("%s: no token reaches the log" % tag,
                not any(tok.encode() in log for tok in tokens.values())
                and not any(tok.split(".")[2].encode() in log for tok in tokens.values()))
        hub.stop()
        p = subprocess.run([binary, "cache", "verify", hub.cache], capture_output=True,
                           timeout=60)
        t.check("%s: yurthub cache verify takes the stored keys (exit %d)" % (tag, p.returncode),
                p.returncode == 0, (p.stdout + p.stderr)[-500:])
    finally:
        hub.stop()
        double.restore()


def forbidden_keys(t, tag, binary, double):
    """kube-apiserver's default RBAC: the node may not read the keys."""
    double.control("POST", "/issuer-discovery?who=serviceaccounts")
    hub = Hub(t.workdir, [double.url], name="rbac-" + tag, binary=binary)
    try:
        fill_cache(hub)

        def warned():
            with open(hub.logpath, "rb") as f:
                return [ln for ln in f.read().splitlines()
                        if b"system:service-account-issuer-discovery" in ln]
        lines = wait_for(warned, 20, what="the warning about the RBAC binding")
        t.check("%s: a 403 on the keys gives one warning naming the binding to add" % tag,
                len(lines) == 1 and b"clusterrolebinding" in lines[0]
                and b"system:nodes" in lines[0], lines)
        t.check("%s: nothing is stored" % tag, not keys_cached(hub))
        token = mint(double, "app-1")
        go_offline(double, hub)
        s, body = req(hub, "/api/v1/namespaces/default/secrets/app-credentials",
                      "Bearer " + token)
        t.check("%s: without keys, offline, even a valid token gets 401 (%d)" % (tag, s),
                s == 401 and no_secret_in(body), body[:200])
        s, body = req(hub, "/api/v1/namespaces/default/secrets/app-credentials", ua=KUBELET)
        t.check("%s: ... and kubelet is served as before (%d)" % (tag, s), s == 200, body[:200])
    finally:
        hub.stop()
        double.restore()
        double.control("POST", "/issuer-discovery?who=all")


def etcd_store(t, double):
    """On the etcd store the keys are kept in etcd, beside the node's other records, and serve
    after a restart offline as on the disk."""
    etcd = Etcd(t.workdir)
    hub = None
    try:
        hub = Hub(t.workdir, [double.url], name="etcd-hub",
                  extra=["--storage=etcd", "--etcd-servers=" + etcd.url])
        fill_cache(hub, etcd)

        def stored():
            keys = etcd.keys("/yurthub") or []
            return [k for k in keys if k.endswith("/ci/openid/v1/jwks")] and \
                [k for k in keys if k.endswith("/ci/.well-known/openid-configuration")]
        try:
            ok = wait_for(stored, 20, what="the keys in etcd")
        except TimeoutError:
            ok = False
        t.check("etcd: online, the hub keeps the cluster's keys in etcd", ok)
        tokens = make_tokens(double)
        go_offline(double, hub)
        hub.stop()
        hub.start()
        path = "/api/v1/namespaces/default/secrets/"
        s, body = req(hub, path + "app-credentials", "Bearer " + tokens["good"])
        t.check("etcd, restarted offline: a pod's valid token reads the Secret it mounts (%d)"
                % s, s == 200 and data_of("app-credentials") in body, body[:200])
        s, body = req(hub, path + UNMOUNTED, "Bearer " + tokens["good"])
        t.check("etcd, restarted offline: ... and not another (%d)" % s,
                s == 403 and no_secret_in(body), body[:200])
        for what, auth in (("Bearer x", "Bearer x"),
                           ("a token signed by another key", "Bearer " + tokens["other_key"])):
            s, body = req(hub, path + "app-credentials", auth)
            t.check("etcd, restarted offline: %s gets 401 (%d)" % (what, s),
                    s == 401 and no_secret_in(body), body[:200])
    finally:
        if hub:
            hub.stop()
        etcd.stop()
        double.restore()


def stored_kids(hub):
    try:
        with open(os.path.join(hub.cache, "_openid_v1_jwks")) as f:
            return [k["kid"] for k in json.load(f)["keys"]]
    except (OSError, ValueError, KeyError):
        return []


def rotated_keys(t, double):
    """The cluster rotates its signing key: the first token of the new key that passes by online
    makes the hub fetch the keys again (at most once a minute after the last fetch), not at its
    10-minute refresh; offline that token then reads what its pod mounts."""
    hub = Hub(t.workdir, [double.url], name="rotate")
    try:
        fill_cache(hub)
        wait_for(lambda: stored_kids(hub), 20, what="the keys cached")
        kid = json.loads(double.control("POST", "/sa-rotate")[1])["kid"]
        t.check("rotation: the hub does not know the new key yet", kid not in stored_kids(hub))
        token = mint(double, "app-1")
        s, body = req(hub, "/api/v1/namespaces/default/pods/app-1", "Bearer " + token)
        t.check("rotation: online, the new key's token goes to the cloud (%d)" % s, s == 200)
        try:
            ok = wait_for(lambda: kid in stored_kids(hub), 100, step=0.5, what="the new key")
        except TimeoutError:
            ok = False
        t.check("rotation: the hub fetched the new key within a minute and a chore", ok,
                stored_kids(hub))
        go_offline(double, hub)
        s, body = req(hub, "/api/v1/namespaces/default/secrets/app-credentials",
                      "Bearer " + token)
        t.check("rotation: offline, the new key's token reads its pod's Secret (%d)" % s,
                s == 200 and data_of("app-credentials") in body, body[:200])
    finally:
        hub.stop()
        double.restore()


def main():
    t = Suite("offline_tokens")
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--node", "node2"])
    t.cleanups.append(double.stop)
    seed(double)
    builds = [("sanitizer", HUB_BIN)]
    if os.path.exists(RELEASE_BIN) and os.path.realpath(RELEASE_BIN) != os.path.realpath(HUB_BIN):
        builds.append(("release", RELEASE_BIN))
    else:
        print("note: no release build at %s (meson setup build --buildtype=release): "
              "only %s is tested" % (RELEASE_BIN, BUILD))
    for tag, binary in builds:
        t.run(scenario, tag, binary, double)
        t.run(forbidden_keys, tag, binary, double)
    t.run(etcd_store, double)
    t.run(rotated_keys, double)
    t.finish()


if __name__ == "__main__":
    main()
