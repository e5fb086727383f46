"""End to end, several upstreams: --lb-mode=rr spreads requests over the
healthy API servers, --lb-mode=priority keeps to the first healthy one, and a
server that stops answering is skipped - the request that found it dead is
retried on another server instead of failing.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Double, Hub, Suite, get, wait_for  # noqa: E402


def count(double, ua):
    return double.state().get("requests_by_user_agent", {}).get(ua, 0)


def send(hub, ua, n):
    codes = []
    for _ in range(n):
        s, _, _ = get("127.0.0.1", hub.proxy_port, "/api/v1/namespaces/default/configmaps",
                      headers={"User-Agent": ua + "/1.0"})
        codes.append(s)
    return codes


def main():
    t = Suite("balance")
    a = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(a.stop)
    b = Double(t.workdir, ["--seed", "sample", "--node", "node1"])
    t.cleanups.append(b.stop)

    rr = Hub(t.workdir, [a.url, b.url], name="rr", extra=["--lb-mode=rr"])
    t.cleanups.append(rr.stop)
    codes = send(rr, "rr-client", 20)
    ca, cb = count(a, "rr-client"), count(b, "rr-client")
    t.check("rr: every request answered", codes == [200] * 20, str(codes))
    t.check("rr: both servers share the load (%d / %d)" % (ca, cb), ca >= 5 and cb >= 5)
    rr.stop()

    prio = Hub(t.workdir, [a.url, b.url], name="prio", extra=["--lb-mode=priority"])
    t.cleanups.append(prio.stop)
    codes = send(prio, "prio-client", 10)
    t.check("priority: all requests to the first server",
            count(a, "prio-client") == 10 and count(b, "prio-client") == 0,
            "%d / %d" % (count(a, "prio-client"), count(b, "prio-client")))
    a.cut("refuse")
    codes = send(prio, "prio-after-cut", 10)
    t.check("priority: with the first server gone every request still succeeds",
            codes == [200] * 10, str(codes))
    t.check("priority: ...served by the second server",
            count(b, "prio-after-cut") == 10, str(count(b, "prio-after-cut")))
    wait_for(lambda: prio.metric("yurthub_upstream_healthy") == 1, 10,
             what="exactly one healthy upstream")
    t.check("the dead server is marked unhealthy, the other stays healthy",
            prio.metric("yurthub_upstream_healthy") == 1)
    a.restore()
    wait_for(lambda: prio.metric("yurthub_upstream_healthy") == 2, 15, what="both healthy")
    codes = send(prio, "prio-back", 5)
    t.check("priority: back to the first server once it is healthy again",
            count(a, "prio-back") == 5, str(count(a, "prio-back")))
    t.finish()


if __name__ == "__main__":
    main()
