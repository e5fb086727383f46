"""One watch of python3-kubernetes (Debian's package; run with /usr/bin/python3)
on a plain-HTTP server, driven by tests/e2e/clients.py.

    py_watch.py --server URL --func list_pod_for_all_namespaces [--api CoreV1Api]
        [--namespace NS] [--resource-version RV] [--label-selector S] [--field-selector S]
        [--timeout-seconds N] [--bookmarks] [--user-agent UA]

--func is a list call of the generated API (list_namespaced_pod needs
--namespace); the watch is its kubernetes.watch.Watch().stream(), which
resumes once by itself after a 410 unless --timeout-seconds is given.

stdout: one JSON object per line, each with "event" and "t" (seconds):
  ADDED / MODIFIED / DELETED / BOOKMARK   name, namespace, resourceVersion
  error   status (HTTP status of the ApiException), reason; or message for
          another exception (type: its class name)
  end     the stream ended without an exception
"""

import argparse
import json
import sys
import time

from kubernetes import client, watch


def emit(event, **fields):
    fields.update(event=event, t=time.time())
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--api", default="CoreV1Api")
    p.add_argument("--func", required=True)
    p.add_argument("--namespace")
    p.add_argument("--resource-version")
    p.add_argument("--label-selector")
    p.add_argument("--field-selector")
    p.add_argument("--timeout-seconds", type=int)
    p.add_argument("--bookmarks", action="store_true")
    p.add_argument("--user-agent")
    a = p.parse_args()

    cfg = client.Configuration()
    cfg.host = a.server
    api_client = client.ApiClient(cfg)
    if a.user_agent:
        api_client.user_agent = a.user_agent
    api = getattr(client, a.api)(api_client)
    func = getattr(api, a.func)
    args = [a.namespace] if a.namespace else []
    kwargs = {}
    for name in ("resource_version", "label_selector", "field_selector", "timeout_seconds"):
        v = getattr(a, name)
        if v is not None:
            kwargs[name] = v
    if a.bookmarks:
        kwargs["allow_watch_bookmarks"] = True
    try:
        for ev in watch.Watch().stream(func, *args, **kwargs):
            md = ev["raw_object"].get("metadata", {})
            emit(ev["type"], name=md.get("name"), namespace=md.get("namespace", ""),
                 resourceVersion=md.get("resourceVersion"))
    except client.rest.ApiException as e:
        emit("error", status=e.status, reason=e.reason)
        return
    except Exception as e:  # a broken stream: what the client's user would see
        emit("error", type=type(e).__name__, message=str(e))
        return
    emit("end")


if __name__ == "__main__":
    main()
