"""Client load for the end-to-end tests and the soak: informers that list and
then watch through the hub (re-listing whenever the watch ends, as client-go
does), a poller of one object, and a cloud that keeps changing.  Each notes
what it saw in a Stats; a request that outlives REQUEST_LIMIT or a watch
silent for WATCH_SILENCE_LIMIT is a problem.
"""

import http.client
import json
import random
import threading
import time

from harness import get

REQUEST_LIMIT = 90  # seconds: the hub gives up on the cloud after 75 s
WATCH_SILENCE_LIMIT = 45  # seconds: offline bookmarks come every 30 s
KUBELET = "kubelet/v1.30.2 (linux/amd64) kubernetes/abcdef"
PROXY = "kube-proxy/v1.30.2 (linux/amd64) kubernetes/abcdef"
COREDNS = "coredns/1.11.1 (linux/amd64)"


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.problems = []
        self.counts = {}

    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def problem(self, what):
        with self.lock:
            self.problems.append(what)


def informer(hub, stats, stop, name, ua, path, query, relisted):
    """List, then watch from the list's rv; again whenever the watch ends."""
    while not stop.is_set():
        t0 = time.time()
        try:
            c = http.client.HTTPConnection("127.0.0.1", hub.proxy_port, timeout=REQUEST_LIMIT)
            c.request("GET", path + "?" + query, headers={"User-Agent": ua})
            r = c.getresponse()
            body = r.read()
            c.close()
        except OSError as e:
            took = time.time() - t0
            if took >= REQUEST_LIMIT - 1:
                stats.problem("%s: list hung %.0f s" % (name, took))
            stats.count("list error")
            time.sleep(0.5)
            continue
        if r.status != 200:
            stats.count("list %d" % r.status)
            time.sleep(0.5)
            continue
        stats.count("list ok")
        relisted[name] = time.time()
        rv = json.loads(body)["metadata"]["resourceVersion"]
        watch(hub, stats, stop, name, ua, "%s?%s%swatch=true&allowWatchBookmarks=true&"
              "timeoutSeconds=60&resourceVersion=%s" % (path, query, "&" if query else "", rv))


def watch(hub, stats, stop, name, ua, url):
    try:
        c = http.client.HTTPConnection("127.0.0.1", hub.proxy_port, timeout=REQUEST_LIMIT)
        c.request("GET", url, headers={"User-Agent": ua})
        r = c.getresponse()
        if r.status != 200:
            r.read()
            stats.count("watch %d" % r.status)
            return
        c.sock.settimeout(WATCH_SILENCE_LIMIT)
        while not stop.is_set():
            line = r.readline()
            if not line:
                stats.count("watch ended")
                return
            ev = json.loads(line)
            stats.count("event " + ev.get("type", "?"))
            if ev.get("type") == "ERROR":
                return
    except TimeoutError:
        stats.problem("%s: watch silent for %d s" % (name, WATCH_SILENCE_LIMIT))
    except (OSError, http.client.HTTPException, ValueError):
        stats.count("watch broken")
    finally:
        c.close()


def poller(hub, stats, stop):
    while not stop.is_set():
        t0 = time.time()
        try:
            s, _, _ = get("127.0.0.1", hub.proxy_port, "/api/v1/nodes/node1",
                          headers={"User-Agent": KUBELET}, timeout=REQUEST_LIMIT)
            stats.count("get %d" % s)
        except OSError:
            if time.time() - t0 >= REQUEST_LIMIT - 1:
                stats.problem("get hung %.0f s" % (time.time() - t0))
            stats.count("get error")
        time.sleep(0.2)


def churn(double, stop):
    """The cloud changes all along: pods of node1 and services come and go."""
    rnd = random.Random(7)
    i = 0
    while not stop.is_set():
        i += 1
        n = rnd.randrange(8)
        if rnd.random() < 0.6:
            double.put_object({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "churn-%d" % n, "namespace": "default",
                                            "labels": {"round": str(i)}},
                               "spec": {"nodeName": "node1",
                                        "containers": [{"name": "c", "image": "x"}]}})
            double.put_object({"apiVersion": "v1", "kind": "Service",
                               "metadata": {"name": "churn-%d" % n, "namespace": "default",
                                            "labels": {"round": str(i)}},
                               "spec": {"ports": [{"port": 80}]}})
        else:
            double.delete_object("v1", "Pod", "default", "churn-%d" % n)
            double.delete_object("v1", "Service", "default", "churn-%d" % n)
        time.sleep(0.3)


