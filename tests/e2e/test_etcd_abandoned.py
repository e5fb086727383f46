"""End to end on the etcd store: the hub killed (-9) in the middle of a
component's first list, a component that never lists again.  `yurthub cache
verify` names the list in progress by the node, not thousands of unexplained
holdings; the hub's next start rolls it back (0 problems, no holding of the
cut list left) and what the node had cached before is still served offline.
Run against the sanitizer build and, when there is one, the release build.
"""

import json
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Etcd, Hub, Suite, each_build, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
KUBE_PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
OWN_PODS = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1"
BULK_PODS = 3000


def hub_get(hub, path, ua, timeout=60):
    return get("127.0.0.1", hub.proxy_port, path, headers={"User-Agent": ua}, timeout=timeout)


def cache_verify(etcd, binary):
    p = subprocess.run([binary, "cache", "--etcd-servers=" + etcd.url, "--node-name=node1",
                        "verify"], capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def names(body):
    return sorted(i["metadata"]["namespace"] + "/" + i["metadata"]["name"]
                  for i in json.loads(body)["items"])


def run(t, label, binary):
    double = Double(t.workdir, ["--seed", "sample", "--node", "node1",
                                "--pods", str(BULK_PODS)])
    t.cleanups.append(double.stop)
    etcd = Etcd(t.workdir, name="etcd-" + label)
    t.cleanups.append(etcd.stop)
    extra = ["--storage=etcd", "--etcd-servers=" + etcd.url]
    hub = Hub(t.workdir, [double.url], extra=extra, binary=binary, name="hub-" + label)
    t.cleanups.append(hub.stop)

    # kubelet's list of its own pods: committed before anything is cut
    s, _, body = hub_get(hub, OWN_PODS, KUBELET)
    own = names(body) if s == 200 else []
    t.check("%s: kubelet lists its pods online (%d)" % (label, len(own)), s == 200 and own)
    wait_for(lambda: etcd.keys("/yurthub/registry/v/node1/kubelet/"), 20,
             what="kubelet's view in etcd")

    # kube-proxy's first list of every pod, cut by a kill -9 of the hub
    lister = threading.Thread(target=lambda: _quietly(hub_get, hub, "/api/v1/pods", KUBE_PROXY),
                              daemon=True)
    lister.start()
    held = "/yurthub/registry/h/node1/kube-proxy/"
    wait_for(lambda: len(etcd.keys(held) or []) >= 80, 60,
             what="kube-proxy's list half-written in etcd")
    # etcd stopped first: not another step of the list can land before the kill
    etcd.proc.send_signal(signal.SIGSTOP)
    hub.stop(signal.SIGKILL)
    etcd.proc.send_signal(signal.SIGCONT)
    lister.join(60)
    stray = len(etcd.keys(held) or [])
    t.check("%s: the list was cut short: no view of kube-proxy, %d holdings written" %
            (label, stray), not etcd.keys("/yurthub/registry/v/node1/kube-proxy/") and stray)

    rc, out, err = cache_verify(etcd, binary)
    t.check("%s: verify: 0 problems while the list is abandoned" % label,
            rc == 0 and "\n0 problems\n" in "\n" + out, (out + err)[-600:])
    t.check("%s: verify names the replace in progress by node node1" % label,
            "replace in progress by node node1 since " in out and "component kube-proxy" in out,
            out[-600:])

    # the hub starts again; kube-proxy never lists again
    hub = Hub(t.workdir, [double.url], extra=extra, binary=binary, name="hub-" + label,
              cache=hub.cache)
    t.cleanups.append(hub.stop)

    def settled():
        rc, out, _ = cache_verify(etcd, binary)
        return rc == 0 and "replace in progress" not in out and out
    out = wait_for(settled, 30, step=0.5, what="the abandoned list rolled back")
    t.check("%s: after the restart verify reports 0 problems and no replace in progress" % label,
            out and "\n0 problems\n" in "\n" + out, str(out)[-600:])
    t.check("%s: no holding of the cut list is left" % label, etcd.keys(held) == [],
            str(etcd.keys(held))[:300])

    # nothing committed before is lost: kubelet's pods offline, from etcd
    double.cut("refuse")
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 30, what="the hub offline")
    s, _, body = hub_get(hub, OWN_PODS, KUBELET)
    t.check("%s: offline, kubelet's pods are all still served" % label,
            s == 200 and names(body) == own, "%s %s" % (s, body[:200]))
    hub.stop()
    double.stop()
    etcd.stop()


def _quietly(fn, *args):
    try:
        fn(*args)
    except OSError:
        pass  # the hub was killed under the request


def main():
    t = Suite("etcd-abandoned")
    each_build(lambda label, binary: t.run(run, label, binary))
    t.finish()


if __name__ == "__main__":
    main()
