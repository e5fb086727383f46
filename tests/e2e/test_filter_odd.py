"""End to end: one object a response filter cannot read, and a hub address
that does not serve (docs/filters.md, "Objects a filter cannot read" and
"The hub's address").

1. kubelet's pod list holds, next to ordinary pods whose
   KUBERNETES_SERVICE_HOST serviceenvupdater rewrites, pods it cannot read:
   a name holding \\u0000, an annotation holding a lone surrogate (no valid
   UTF-8 stands for it, jansson refuses it), an env value that is a number,
   a 31-digit integer.  The list reaches kubelet whole and valid JSON, every
   ordinary pod filtered, each odd one exactly as the cloud sent it;
   yurthub_filter_unparsable_total{filter="serviceenvupdater"} counts them;
   each is logged once however often kubelet lists.  The same in a watch:
   an odd pod's event passes as it came and the stream goes on; and in
   kube-proxy's services list answered by the multiplexer.  The cache
   stores that list without the objects no store key can name (the NUL
   pods, a pod named tmp_...) and only without them: offline, kubelet's
   list answers every other pod, also one a watch brought after an odd
   event; yurthub_cache_objects_skipped_total counts each left out, and
   each is logged once.  The same on the etcd store.
2. A hub with --proxy-secure-port but no serving certificate leaves
   kubelet's default/kubernetes Service, kube-proxy's kubernetes
   EndpointSlice and pods' KUBERNETES_SERVICE_HOST as the cloud sent them,
   and says so in /v1/readyz?verbose and (once) in its log; with a
   certificate the port serves and they are rewritten; a certificate that
   comes later (bootstrap, the serving CSR approved after the start) starts
   the rewrite from then on.

Each part runs against the sanitizer build and, when it is there, the
release build (build/src/yurthub).
"""

import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from harness import (HUB_BIN, ROOT, Double, Etcd, Hub, Suite, free_port, get,  # noqa: E402
                     proxy_json, wait_for, within)
from serving_cert import secure_flags  # noqa: E402
from watch_stream import open_watch, read_events  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
KUBE_PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
HUB_HOST = "169.254.2.1"
CLOUD_HOST = "api.example.com"
NODE_PODS = "/api/v1/pods?fieldSelector=" + urllib.parse.quote("spec.nodeName=node1")
UNPARSABLE = 'yurthub_filter_unparsable_total{filter="serviceenvupdater"}'


def pod(name, env_value=CLOUD_HOST, annotations=None, extra_spec=None):
    spec = {"nodeName": "node1", "containers": [{
        "name": "c", "image": "busybox",
        "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": env_value},
                {"name": "OTHER", "value": "x"}]}]}
    spec.update(extra_spec or {})
    md = {"name": name, "namespace": "default"}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


GOOD = ["good-%d" % i for i in range(4)]
ODD = {
    "odd\u0000nul": pod("odd\u0000nul"),
    "odd-surrogate": pod("odd-surrogate", annotations={"note": "bad \udcff utf-8"}),
    "odd-type": pod("odd-type", env_value=6443),
    "odd-bignum": pod("odd-bignum", extra_spec={"priority": 10 ** 30}),
}


def env_host(p):
    return p["spec"]["containers"][0]["env"][0]["value"]


def cloud_items(double, path):
    s, _, body = get("127.0.0.1", double.port, path, headers={"User-Agent": KUBELET})
    return {i["metadata"]["name"]: i for i in json.loads(body)["items"]}


def odd_log_lines(hub):
    with open(hub.logpath, "rb") as f:
        return [ln for ln in f.read().decode(errors="replace").splitlines()
                if "passed unfiltered" in ln]


def unparsable(hub):
    for line in hub.metrics().splitlines():
        if line.startswith(UNPARSABLE + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_odd_list(t, double, hub, tag):
    cloud = cloud_items(double, NODE_PODS)
    # ODD, and the odd pods an earlier run's watch part added
    odd = [n for n in cloud if n.startswith("odd")]
    before = unparsable(hub) or 0
    for rnd in range(3):
        s, body = proxy_json(hub, NODE_PODS, KUBELET)
        whole = s == 200 and isinstance(body, dict) and body.get("kind") == "PodList"
        t.check("%s list %d: kubelet's pod list with odd pods is whole, valid JSON" % (tag, rnd),
                whole, "%s %r" % (s, body[:300] if isinstance(body, bytes) else ""))
        if not whole:
            return
        got = {i["metadata"]["name"]: i for i in body["items"]}
        t.check("%s list %d: every pod is there" % (tag, rnd),
                sorted(got) == sorted(cloud), repr(sorted(got)))
        t.check("%s list %d: the ordinary pods are filtered (hub's address)" % (tag, rnd),
                all(env_host(got[n]) == HUB_HOST for n in GOOD),
                repr([env_host(got[n]) for n in GOOD if n in got]))
        t.check("%s list %d: each odd pod is as the cloud sent it" % (tag, rnd),
                set(ODD) <= set(odd) and all(got.get(n) == cloud[n] for n in odd),
                repr([n for n in odd if got.get(n) != cloud[n]]))
    after = unparsable(hub)
    t.check("%s: %s counts each odd pod of each list" % (tag, UNPARSABLE),
            after is not None and after - before == 3 * len(odd), "%s -> %s" % (before, after))
    lines = odd_log_lines(hub)
    t.check("%s: each odd pod is logged once across three lists" % tag,
            len(lines) == len(odd) and sum("default/odd-type" in ln for ln in lines) == 1,
            "\n".join(lines))
    # a get of one passes as it came too
    s, body = proxy_json(hub, "/api/v1/namespaces/default/pods/odd-type", KUBELET)
    t.check("%s: a get of an odd pod answers it as it came" % tag,
            s == 200 and body == cloud["odd-type"], "%s %r" % (s, body))


def test_odd_watch(t, double, hub, tag):
    s, body = proxy_json(hub, NODE_PODS, KUBELET)
    rv = body["metadata"]["resourceVersion"]
    before = unparsable(hub)
    logged = len(odd_log_lines(hub))
    sock, head, rest = open_watch(hub, NODE_PODS + "&watch=true&resourceVersion=" + rv, KUBELET)
    try:
        odd = pod("odd2\u0000" + tag)
        double.put_object(odd)
        double.put_object(pod("after-" + tag))
        events, closed = read_events(sock, rest, lambda ev: any(
            e["object"]["metadata"]["name"] == "after-" + tag for e in ev), 20)
    finally:
        sock.close()
    names = [e["object"]["metadata"]["name"] for e in events]
    t.check("%s watch: the odd pod's event and the next one arrive, the stream goes on" % tag,
            b" 200 " in head.split(b"\r\n")[0] and "odd2\u0000" + tag in names and
            "after-" + tag in names and not closed, repr((head[:40], names, closed)))
    by = {e["object"]["metadata"]["name"]: e["object"] for e in events}
    t.check("%s watch: the odd pod as it came, the next one filtered" % tag,
            env_host(by.get("odd2\u0000" + tag, pod("x", "?"))) == CLOUD_HOST and
            env_host(by.get("after-" + tag, pod("x", "?"))) == HUB_HOST, repr(by)[:400])
    wait_for(lambda: unparsable(hub) == before + 1, 10, what="the watch event counted")
    t.check("%s watch: counted and logged once" % tag,
            len(odd_log_lines(hub)) == logged + 1, "\n".join(odd_log_lines(hub)))
    double.delete_object("v1", "Pod", "default", "after-" + tag)


def test_odd_mux(t, double, hub, tag):
    """Services are pool-scope: kube-proxy's list comes from the multiplexer's
    shared cache, through the same rewriter."""
    name = "odd-lb-" + tag
    double.put_object({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": name, "namespace": "default",
                                    "annotations": {"svc.openyurt.io/discard": "true",
                                                    "note": "\udcff"}},
                       "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})
    double.put_object({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": "lb-" + tag, "namespace": "default",
                                    "annotations": {"svc.openyurt.io/discard": "true"}},
                       "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})
    metric = 'yurthub_filter_unparsable_total{filter="discardcloudservice"}'

    def count():
        for line in hub.metrics().splitlines():
            if line.startswith(metric + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0

    before_kp = double.state()["requests_by_user_agent"].get("kube-proxy", 0)
    before = count()
    got = {}

    def listed():
        s, body = proxy_json(hub, "/api/v1/services", KUBE_PROXY)
        got.clear()
        got.update({i["metadata"]["name"]: i for i in body["items"]})
        return name in got
    wait_for(listed, 20, what="the odd service in kube-proxy's list")
    after_kp = double.state()["requests_by_user_agent"].get("kube-proxy", 0)
    t.check("%s multiplexer: kube-proxy's services come from the multiplexer" % tag,
            after_kp == before_kp, "%s -> %s" % (before_kp, after_kp))
    t.check("%s multiplexer: the odd LoadBalancer passes as it came, the other is dropped"
            % tag, got[name]["metadata"]["annotations"]["note"] == "\udcff" and
            "lb-" + tag not in got, repr(sorted(got)))
    t.check("%s multiplexer: counted against discardcloudservice" % tag, count() > before,
            "%s -> %s" % (before, count()))
    double.delete_object("v1", "Service", "default", name)
    double.delete_object("v1", "Service", "default", "lb-" + tag)


def skipped_lines(hub):
    with open(hub.logpath, "rb") as f:
        return [ln for ln in f.read().decode(errors="replace").splitlines()
                if "is not cached, only it" in ln]


def test_odd_offline(t, double, hub, tag):
    """The cache stores kubelet's list with every object it can name: one
    with a NUL in its name (or a name no store key can be) is left out,
    counted and logged once, and offline the list answers the others; the
    same for a watch, whose later events are still cached."""
    keyless = "tmp_keyless-" + tag  # a store key cannot start with tmp_
    double.put_object(pod(keyless))
    skipped = "yurthub_cache_objects_skipped_total"
    before = hub.metric(skipped) or 0
    keyless_now = len([n for n in cloud_items(double, NODE_PODS)
                       if "\u0000" in n or n.startswith("tmp_")])
    for _ in range(2):
        s, body = proxy_json(hub, NODE_PODS, KUBELET)
    t.check("%s offline part: online, kubelet's list is whole" % tag,
            s == 200 and keyless in [i["metadata"]["name"] for i in body["items"]], s)
    rv = body["metadata"]["resourceVersion"]
    sock, head, rest = open_watch(hub, NODE_PODS + "&watch=true&resourceVersion=" + rv, KUBELET)
    try:
        double.put_object(pod("odd3\u0000" + tag))
        double.put_object(pod("late-" + tag))
        read_events(sock, rest, lambda ev: any(
            e["object"]["metadata"]["name"] == "late-" + tag for e in ev), 20)
    finally:
        sock.close()
    cloud = cloud_items(double, NODE_PODS)
    storable = sorted(n for n in cloud if "\u0000" not in n and not n.startswith("tmp_"))
    t.check("%s offline part: the cloud has objects no store key can name" % tag,
            len(storable) < len(cloud) and "late-" + tag in storable, repr(sorted(cloud)))
    double.cut()
    try:
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 20, what="offline")
        got = {}

        def offline_list():
            s, body = proxy_json(hub, NODE_PODS, KUBELET)
            got.clear()
            if s == 200 and isinstance(body, dict):
                got.update({i["metadata"]["name"]: i for i in body["items"]})
            return "late-" + tag in got
        ok = within(offline_list, 20, "the offline list with the watch's later pod")
        t.check("%s offline: kubelet's list answers every other pod, the watch's too" % tag,
                ok and sorted(got) == storable, repr(sorted(got)))
        t.check("%s offline: the ordinary pods are filtered" % tag,
                all(env_host(got[n]) == HUB_HOST for n in GOOD if n in got), repr(got)[:300])
        t.check("%s offline: the odd pods the store holds are as the cloud sent them" % tag,
                all(got[n] == cloud[n] for n in ("odd-type", "odd-bignum", "odd-surrogate")
                    if n in got), "")
        # two lists with the NUL pods and the tmp_ one, and the watch's odd event
        # (the cache's workers count them after the answers: waited for)
        want = before + 2 * keyless_now + 1
        t.check("%s: %s counts each object left out" % (tag, skipped),
                within(lambda: (hub.metric(skipped) or 0) == want, 20, "the count"),
                "%s -> %s, not %s" % (before, hub.metric(skipped), want))
        s, _ = proxy_json(hub, NODE_PODS, KUBELET)  # offline: nothing new to log
        distinct = keyless_now + 1  # each logged once, whatever the lists
        t.check("%s: each object left out is logged once" % tag,
                within(lambda: len(skipped_lines(hub)) == distinct, 20, "the log") and
                sum(keyless in ln for ln in skipped_lines(hub)) == 1,
                "\n".join(skipped_lines(hub)))
    finally:
        double.restore()
        wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 20, what="online")
        double.delete_object("v1", "Pod", "default", keyless)
        double.delete_object("v1", "Pod", "default", "late-" + tag)


def test_port_not_serving(t, double, binary, tag):
    port = free_port()
    hub = Hub(t.workdir, [double.url], extra=["--proxy-secure-port=%d" % port],
              name="hub-noport-" + tag, binary=binary)
    t.cleanups.append(hub.stop)
    for _ in range(2):
        s, body = proxy_json(hub, "/api/v1/services", KUBELET)
        svcs = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in body["items"]}
    k = svcs[("default", "kubernetes")]["spec"]
    t.check("%s no certificate: kubelet's kubernetes Service is the cloud's" % tag,
            k["clusterIP"] == "10.96.0.1" and k["ports"][0]["port"] != port, repr(k))
    s, body = proxy_json(hub, "/apis/discovery.k8s.io/v1/endpointslices", KUBE_PROXY)
    sl = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in body["items"]}
    t.check("%s no certificate: kube-proxy's kubernetes slice is the cloud's" % tag,
            sl[("default", "kubernetes")]["endpoints"][0]["addresses"] == ["127.0.0.1"],
            repr(sl[("default", "kubernetes")]))
    s, body = proxy_json(hub, NODE_PODS, KUBELET)
    good = [i for i in body["items"] if i["metadata"]["name"] == "good-0"]
    t.check("%s no certificate: pods' KUBERNETES_SERVICE_HOST is the cloud's" % tag,
            good and env_host(good[0]) == CLOUD_HOST, repr(good)[:300])
    s, _, ready = get("127.0.0.1", hub.serve_port, "/v1/readyz?verbose")
    t.check("%s no certificate: readyz?verbose says the hub address does not serve" % tag,
            s == 200 and b"[-]hub-address not serving" in ready, ready.decode(errors="replace"))
    with open(hub.logpath, "rb") as f:
        log = f.read().decode(errors="replace")
    t.check("%s no certificate: the log says so, once" % tag,
            log.count("the secure port does not serve (no serving certificate yet)") == 1,
            hub.tail())
    hub.stop()


def test_port_serving(t, double, hub, tag):
    s, body = proxy_json(hub, "/api/v1/services", KUBELET)
    svcs = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in body["items"]}
    k = svcs[("default", "kubernetes")]["spec"]
    https = [p for p in k["ports"] if p.get("name") == "https"]
    t.check("%s certificate: kubelet's kubernetes Service points at the hub" % tag,
            k["clusterIP"] == HUB_HOST and https and https[0]["port"] == hub.secure_port,
            repr(k))
    s, _, ready = get("127.0.0.1", hub.serve_port, "/v1/readyz?verbose")
    t.check("%s certificate: readyz?verbose says the hub address serves" % tag,
            s == 200 and b"[+]hub-address ok" in ready, ready.decode(errors="replace"))


def csrs(double):
    s, body = double.control("GET", "/objects?apiVersion=certificates.k8s.io/v1"
                             "&kind=CertificateSigningRequest")
    return json.loads(body)["items"] if s == 200 else []


def approve(double, signer):
    """Approve the pending CSRs of signer; how many there were."""
    n = 0
    for c in csrs(double):
        conds = [x["type"] for x in (c.get("status") or {}).get("conditions") or []]
        if c["spec"].get("signerName") == signer and not conds:
            double.control("POST", "/csr?action=approve&name=" + c["metadata"]["name"])
            n += 1
    return n


def start_hub_serving_later(t, cloud, pki, token, tag, binary):
    """A hub joined to cloud by token bootstrap with a secure port, whose client
    certificate is approved (as yurt-manager would) and whose serving one is
    left pending: its secure port does not serve yet.  (hub, secure port)."""
    import hashlib
    import threading
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    with open(os.path.join(pki, "ca.crt"), "rb") as f:
        spki = x509.load_pem_x509_certificate(f.read()).public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    stop = threading.Event()

    def approver():  # yurt-manager, for the client certificate only
        while not stop.is_set():
            approve(cloud, "kubernetes.io/kube-apiserver-client")
            stop.wait(0.2)
    th = threading.Thread(target=approver, daemon=True)
    th.start()
    port = free_port()
    try:
        hub = Hub(t.workdir, ["https://127.0.0.1:%d" % cloud.port], name="hub-late-" + tag,
                  binary=binary,
                  extra=["--join-token=" + token, "--root-dir=" + os.path.join(
                      t.workdir, "root-" + tag), "--discovery-token-ca-cert-hash=sha256:" +
                         hashlib.sha256(spki).hexdigest(), "--proxy-secure-port=%d" % port])
    finally:
        stop.set()
        th.join()
    t.cleanups.append(hub.stop)
    return hub, port


def test_certificate_arrives(t, binary, tag):
    """Bootstrap: the client certificate is approved, the serving one only later.
    Until then kubelet sees the cloud's kubernetes Service; from then on, the hub."""
    token = "abcdef.0123456789abcdef"
    pki = os.path.join(t.workdir, "pki-" + tag)
    cloud = Double(t.workdir, ["--seed", "sample", "--node", "node1", "--pki-dir", pki,
                               "--bootstrap-token", token])
    t.cleanups.append(cloud.stop)
    hub, port = start_hub_serving_later(t, cloud, pki, token, tag, binary)

    def kube_ip():
        s, body = proxy_json(hub, "/api/v1/services", KUBELET)
        for i in body["items"]:
            if (i["metadata"]["namespace"], i["metadata"]["name"]) == ("default", "kubernetes"):
                return i["spec"]["clusterIP"]
        return None
    t.check("%s late certificate: before it, the cloud's kubernetes Service" % tag,
            kube_ip() not in (None, HUB_HOST), repr(kube_ip()))
    wait_for(lambda: [c for c in csrs(cloud)
                      if c["spec"].get("signerName") == "kubernetes.io/kubelet-serving"],
             30, what="the serving CSR")
    t.check("%s late certificate: the serving CSR approved" % tag,
            approve(cloud, "kubernetes.io/kubelet-serving") == 1)
    wait_for(lambda: kube_ip() == HUB_HOST, 30, what="the rewrite once the port serves")
    _, _, ready = get("127.0.0.1", hub.serve_port, "/v1/readyz?verbose")
    with open(hub.logpath, "rb") as f:
        log = f.read().decode(errors="replace")
    t.check("%s late certificate: then the hub's, said in the log and readyz" % tag,
            b"[+]hub-address ok" in ready and "point pods at the hub from now on" in log,
            ready.decode(errors="replace"))
    hub.stop()
    cloud.stop()


def run_with(t, double, binary, tag):
    port = free_port()
    hub = Hub(t.workdir, [double.url], extra=secure_flags(t.workdir, port),
              name="hub-" + tag, binary=binary)
    hub.secure_port = port
    t.cleanups.append(hub.stop)
    t.run(test_port_serving, double, hub, tag)
    t.run(test_odd_list, double, hub, tag)
    t.run(test_odd_watch, double, hub, tag)
    t.run(test_odd_mux, double, hub, tag)
    hub.stop()
    t.run(test_port_not_serving, double, binary, tag)
    t.run(test_certificate_arrives, binary, tag)


def run_offline(t, double, binary, tag):
    """The offline part, on a hub of its own (its log and counts are this
    part's only): on the disk store, then on the etcd store - the same rule,
    the same answer."""
    port = free_port()
    hub = Hub(t.workdir, [double.url], name="hub-offline-" + tag, binary=binary,
              extra=secure_flags(t.workdir, port))
    t.cleanups.append(hub.stop)
    t.run(test_odd_offline, double, hub, tag)
    hub.stop()
    etcd = Etcd(t.workdir, name="etcd-" + tag)
    t.cleanups.append(etcd.stop)
    port = free_port()
    hub = Hub(t.workdir, [double.url], name="hub-etcd-" + tag, binary=binary,
              extra=secure_flags(t.workdir, port) + ["--storage=etcd",
                                                    "--etcd-servers=" + etcd.url])
    t.cleanups.append(hub.stop)
    t.run(test_odd_offline, double, hub, tag + "-etcd")
    hub.stop()
    etcd.stop()


def main():
    t = Suite("filter-odd")
    double = Double(t.workdir, ["--node", "node1", "--node", "node2"])
    t.cleanups.append(double.stop)
    for n in GOOD:
        double.put_object(pod(n))
    for o in ODD.values():
        double.put_object(o)
    run_with(t, double, HUB_BIN, "san")
    run_offline(t, double, HUB_BIN, "san")
    release = os.path.join(ROOT, "build", "src", "yurthub")
    if os.path.exists(release):
        run_with(t, double, release, "release")
        run_offline(t, double, release, "release")
    else:
        print("note: %s is absent: the release build's half is skipped" % release, flush=True)
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
