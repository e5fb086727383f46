"""End to end: the hub's disk fails, the node keeps working.

Two ways for the cache directory to fail under a running hub:

- the fault injector (tests/fault/inject.c) in the hub's LD_PRELOAD, steered
  through a control file (YH_FAULT_CTL): every write, sync and rename under
  the cache directory fails with EIO while the test says so;
- a real full disk: the cache directory on a 4 MiB tmpfs, filled up by the
  test (needs root to mount; skipped, and said so, otherwise).

Either way, while the disk fails: clients get full answers from the cloud
(lists compared with the cloud's own, watch events arrive), the failures
show in /metrics (yurthub_cache_failures_total) and in the log at the default
verbosity (-v 0); once the disk works again the next list is cached, and
served offline when the link is cut.
"""

import json
import os
import subprocess
import sys
import time
import http.client

sys.path.insert(0, os.path.dirname(__file__))
from harness import BUILD, HUB_BIN, Double, Hub, Suite, get, wait_for  # noqa: E402

KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
CMS = "/api/v1/namespaces/default/configmaps"
INJECT = os.path.join(BUILD, "tests", "fault", "libyh_inject.so")


def asan_runtime(binary):
    """The ASan runtime a sanitized binary links, which must come first in
    LD_PRELOAD; None for a plain build."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libasan.so" in line and "=>" in line:
            return line.split("=>")[1].split("(")[0].strip()
    return None


def sample(hub, name, op):
    """One sample of a labelled metric, 0 when absent."""
    prefix = '%s{op="%s"} ' % (name, op)
    for line in hub.metrics().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return 0.0


def failures(hub, op):
    return sample(hub, "yurthub_cache_failures_total", op)


def writes(hub, op):
    return sample(hub, "yurthub_cache_writes_total", op)


def names_rvs(body):
    doc = json.loads(body)
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in doc["items"]}


def hub_list(hub):
    return get("127.0.0.1", hub.proxy_port, CMS,
               headers={"User-Agent": KUBELET, "Accept": "application/json"}, timeout=30)


def cloud_list(double):
    return get("127.0.0.1", double.port, CMS, headers={"Accept": "application/json"})


def configmap(name, size=100):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"v": "x" * size}}


def watch_sees(t, double, hub, rv, name, label):
    """A watch through the hub gets the event of an object made in the cloud."""
    c = http.client.HTTPConnection("127.0.0.1", hub.proxy_port, timeout=10)
    c.request("GET", CMS + "?watch=true&resourceVersion=" + rv,
              headers={"User-Agent": KUBELET, "Accept": "application/json"})
    r = c.getresponse()
    double.put_object(configmap(name))
    seen = False
    deadline = time.time() + 10
    while not seen and time.time() < deadline:
        line = r.readline()
        if not line:
            break
        if line.strip().startswith(b"{"):
            ev = json.loads(line)
            seen = ev.get("type") == "ADDED" and ev["object"]["metadata"]["name"] == name
    c.close()
    t.check("%s: the watch through the hub delivers the new object" % label,
            r.status == 200 and seen)


def full_answer(t, double, hub, label):
    """A list through the hub is the cloud's own list; returns its summary."""
    s, _, body = hub_list(hub)
    _, _, direct = cloud_list(double)
    ok = s == 200 and names_rvs(body) == names_rvs(direct)
    t.check("%s: the list through the hub is the cloud's list" % label, ok,
            "%s %s" % (s, body[:200]))
    return names_rvs(body) if s == 200 else {}, json.loads(body)["metadata"]["resourceVersion"]


def wait_more(t, what, fn, before, timeout=15):
    try:
        wait_for(lambda: fn() > before, timeout, what=what)
        t.check(what, True)
    except TimeoutError:
        t.check(what, False, "still %s" % fn())


def cached_and_offline(t, double, hub, online, label):
    """After the disk works again: the next list is cached and served offline."""
    before = writes(hub, "list")
    online, _ = full_answer(t, double, hub, label + ", disk back")
    wait_more(t, label + ": the list is cached once the disk works again",
              lambda: writes(hub, "list"), before)
    double.cut("refuse")
    hub_list(hub)  # the failed request that makes the hub probe at once
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 0, 10, what="offline")
    s, _, body = hub_list(hub)
    t.check(label + ": offline, the hub answers the list as the cloud did",
            s == 200 and names_rvs(body) == online, "%s %s" % (s, body[:200]))
    double.restore()
    wait_for(lambda: hub.metric("yurthub_upstream_healthy") == 1, 15, what="online again")


def log_says(t, hub, label, *words):
    with open(hub.logpath, "rb") as f:
        log = f.read().decode(errors="replace")
    ok = all(w in log for w in words)
    t.check("%s: the log (-v 0) says %s" % (label, " / ".join(words)), ok, hub.tail(10))


def test_injected_eio(t):
    if not os.path.exists(INJECT):
        print("SKIPPED: %s not built" % INJECT)
        return
    double = Double(t.workdir, ["--seed", "sample"])
    t.cleanups.append(double.stop)
    for i in range(3):
        double.put_object(configmap("cm-%d" % i))
    cache = os.path.join(t.workdir, "eio-cache")
    ctl = os.path.join(t.workdir, "fault-ctl")
    asan = asan_runtime(HUB_BIN)
    env = dict(os.environ, YH_FAULT_CTL=ctl,
               LD_PRELOAD=" ".join(p for p in (asan, INJECT) if p))
    hub = Hub(t.workdir, [double.url], env=env, cache=cache, name="eio-hub",
                    extra=["-v", "0"])
    t.cleanups.append(hub.stop)
    label = "EIO"
    before = writes(hub, "list")
    online, rv = full_answer(t, double, hub, label + ", healthy disk")
    wait_more(t, "EIO: the first list is cached", lambda: writes(hub, "list"), before)

    # the disk fails: written atomically, so that the hub reads it whole
    with open(ctl + ".tmp", "w") as f:
        f.write("write:*:EIO,sync:*:EIO,rename:*:EIO,open:*:EIO,mkdir:*:EIO,link:*:EIO\n"
                + cache + "\n")
    os.rename(ctl + ".tmp", ctl)
    double.put_object(configmap("cm-during"))
    fl, fw = failures(hub, "list"), failures(hub, "watch_event")
    online, rv = full_answer(t, double, hub, label + ", failing disk")
    t.check("EIO: the object made meanwhile is in the answer", "cm-during" in online)
    wait_more(t, "EIO: the failed list is counted in yurthub_cache_failures_total",
              lambda: failures(hub, "list"), fl)
    watch_sees(t, double, hub, rv, "cm-watched", label)
    wait_more(t, "EIO: the failed watch event is counted", lambda: failures(hub, "watch_event"),
              fw)
    log_says(t, hub, label, "cache: the store failed", "Input/output error")

    os.unlink(ctl)  # the disk works again
    cached_and_offline(t, double, hub, online, label)
    log_says(t, hub, label, "the store writes again")
    t.check("EIO: the hub stops cleanly", hub.stop() == 0, hub.tail())


def mount_tmpfs(path, size):
    os.makedirs(path)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", path],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("SKIPPED: a full disk needs a small tmpfs, and mount said: %s"
              % (p.stderr.strip() or p.returncode))
        return False
    return True


def fill(path):
    """Fill the file system of path up; returns the filler's path."""
    filler = os.path.join(path, "filler")
    block = b"f" * 65536
    with open(filler, "wb", buffering=0) as f:
        while len(block) >= 512:
            try:
                f.write(block)
            except OSError:
                block = block[:len(block) // 2]
    return filler


def test_full_tmpfs(t):
    cache = os.path.join(t.workdir, "tmpfs-cache")
    if not mount_tmpfs(cache, "4m"):
        return
    t.cleanups.append(lambda: subprocess.run(["umount", "-l", cache]))
    double = Double(t.workdir, ["--seed", "sample"])
    t.cleanups.append(double.stop)
    for i in range(3):
        double.put_object(configmap("cm-%d" % i))
    hub = Hub(t.workdir, [double.url], cache=cache, name="full-hub", extra=["-v", "0"])
    t.cleanups.append(hub.stop)
    label = "full disk"
    before = writes(hub, "list")
    online, rv = full_answer(t, double, hub, label + ", space left")
    wait_more(t, "full disk: the first list is cached", lambda: writes(hub, "list"), before)

    filler = fill(cache)
    # big objects: they cannot fit in what is left
    for i in range(3):
        double.put_object(configmap("big-%d" % i, 20000))
    fl, fw = failures(hub, "list"), failures(hub, "watch_event")
    online, rv = full_answer(t, double, hub, label)
    wait_more(t, "full disk: the failed list is counted", lambda: failures(hub, "list"), fl)
    watch_sees(t, double, hub, rv, "big-watched", label)
    wait_more(t, "full disk: the failed watch event is counted",
              lambda: failures(hub, "watch_event"), fw)
    log_says(t, hub, label, "cache: the store failed", "No space left on device")
    s, _, body = hub_list(hub)
    t.check("full disk: still a full answer", s == 200 and "big-watched" in names_rvs(body))

    os.unlink(filler)
    cached_and_offline(t, double, hub, online, label)
    t.check("full disk: the hub stops cleanly", hub.stop() == 0, hub.tail())


def main():
    t = Suite("disk-faults")
    t.run(test_injected_eio)
    t.run(test_full_tmpfs)
    t.finish()


if __name__ == "__main__":
    main()
