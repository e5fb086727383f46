#!/usr/bin/python3
"""A kube-apiserver test double, standard library only.

What it is for: the hub's integration tests need a "cloud" that behaves like a real
kube-apiserver towards kubelet, kube-proxy, coredns, kubectl and client libraries -- lists with
selectors and paging, watches with bookmarks and 410s, patches, discovery, OpenAPI v3 enough for
`kubectl apply`, gzip -- and that a test can break on purpose: refuse or black-hole connections
(control port), change objects while the API port is cut, compact the event history, and count
which requests reached it.

    python3 tests/double/apiserver.py --port 0 --control-port 0 --ready-file /tmp/ready.json

The ready file receives {"port": P, "control_port": C, "pid": PID} once both ports listen.
See tests/double/README.md for the control API and what is simplified.
"""

import argparse
import base64
import bisect
import datetime
import gzip
import hashlib
import hmac
import json
import os
import random
import re
import select
import signal
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import traceback
import uuid
import zlib
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

SERVER_VERSION = "v1.32.4"
GZIP_THRESHOLD = 128 * 1024      # kube-apiserver's defaultGzipThresholdBytes
TOO_LARGE_RV_WAIT = 3.0          # how long a list for a future resourceVersion waits
PEER_CHECK_INTERVAL = 1.0        # how often a quiet watch checks that its client is still there
HEADS_KEPT = 1000                # request heads kept, as received, for GET /heads
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def now_ts(offset=0):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


# --------------------------------------------------------------------------------------------
# Resources
# --------------------------------------------------------------------------------------------

class Resource:
    """One served resource type (group/version/plural)."""

    def __init__(self, group, version, plural, kind, namespaced, short=(), status=False,
                 create_on_update=False, generation=False, categories=(), verbs=ALL_VERBS,
                 crd=False, subresources=()):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespaced = namespaced
        self.short = list(short)
        self.status = status                      # has a /status subresource
        self.create_on_update = create_on_update  # PUT of a missing object creates it
        self.generation = generation              # metadata.generation bumps on spec change
        self.categories = list(categories)
        self.verbs = list(verbs)
        self.crd = crd                            # a custom resource: no strategic merge patch
        self.subresources = list(subresources)    # served besides /status (CSRs' /approval)
        self.singular = kind.lower()
        self.gv = f"{group}/{version}" if group else version
        self.id = f"{self.gv}/{plural}"
        self.prefix = f"/apis/{self.gv}" if group else f"/api/{version}"
        self.qualified = f"{plural}.{group}" if group else plural   # as in error messages

    def key(self, ns, name):
        return f"{ns}/{name}" if self.namespaced else name

    def __repr__(self):
        return f"<Resource {self.id}>"


RESOURCES = [
    Resource("", "v1", "pods", "Pod", True, ["po"], status=True, categories=["all"]),
    Resource("", "v1", "nodes", "Node", False, ["no"], status=True),
    Resource("", "v1", "services", "Service", True, ["svc"], status=True, categories=["all"]),
    Resource("", "v1", "endpoints", "Endpoints", True, ["ep"], create_on_update=True),
    Resource("", "v1", "configmaps", "ConfigMap", True, ["cm"]),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "namespaces", "Namespace", False, ["ns"], status=True,
             verbs=[v for v in ALL_VERBS if v != "deletecollection"]),
    Resource("", "v1", "events", "Event", True, ["ev"], create_on_update=True),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, ["sa"]),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True, create_on_update=True),
    Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    Resource("events.k8s.io", "v1", "events", "Event", True, ["ev"], create_on_update=True),
    Resource("apps", "v1", "deployments", "Deployment", True, ["deploy"], status=True,
             generation=True, categories=["all"]),
    # /approval takes the Approved/Denied conditions, /status the signer's certificate
    Resource("certificates.k8s.io", "v1", "certificatesigningrequests",
             "CertificateSigningRequest", False, ["csr"], status=True,
             subresources=["approval"]),
    Resource("example.com", "v1", "widgets", "Widget", True, ["wd"], status=True,
             generation=True, categories=["all"], crd=True),
    # OpenYurt's CRDs that the hub's filters read (cluster-scoped, as in openyurt's
    # kubebuilder markers); one group, two versions: discovery prefers v1beta2
    Resource("apps.openyurt.io", "v1beta2", "nodepools", "NodePool", False, ["np"], status=True,
             generation=True, categories=["yurt"], crd=True),
    Resource("apps.openyurt.io", "v1alpha1", "nodebuckets", "NodeBucket", False, ["nb"],
             status=True, generation=True, categories=["yurt"], crd=True),
]
BY_GV = {}                                     # gv -> {plural: Resource}
BY_KIND = {}                                   # (apiVersion, kind) -> Resource
for _r in RESOURCES:
    BY_GV.setdefault(_r.gv, {})[_r.plural] = _r
    BY_KIND[(_r.gv, _r.kind)] = _r
GROUPS = []                                    # API groups in discovery order (core excluded)
for _r in RESOURCES:
    if _r.group and _r.group not in GROUPS:
        GROUPS.append(_r.group)
NAMESPACES = BY_GV["v1"]["namespaces"]
CONFIGMAPS = BY_GV["v1"]["configmaps"]
SECRETS = BY_GV["v1"]["secrets"]
PODS = BY_GV["v1"]["pods"]
CSRS = BY_GV["certificates.k8s.io/v1"]["certificatesigningrequests"]


# --------------------------------------------------------------------------------------------
# Errors (kube Status objects)
# --------------------------------------------------------------------------------------------

class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None, metadata=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers, self.metadata = details, headers or {}, metadata

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": self.metadata or {},
              "status": "Failure", "message": self.message, "reason": self.reason}
        if self.details:
            st["details"] = self.details
        st["code"] = self.code
        return st


def _details(rt, name):
    d = {"name": name}
    if rt.group:
        d["group"] = rt.group
    d["kind"] = rt.plural
    return d


def not_found(rt, name):
    return ApiError(404, "NotFound", f'{rt.qualified} "{name}" not found', _details(rt, name))


def already_exists(rt, name):
    return ApiError(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists',
                    _details(rt, name))


def conflict(rt, name, why="the object has been modified; please apply your changes to the "
                           "latest version and try again"):
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {rt.qualified} "{name}": '
                    f"{why}", _details(rt, name))


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def invalid(rt, name, msg):
    return ApiError(422, "Invalid", f'{rt.kind} "{name}" is invalid: {msg}',
                    dict(_details(rt, name), kind=rt.kind))


def expired(msg, metadata=None):
    return ApiError(410, "Expired", msg, metadata=metadata)


PAGE_NOT_FOUND = ApiError(404, "NotFound", "the server could not find the requested resource",
                          {})
METHOD_NOT_ALLOWED = ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                              "the requested resource")


# --------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^({_NAME}/)?{_NAME}$")
_SET_RE = re.compile(r"^(\S+?)\s+(in|notin)\s*\((.*)\)$")


def _split_top(s):
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_label_selector(s):
    reqs = []
    for part in _split_top(s or ""):
        part = part.strip()
        if not part:
            continue
        m = _SET_RE.match(part)
        if m:
            key, op = m.group(1), m.group(2)
            vals = {v.strip() for v in m.group(3).split(",")}
            if vals == {""}:
                raise bad_request(f"unable to parse requirement: for '{op}', 'notin' operators, "
                                  "values set can't be empty")
        elif part.startswith("!"):
            key, op, vals = part[1:].strip(), "!", None
        else:
            for sym, op in (("!=", "!="), ("==", "="), ("=", "="), (">", "gt"), ("<", "lt")):
                if sym in part:
                    key, vals = (x.strip() for x in part.split(sym, 1))
                    break
            else:
                key, op, vals = part, "exists", None
            if op in ("gt", "lt"):
                try:
                    vals = int(vals)
                except ValueError:
                    raise bad_request("unable to parse requirement: invalid integer value "
                                      f"{vals!r}")
        if not _LABEL_KEY.match(key):
            raise bad_request(f"unable to parse requirement: invalid label key {key!r}")
        reqs.append((key, op, vals))
    return reqs


def labels_match(reqs, labels):
    for key, op, v in reqs:
        has = key in labels
        val = labels.get(key)
        if op == "=":
            ok = has and val == v
        elif op == "!=":
            ok = not has or val != v
        elif op == "in":
            ok = has and val in v
        elif op == "notin":
            ok = not has or val not in v
        elif op == "exists":
            ok = has
        elif op == "!":
            ok = not has
        else:
            try:
                ok = has and (int(val) > v if op == "gt" else int(val) < v)
            except ValueError:
                ok = False
        if not ok:
            return False
    return True


def parse_field_selector(s):
    reqs = []
    for part in (s or "").split(","):
        part = part.strip()
        if not part:
            continue
        for sym, op in (("!=", "!="), ("==", "="), ("=", "=")):
            if sym in part:
                path, val = (x.strip() for x in part.split(sym, 1))
                reqs.append((path.split("."), op, val))
                break
        else:
            raise bad_request(f"invalid selector: '{s}'; can't understand '{part}'")
    return reqs


def field_value(obj, path):
    cur = obj
    for p in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(reqs, obj):
    for path, op, val in reqs:
        if (field_value(obj, path) == val) != (op == "="):
            return False
    return True


# The fields kube-apiserver lets clients select on (its core/v1 field label
# conversions); other core resources get the default, metadata.name and
# metadata.namespace.  Other groups are not checked here.
_CORE_FIELD_LABELS = {
    "pods": {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
             "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
             "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"},
    "nodes": {"metadata.name", "spec.unschedulable"},
    "replicationcontrollers": {"metadata.name", "metadata.namespace", "status.replicas"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion",
               "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
               "reportingComponent", "source", "type", "metadata.namespace", "metadata.name"},
    "namespaces": {"status.phase", "metadata.name"},
    "secrets": {"type", "metadata.namespace", "metadata.name"},
    "services": {"metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"},
}


def check_field_labels(rt, reqs):
    if rt.group:
        return
    known = _CORE_FIELD_LABELS.get(rt.plural)
    for path, _, _ in sorted(reqs):
        label = ".".join(path)
        if known is not None and label not in known:
            raise bad_request(f"field label not supported: {label}")
        if known is None and label not in ("metadata.name", "metadata.namespace"):
            raise bad_request(f'"{label}" is not a known field selector: only '
                              '"metadata.name", "metadata.namespace"')


class Matcher:
    """Which objects a list or watch request covers."""

    def __init__(self, rt, ns, name, label_sel, field_sel):
        self.rt, self.ns, self.name = rt, ns, name
        self.labels = parse_label_selector(label_sel)
        self.fields = parse_field_selector(field_sel)
        check_field_labels(rt, self.fields)

    @property
    def filtered(self):
        return bool(self.labels or self.fields or self.name)

    def match(self, obj):
        md = obj.get("metadata") or {}
        if self.ns and md.get("namespace") != self.ns:
            return False
        if self.name and md.get("name") != self.name:
            return False
        if self.labels and not labels_match(self.labels, md.get("labels") or {}):
            return False
        return not self.fields or fields_match(self.fields, obj)


# --------------------------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------------------------

def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# lists merged element by element in a strategic merge patch, by field name -> merge key
SMP_MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "env": "name", "imagePullSecrets": "name", "volumeMounts": "mountPath",
    "conditions": "type", "addresses": "type", "ownerReferences": "uid", "hostAliases": "ip",
    "containerStatuses": "name", "initContainerStatuses": "name", "podIPs": "ip",
    "hostIPs": "ip", "volumeDevices": "devicePath", "resourceClaims": "name",
}
SMP_PRIMITIVE_MERGE = {"finalizers"}


def _strip_directives(v):
    if isinstance(v, dict):
        return {k: _strip_directives(x) for k, x in v.items() if not k.startswith("$")}
    if isinstance(v, list):
        return [_strip_directives(x) for x in v]
    return v


def strategic_merge_patch(target, patch):
    """Strategic merge patch, simplified: a merge patch whose lists of maps with a known merge key
    (containers by name, ports by containerPort/port, ...) merge element-wise; $patch
    delete/replace, $deleteFromPrimitiveList and $retainKeys are honoured, other directives
    ($setElementOrder, ...) are dropped."""
    if not isinstance(patch, dict):
        return _strip_directives(patch)
    if patch.get("$patch") == "replace":
        return _strip_directives(patch)
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain or k in patch}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(result.get(f), list):
                result[f] = [x for x in result[f] if x not in v]
            continue
        if k.startswith("$"):
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            r = strategic_merge_patch(result.get(k), v)
            if r is None:
                result.pop(k, None)
            else:
                result[k] = r
        elif isinstance(v, list):
            result[k] = _smp_list(k, result.get(k), v)
        else:
            result[k] = v
    return result


def _smp_list(field, cur, plist):
    cur = cur if isinstance(cur, list) else []
    if field in SMP_PRIMITIVE_MERGE and not any(isinstance(x, (dict, list)) for x in plist):
        return cur + [x for x in plist if x not in cur]
    if not plist or not all(isinstance(x, dict) for x in plist):
        return _strip_directives(plist)
    key = SMP_MERGE_KEYS.get(field)
    if field == "ports":
        key = "containerPort" if any("containerPort" in x for x in plist + cur
                                     if isinstance(x, dict)) else "port"
    if key is None or any(x.get("$patch") == "replace" for x in plist):
        return [_strip_directives(x) for x in plist if x.get("$patch") != "replace"]
    result = [x for x in cur]
    for el in plist:
        idx = next((i for i, x in enumerate(result)
                    if isinstance(x, dict) and x.get(key) == el.get(key)), None)
        if el.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
        elif idx is not None:
            result[idx] = strategic_merge_patch(result[idx], el)
        else:
            result.append(_strip_directives(el))
    return result


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts):
    cur = doc
    for p in parts:
        if isinstance(cur, list):
            cur = cur[int(p)]
        elif isinstance(cur, dict):
            cur = cur[p]
        else:
            raise KeyError(p)
    return cur


def json_patch(doc, ops):
    """RFC 6902 JSON patch."""
    if not isinstance(ops, list):
        raise ValueError("a JSON patch must be a list of operations")
    for op in ops:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))

        def remove(parts):
            parent = _walk(doc, parts[:-1])
            if isinstance(parent, list):
                return parent.pop(int(parts[-1]))
            return parent.pop(parts[-1])

        def add(parts, value):
            nonlocal doc
            if not parts:
                doc = value
                return
            parent = _walk(doc, parts[:-1])
            last = parts[-1]
            if isinstance(parent, list):
                idx = len(parent) if last == "-" else int(last)
                if idx < 0 or idx > len(parent):
                    raise IndexError(last)
                parent.insert(idx, value)
            elif isinstance(parent, dict):
                parent[last] = value
            else:
                raise KeyError(last)

        if kind == "add":
            add(parts, op["value"])
        elif kind == "remove":
            remove(parts)
        elif kind == "replace":
            _walk(doc, parts)          # must exist
            if parts:
                remove(parts)
            add(parts, op["value"])
        elif kind in ("move", "copy"):
            src = _pointer(op["from"])
            value = remove(src) if kind == "move" else json.loads(json.dumps(_walk(doc, src)))
            add(parts, value)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise ValueError(f"test operation failed at {op.get('path')}")
        else:
            raise ValueError(f"unknown JSON patch operation {kind!r}")
    return doc


# --------------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------------

class Entry:
    """A stored object and its cached JSON. Never mutated once stored."""
    __slots__ = ("obj", "data")

    def __init__(self, obj):
        self.obj = obj
        self.data = dumps(obj)


class Event:
    __slots__ = ("rv", "type", "rid", "key", "entry", "old")

    def __init__(self, rv, etype, rid, key, entry, old):
        self.rv, self.type, self.rid, self.key = rv, etype, rid, key
        self.entry, self.old = entry, old


def copy_obj(entry):
    return json.loads(entry.data)


def encode_continue(rv, start):
    raw = dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token):
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        d = json.loads(raw)
        if d.get("v") != "meta.k8s.io/v1":
            raise ValueError("unknown version")
        return int(d["rv"]), str(d["start"])
    except Exception as e:  # noqa: BLE001 - any garbage is a bad token
        raise bad_request(f"continue key is not valid: {e}")


class Store:
    """All objects, the resourceVersion counter and the event history, behind one condition.

    Every write bumps the global rv, stamps it on the object and appends an Event (with the
    previous version, so that watches can compute selector transitions and lists can rebuild an
    older snapshot for continue tokens). The history keeps the last `history` events; `floor` is
    the rv below which nothing can be replayed (older rvs get 410 Expired)."""

    def __init__(self, history=2000, start_rv=1000):
        self.cond = threading.Condition()
        self.rv = start_rv
        self.floor = start_rv
        self.history_size = history
        self.history, self.history_rvs = [], []
        self.objects = {r.id: {} for r in RESOURCES}
        self.sorted_keys = {}
        self.ip_counter = 100
        # controllers: hook(rt, key, etype, entry, old entry or None), called after each commit
        # with the lock held; a hook may commit in turn (the CSR signer, the bootstrap signer)
        self.hooks = []

    # -- internals (lock held) --

    def _keys(self, rid):
        keys = self.sorted_keys.get(rid)
        if keys is None:
            keys = self.sorted_keys[rid] = sorted(self.objects[rid])
        return keys

    def _commit(self, rt, key, obj, etype):
        """Store obj (None for DELETED) under key; returns the new Entry."""
        self.rv += 1
        objs = self.objects[rt.id]
        old = objs.get(key)
        if etype == "DELETED":
            obj = copy_obj(old)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        entry = Entry(obj)
        if etype == "DELETED":
            del objs[key]
        else:
            objs[key] = entry
        if etype != "MODIFIED":                 # the set of keys changed
            self.sorted_keys.pop(rt.id, None)
        self.history.append(Event(self.rv, etype, rt.id, key, entry, old))
        self.history_rvs.append(self.rv)
        if len(self.history) > self.history_size:
            cut = len(self.history) - self.history_size
            self.floor = self.history_rvs[cut - 1]
            del self.history[:cut]
            del self.history_rvs[:cut]
        self.cond.notify_all()
        for hook in self.hooks:
            hook(rt, key, etype, entry, old)
        return entry

    def _snapshot(self, rt, rv):
        """{key: Entry} of rt as it was at rv (rv >= floor), and its sorted keys."""
        if rv >= self.rv:
            return self.objects[rt.id], self._keys(rt.id)
        if rv < self.floor:
            raise expired(f"too old resource version: {rv} ({self.floor})")
        objs = dict(self.objects[rt.id])
        i = bisect.bisect_right(self.history_rvs, rv)
        for ev in reversed(self.history[i:]):
            if ev.rid != rt.id:
                continue
            if ev.type == "ADDED":
                objs.pop(ev.key, None)
            else:
                objs[ev.key] = ev.old
        return objs, sorted(objs)

    def _finalize_meta(self, rt, obj, old):
        md = obj["metadata"]
        omd = old.obj["metadata"]
        for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if f in omd:
                md[f] = omd[f]
            else:
                md.pop(f, None)
        md["name"] = omd["name"]
        if rt.namespaced:
            md["namespace"] = omd["namespace"]
        if rt.generation:
            gen = omd.get("generation", 1)
            md["generation"] = gen + 1 if obj.get("spec") != old.obj.get("spec") else gen

    # -- API operations --

    def get(self, rt, ns, name):
        with self.cond:
            return self.objects[rt.id].get(rt.key(ns, name))

    def list(self, rt, matcher, limit=0, cont="", rv="", rv_match=""):
        """Returns (item bytes list, list rv, continue token or "", remainingItemCount or None)."""
        with self.cond:
            start = ""
            if cont:
                list_rv, start = decode_continue(cont)
                if list_rv <= 0:
                    list_rv = self.rv
                elif list_rv < self.floor:
                    raise expired(
                        "The provided continue parameter is too old to display a consistent list "
                        "result. You can start a new list without the continue parameter, or use "
                        "the continue token in this response to retrieve the remainder of the "
                        "results. Continuing with the provided token results in an inconsistent "
                        "list - objects that were created, modified, or deleted between the time "
                        "the first chunk was returned and now may show up in the list.",
                        metadata={"continue": encode_continue(-1, start)})
            elif rv in ("", "0"):
                list_rv = self.rv
                if rv == "0":
                    limit = 0          # served from the "watch cache": limit is ignored
            else:
                try:
                    want = int(rv)
                except ValueError:
                    raise bad_request(f'invalid resource version "{rv}"')
                deadline = time.monotonic() + TOO_LARGE_RV_WAIT
                while self.rv < want and time.monotonic() < deadline:
                    self.cond.wait(deadline - time.monotonic())
                if self.rv < want:
                    causes = [{"reason": "ResourceVersionTooLarge",
                               "message": "Too large resource version"}]
                    raise ApiError(504, "Timeout", f"Too large resource version: {want}, "
                                   f"current: {self.rv}",
                                   {"causes": causes, "retryAfterSeconds": 1},
                                   headers={"Retry-After": "1"})
                list_rv = want if rv_match == "Exact" else self.rv
            objs, keys = self._snapshot(rt, list_rv)
            i = bisect.bisect_left(keys, start) if start else 0
            if matcher.ns and not start:
                i = bisect.bisect_left(keys, matcher.ns + "/")
            items, last, more = [], None, False
            for key in keys[i:]:
                e = objs[key]
                if matcher.ns and not key.startswith(matcher.ns + "/"):
                    if key > matcher.ns + "/":
                        break
                    continue
                if not matcher.match(e.obj):
                    continue
                if limit and len(items) >= limit:
                    more = True
                    break
                items.append(e.data)
                last = key
            token, remaining = "", None
            if more:
                token = encode_continue(list_rv, last + "\x00")
                if not matcher.filtered and not matcher.ns:
                    remaining = len(keys) - bisect.bisect_right(keys, last)
            return items, list_rv, token, remaining

    def snapshot_for_watch(self, rt, matcher):
        with self.cond:
            objs, keys = self.objects[rt.id], self._keys(rt.id)
            return [objs[k] for k in keys if matcher.match(objs[k].obj)], self.rv

    def events_after(self, cursor):
        """Events with rv > cursor; None if they are no longer in the history. Lock held."""
        if cursor < self.floor:
            return None
        i = bisect.bisect_right(self.history_rvs, cursor)
        return self.history[i:]

    def namespace_exists(self, ns):
        with self.cond:
            return ns in self.objects[NAMESPACES.id]

    def create(self, rt, obj, dry_run=False):
        with self.cond:
            md = obj["metadata"]
            if not md.get("name") and md.get("generateName"):
                while True:
                    md["name"] = md["generateName"] + "".join(
                        random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
                    if rt.key(md.get("namespace"), md["name"]) not in self.objects[rt.id]:
                        break
            key = rt.key(md.get("namespace"), md["name"])
            if key in self.objects[rt.id]:
                raise already_exists(rt, md["name"])
            self._defaults(rt, obj)
            if dry_run:
                return Entry(obj)
            return self._commit(rt, key, obj, "ADDED")

    def _defaults(self, rt, obj):
        md = obj["metadata"]
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_ts()
        for f in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            md.pop(f, None)
        if rt.generation:
            md["generation"] = 1
        if rt.kind == "Pod" and not obj.get("status"):
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif rt.kind == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
        elif rt.kind == "Service":
            spec = obj.setdefault("spec", {})
            if not spec.get("clusterIP") and spec.get("type") != "ExternalName":
                self.ip_counter += 1
                spec["clusterIP"] = f"10.96.{self.ip_counter // 250}.{self.ip_counter % 250 + 1}"
                spec["clusterIPs"] = [spec["clusterIP"]]
            spec.setdefault("type", "ClusterIP")

    def update(self, rt, ns, name, fn, sub=None, dry_run=False, check_rv=True, prepare=None):
        """Read-modify-write: fn(current obj copy or None) -> new obj. Returns (Entry, created).

        prepare(old obj copy, new obj) -> obj, when given, replaces the generic handling of
        status and subresources (a resource's own update strategy, as for CSRs)."""
        with self.cond:
            key = rt.key(ns, name)
            old = self.objects[rt.id].get(key)
            obj = fn(copy_obj(old) if old else None)
            md = obj.setdefault("metadata", {})
            if old is None:
                if not rt.create_on_update or sub:
                    raise not_found(rt, name)
                md["name"], md["namespace"] = name, ns
                if not rt.namespaced:
                    md.pop("namespace", None)
                self._defaults(rt, obj)
                return (Entry(obj) if dry_run else self._commit(rt, key, obj, "ADDED")), True
            want = md.get("resourceVersion")
            if check_rv and want and want != old.obj["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if prepare is not None:
                obj = prepare(copy_obj(old), obj)
            elif sub == "status":
                status = obj.get("status")
                obj = copy_obj(old)
                if status is None:
                    obj.pop("status", None)
                else:
                    obj["status"] = status
            elif rt.status:
                if "status" in old.obj:
                    obj["status"] = old.obj["status"]
                else:
                    obj.pop("status", None)
            self._finalize_meta(rt, obj, old)
            if dry_run:
                return Entry(obj), False
            if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
                return self._commit(rt, key, None, "DELETED"), False
            return self._commit(rt, key, obj, "MODIFIED"), False

    def delete(self, rt, ns, name, preconditions=None, dry_run=False):
        with self.cond:
            key = rt.key(ns, name)
            old = self.objects[rt.id].get(key)
            if old is None:
                raise not_found(rt, name)
            md = old.obj["metadata"]
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != md.get("uid"):
                raise conflict(rt, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                               f"UID in object meta: {md.get('uid')}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != md["resourceVersion"]:
                raise conflict(rt, name, "Precondition failed: ResourceVersion in precondition: "
                               f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                               f"{md['resourceVersion']}")
            if dry_run:
                return old
            if md.get("finalizers"):
                if md.get("deletionTimestamp"):
                    return old
                obj = copy_obj(old)
                obj["metadata"]["deletionTimestamp"] = now_ts()
                obj["metadata"]["deletionGracePeriodSeconds"] = 0
                return self._commit(rt, key, obj, "MODIFIED")
            if rt is NAMESPACES:            # the namespace controller's work, done at once
                for other in RESOURCES:
                    if other.namespaced:
                        for k in [k for k in self.objects[other.id] if k.startswith(name + "/")]:
                            self._commit(other, k, None, "DELETED")
            return self._commit(rt, key, None, "DELETED")

    # -- control-port operations (no admission, no preconditions) --

    def put_raw(self, obj):
        rt = BY_KIND.get((obj.get("apiVersion"), obj.get("kind")))
        if rt is None:
            raise bad_request(f"unknown apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')}")
        md = obj.setdefault("metadata", {})
        if not md.get("name"):
            raise bad_request("metadata.name is required")
        if rt.namespaced:
            md.setdefault("namespace", "default")
        else:
            md.pop("namespace", None)
        with self.cond:
            key = rt.key(md.get("namespace"), md["name"])
            old = self.objects[rt.id].get(key)
            if old is None:
                md.setdefault("uid", str(uuid.uuid4()))
                md.setdefault("creationTimestamp", now_ts())
                if rt.generation:
                    md.setdefault("generation", 1)
                return self._commit(rt, key, obj, "ADDED")
            omd = old.obj["metadata"]
            md.setdefault("uid", omd.get("uid"))
            md.setdefault("creationTimestamp", omd.get("creationTimestamp"))
            return self._commit(rt, key, obj, "MODIFIED")

    def delete_raw(self, rt, ns, name):
        with self.cond:
            key = rt.key(ns, name)
            if key not in self.objects[rt.id]:
                raise not_found(rt, name)
            return self._commit(rt, key, None, "DELETED")

    def compact(self):
        with self.cond:
            self.history.clear()
            self.history_rvs.clear()
            self.floor = self.rv
            self.cond.notify_all()
            return self.rv


# --------------------------------------------------------------------------------------------
# Seed data: a small realistic cluster, and N bulk pods
# --------------------------------------------------------------------------------------------

FAKE_CA = ("-----BEGIN CERTIFICATE-----\n" + "\n".join(
    base64.b64encode(hashlib.sha512(b"ca%d" % i).digest()).decode()[:64] for i in range(12))
    + "\n-----END CERTIFICATE-----\n")


def _h(*parts, n=10):
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:n]


_ALNUM = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(i):
    """A 5-character pod-name suffix, unique for i < 27**5 (a bijection of i)."""
    n, out = (i * 7919 + 4242) % 27 ** 5, ""
    for _ in range(5):
        n, d = divmod(n, 27)
        out += _ALNUM[d]
    return out


def _uid(*parts):
    return str(uuid.UUID(hashlib.md5("/".join(map(str, parts)).encode()).hexdigest()))


def _meta(name, ns=None, labels=None, annotations=None, age=86400, owner=None):
    md = {"name": name}
    if ns:
        md["namespace"] = ns
    md["uid"] = _uid(ns, name)
    md["creationTimestamp"] = now_ts(-age)
    if labels:
        md["labels"] = labels
    if annotations:
        md["annotations"] = annotations
    if owner:
        kind, oname = owner
        md["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": oname,
                                  "uid": _uid("owner", ns, oname), "controller": True,
                                  "blockOwnerDeletion": True}]
    return md


def make_node(name, i):
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": _meta(name, labels={
            "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux", "openyurt.io/is-edge-worker": "true"},
            annotations={"node.alpha.kubernetes.io/ttl": "0",
                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"}),
        "spec": {"podCIDR": f"10.244.{i % 250}.0/24", "podCIDRs": [f"10.244.{i % 250}.0/24"]},
        "status": {
            "addresses": [{"type": "InternalIP", "address": f"127.0.1.{i % 250 + 1}"},
                          {"type": "Hostname", "address": name}],
            "allocatable": {"cpu": "4", "ephemeral-storage": "95069439022", "memory": "8045668Ki",
                            "pods": "110"},
            "capacity": {"cpu": "4", "ephemeral-storage": "103154Mi", "memory": "8148068Ki",
                         "pods": "110"},
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m,
                 "lastHeartbeatTime": now_ts(-10), "lastTransitionTime": now_ts(-86000)}
                for t, s, r, m in (
                    ("MemoryPressure", "False", "KubeletHasSufficientMemory",
                     "kubelet has sufficient memory available"),
                    ("DiskPressure", "False", "KubeletHasNoDiskPressure",
                     "kubelet has no disk pressure"),
                    ("PIDPressure", "False", "KubeletHasSufficientPID",
                     "kubelet has sufficient PID available"),
                    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"))],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": _uid("boot", name),
                         "containerRuntimeVersion": "containerd://1.7.22",
                         "kernelVersion": "6.1.0-27-amd64", "kubeProxyVersion": SERVER_VERSION,
                         "kubeletVersion": SERVER_VERSION, "machineID": _h("m", name, n=32),
                         "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "systemUUID": _uid("sys", name)},
        },
    }


def make_pod(ns, name, node, app, owner, ip, host_ip, phase="Running", image=None, env=4,
             host_network=False, labels=None):
    image = image or f"registry.example.com/{app}:1.{len(name) % 7}.2"
    tok = "kube-api-access-" + _h(ns, name, n=5)
    started = now_ts(-3600)
    running = phase == "Running"
    lbl = {"app": app}
    if owner[0] == "ReplicaSet":
        lbl["pod-template-hash"] = owner[1].rsplit("-", 1)[-1]
    else:
        lbl["controller-revision-hash"] = _h(owner[1], n=10)
    lbl.update(labels or {})
    cond = [{"type": t, "status": "True" if running or t == "PodScheduled" else "False",
             "lastProbeTime": None, "lastTransitionTime": started}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                      "PodScheduled")]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": dict(_meta(name, ns, lbl, owner=owner, age=3700),
                         generateName=owner[1] + "-"),
        "spec": {
            "containers": [{
                "name": app, "image": image, "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": "metadata.name"}}},
                        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {
                            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}}]
                + [{"name": f"{app.upper().replace('-', '_')}_SETTING_{k}", "value": f"value-{k}"}
                   for k in range(env)],
                "resources": {"limits": {"memory": "256Mi"},
                              "requests": {"cpu": "100m", "memory": "128Mi"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                  "name": tok, "readOnly": True}],
            }],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": True, "hostNetwork": host_network,
            "nodeName": node, "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
            "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {}, "serviceAccount": "default", "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"effect": "NoExecute", "key": k, "operator": "Exists",
                             "tolerationSeconds": 300}
                            for k in ("node.kubernetes.io/not-ready",
                                      "node.kubernetes.io/unreachable")],
            "volumes": [{"name": tok, "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}],
                               "name": "kube-root-ca.crt"}},
                {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                                                         "fieldPath": "metadata.namespace"},
                                            "path": "namespace"}]}}]}}],
        },
        "status": {
            "phase": phase, "conditions": cond, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": ip, "podIPs": [{"ip": ip}], "qosClass": "Burstable", "startTime": started,
            "containerStatuses": [{
                "name": app, "image": image, "imageID": image.split(":")[0] + "@sha256:"
                + hashlib.sha256(image.encode()).hexdigest(),
                "containerID": "containerd://" + hashlib.sha256(name.encode()).hexdigest(),
                "ready": running, "restartCount": 0, "started": running, "lastState": {},
                "state": {"running": {"startedAt": started}} if running else
                {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                                "finishedAt": now_ts(-60)}},
            }],
        },
    }


def seed(store, mode, nodes, bulk_pods, api_port, pool=None):
    put = store.put_raw
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        put({"apiVersion": "v1", "kind": "Namespace",
             "metadata": _meta(ns, labels={"kubernetes.io/metadata.name": ns}),
             "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    if mode == "sample":
        seed_sample(store, nodes, api_port, pool)
    if bulk_pods:
        seed_bulk(store, bulk_pods, nodes)
    store.compact()            # like a fresh apiserver: nothing older than now can be replayed


def seed_sample(store, nodes, api_port, pool=None):
    put = store.put_raw
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        put({"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": _meta("kube-root-ca.crt", ns, annotations={
                 "kubernetes.io/description": "Contains a CA bundle that can be used to verify "
                 "the kube-apiserver when using internal endpoints such as the internal service "
                 "IP or kubernetes.default.svc. No other usage is guaranteed across "
                 "distributions of Kubernetes clusters."}),
             "data": {"ca.crt": FAKE_CA}})
        put({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("default", ns)})
    put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("coredns", "kube-system"),
         "data": {"Corefile": ".:53 {\n    errors\n    health\n    ready\n    kubernetes "
                  "cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       "
                  "fallthrough in-addr.arpa ip6.arpa\n    }\n    forward . /etc/resolv.conf\n"
                  "    cache 30\n    loop\n    reload\n}\n"}})
    put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("kube-proxy", "kube-system",
                                                                     labels={"app": "kube-proxy"}),
         "data": {"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
                  "kind: KubeProxyConfiguration\nmode: iptables\n"}})
    put({"apiVersion": "v1", "kind": "Secret", "metadata": _meta("app-credentials", "default"),
         "type": "Opaque", "data": {"username": base64.b64encode(b"admin").decode(),
                                    "password": base64.b64encode(b"s3cr3t").decode()}})
    dns_ips = []
    for i, node in enumerate(nodes):
        n = make_node(node, i)
        if pool:
            n["metadata"]["labels"]["apps.openyurt.io/nodepool"] = pool
        put(n)
        host_ip = f"127.0.1.{i % 250 + 1}"
        put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": dict(_meta(node, "kube-node-lease"), ownerReferences=[{
                 "apiVersion": "v1", "kind": "Node", "name": node, "uid": _uid(None, node)}]),
             "spec": {"holderIdentity": node, "leaseDurationSeconds": 40,
                      "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}})
        put(make_pod("kube-system", f"kube-proxy-{_h(node, n=5)}", node, "kube-proxy",
                     ("DaemonSet", "kube-proxy"), host_ip, host_ip, host_network=True,
                     image=f"registry.k8s.io/kube-proxy:{SERVER_VERSION}", env=1,
                     labels={"k8s-app": "kube-proxy"}))
        put(make_pod("default", f"web-{_h('web', n=10)}-{_h(node, n=5)}", node, "web",
                     ("ReplicaSet", "web-" + _h("web", n=10)), f"10.244.{i % 250}.10", host_ip,
                     labels={"tier": "frontend"}))
        if i < 2:
            ip = f"10.244.{i % 250}.2"
            dns_ips.append((ip, node, f"coredns-6f6b679f8f-{_h('dns', node, n=5)}"))
            put(make_pod("kube-system", dns_ips[-1][2], node, "coredns",
                         ("ReplicaSet", "coredns-6f6b679f8f"), ip, host_ip,
                         image="registry.k8s.io/coredns/coredns:v1.11.3", env=0,
                         labels={"k8s-app": "kube-dns"}))
    put({"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": dict(_meta("coredns", "kube-system", {"k8s-app": "kube-dns"}), generation=1),
         "spec": {"replicas": len(dns_ips), "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                  "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}}, "spec": {
                      "containers": [{"name": "coredns",
                                      "image": "registry.k8s.io/coredns/coredns:v1.11.3"}]}}},
         "status": {"replicas": len(dns_ips), "readyReplicas": len(dns_ips),
                    "availableReplicas": len(dns_ips), "observedGeneration": 1}})
    # the API server's own service, pointing at this double
    put({"apiVersion": "v1", "kind": "Service",
         "metadata": _meta("kubernetes", "default", {"component": "apiserver",
                                                     "provider": "kubernetes"}),
         "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "type": "ClusterIP",
                  "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                             "targetPort": api_port}], "sessionAffinity": "None"},
         "status": {"loadBalancer": {}}})
    put({"apiVersion": "v1", "kind": "Endpoints",
         "metadata": _meta("kubernetes", "default", {"endpointslice.kubernetes.io/skip-mirror":
                                                     "true"}),
         "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                      "ports": [{"name": "https", "port": api_port, "protocol": "TCP"}]}]})
    put({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": _meta("kubernetes", "default", {"kubernetes.io/service-name": "kubernetes"}),
         "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"],
                                               "conditions": {"ready": True}}],
         "ports": [{"name": "https", "port": api_port, "protocol": "TCP"}]})
    dns_ports = [("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"), ("metrics", 9153, "TCP")]
    put({"apiVersion": "v1", "kind": "Service",
         "metadata": _meta("kube-dns", "kube-system", {"k8s-app": "kube-dns",
                                                       "kubernetes.io/name": "CoreDNS"}),
         "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "type": "ClusterIP",
                  "selector": {"k8s-app": "kube-dns"}, "sessionAffinity": "None",
                  "ports": [{"name": n, "port": p, "protocol": pr, "targetPort": p}
                            for n, p, pr in dns_ports]},
         "status": {"loadBalancer": {}}})
    put({"apiVersion": "v1", "kind": "Endpoints",
         "metadata": _meta("kube-dns", "kube-system", {"k8s-app": "kube-dns"}),
         "subsets": [{"addresses": [{"ip": ip, "nodeName": node, "targetRef": {
             "kind": "Pod", "name": pod, "namespace": "kube-system",
             "uid": _uid("kube-system", pod)}} for ip, node, pod in dns_ips],
             "ports": [{"name": n, "port": p, "protocol": pr} for n, p, pr in dns_ports]}]})
    put({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": _meta("kube-dns-" + _h("kube-dns", n=5), "kube-system", {
             "kubernetes.io/service-name": "kube-dns", "k8s-app": "kube-dns",
             "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}),
         "addressType": "IPv4",
         "endpoints": [{"addresses": [ip], "conditions": {"ready": True, "serving": True,
                                                          "terminating": False},
                        "nodeName": node, "targetRef": {"kind": "Pod", "name": pod,
                                                        "namespace": "kube-system"}}
                       for ip, node, pod in dns_ips],
         "ports": [{"name": n, "port": p, "protocol": pr} for n, p, pr in dns_ports]})
    put({"apiVersion": "v1", "kind": "Event",
         "metadata": _meta(f"{nodes[0]}.{_h('ev', n=16)}", "default", age=600),
         "involvedObject": {"kind": "Node", "name": nodes[0], "uid": nodes[0]},
         "reason": "NodeReady", "message": f"Node {nodes[0]} status is now: NodeReady",
         "source": {"component": "kubelet", "host": nodes[0]}, "type": "Normal", "count": 1,
         "firstTimestamp": now_ts(-600), "lastTimestamp": now_ts(-600)})
    for i, color in enumerate(("red", "green", "blue")):
        put({"apiVersion": "example.com/v1", "kind": "Widget",
             "metadata": dict(_meta(f"widget-{color}", "default", {"color": color}),
                              generation=1),
             "spec": {"size": i + 1, "color": color}, "status": {"ready": True}})
    if pool:
        seed_pool(store, pool, nodes)


def seed_pool(store, pool, nodes):
    """The NodePool of the nodes, as yurt-manager keeps it (status.nodes), and the NodeBucket its
    nodebucket controller makes of it (labelled with the pool's name, owned by the pool)."""
    put = store.put_raw
    put({"apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
         "metadata": dict(_meta(pool), generation=1),
         "spec": {"type": "Edge"},
         "status": {"readyNodeNum": len(nodes), "unreadyNodeNum": 0, "nodes": sorted(nodes)}})
    put({"apiVersion": "apps.openyurt.io/v1alpha1", "kind": "NodeBucket",
         "metadata": dict(_meta(f"{pool}-1", labels={"openyurt.io/pool-name": pool}),
                          generation=1, ownerReferences=[{
                              "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
                              "name": pool, "uid": _uid(None, pool), "controller": True,
                              "blockOwnerDeletion": True}]),
         "numNodes": len(nodes), "nodes": [{"name": n} for n in sorted(nodes)]})


def seed_bulk(store, n, nodes):
    nss = [f"bulk-{i:02d}" for i in range(10)]
    for ns in nss:
        store.put_raw({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": _meta(ns, labels={"kubernetes.io/metadata.name": ns}),
                       "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    workers = [f"worker-{i:03d}" for i in range(max(1, n // 100))]
    for i, w in enumerate(workers):
        store.put_raw(make_node(w, len(nodes) + i))
    all_nodes = list(nodes) + workers
    apps = ["api", "web", "worker", "cache", "billing", "search", "auth", "queue"]
    for i in range(n):
        ns = nss[i % len(nss)]
        app = apps[(i // len(nss)) % len(apps)]
        node_i = i % len(all_nodes)
        node = all_nodes[node_i]
        rs = f"{app}-{_h(ns, app, n=10)}"
        phase = "Succeeded" if i % 50 == 49 else ("Pending" if i % 97 == 96 else "Running")
        store.put_raw(make_pod(ns, f"{rs}-{_suffix(i)}", node, app, ("ReplicaSet", rs),
                               f"10.{64 + (i >> 16) % 64}.{(i >> 8) & 255}.{i & 255}",
                               f"127.0.1.{node_i % 250 + 1}", phase=phase, env=2,
                               labels={"tier": "backend" if i % 3 else "frontend",
                                       "release": f"r{i % 5}"}))


# --------------------------------------------------------------------------------------------
# Discovery and OpenAPI
# --------------------------------------------------------------------------------------------

def version_doc():
    major, minor = SERVER_VERSION.lstrip("v").split(".")[:2]
    return {"major": major, "minor": minor, "gitVersion": SERVER_VERSION,
            "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": "2025-04-22T16:03:10Z",
            "goVersion": "go1.23.6", "compiler": "gc", "platform": "linux/amd64"}


def api_versions_doc(port):
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{port}"}]}


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(v):
    """Sort key of a version as kube-apiserver orders a group's versions: GA before beta before
    alpha, then the higher number first (v2, v1, v1beta2, v1beta1, v1alpha1); other names last,
    in alphabetical order."""
    m = _VERSION_RE.match(v)
    if not m:
        return (1, 0, 0, 0, v)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (0, stage, -int(m.group(1)), -int(m.group(3) or 0), v)


def api_group_doc(group):
    versions = sorted({r.version for r in RESOURCES if r.group == group}, key=version_priority)
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": vs,
            "preferredVersion": vs[0]}


def api_group_list_doc():
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [{k: v for k, v in api_group_doc(g).items()
                        if k not in ("kind", "apiVersion")} for g in GROUPS]}


def resource_list_doc(gv):
    res = []
    for r in BY_GV[gv].values():
        d = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
             "kind": r.kind, "verbs": r.verbs}
        if r.short:
            d["shortNames"] = r.short
        if r.categories:
            d["categories"] = r.categories
        d["storageVersionHash"] = base64.b64encode(
            hashlib.sha256(r.id.encode()).digest()[:8]).decode()
        res.append(d)
        for sub in (["approval"] if "approval" in r.subresources else []) + (
                ["status"] if r.status else []):
            res.append({"name": f"{r.plural}/{sub}", "singularName": "",
                        "namespaced": r.namespaced, "kind": r.kind,
                        "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}


def _schema_name(r):
    if r.crd:                  # a CRD's schema is named by its reversed group
        return f"{'.'.join(reversed(r.group.split('.')))}.{r.version}.{r.kind}"
    short = r.group.split(".")[0] if r.group else "core"
    return f"io.k8s.api.{short}.{r.version}.{r.kind}"


def _query_params(names):
    return [{"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
            for n in names]


def _operation(r, action, params, body=None):
    schema = {"$ref": f"#/components/schemas/{_schema_name(r)}"}
    op = {"operationId": f"{action}{r.kind}", "parameters": _query_params(params),
          "responses": {"200": {"description": "OK",
                                "content": {"application/json": {"schema": schema}}}},
          "x-kubernetes-action": action,
          "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version,
                                              "kind": r.kind}}
    if body is not None:
        op["requestBody"] = {"content": {t: {"schema": body or schema} for t in
                                         (["application/json-patch+json",
                                           "application/merge-patch+json"] if body else ["*/*"])},
                             "required": True}
    return op


def openapi_gv_doc(gv):
    """A minimal OpenAPI v3 document for one group/version: for each kind an object schema
    carrying x-kubernetes-group-version-kind, and item paths whose PATCH operation lists the
    fieldValidation query parameter (which is what kubectl checks before `apply`). The PATCH
    request bodies do not list strategic-merge-patch, so kubectl computes strategic patches from
    its compiled-in types instead of from these (property-less) schemas."""
    meta = "io.k8s.apimachinery.pkg.apis.meta.v1."
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schemas = {meta + "ObjectMeta": loose, meta + "Status": loose,
               meta + "Patch": {"type": "object"}}
    patch_body = {"$ref": f"#/components/schemas/{meta}Patch"}
    paths = {}
    for r in BY_GV[gv].values():
        schemas[_schema_name(r)] = {
            "description": f"{r.kind} (schema reduced by the test double)", "type": "object",
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"$ref": f"#/components/schemas/{meta}ObjectMeta"}},
            "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-group-version-kind": [{"group": r.group, "version": r.version,
                                                 "kind": r.kind}]}
        path_params = [{"name": "name", "in": "path", "required": True,
                        "schema": {"type": "string"}}]
        if r.namespaced:
            path_params.append({"name": "namespace", "in": "path", "required": True,
                                "schema": {"type": "string"}})
        base = r.prefix + ("/namespaces/{namespace}/" if r.namespaced else "/") + r.plural
        write = ["dryRun", "fieldManager", "fieldValidation"]
        paths[base] = {
            "get": _operation(r, "list", ["labelSelector", "fieldSelector", "limit", "continue",
                                          "resourceVersion", "watch"]),
            "post": _operation(r, "post", write, body={}),
            "parameters": path_params[1:]}
        paths[base + "/{name}"] = {
            "get": _operation(r, "get", []),
            "delete": _operation(r, "delete", ["dryRun", "gracePeriodSeconds"]),
            "put": _operation(r, "put", write, body={}),
            "patch": _operation(r, "patch", write + ["force"], body=patch_body),
            "parameters": path_params}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": SERVER_VERSION},
            "paths": paths, "components": {"schemas": schemas}}


def _gv_path(gv):
    return f"apis/{gv}" if "/" in gv else f"api/{gv}"


OPENAPI_DOCS = {_gv_path(gv): dumps(openapi_gv_doc(gv)) for gv in BY_GV}
OPENAPI_ROOT = dumps({"paths": {p: {"serverRelativeURL": f"/openapi/v3/{p}?hash="
                                    + hashlib.sha512(d).hexdigest().upper()}
                                for p, d in OPENAPI_DOCS.items()}})


# --------------------------------------------------------------------------------------------
# Network gate: cut modes, connection tracking, request statistics, injected failures
# --------------------------------------------------------------------------------------------

class Gate:
    """The state of the API port: "open", "refuse" or "blackhole".

    Shares the store's condition so that watch loops wake up on a change."""

    def __init__(self, cond):
        self.cond = cond
        self.mode = "open"
        self.conns = set()            # holders of live API sockets
        self.requests = 0
        self.by_ua, self.by_path, self.by_verb = Counter(), Counter(), Counter()
        self.by_verb_path = Counter()
        self.by_client_cn = Counter()  # the CN of each request's client certificate
        self.by_bearer_user = Counter()      # requests authenticated by a bearer token, by user
        self.bearer_no_cert = Counter()      # requests with a bearer token and no client cert
        self.unauthorized = Counter()        # 401s, by path
        self.forbidden = Counter()           # 403s, by "user verb path"
        self.bytes_by_ua = Counter()         # response bytes written, headers included
        self.bytes_lock = threading.Lock()   # not cond: writes happen with or without it
        self.watches = 0
        self.faults = []              # [code, count, path_prefix]
        self.heads = deque(maxlen=HEADS_KEPT)  # (path, request line and headers as received)

    def hold(self):
        """Block while black-holed; True if the request may be answered."""
        with self.cond:
            while self.mode == "blackhole":
                self.cond.wait()
            return self.mode == "open"

    def track(self, holder):
        with self.cond:
            if self.mode == "refuse":
                return False
            self.conns.add(holder)
            return True

    def untrack(self, holder):
        with self.cond:
            self.conns.discard(holder)

    def adopt(self, holder, sock):
        """holder's connection is now sock, its TLS side, whose handshake is done; False if
        kill_all() ran during that handshake (the connection is then to be dropped)."""
        with self.cond:
            holder.sock = sock
            return not holder.killed

    def kill_all(self):
        """Shut down every open API connection (watches included) at once.  Exact: once it
        returns, nothing that came over a connection open before it is counted (see
        ConnHolder), which is what a test that switches the client CA relies on."""
        with self.cond:
            for holder in list(self.conns):
                holder.killed = True
                try:
                    fd = holder.sock.fileno()
                    if fd >= 0:
                        dup = socket.socket(fileno=os.dup(fd))
                        try:
                            dup.shutdown(socket.SHUT_RDWR)
                        finally:
                            dup.close()
                except OSError:
                    pass

    def count(self, ua, path, client_cn, holder):
        """Count a request (client_cn: its certificate's CN, None without one).  False, and
        nothing counted, when its connection has been killed: the request was read before
        the kill, its answer cannot be sent, and it must not show up after the kill."""
        with self.cond:
            if holder.killed:
                return False
            self.requests += 1
            self.by_ua[(ua or "").split("/")[0]] += 1
            self.by_path[path] += 1
            if client_cn is not None:
                self.by_client_cn[client_cn] += 1
            return True

    def record_head(self, path, head):
        with self.cond:
            self.heads.append((path, head))

    def heads_under(self, prefix):
        with self.cond:
            return [h for p, h in self.heads if p.startswith(prefix)]

    def count_bytes(self, ua, n):
        with self.bytes_lock:
            self.bytes_by_ua[(ua or "").split("/")[0]] += n

    def bytes_snapshot(self):
        with self.bytes_lock:
            return dict(self.bytes_by_ua)

    def count_in(self, counter, key):
        with self.cond:
            counter[key] += 1

    def reset(self):
        with self.cond:
            self.requests = 0
            for c in (self.by_ua, self.by_path, self.by_verb, self.by_verb_path, self.by_client_cn,
                      self.by_bearer_user, self.bearer_no_cert, self.unauthorized,
                      self.forbidden, self.heads):
                c.clear()
        with self.bytes_lock:
            self.bytes_by_ua.clear()

    def count_verb(self, verb, path):
        with self.cond:
            self.by_verb[verb] += 1
            self.by_verb_path[f"{verb} {path}"] += 1

    def take_fault(self, path):
        with self.cond:
            for f in self.faults:
                if path.startswith(f[2]) and f[1] > 0:
                    f[1] -= 1
                    if f[1] == 0:
                        self.faults.remove(f)
                    return f[0]
        return None


class ConnHolder:
    """An API connection, from its accept to its close.  killed is set by kill_all(), also
    while the TLS handshake is in flight: Python has then detached the accepted socket (its
    fileno() is -1) and the TLS socket is not there yet, so there is no fd to shut down;
    the connection is dropped when the handshake ends (Gate.adopt)."""
    __slots__ = ("sock", "killed")

    def __init__(self, sock):
        self.sock = sock
        self.killed = False


# --------------------------------------------------------------------------------------------
# Hostile answers: a broken or malicious API server, switched on per path from the control port
# --------------------------------------------------------------------------------------------

HOSTILE_MODES = ("names", "bad-json", "no-metadata", "cut", "hang", "trickle", "big",
                 "gzip-bomb", "gzip-items", "ctype", "headers")
BOMB_MEMBER = 64 << 20          # what one gzip member of a bomb inflates to
BOMB_DEFAULT = 4 << 30          # a bomb inflates to this much unless size= says otherwise
_bomb_members = {}              # fill byte -> one compressed member (~64 KB), built once
_bomb_lock = threading.Lock()


def bomb_member(fill):
    """A gzip member that inflates to BOMB_MEMBER bytes of fill (a one-byte bytes)."""
    with _bomb_lock:
        m = _bomb_members.get(fill)
        if m is None:
            z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            block = fill * (1 << 20)
            m = b"".join([z.compress(block) for _ in range(BOMB_MEMBER >> 20)] + [z.flush()])
            _bomb_members[fill] = m
        return m


ITEMS_MEMBER = 1 << 16          # copies of the object in one gzip member of gzip-items
_items_members = {}             # (object, copies) -> one compressed member, built once


def items_member(obj, copies):
    """A gzip member that inflates to copies of b"," + obj."""
    with _bomb_lock:
        m = _items_members.get((obj, copies))
        if m is None:
            z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            m = z.compress((b"," + obj) * copies) + z.flush()
            _items_members[(obj, copies)] = m
        return m


def hostile_target(path):
    """(apiVersion, kind, namespace, name) that a hostile answer for path pretends to be
    about; name is None for a collection."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 2:
        gv, rest = parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 3:
        gv, rest = parts[1] + "/" + parts[2], parts[3:]
    else:
        return "v1", "Unknown", None, None
    if rest[:1] == ["watch"]:
        rest = rest[1:]
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    rt = BY_GV.get(gv, {}).get(rest[0]) if rest else None
    return gv, rt.kind if rt else "Unknown", ns, rest[1] if len(rest) > 1 else None


class HostileLog:
    """Armed behaviours and what was served, under the gate's lock."""

    def __init__(self, cond):
        self.cond = cond
        self.armed = []               # dicts: mode, path, count (0: until disarmed), params
        self.served = []              # dicts: mode, path, bytes, sha256, outcome, seconds
        self.total = 0                # records ever served (served keeps the last 100)
        self.active = 0

    def arm(self, q):
        mode = q.get("mode", "")
        if mode not in HOSTILE_MODES:
            raise bad_request("mode must be one of " + ", ".join(HOSTILE_MODES))
        spec = {"mode": mode, "path": q.get("path", "/"), "count": int(q.get("count", 1)),
                "params": {k: v for k, v in q.items() if k not in ("mode", "path", "count")}}
        with self.cond:
            self.armed.append(spec)
        return spec

    def disarm(self):
        with self.cond:
            self.armed = []

    def take(self, path):
        with self.cond:
            for spec in self.armed:
                if path.startswith(spec["path"]):
                    if spec["count"] > 0:
                        spec["count"] -= 1
                        if spec["count"] == 0:
                            self.armed.remove(spec)
                    self.active += 1
                    return spec
        return None

    def done(self, record):
        with self.cond:
            self.active -= 1
            self.served.append(record)
            self.total += 1
            del self.served[:-100]

    def state(self):
        with self.cond:
            return {"armed": [dict(s) for s in self.armed], "served": list(self.served),
                    "total": self.total, "active": self.active}


class HostileAnswer:
    """One hostile answer, written straight to the handler's socket.

    The shape follows the request: watch events for a watch, an object for a path that names
    one, a list otherwise. sha256 and bytes are those of the body as sent (after gzip, before
    chunk framing), so a client can check that it got exactly that."""

    def __init__(self, handler, spec, q, path):
        self.h, self.spec, self.p = handler, spec, spec["params"]
        self.gv, self.kind, self.ns, self.name = hostile_target(path)
        self.watch = _truthy(q.get("watch")) or "/watch/" in path
        self.sha, self.bytes, self.outcome = hashlib.sha256(), 0, "done"
        self.t0 = time.monotonic()
        store = handler.server.store
        with store.cond:
            self.rv = store.rv

    # -- plumbing --

    def head(self, code=200, ctype="application/json", length=None, extra=()):
        h = self.h
        h.send_response(code)
        h.send_header("Audit-Id", str(uuid.uuid4()))
        h.send_header("Content-Type", ctype)
        for k, v in extra:
            h.send_header(k, v)
        if length is None:
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Content-Length", str(length))
        h.end_headers()
        h.wfile.flush()

    def body(self, data, chunked=False):
        self.sha.update(data)
        self.bytes += len(data)
        w = self.h.wfile
        if chunked and data:
            w.write(b"%x\r\n" % len(data))
        for i in range(0, len(data), 1 << 20):
            w.write(data[i:i + (1 << 20)])
        if chunked and data:
            w.write(b"\r\n")
        w.flush()

    def end_chunks(self):
        self.h.wfile.write(b"0\r\n\r\n")
        self.h.wfile.flush()

    def whole(self, data, ctype="application/json", extra=()):
        self.head(ctype=ctype, length=len(data), extra=extra)
        self.body(data)

    def obj(self, name, ns, extra=None):
        md = {"name": name, "resourceVersion": str(self.rv + 1)}
        if ns is not None:
            md["namespace"] = ns
        o = {"apiVersion": self.gv, "kind": self.kind, "metadata": md}
        o.update(extra or {})
        return dumps(o)

    def list_of(self, items):
        return (b'{"kind":"%sList","apiVersion":"%s","metadata":{"resourceVersion":"%d"},'
                b'"items":[' % (self.kind.encode(), self.gv.encode(), self.rv)
                + b",".join(items) + b"]}\n")

    def event(self, etype, obj):
        return b'{"type":"%s","object":%s}\n' % (etype.encode(), obj)

    def answer(self, objs, events=("ADDED",)):
        """objs as watch events, the first as the object, or all as a list."""
        if self.watch:
            self.head()
            for o in objs:
                for e in events:
                    self.body(self.event(e, o), chunked=True)
            self.end_chunks()
        elif self.name is not None:
            self.whole(objs[0] + b"\n")
        else:
            self.whole(self.list_of(objs))

    def wait_peer(self, seconds):
        """Hold the connection until the peer goes or seconds pass; True if it went."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.h.server.stopping:
            if self.h._peer_gone():
                self.outcome = "peer-gone"
                return True
            time.sleep(0.1)
        self.outcome = "timeout"
        return False

    # -- the behaviours --

    def send(self):
        try:
            getattr(self, "mode_" + self.spec["mode"].replace("-", "_"))()
        except CONN_ERRORS:
            self.outcome = "peer-gone"
        finally:
            self.h.close_connection = True
            self.h.server.hostile.done({
                "mode": self.spec["mode"], "path": self.spec["path"], "bytes": self.bytes,
                "sha256": self.sha.hexdigest(), "outcome": self.outcome,
                "seconds": round(time.monotonic() - self.t0, 3)})

    def mode_names(self):
        name = self.p.get("name", self.name or "hostile")
        ns = self.p.get("namespace", self.ns)
        self.answer([self.obj(name, ns, {"data": {"hostile": "names"}})],
                    events=("ADDED", "MODIFIED", "DELETED"))

    def mode_bad_json(self):
        junk = (b'{"kind":"%sList","items":[{"metadata":{"name":"bad","namespace":"x"}},,'
                b'{"metadata":{"name":\x01}}]}' % self.kind.encode())
        if self.watch:
            self.head()
            self.body(b'{"type":"ADDED","object":{"metadata":{"name":"bad"}}}\n{"type":,]\n',
                      chunked=True)
            self.end_chunks()
        else:
            self.whole(junk + b"\n")

    def mode_no_metadata(self):
        objs = [b'{}', b'{"kind":"%s","data":{"a":"b"}}' % self.kind.encode(),
                b'{"metadata":null}', b'{"metadata":"name"}', b'{"metadata":{"name":7}}',
                b'{"metadata":{"namespace":"default"}}']
        self.answer(objs)

    def mode_cut(self):
        """Half of the body, then the connection closes."""
        if self.watch:
            self.head()
            self.body(self.event("ADDED", self.obj("cut-0", self.ns)), chunked=True)
            half = self.event("ADDED", self.obj("cut-1", self.ns))
            half = half[:len(half) // 2]
            self.h.wfile.write(b"%x\r\n" % (2 * len(half)))
            self.body(half)
        else:
            objs = [self.obj("cut-%d" % i, self.ns, {"data": {"k": "v" * 100}})
                    for i in range(20)]
            data = objs[0] + b"\n" if self.name is not None else self.list_of(objs)
            self.head(length=len(data))
            self.body(data[:len(data) // 2])
        self.outcome = "cut"

    def mode_hang(self):
        """Headers, then nothing until the peer goes (or seconds= pass)."""
        self.head(length=None if self.watch else 4096)
        self.wait_peer(float(self.p.get("seconds", 120)))

    def mode_trickle(self):
        """A byte every interval= seconds of a body that would take forever."""
        interval = float(self.p.get("interval", 0.5))
        deadline = time.monotonic() + float(self.p.get("seconds", 120))
        prefix = self.list_of([])[:-4] if not self.watch else b""
        self.head(length=None if self.watch else 1 << 30)
        data = prefix + b" " * (1 << 20)
        for i in range(len(data)):
            if time.monotonic() >= deadline:
                self.outcome = "timeout"
                return
            self.body(data[i:i + 1], chunked=self.watch)
            if self.wait_peer(interval):
                return
        self.outcome = "done"

    def mode_big(self):
        """A size= byte body (default 200 MB): one huge object (item= 0) or items of item=
        bytes each."""
        size = int(self.p.get("size", 200 << 20))
        item = int(self.p.get("item", 0))
        if self.watch:
            o = self.obj("big-0", self.ns, {"data": {"k": ""}})
            pad = max(0, size - len(self.event("ADDED", o)))
            self.head()
            self.body(self.event("ADDED", o.replace(b'"k":""', b'"k":"' + b"x" * pad + b'"')),
                      chunked=True)
            self.end_chunks()
            return
        if self.name is not None or item <= 0:
            o = self.obj("big-0", self.ns, {"data": {"k": ""}})
            envelope = o + b"\n" if self.name is not None else self.list_of([o])
            pad = max(0, size - len(envelope))
            self.whole(envelope.replace(b'"k":""', b'"k":"' + b"x" * pad + b'"', 1))
            return
        objs, total = [], 0
        while total < size:
            o = self.obj("big-%d" % len(objs), self.ns, {"data": {"k": ""}})
            o = o.replace(b'"k":""', b'"k":"' + b"x" * max(0, item - len(o)) + b'"')
            objs.append(o)
            total += len(o) + 1
        self.whole(self.list_of(objs))

    def mode_gzip_bomb(self):
        """Content-Encoding: gzip, a few MB that inflate to size= bytes (default 4 GiB):
        whitespace between JSON tokens (shape=space) or one endless string (shape=string)."""
        size = int(self.p.get("size", BOMB_DEFAULT))
        if self.p.get("shape", "space") == "string":
            fill = b"a"
            if self.watch:
                prefix = b'{"type":"ADDED","object":{"metadata":{"name":"'
                suffix = b'"}}}\n'
            elif self.name is not None:
                prefix, suffix = b'{"metadata":{"name":"', b'"}}\n'
            else:
                prefix, suffix = self.list_of([])[:-3] + b'{"metadata":{"name":"', b'"}}]}\n'
        else:
            fill = b" "
            if self.watch:
                prefix, suffix = b'{"type":"ADDED","object":', b'{"metadata":{"name":"b"}}}\n'
            elif self.name is not None:
                prefix, suffix = b'{"metadata":', b'{"name":"bomb"}}\n'
            else:
                prefix, suffix = self.list_of([])[:-3], b"]}\n"
        data = (gzip.compress(prefix) + bomb_member(fill) * max(1, size // BOMB_MEMBER)
                + gzip.compress(suffix))
        extra = [("Content-Encoding", "gzip")]
        if self.watch:
            self.head(extra=extra)
            for i in range(0, len(data), 1 << 16):
                self.body(data[i:i + (1 << 16)], chunked=True)
            self.end_chunks()
        else:
            self.whole(data, extra=extra)

    def mode_gzip_items(self):
        """Content-Encoding: gzip, a list of copies= (default 4,000,000) copies of one
        object, all of one name: a few MB that inflate to hundreds.  Streamed, member by
        member (ITEMS_MEMBER copies each), never held whole.  distinct=1: each copy named
        <name>-<i>, a list as big as a real one can be."""
        copies = max(1, int(self.p.get("copies", 4000000)))
        distinct = _truthy(self.p.get("distinct"))
        name = self.p.get("name", "dup")
        obj = self.obj(name + ("-@@" if distinct else ""), self.ns or "default",
                       {"data": {"hostile": "items"}})

        def member(first, n):
            if not distinct:
                return items_member(obj, n)
            z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            return z.compress(b"".join(b"," + obj.replace(b"@@", b"%d" % i)
                                       for i in range(first, first + n))) + z.flush()

        self.head(extra=[("Content-Encoding", "gzip")])
        self.body(gzip.compress(self.list_of([obj.replace(b"@@", b"0")])[:-3]), chunked=True)
        done = 1
        while done < copies:
            n = min(copies - done, ITEMS_MEMBER)
            data = member(done, n)
            for i in range(0, len(data), 1 << 16):
                self.body(data[i:i + (1 << 16)], chunked=True)
            done += n
        self.body(gzip.compress(b"]}\n"), chunked=True)
        self.end_chunks()

    def mode_ctype(self):
        """Content-Type: ctype= (default protobuf) on body=json (an empty list, or an object)
        or body=protobuf (protobuf bytes, whatever the type says)."""
        ctype = self.p.get("ctype", PROTOBUF)
        if self.p.get("body", "json") == "protobuf":
            data = (b"k8s\x00\n\x0c\n\x02v1\x12\x06" + self.kind.encode()[:6].ljust(6, b"x")
                    + b"\x12\x08\n\x06\n\x04\x00\x01\x02\x03\x1a\x00\"\x00")
        elif self.name is not None:
            data = self.obj(self.name, self.ns, {"data": {"hostile": "ctype"}}) + b"\n"
        else:
            data = self.list_of([])
        if self.watch:
            self.head(ctype=ctype)
            self.body(data if self.p.get("body") == "protobuf"
                      else self.event("ADDED", self.obj("ctype", self.ns)), chunked=True)
            self.end_chunks()
        else:
            self.whole(data, ctype=ctype)

    def mode_headers(self):
        """n= extra response headers (default 10,000), or one of hsize= bytes."""
        hsize = int(self.p.get("hsize", 0))
        if hsize:
            extra = [("X-Hostile", "h" * hsize)]
        else:
            extra = [("X-Hostile-%d" % i, "v") for i in range(int(self.p.get("n", 10000)))]
        self.whole(self.list_of([]) if self.name is None else self.obj(self.name, self.ns),
                   extra=extra)


# --------------------------------------------------------------------------------------------
# Identity: the cluster CA, CSRs and their signer, bootstrap tokens, who a request comes from
# --------------------------------------------------------------------------------------------

try:                             # Debian's python3-cryptography; only these features need it
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
    from cryptography.x509 import ObjectIdentifier
    from cryptography.x509.oid import NameOID
except ImportError:
    x509 = None

SIGNER_CLIENT = "kubernetes.io/kube-apiserver-client"
SIGNER_KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
SIGNER_SERVING = "kubernetes.io/kubelet-serving"
SIGNER_LEGACY = "kubernetes.io/legacy-unknown"
CLUSTER_IP = "10.96.0.1"         # default/kubernetes; the serving certificate carries it
MAX_BACKDATE = 300               # kube-controller-manager's signer backdates 5 minutes

# CSR usages (certificates.k8s.io KeyUsage) -> the x509 KeyUsage bit or extended key usage
KEY_USAGE_BITS = {
    "signing": "digital_signature", "digital signature": "digital_signature",
    "content commitment": "content_commitment", "key encipherment": "key_encipherment",
    "key agreement": "key_agreement", "data encipherment": "data_encipherment",
    "cert sign": "key_cert_sign", "crl sign": "crl_sign", "encipher only": "encipher_only",
    "decipher only": "decipher_only"}
EXT_KEY_USAGES = {
    "any": "2.5.29.37.0", "server auth": "1.3.6.1.5.5.7.3.1", "client auth": "1.3.6.1.5.5.7.3.2",
    "code signing": "1.3.6.1.5.5.7.3.3", "email protection": "1.3.6.1.5.5.7.3.4",
    "s/mime": "1.3.6.1.5.5.7.3.4", "ipsec end system": "1.3.6.1.5.5.7.3.5",
    "ipsec tunnel": "1.3.6.1.5.5.7.3.6", "ipsec user": "1.3.6.1.5.5.7.3.7",
    "timestamping": "1.3.6.1.5.5.7.3.8", "ocsp signing": "1.3.6.1.5.5.7.3.9",
    "microsoft sgc": "1.3.6.1.4.1.311.10.3.3", "netscape sgc": "2.16.840.1.113730.4.1"}
ALL_USAGES = sorted(set(KEY_USAGE_BITS) | set(EXT_KEY_USAGES))
YURTHUB_CLIENT_USAGES = {"digital signature", "key encipherment", "client auth"}
YURTHUB_SERVER_USAGES = {"digital signature", "key encipherment", "server auth"}

BOOTSTRAP_TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
BOOTSTRAP_SECRET_TYPE = "bootstrap.kubernetes.io/token"
BOOTSTRAP_DEFAULT_GROUP = "system:bootstrappers:kubeadm:default-node-token"
_PEM_RE = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.S)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")


def need_cryptography():
    if x509 is None:
        raise ApiError(500, "InternalError", "the test double needs python3-cryptography for "
                       "certificates (apt-get install python3-cryptography)")


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def pem_blocks(data):
    """[(type, der bytes, has headers)] of the PEM blocks in data, in order."""
    out = []
    for m in _PEM_RE.finditer(data):
        body = m.group(2)
        headers = b":" in body
        lines = [ln for ln in body.splitlines() if ln.strip() and b":" not in ln]
        try:
            der = base64.b64decode(b"".join(ln.strip() for ln in lines), validate=True)
        except ValueError:
            continue
        out.append((m.group(1).decode(), der, headers))
    return out


class CsrInfo:
    """What a PKCS#10 request asks for: subject and SANs."""

    def __init__(self, pem):
        blocks = pem_blocks(pem)
        if not blocks or blocks[0][0] != "CERTIFICATE REQUEST":
            raise ValueError("PEM block type must be CERTIFICATE REQUEST")
        try:
            self.req = x509.load_der_x509_csr(blocks[0][1])
            self.cn = next((a.value for a in self.req.subject.get_attributes_for_oid(
                NameOID.COMMON_NAME)), "")
            self.orgs = [a.value for a in self.req.subject.get_attributes_for_oid(
                NameOID.ORGANIZATION_NAME)]
            try:
                san = self.req.extensions.get_extension_for_class(
                    x509.SubjectAlternativeName).value
            except x509.ExtensionNotFound:
                san = None
        except Exception as e:  # noqa: BLE001 - whatever the parser objects to
            raise ValueError(f"x509: malformed certificate request: {e}")
        self.san = san
        self.dns = san.get_values_for_type(x509.DNSName) if san else []
        self.ips = [str(i) for i in san.get_values_for_type(x509.IPAddress)] if san else []
        self.emails = san.get_values_for_type(x509.RFC822Name) if san else []
        self.uris = san.get_values_for_type(x509.UniformResourceIdentifier) if san else []
        if not self.req.is_signature_valid:
            raise ValueError("x509: the certificate request's signature does not verify")


def _hash_for(key):
    return None if isinstance(key, (ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)) \
        else hashes.SHA256()


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class Pki:
    """The cluster CA. Like a kubeadm cluster's, one CA signs the API port's serving
    certificate, the client certificates it accepts and the certificates of approved CSRs."""

    def __init__(self, cert_pem, key_pem):
        self.cert_pem, self.key_pem = cert_pem, key_pem
        self.cert = x509.load_pem_x509_certificate(cert_pem)
        self.key = serialization.load_pem_private_key(key_pem, None)

    @classmethod
    def load(cls, cert_path, key_path):
        with open(cert_path, "rb") as c, open(key_path, "rb") as k:
            return cls(c.read(), k.read())

    @classmethod
    def generate(cls):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
        now = _utcnow()
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=3650))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(True, False, True, False, False, True, True, False,
                                             False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                               critical=False)
                .sign(key, hashes.SHA256()))
        return cls(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def issue(self, public_key, subject, san=None, usages=(), not_before=None, not_after=None):
        """A leaf certificate signed by the CA, the way kube-controller-manager's signer makes
        one: the subject and SANs asked for, BasicConstraints CA:false, the key usages and
        extended key usages of the CSR's usages, a random serial."""
        bits = {v: False for v in KEY_USAGE_BITS.values()}
        ekus = []
        for u in usages:
            if u in KEY_USAGE_BITS:
                bits[KEY_USAGE_BITS[u]] = True
            elif u in EXT_KEY_USAGES and ObjectIdentifier(EXT_KEY_USAGES[u]) not in ekus:
                ekus.append(ObjectIdentifier(EXT_KEY_USAGES[u]))
        if not bits["key_agreement"]:      # x509 allows these only with key agreement
            bits["encipher_only"] = bits["decipher_only"] = False
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(self.cert.subject)
             .public_key(public_key).serial_number(x509.random_serial_number())
             .not_valid_before(not_before).not_valid_after(min(not_after,
                                                               self.cert.not_valid_after))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
        if any(bits.values()):
            b = b.add_extension(x509.KeyUsage(**bits), critical=True)
        if ekus:
            b = b.add_extension(x509.ExtendedKeyUsage(ekus), critical=False)
        if san is not None and len(san):
            b = b.add_extension(san, critical=False)
        try:
            ski = self.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
            aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
        except x509.ExtensionNotFound:
            aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key())
        b = b.add_extension(aki, critical=False)
        return b.sign(self.key, _hash_for(self.key))

    def sign_csr(self, info, usages, lifetime):
        """PEM of the certificate for an approved CSR: valid from now minus a tenth of the
        lifetime (at most the real signer's 5 minutes) until now plus the lifetime."""
        now = _utcnow()
        backdate = min(MAX_BACKDATE, lifetime / 10)
        cert = self.issue(info.req.public_key(), info.req.subject, info.san, usages,
                          now - datetime.timedelta(seconds=backdate),
                          now + datetime.timedelta(seconds=lifetime))
        return cert.public_bytes(serialization.Encoding.PEM)

    def keypair(self, cn, orgs=(), dns=(), ips=(), usages=("digital signature",
                                                           "key encipherment", "client auth"),
                days=365):
        """(cert PEM, key PEM) of a new key pair and its certificate."""
        import ipaddress
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
                            + [x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i))
                                                  for i in ips]
        now = _utcnow()
        cert = self.issue(key.public_key(), subject,
                          x509.SubjectAlternativeName(names) if names else None, usages,
                          now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days))
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


# -- CSR validation and update strategy, as kube-apiserver's certificates registry --

class FieldErrors:
    """field.ErrorList: collects errors, raises them as one 422 Invalid."""

    def __init__(self):
        self.errs = []

    def add(self, reason, field, text):
        self.errs.append({"reason": reason, "message": f"{field}: {text}", "field": field})

    def required(self, field):
        self.add("FieldValueRequired", field, "Required value")

    def invalid(self, field, value, detail):
        self.add("FieldValueInvalid", field, f"Invalid value: {value}: {detail}")

    def forbidden(self, field, detail):
        self.add("FieldValueForbidden", field, f"Forbidden: {detail}")

    def raise_if_any(self, name):
        if not self.errs:
            return
        msgs = [e["message"] for e in self.errs]
        text = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
        raise ApiError(422, "Invalid", f'CertificateSigningRequest.certificates.k8s.io "{name}" '
                       f"is invalid: {text}", {"name": name, "group": "certificates.k8s.io",
                                              "kind": "CertificateSigningRequest",
                                              "causes": self.errs})


def _cannot_decode(what):
    return bad_request('CertificateSigningRequest in version "v1" cannot be handled as a '
                       f"CertificateSigningRequest: {what}")


def _decode_bytes(value, field):
    """A []byte field of the JSON body (base64, as encoding/json writes it)."""
    if value is None:
        return b""
    if not isinstance(value, str):
        raise _cannot_decode(f"json: cannot unmarshal {type(value).__name__} into Go struct "
                             f"field {field} of type []uint8")
    try:
        return base64.b64decode(re.sub(r"[\r\n]", "", value), validate=True)
    except ValueError as e:
        raise _cannot_decode(f"illegal base64 data in {field}: {e}")


def _check_types(spec, status):
    if not isinstance(spec, dict):
        raise _cannot_decode("json: cannot unmarshal spec into Go struct field "
                             "CertificateSigningRequest.spec")
    usages = spec.get("usages")
    if usages is not None and (not isinstance(usages, list)
                               or not all(isinstance(u, str) for u in usages)):
        raise _cannot_decode("json: cannot unmarshal into Go struct field "
                             "CertificateSigningRequestSpec.spec.usages of type []v1.KeyUsage")
    for f in ("signerName", "username", "uid"):
        if spec.get(f) is not None and not isinstance(spec[f], str):
            raise _cannot_decode(f"json: cannot unmarshal into Go struct field "
                                 f"CertificateSigningRequestSpec.spec.{f} of type string")
    exp = spec.get("expirationSeconds")
    if exp is not None and (not isinstance(exp, int) or isinstance(exp, bool)):
        raise _cannot_decode("json: cannot unmarshal into Go struct field "
                             "CertificateSigningRequestSpec.spec.expirationSeconds of type int32")
    conds = (status or {}).get("conditions")
    if conds is not None and (not isinstance(conds, list)
                              or not all(isinstance(c, dict) for c in conds)):
        raise _cannot_decode("json: cannot unmarshal into Go struct field "
                             "CertificateSigningRequestStatus.status.conditions")


def _validate_csr(obj, errs):
    """validateCertificateSigningRequest: the request parses and its signature verifies, usages
    (required, known, no duplicates), signerName, expirationSeconds, conditions, certificate."""
    spec = obj["spec"]
    try:
        CsrInfo(_decode_bytes(spec.get("request"), "spec.request"))
    except ValueError as e:
        errs.invalid("spec.request", "[]byte{...}", str(e))
    usages = spec.get("usages") or []
    if not usages:
        errs.required("spec.usages")
    seen = set()
    for i, u in enumerate(usages):
        if u not in ALL_USAGES:
            errs.add("FieldValueNotSupported", f"spec.usages[{i}]", f'Unsupported value: "{u}": '
                     "supported values: " + ", ".join(f'"{x}"' for x in ALL_USAGES))
        if u in seen:
            errs.add("FieldValueDuplicate", f"spec.usages[{i}]", f'Duplicate value: "{u}"')
        seen.add(u)
    signer = spec.get("signerName") or ""
    if not signer:
        errs.required("spec.signerName")
    elif signer == SIGNER_LEGACY:
        errs.invalid("spec.signerName", f'"{signer}"',
                     "the legacy signerName is not allowed via this API version")
    else:
        domain, _, path = signer.partition("/")
        if not path or not _DNS_SUBDOMAIN.match(domain):
            errs.invalid("spec.signerName", f'"{signer}"', "must be a fully qualified domain and "
                         "path of the form 'example.com/signer-name'")
    exp = spec.get("expirationSeconds")
    if exp is not None and exp < 600:
        errs.invalid("spec.expirationSeconds", exp,
                     "may not specify a duration less than 600 seconds (10 minutes)")
    status = obj.get("status") or {}
    seen, approved, denied = set(), False, False
    for i, c in enumerate(status.get("conditions") or []):
        t, st = c.get("type") or "", c.get("status") or ""
        if not t:
            errs.required(f"status.conditions[{i}].type")
        allowed = ["True"] if t in ("Approved", "Denied", "Failed") else ["False", "True",
                                                                          "Unknown"]
        if not st:
            errs.required(f"status.conditions[{i}].status")
        elif st not in allowed:
            errs.add("FieldValueNotSupported", f"status.conditions[{i}].status",
                     f'Unsupported value: "{st}": supported values: '
                     + ", ".join(f'"{x}"' for x in allowed))
        approved |= t == "Approved"
        denied |= t == "Denied"
        if t in ("Approved", "Denied") and approved and denied:
            errs.invalid(f"status.conditions[{i}].type", f'"{t}"',
                         "Approved and Denied conditions are mutually exclusive")
        if t in seen:
            errs.add("FieldValueDuplicate", f"status.conditions[{i}].type",
                     f'Duplicate value: "{t}"')
        seen.add(t)


def csr_prepare_create(obj, ident):
    """PrepareForCreate and validation: the requester's identity goes into spec.username,
    uid and groups (whatever the client wrote there), the status is emptied."""
    need_cryptography()
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    _check_types(spec, None)
    name = obj["metadata"].get("name") or obj["metadata"].get("generateName") or ""
    errs = FieldErrors()
    obj["status"] = {}
    _validate_csr(obj, errs)
    errs.raise_if_any(name)
    spec["request"] = base64.b64encode(_decode_bytes(spec.get("request"), "")).decode()
    for f in ("username", "uid", "groups", "extra"):
        spec.pop(f, None)
    spec["username"] = ident.user
    if ident.uid:
        spec["uid"] = ident.uid
    spec["groups"] = list(ident.groups)
    return obj


def _conditions(obj, ctype=None):
    conds = ((obj.get("status") or {}).get("conditions") or [])
    return [c for c in conds if ctype is None or c.get("type") == ctype]


def csr_prepare_update(old, new, sub):
    """The CSR update strategies: spec never changes; the main resource keeps the status;
    /approval changes only the conditions; /status may set the certificate once (the
    signer's part) and conditions other than Approved/Denied. Then validation."""
    need_cryptography()
    status = new.get("status") if isinstance(new.get("status"), dict) else {}
    _check_types(old.get("spec") or {}, status)
    ostatus = old.get("status") or {}
    new["spec"] = old.get("spec")
    if sub is None:
        status = dict(ostatus)
    elif sub == "approval":
        status = dict(ostatus, conditions=status.get("conditions") or [])
    else:
        status = dict(status)
    if not status.get("conditions"):
        status.pop("conditions", None)
    new["status"] = status
    now = now_ts()
    for c in status.get("conditions") or []:
        c.setdefault("lastUpdateTime", now)
        if not c.get("lastTransitionTime"):
            c["lastTransitionTime"] = next(
                (o["lastTransitionTime"] for o in _conditions(old, c.get("type"))
                 if o.get("status") == c.get("status") and o.get("lastTransitionTime")), now)
    errs = FieldErrors()
    _validate_csr(new, errs)
    for t in ("Approved", "Denied", "Failed"):
        if len(_conditions(new, t)) < len(_conditions(old, t)):
            errs.forbidden("status.conditions", f'updates may not remove a condition of type "{t}"')
    if sub != "approval":
        for t in ("Approved", "Denied"):
            o, n = _conditions(old, t), _conditions(new, t)
            if len(n) > len(o):
                errs.forbidden("status.conditions",
                               f'updates may not add a condition of type "{t}"')
            elif len(n) == len(o) and n != o:
                errs.forbidden("status.conditions",
                               f'updates may not modify a condition of type "{t}"')
    cert, ocert = status.get("certificate") or "", ostatus.get("certificate") or ""
    if cert != ocert:
        if sub != "status":
            errs.forbidden("status.certificate", "updates may not set certificate content")
        elif ocert:
            errs.forbidden("status.certificate",
                           "updates may not modify existing certificate content")
        else:
            blocks = pem_blocks(_decode_bytes(cert, "status.certificate"))
            if not blocks or any(t != "CERTIFICATE" for t, _, _ in blocks):
                errs.invalid("status.certificate", "<certificate data>",
                             "must contain at least one CERTIFICATE PEM block")
    errs.raise_if_any(old["metadata"]["name"])
    return new


# -- the controllers of a cluster's CSRs: yurt-manager's approver, kube-controller-manager's
#    signer --

def yurt_approval(spec, info):
    """yurt-manager's csrapprover rules (isYurtHubNodeCert, isYurtTLSServerCert): the message
    it approves with, or None when it leaves the CSR alone."""
    signer, usages = spec.get("signerName"), set(spec.get("usages") or [])
    if (signer == SIGNER_CLIENT and len(info.orgs) >= 2
            and all(o in ("openyurt:yurthub", "system:nodes") or o.startswith("openyurt:tenant:")
                    for o in info.orgs)
            and info.cn.startswith("system:node:") and usages == YURTHUB_CLIENT_USAGES):
        return "Auto approving yurthub node client certificate"
    if (signer == SIGNER_SERVING and info.orgs == ["system:nodes"] and (info.dns or info.ips)
            and info.cn.startswith("system:node:") and usages == YURTHUB_SERVER_USAGES):
        return "Auto approving openyurt tls server certificate"
    return None


def signer_check(signer, info, usages):
    """kube-controller-manager's signers: (handled, error). Signers it does not run are not
    handled (the CSR stays approved without a certificate, as in a real cluster)."""
    usages = set(usages)
    if signer == SIGNER_CLIENT:
        for u in sorted(usages):
            if u not in YURTHUB_CLIENT_USAGES:
                return True, f"invalid usage for client certificate: {u}"
        if "client auth" not in usages:
            return True, "missing required usage for client certificate: client auth"
        return True, None
    if signer not in (SIGNER_KUBELET_CLIENT, SIGNER_SERVING):
        return False, None
    if info.orgs != ["system:nodes"]:
        return True, "subject organization is not system:nodes"
    if signer == SIGNER_SERVING:
        if not info.dns and not info.ips:
            return True, "DNS or IP subjectAltName is required"
        want = [YURTHUB_SERVER_USAGES, {"digital signature", "server auth"}]
    else:
        for kind, values in (("DNS", info.dns), ("IP", info.ips)):
            if values:
                return True, f"{kind} subjectAltNames are not allowed"
        want = [YURTHUB_CLIENT_USAGES, {"digital signature", "client auth"}]
    if info.emails:
        return True, "Email subjectAltNames are not allowed"
    if info.uris:
        return True, "URI subjectAltNames are not allowed"
    if usages not in want:
        return True, f"usages did not match [{' '.join(sorted(want[0]))}]"
    if not info.cn.startswith("system:node:"):
        return True, "subject common name does not begin with system:node:"
    return True, None


class Signer:
    """Approves (with --csr-auto-approve, by yurt-manager's rules) and signs CSRs as soon as
    they are written: a store hook, so each step is its own write and watch event, as when
    the controllers do it. Also counts what happens to CSRs."""

    def __init__(self, store, pki, auto_approve, lifetime):
        self.store, self.pki = store, pki
        self.auto_approve, self.lifetime = auto_approve, lifetime
        self.counts = Counter()

    def hook(self, rt, key, etype, entry, old):
        if rt is not CSRS:
            return
        if etype == "ADDED":
            self.counts["created"] += 1
        if etype == "DELETED":
            return
        for t in ("Approved", "Denied", "Failed"):
            if _conditions(entry.obj, t) and not (old and _conditions(old.obj, t)):
                self.counts[t.lower()] += 1
        status = entry.obj.get("status") or {}
        if status.get("certificate") and not (old and (old.obj.get("status") or {}).get(
                "certificate")):
            self.counts["issued"] += 1
        self.reconcile(entry.obj)

    def _write(self, name, fn):
        self.store.update(CSRS, None, name, lambda cur: fn(cur), check_rv=False,
                          prepare=lambda old, new: new)

    def reconcile(self, obj):
        """One step (approve, or sign, or fail), written; the write calls the hook again for
        the next step."""
        if x509 is None:
            return
        name, spec = obj["metadata"]["name"], obj.get("spec") or {}
        if obj["metadata"].get("deletionTimestamp"):
            return
        try:
            info = CsrInfo(_decode_bytes(spec.get("request"), "spec.request"))
        except (ValueError, ApiError):
            return
        approved, denied = _conditions(obj, "Approved"), _conditions(obj, "Denied")
        if not approved and not denied:
            msg = yurt_approval(spec, info) if self.auto_approve else None
            if msg:
                self.counts["auto_approved"] += 1
                self._write(name, lambda cur: self._with_condition(cur, "Approved",
                                                                  "AutoApproved", msg))
            return
        status = obj.get("status") or {}
        if denied or _conditions(obj, "Failed") or status.get("certificate") or not self.pki:
            return
        handled, err = signer_check(spec.get("signerName"), info, spec.get("usages") or [])
        if not handled:
            return
        if err:
            self._write(name, lambda cur: self._with_condition(cur, "Failed",
                                                              "SignerValidationFailure", err))
            return
        lifetime = self.lifetime
        if spec.get("expirationSeconds"):
            lifetime = min(lifetime, spec["expirationSeconds"])
        pem = self.pki.sign_csr(info, spec.get("usages") or [], lifetime)

        def put_cert(cur):
            cur.setdefault("status", {})["certificate"] = base64.b64encode(pem).decode()
            return cur
        self._write(name, put_cert)

    @staticmethod
    def _with_condition(cur, ctype, reason, message):
        now = now_ts()
        cur.setdefault("status", {}).setdefault("conditions", []).append({
            "type": ctype, "status": "True", "reason": reason, "message": message,
            "lastUpdateTime": now, "lastTransitionTime": now})
        return cur

    def decide(self, name, action, reason="", message=""):
        """The control port's approve/deny: as `kubectl certificate approve|deny` would."""
        with self.store.cond:
            e = self.store.get(CSRS, None, name)
            if e is None:
                raise not_found(CSRS, name)
            ctype = "Approved" if action == "approve" else "Denied"
            other = "Denied" if ctype == "Approved" else "Approved"
            if _conditions(e.obj, other):
                raise conflict(CSRS, name, f"certificate signing request is already {other}")
            if not _conditions(e.obj, ctype):
                self._write(name, lambda cur: self._with_condition(
                    cur, ctype, reason or ("TestDoubleApprove" if ctype == "Approved"
                                           else "TestDoubleDeny"),
                    message or f"This CSR was {ctype.lower()} by the test double's control "
                               "port."))
            return self.store.get(CSRS, None, name).obj

    def state(self):
        with self.store.cond:
            pending = sum(1 for e in self.store.objects[CSRS.id].values()
                          if not any(_conditions(e.obj, t)
                                     for t in ("Approved", "Denied", "Failed")))
            out = {k: self.counts.get(k, 0) for k in ("created", "approved", "auto_approved",
                                                       "denied", "failed", "issued")}
            out.update(pending=pending, auto_approve=self.auto_approve,
                       cert_lifetime=self.lifetime)
            return out


# -- bootstrap tokens and kube-public/cluster-info --

def bootstrap_token_secret(token_id, secret, expiration=None, groups=None):
    """The Secret `kubeadm token create` makes: kube-system/bootstrap-token-<id>."""
    data = {"token-id": token_id, "token-secret": secret,
            "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
            "auth-extra-groups": BOOTSTRAP_DEFAULT_GROUP if groups is None else groups,
            "description": "A bootstrap token of the API server test double."}
    if expiration:
        data["expiration"] = expiration
    return {"apiVersion": "v1", "kind": "Secret", "type": BOOTSTRAP_SECRET_TYPE,
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items() if v}}


def _secret_data(obj):
    data = {}
    for k, v in (obj.get("data") or {}).items():
        try:
            data[k] = base64.b64decode(v).decode()
        except (ValueError, TypeError):
            pass
    for k, v in (obj.get("stringData") or {}).items():   # not converted by the double
        data[k] = str(v)
    return data


def _expired(expiration):
    """An RFC 3339 expiration in the past (or unparseable: the real authenticator refuses)."""
    if not expiration:
        return False
    try:
        t = datetime.datetime.fromisoformat(expiration.replace("Z", "+00:00"))
        return t.timestamp() <= time.time()
    except ValueError:
        return True


def _usable_token(entry, tid, usage):
    """(secret, data) of a bootstrap-token Secret entry of the right type and id, not expired
    nor being deleted, with usage-bootstrap-<usage>=true; None otherwise."""
    if entry is None:
        return None
    obj = entry.obj
    data = _secret_data(obj)
    if (obj.get("type") != BOOTSTRAP_SECRET_TYPE or data.get("token-id") != tid
            or obj["metadata"].get("deletionTimestamp")
            or data.get(f"usage-bootstrap-{usage}") != "true"
            or _expired(data.get("expiration")) or not data.get("token-secret")):
        return None
    return data["token-secret"], data


def bootstrap_tokens(store, usage):
    """{id: (secret, data)} of the usable bootstrap tokens (see _usable_token)."""
    out = {}
    with store.cond:
        for key, e in store.objects[SECRETS.id].items():
            if key.startswith("kube-system/bootstrap-token-"):
                tid = key[len("kube-system/bootstrap-token-"):]
                found = _usable_token(e, tid, usage)
                if found:
                    out[tid] = found
    return out


def detached_jws(content, token_id, secret):
    """kubeadm's cluster-info signature: a compact HS256 JWS with the payload left out,
    "header..signature", base64url without padding."""
    header = b64url(b'{"alg":"HS256","kid":"' + token_id.encode() + b'"}')
    payload = b64url(content.encode())
    sig = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}..{b64url(sig)}"


class ClusterInfo:
    """kube-public/cluster-info as kubeadm writes it (a kubeconfig with one unnamed cluster:
    this server and the CA), signed for each bootstrap token by the bootstrap signer, which
    here is a store hook on the token Secrets."""

    def __init__(self, store, server, ca_pem):
        self.store = store
        self.kubeconfig = (
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: "
            + base64.b64encode(ca_pem).decode() + "\n    server: " + server
            + '\n  name: ""\ncontexts: null\ncurrent-context: ""\nkind: Config\n'
            "preferences: {}\nusers: null\n")

    def hook(self, rt, key, etype, entry, old):
        if rt is SECRETS and key.startswith("kube-system/bootstrap-token-"):
            self.resign()

    def resign(self):
        data = {"kubeconfig": self.kubeconfig}
        for tid, (secret, _) in sorted(bootstrap_tokens(self.store, "signing").items()):
            data[f"jws-kubeconfig-{tid}"] = detached_jws(self.kubeconfig, tid, secret)
        with self.store.cond:
            cur = self.store.get(CONFIGMAPS, "kube-public", "cluster-info")
            if cur is not None and cur.obj.get("data") == data:
                return
            md = cur.obj["metadata"] if cur else {"name": "cluster-info",
                                                  "namespace": "kube-public"}
            self.store.put_raw({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {k: md[k] for k in ("name", "namespace", "uid",
                                                                "creationTimestamp") if k in md},
                                "data": data})


# -- authentication and authorization --

class Identity:
    __slots__ = ("user", "groups", "uid", "source")

    def __init__(self, user, groups, source, uid=""):
        self.user, self.groups, self.source, self.uid = user, list(groups), source, uid


ANONYMOUS = Identity("system:anonymous", ["system:unauthenticated"], "anonymous")
UNAUTHORIZED = ApiError(401, "Unauthorized", "Unauthorized")
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")   # system:public-info-viewer


def jwt_subject(token):
    """The sub claim of a JWT (a service-account token), unverified; None if not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        sub = claims.get("sub")
        return sub if isinstance(sub, str) and sub else None
    except (ValueError, AttributeError):
        return None


def token_identity(store, token, auth):
    """Who a bearer token says the request comes from. A bootstrap token (ID.SECRET) must
    match a token Secret: system:bootstrap:<ID>, groups system:bootstrappers and its
    auth-extra-groups; a wrong one is 401 with client authentication on, ignored (anonymous)
    without. Any other token is taken on trust (pods' service-account tokens): the user is the
    JWT's sub claim, or "token:<the token>"."""
    m = BOOTSTRAP_TOKEN_RE.match(token)
    if m:
        found = _usable_token(store.get(SECRETS, "kube-system", "bootstrap-token-"
                                        + m.group(1)), m.group(1), "authentication")
        if found and hmac.compare_digest(found[0], m.group(2)):
            extra = [g.strip() for g in found[1].get("auth-extra-groups", "").split(",")
                     if g.strip()]
            return Identity(f"system:bootstrap:{m.group(1)}",
                            ["system:bootstrappers"] + extra + ["system:authenticated"],
                            "bootstrap")
        if auth:
            raise UNAUTHORIZED
        return None
    sub = jwt_subject(token)
    user = sub or f"token:{token}"
    groups = ["system:authenticated"]
    if user.startswith("system:serviceaccount:") and user.count(":") == 3:
        groups = ["system:serviceaccounts", "system:serviceaccounts:" + user.split(":")[2],
                  "system:authenticated"]
    return Identity(user, groups, "token")


def forbidden(ident, verb, rt, ns, name, sub):
    res = rt.plural + (f"/{sub}" if sub else "")
    scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
    what = rt.qualified + (f' "{name}"' if name else "")
    details = {"name": name} if name else {}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    return ApiError(403, "Forbidden", f'{what} is forbidden: User "{ident.user}" cannot {verb} '
                    f'resource "{res}" in API group "{rt.group}" {scope}', details)


def allowed(ident, verb, rt, ns, name, sub):
    """The RBAC of a kubeadm cluster, as far as it matters here: certificate users may do
    anything (no RBAC on them); bootstrap tokens may create, get, list and watch CSRs
    (system:node-bootstrapper); everyone, anonymous included, may get kube-public/cluster-info."""
    if ident.source in ("cert", "token"):
        return True
    if rt is CONFIGMAPS and ns == "kube-public" and name == "cluster-info" and verb == "get" \
            and not sub:
        return True
    return (ident.source == "bootstrap" and rt is CSRS and not sub
            and verb in ("create", "get", "list", "watch"))


def path_allowed(ident, path):
    """Non-resource paths: health and /version for everyone, discovery and OpenAPI for the
    authenticated (system:discovery)."""
    if path in PUBLIC_PATHS or path.startswith(tuple(p + "/" for p in PUBLIC_PATHS)):
        return True
    return ident.source != "anonymous"


SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
OIDC_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"


def _uint_b64url(n):
    return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class SaIssuer:
    """The service-account token issuer: an RSA key (made on first use: most runs never need
    it), its OpenID discovery documents as kube-apiserver serves them, and tokens bound to a pod
    as a TokenRequest of kubelet gets them (RS256, kid = base64url(SHA-256 of the public key's
    DER), aud = the issuer, kube-apiserver's default --api-audiences). who: "all" lets any
    authenticated client read the documents; "serviceaccounts" is kube-apiserver's default RBAC
    (system:service-account-issuer-discovery bound to system:serviceaccounts only)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.key = self.other = None
        self.retired = []                # keys rotated out, still published (their tokens live)
        self.who = "all"

    def _keys(self):
        need_cryptography()
        with self.lock:
            if self.key is None:
                self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
                self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            return self.key, self.other

    def kid(self, key=None):
        der = (key or self._keys()[0]).public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return b64url(hashlib.sha256(der).digest())

    def rotate(self):
        """A new signing key; the old one stays in the JWK Set, as kube-apiserver keeps every
        --service-account-key-file key."""
        old = self._keys()[0]
        new = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        with self.lock:
            self.retired.append(old)
            self.key = new
        return {"kid": self.kid()}

    def oidc_doc(self, base):
        return {"issuer": SA_ISSUER, "jwks_uri": base + JWKS_PATH,
                "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"]}

    def jwks_doc(self):
        keys = [self._keys()[0]] + self.retired
        return {"keys": [{"use": "sig", "kty": "RSA", "kid": self.kid(k), "alg": "RS256",
                          "n": _uint_b64url(k.public_key().public_numbers().n),
                          "e": _uint_b64url(k.public_key().public_numbers().e)} for k in keys]}

    def allowed(self, ident):
        return self.who == "all" or "system:serviceaccounts" in ident.groups

    def mint(self, store, q):
        """A token for the pod q["namespace"]/q["pod"] (its uid and service account from the
        store, or q["uid"]), expiring q["exp"] seconds from now (3600), signed by the issuer's
        key or, with q["key"] == "other", by another key under the same kid."""
        key, other = self._keys()
        ns, name = q.get("namespace", "default"), q.get("pod", "")
        e = store.get(PODS, ns, name)
        if e is None and not q.get("uid"):
            raise not_found(PODS, name)
        pod = e.obj if e is not None else {"metadata": {}, "spec": {}}
        sa = pod["spec"].get("serviceAccountName") or "default"
        now = int(time.time())
        claims = {"aud": [q.get("aud", SA_ISSUER)], "exp": now + int(q.get("exp", 3600)),
                  "iat": now, "nbf": now, "iss": q.get("iss", SA_ISSUER), "jti": str(uuid.uuid4()),
                  "kubernetes.io": {"namespace": ns,
                                    "node": {"name": pod["spec"].get("nodeName", ""),
                                             "uid": _uid(None, pod["spec"].get("nodeName", ""))},
                                    "pod": {"name": name,
                                            "uid": q.get("uid") or pod["metadata"]["uid"]},
                                    "serviceaccount": {"name": sa, "uid": _uid(ns, sa)}},
                  "sub": f"system:serviceaccount:{ns}:{sa}"}
        header = {"alg": "RS256", "kid": self.kid()}
        signing = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "."
                   + b64url(json.dumps(claims, separators=(",", ":")).encode()))
        signer = other if q.get("key") == "other" else key
        sig = signer.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return {"token": signing + "." + b64url(sig), "claims": claims}


def kubeconfig_yaml(server, ca_pem, user, user_fields):
    """A kubeconfig with one cluster, user and context (block YAML)."""
    lines = ["apiVersion: v1", "kind: Config", "clusters:", "- name: kubernetes", "  cluster:",
             f"    server: {server}",
             "    certificate-authority-data: " + base64.b64encode(ca_pem).decode(),
             "contexts:", f"- name: {user}@kubernetes", "  context:", "    cluster: kubernetes",
             f"    user: {user}", f"current-context: {user}@kubernetes", "users:",
             f"- name: {user}", "  user:"]
    lines += [f"    {k}: {v}" for k, v in user_fields]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The API handler
# --------------------------------------------------------------------------------------------

CONN_ERRORS = (ConnectionError, BrokenPipeError, ssl.SSLError, socket.timeout, OSError)
PROTOBUF = "application/vnd.kubernetes.protobuf"
PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json",
               "application/json-patch+json", "application/apply-patch+yaml")


def _truthy(v):
    return v in ("true", "1", "True")


# --------------------------------------------------------------------------------------------
# Protocol upgrades: exec, attach and port-forward, answered by an echo
# --------------------------------------------------------------------------------------------

UPGRADE_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/(exec|attach|portforward)$")
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# RemoteCommand over WebSocket: each binary message starts with its stream
# (0 stdin, 1 stdout, 2 stderr, 3 error/status, 4 resize; v5 adds 255 "close
# stream N").  Newest first: the server picks the first the client offers.
WS_CHANNEL_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io",
                        "v2.channel.k8s.io", "channel.k8s.io")
WS_PORTFORWARD_PROTOCOLS = ("v4.portforward.k8s.io", "portforward.k8s.io")
WS_CONT, WS_TEXT, WS_BINARY, WS_CLOSE, WS_PING, WS_PONG = 0, 1, 2, 8, 9, 10
EXEC_SUCCESS = b'{"metadata":{},"status":"Success"}'


def ws_frame(op, data=b""):
    """One unmasked (server to client) frame."""
    n = len(data)
    if n < 126:
        head = bytes([0x80 | op, n])
    elif n < 65536:
        head = bytes([0x80 | op, 126]) + struct.pack(">H", n)
    else:
        head = bytes([0x80 | op, 127]) + struct.pack(">Q", n)
    return head + data


def ws_read_message(rfile):
    """(opcode, payload) of the next message, continuation frames joined;
    None at EOF.  Control frames come as they are."""
    op, data = None, b""
    while True:
        head = rfile.read(2)
        if len(head) < 2:
            return None
        fin, fop, n = head[0] & 0x80, head[0] & 0x0F, head[1] & 0x7F
        if n == 126:
            n = struct.unpack(">H", rfile.read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", rfile.read(8))[0]
        mask = rfile.read(4) if head[1] & 0x80 else b""
        payload = rfile.read(n)
        if len(payload) < n:
            return None
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        if fop >= WS_CLOSE:
            return fop, payload
        op = fop if fop != WS_CONT else op
        data += payload
        if fin:
            return op, data


class RecordingReader:
    """An API connection's rfile while the request's headers are read: keeps every byte
    of them as it came, before the header parser (which splits lines its own way) sees
    them."""

    def __init__(self, raw):
        self.raw, self.data = raw, bytearray()

    def readline(self, *args):
        line = self.raw.readline(*args)
        self.data += line
        return line

    def __getattr__(self, name):
        return getattr(self.raw, name)


class CountingWriter:
    """An API connection's wfile that counts the bytes written to the socket by the
    User-Agent of the request being answered: status line, headers and body, streamed watch
    events and upgraded connections included."""

    def __init__(self, raw, handler):
        self.raw, self.h = raw, handler

    def write(self, data):
        n = self.raw.write(data)
        headers = getattr(self.h, "headers", None)
        self.h.server.gate.count_bytes(headers.get("User-Agent", "") if headers else "",
                                       len(data))
        return n

    def __getattr__(self, name):
        return getattr(self.raw, name)


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY every
    # small response on a kept-alive connection waits ~40 ms for a delayed ACK,
    # which a real API server (Go) never does.
    disable_nagle_algorithm = True
    server_version = "kube-apiserver-double"
    timeout = None

    # -- plumbing --

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("api: %s %s\n" % (self.address_string(), fmt % args))

    def setup(self):
        super().setup()
        self.wfile = CountingWriter(self.wfile, self)

    def handle(self):
        try:
            super().handle()
        except CONN_ERRORS:
            self.close_connection = True

    def finish(self):
        try:
            super().finish()
        except CONN_ERRORS:
            pass

    def parse_request(self):
        # every head is recorded as it came, before anything (a parse error, a
        # black hole, an injected fault) can stop the request: a test can tell
        # exactly which bytes reached the cloud
        rec = self.rfile = RecordingReader(self.rfile)
        try:
            return super().parse_request()
        finally:
            self.rfile = rec.raw
            words = self.raw_requestline.split()
            path = urlsplit(words[1].decode("latin-1")).path if len(words) > 1 else ""
            self.server.gate.record_head(path, bytes(self.raw_requestline + rec.data))

    def send_response(self, code, message=None):
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = lambda self: self.dispatch()

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, code, body, ctype="application/json", headers=None, compress=True):
        extra = dict(headers or {})
        if (compress and len(body) > GZIP_THRESHOLD
                and "gzip" in self.headers.get("Accept-Encoding", "")):
            body = gzip.compress(body, compresslevel=1, mtime=0)  # same bytes every time
            extra["Content-Encoding"] = "gzip"
            extra["Vary"] = "Accept-Encoding"
        self.send_response(code)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", ctype)
        for k, v in extra.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_obj(self, code, obj, **kw):
        self._send(code, dumps(obj) + b"\n", **kw)

    def _send_error(self, e):
        self._send_obj(e.code, e.status(), headers=e.headers)

    # -- dispatch --

    def dispatch(self):
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        body = self._read_body()
        gate = self.server.gate
        if not gate.hold():            # black-holed requests count once they are answered
            self.close_connection = True
            return
        self.req_path = u.path
        peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
        cn = next((v for rdn in peer.get("subject", ()) for k, v in rdn
                   if k == "commonName"), "") if peer else None
        if not gate.count(self.headers.get("User-Agent", ""), u.path, cn,
                          self.server.this_conn.holder):
            self.close_connection = True
            return
        hostile = self.server.hostile.take(u.path)
        if hostile:
            return HostileAnswer(self, hostile, q, u.path).send()
        try:
            code = gate.take_fault(u.path)
            if code:
                raise ApiError(code, {429: "TooManyRequests", 503: "ServiceUnavailable",
                                      504: "Timeout"}.get(code, "InternalError"),
                               "injected failure (test double control port)",
                               headers={"Retry-After": "1"} if code in (429, 503) else None)
            self.ident = self._authenticate(peer, u.path)
            if self.headers.get("Upgrade"):
                return self.upgrade(u.path)
            accept = self.headers.get("Accept", "")
            types = [t.split(";")[0].strip() for t in accept.split(",") if t.strip()]
            if types and all(t == PROTOBUF for t in types):
                raise ApiError(406, "NotAcceptable", "only the following media types are "
                               "accepted: application/json, application/yaml")
            self.route(u.path, q, body)
        except ApiError as e:
            self._send_error(e)
        except CONN_ERRORS:
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - report as a kube InternalError
            traceback.print_exc()
            self._send_error(ApiError(500, "InternalError", f"Internal error occurred: {e}"))

    # -- who: authentication and authorization --

    def _authenticate(self, peer, path):
        """The request's Identity: its client certificate's CN and O, else its bearer token
        (token_identity), else anonymous. Also counts bearer requests. A certificate that has
        expired since the connection was made is 401, as kube-apiserver checks each request."""
        gate = self.server.gate
        auth = self.headers.get("Authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        if token and not peer:
            gate.count_in(gate.bearer_no_cert, path)
        if peer:
            try:
                valid = (ssl.cert_time_to_seconds(peer["notBefore"]) <= time.time()
                         < ssl.cert_time_to_seconds(peer["notAfter"]))
            except (KeyError, ValueError):
                valid = True
            if not valid:
                gate.count_in(gate.unauthorized, path)
                raise UNAUTHORIZED
            names = [(k, v) for rdn in peer.get("subject", ()) for k, v in rdn]
            return Identity(next((v for k, v in names if k == "commonName"), ""),
                            [v for k, v in names if k == "organizationName"]
                            + ["system:authenticated"], "cert")
        if not token:
            return ANONYMOUS
        try:
            ident = token_identity(self.server.store, token, self.server.auth_enabled)
        except ApiError:
            gate.count_in(gate.unauthorized, path)
            raise
        if ident is None:
            return ANONYMOUS
        gate.count_in(gate.by_bearer_user, ident.user)
        return ident

    def _authorize(self, verb, rt, ns, name, sub):
        """With client authentication on, what allowed() does not allow is 403 Forbidden."""
        if not self.server.auth_enabled or allowed(self.ident, verb, rt, ns, name, sub):
            return
        gate = self.server.gate
        gate.count_in(gate.forbidden, f"{self.ident.user} {verb} {self.req_path}")
        raise forbidden(self.ident, verb, rt, ns, name, sub)

    def _authorize_path(self, path):
        if not self.server.auth_enabled or path_allowed(self.ident, path):
            return
        gate = self.server.gate
        gate.count_in(gate.forbidden, f"{self.ident.user} get {self.req_path}")
        raise ApiError(403, "Forbidden", f'forbidden: User "{self.ident.user}" cannot get path '
                       f'"{self.req_path}"', {})

    def route(self, path, q, body):
        path = path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(
                ("/healthz/", "/livez/", "/readyz/")):
            return self._send(200, b"ok", "text/plain; charset=utf-8")
        parts = path.strip("/").split("/")
        resource_path = (parts[0] == "api" and len(parts) > 2) or (parts[0] == "apis"
                                                                  and len(parts) > 3)
        if self.command != "GET" and not resource_path:
            raise METHOD_NOT_ALLOWED
        if not resource_path:
            self.server.gate.count_verb("get", self.req_path)
            self._authorize_path(path)
        if path in (OIDC_PATH, JWKS_PATH):
            issuer = self.server.sa_issuer
            if not issuer.allowed(self.ident):
                self.server.gate.count_in(self.server.gate.forbidden,
                                          f"{self.ident.user} get {self.req_path}")
                raise ApiError(403, "Forbidden", f'forbidden: User "{self.ident.user}" cannot '
                               f'get path "{path}"', {})
            scheme = "https" if self.server.ssl_ctx else "http"
            base = f"{scheme}://{self.headers.get('Host', '127.0.0.1')}"
            doc = issuer.oidc_doc(base) if path == OIDC_PATH else issuer.jwks_doc()
            return self._send_obj(200, doc)
        if path == "/version":
            return self._send_obj(200, version_doc())
        if path == "/api":
            return self._send_obj(200, api_versions_doc(self.server.server_address[1]))
        if path == "/apis":
            return self._send_obj(200, api_group_list_doc())
        if path == "/openapi/v2":
            raise PAGE_NOT_FOUND
        if path == "/openapi/v3":
            return self._send(200, OPENAPI_ROOT)
        if path.startswith("/openapi/v3/"):
            doc = OPENAPI_DOCS.get(path[len("/openapi/v3/"):])
            if doc is None:
                raise PAGE_NOT_FOUND
            return self._send(200, doc, headers={"Cache-Control": "public, immutable"})
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            if len(parts) == 2:
                if parts[1] not in GROUPS:
                    raise PAGE_NOT_FOUND
                return self._send_obj(200, api_group_doc(parts[1]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise PAGE_NOT_FOUND
        gv = f"{group}/{version}" if group else version
        served = BY_GV.get(gv)
        if served is None:
            raise PAGE_NOT_FOUND
        if not rest:
            return self._send_obj(200, resource_list_doc(gv))
        watch_prefix = rest[0] == "watch"
        if watch_prefix:
            rest = rest[1:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in served \
                and served[rest[2]].namespaced:
            ns, rest = rest[1], rest[2:]
        if not rest or rest[0] not in served or len(rest) > 3:
            raise PAGE_NOT_FOUND
        rt = served[rest[0]]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if (ns is not None and not rt.namespaced) or (rt.namespaced and name and ns is None):
            raise PAGE_NOT_FOUND
        if sub and not ((sub == "status" and rt.status) or sub in rt.subresources):
            raise PAGE_NOT_FOUND
        self.api(rt, ns, name, sub, q, body, watch_prefix)

    def api(self, rt, ns, name, sub, q, body, watch):
        m = self.command
        dry = q.get("dryRun") == "All"
        watch = watch or (m == "GET" and _truthy(q.get("watch")))
        verb = ("watch" if watch else "get" if m == "GET" and name else "list" if m == "GET" else
                {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(m) or
                ("delete" if name else "deletecollection"))
        self.server.gate.count_verb(verb, self.req_path)
        self._authorize(verb, rt, ns, name, sub)
        if m == "GET":
            if watch:
                return self.watch(rt, ns, name, q)
            if name:
                e = self.server.store.get(rt, ns, name)
                if e is None:
                    raise not_found(rt, name)
                return self._send(200, e.data + b"\n")
            return self.list(rt, ns, q)
        if watch:
            raise METHOD_NOT_ALLOWED
        if m == "POST":
            if name:
                raise METHOD_NOT_ALLOWED
            return self.create(rt, ns, body, dry)
        if m == "PUT" and name:
            return self.update(rt, ns, name, sub, body, dry)
        if m == "PATCH" and name:
            return self.patch(rt, ns, name, sub, body, dry)
        if m == "DELETE":
            opts = self._json(body) if body.strip() else {}
            if not isinstance(opts, dict):
                raise bad_request("DeleteOptions must be a JSON object")
            if name:
                if sub:
                    raise METHOD_NOT_ALLOWED
                e = self.server.store.delete(rt, ns, name, opts.get("preconditions"), dry)
                return self._send(200, e.data + b"\n")
            if "deletecollection" not in rt.verbs:
                raise METHOD_NOT_ALLOWED
            return self.delete_collection(rt, ns, q, dry)
        raise METHOD_NOT_ALLOWED

    # -- protocol upgrades --

    def upgrade(self, path):
        """exec, attach and port-forward: 101, then an echo.  WebSocket
        (RemoteCommand v1-v5, what kubectl 1.30+ speaks) gets real framing:
        stdin comes back on stdout, `echo ARGS` prints ARGS; SPDY/3.1 gets
        the 101 and a raw echo of every byte (enough for a raw client)."""
        m = UPGRADE_PATH.match(path)
        if not m:
            raise bad_request("protocol upgrades are served for pods/NAME/exec, attach and "
                              "portforward only")
        ns, name, sub = m.groups()
        pods = BY_GV["v1"]["pods"]
        self._authorize("create" if self.command == "POST" else "get", pods, ns, name, sub)
        if self.server.store.get(pods, ns, name) is None:
            raise not_found(pods, name)
        if "upgrade" not in self.headers.get("Connection", "").lower():
            raise bad_request("Upgrade without Connection: Upgrade")
        self.server.gate.count_verb("create" if self.command == "POST" else "get", path)
        proto = self.headers.get("Upgrade", "").strip().lower()
        self.close_connection = True
        if proto == "websocket":
            return self._websocket(sub)
        if proto.startswith("spdy/"):
            return self._spdy_echo()
        raise bad_request("unsupported upgrade protocol " + proto)

    def _switch(self, upgrade, extra):
        self.send_response(101)
        self.send_header("Connection", "Upgrade")
        self.send_header("Upgrade", upgrade)
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.flush()

    def _spdy_echo(self):
        offered = [p.strip() for p in self.headers.get("X-Stream-Protocol-Version", "").split(",")
                   if p.strip()]
        self._switch("SPDY/3.1", [("X-Stream-Protocol-Version", offered[0])] if offered else [])
        while True:
            data = self.rfile.read1(65536)
            if not data:
                return
            self.wfile.write(data)

    def _websocket(self, sub):
        key = self.headers.get("Sec-WebSocket-Key", "")
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        known = WS_PORTFORWARD_PROTOCOLS if sub == "portforward" else WS_CHANNEL_PROTOCOLS
        proto = next((p for p in known if p in offered), None)
        if not key or not proto:
            raise bad_request("a WebSocket upgrade needs Sec-WebSocket-Key and one of the "
                              "protocols " + ", ".join(known))
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self._switch("websocket", [("Sec-WebSocket-Accept", accept),
                                   ("Sec-WebSocket-Protocol", proto)])
        if sub == "portforward":
            return self._ws_loop(lambda op, data: [(op, data)])
        query = parse_qs(urlsplit(self.path).query)
        cmd = query.get("command", [])
        if cmd[:1] == ["echo"]:
            # client-go creates its streams after the handshake and drops what
            # arrives before them ("Unknown stream id"), so with stdin open the
            # output waits for the client's first stdin message: by then every
            # stream of the client exists.
            if query.get("stdin", [""])[0] == "true" and ws_read_message(self.rfile) is None:
                return
            self.wfile.write(ws_frame(WS_BINARY, b"\x01" + " ".join(cmd[1:]).encode() + b"\n"))
            return self._ws_finish()
        return self._ws_loop(lambda op, data: self._exec_cat(proto, data))

    def _exec_cat(self, proto, data):
        """What `cat` answers a message: stdin back on stdout; when stdin
        closes (v5), the exit status and the end."""
        if data[:1] == b"\x00" and len(data) > 1:
            return [(WS_BINARY, b"\x01" + data[1:])]
        if proto == "v5.channel.k8s.io" and data == b"\xff\x00":
            return None
        return []

    def _ws_loop(self, answer):
        """Read messages; answer(op, data) gives the messages to send, or
        None to end the session as a finished command does."""
        while True:
            msg = ws_read_message(self.rfile)
            if msg is None:
                return
            op, data = msg
            if op == WS_PING:
                self.wfile.write(ws_frame(WS_PONG, data))
                continue
            if op == WS_CLOSE:
                self.wfile.write(ws_frame(WS_CLOSE, data[:2]))
                return
            if op not in (WS_TEXT, WS_BINARY):
                continue
            out = answer(op, data)
            if out is None:
                return self._ws_finish()
            for o, d in out:
                self.wfile.write(ws_frame(o, d))

    def _ws_finish(self):
        """The command exited 0: its status on stream 3, then a close."""
        self.wfile.write(ws_frame(WS_BINARY, b"\x03" + EXEC_SUCCESS))
        self.wfile.write(ws_frame(WS_CLOSE, struct.pack(">H", 1000)))
        self.connection.settimeout(5)  # wait for the client's close, not forever
        while True:
            msg = ws_read_message(self.rfile)
            if msg is None or msg[0] == WS_CLOSE:
                return

    # -- reads --

    def _list_envelope(self, rt, rv, items, token="", remaining=None):
        meta = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        head = b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[' % (
            rt.kind.encode() + b"List", rt.gv.encode(), dumps(meta))
        return head + b",".join(items) + b"]}\n"

    def list(self, rt, ns, q):
        rv, cont = q.get("resourceVersion", ""), q.get("continue", "")
        rv_match = q.get("resourceVersionMatch", "")
        if rv_match and rv_match not in ("NotOlderThan", "Exact"):
            raise invalid(rt, "", f'resourceVersionMatch: Unsupported value: "{rv_match}"')
        if rv_match and not rv:
            raise invalid(rt, "", "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                          "forbidden unless resourceVersion is provided")
        if cont and rv not in ("", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise bad_request("limit must be an integer")
        matcher = Matcher(rt, ns, None, q.get("labelSelector"), q.get("fieldSelector"))
        items, list_rv, token, remaining = self.server.store.list(rt, matcher, limit, cont, rv,
                                                                  rv_match)
        self._send(200, self._list_envelope(rt, list_rv, items, token, remaining))

    def watch(self, rt, ns, name, q):
        store, gate = self.server.store, self.server.gate
        rv = q.get("resourceVersion", "")
        sie = q.get("sendInitialEvents")
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        rv_match = q.get("resourceVersionMatch", "")
        if sie is not None:
            if rv_match != "NotOlderThan":
                raise invalid(rt, "", "resourceVersionMatch: Forbidden: sendInitialEvents "
                              "requires setting resourceVersionMatch to NotOlderThan")
            if not bookmarks:
                raise invalid(rt, "", "allowWatchBookmarks: Forbidden: sendInitialEvents "
                              "requires setting allowWatchBookmarks to true")
        elif rv_match:
            raise invalid(rt, "", "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                          "forbidden for watch unless sendInitialEvents is provided")
        sie = _truthy(sie) if sie is not None else None
        try:
            timeout = float(q.get("timeoutSeconds") or 0)
        except ValueError:
            raise bad_request("timeoutSeconds must be a number")
        matcher = Matcher(rt, ns, name, q.get("labelSelector"), q.get("fieldSelector"))
        initial, too_old = [], None
        if sie or (sie is None and rv in ("", "0")):
            initial, cursor = store.snapshot_for_watch(rt, matcher)
        elif rv in ("", "0"):
            with store.cond:
                cursor = store.rv
        else:
            try:
                cursor = int(rv)
            except ValueError:
                raise bad_request(f'invalid resource version "{rv}"')
            with store.cond:
                if cursor < store.floor:
                    too_old = f"too old resource version: {cursor} ({store.floor})"
        self.send_response(200)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with store.cond:
            gate.watches += 1
        try:
            self._watch_loop(rt, matcher, initial, cursor, too_old, sie, bookmarks, timeout)
        except CONN_ERRORS:
            self.close_connection = True
        finally:
            with store.cond:
                gate.watches -= 1

    def _chunk(self, etype, data):
        line = b'{"type":"%s","object":%s}\n' % (etype.encode(), data)
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))

    def _bookmark(self, rt, rv, initial_end=False):
        md = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            md["annotations"] = {"k8s.io/initial-events-end": "true"}
        self._chunk("BOOKMARK", dumps({"kind": rt.kind, "apiVersion": rt.gv, "metadata": md}))

    def _watch_loop(self, rt, matcher, initial, cursor, too_old, sie, bookmarks, timeout):
        store, gate, interval = self.server.store, self.server.gate, self.server.bookmark_interval
        if too_old:
            self._chunk("ERROR", dumps(expired(too_old).status()))
            self.wfile.write(b"0\r\n\r\n")
            return
        if not gate.hold():
            self.close_connection = True
            return
        for e in initial:
            self._chunk("ADDED", e.data)
        if sie:
            self._bookmark(rt, cursor, initial_end=True)
        start = time.monotonic()
        deadline = start + timeout if timeout > 0 else None
        next_bm = start + interval if bookmarks else None
        next_check = start + PEER_CHECK_INTERVAL
        while True:
            with store.cond:
                while True:
                    if gate.mode == "refuse" or self.server.stopping:
                        self.close_connection = True
                        return
                    now = time.monotonic()
                    if gate.mode == "open" and (
                            store.rv > cursor or (deadline and now >= deadline)
                            or (next_bm and now >= next_bm)):
                        break
                    if now >= next_check:           # a quiet watch notices a departed client
                        if self._peer_gone():
                            self.close_connection = True
                            return
                        next_check = now + PEER_CHECK_INTERVAL
                    wake = [next_check] + ([deadline, next_bm] if gate.mode == "open" else [])
                    store.cond.wait(max(0.001, min(t for t in wake if t) - now))
                events = store.events_after(cursor)
                current = store.rv
            if events is None:
                self._chunk("ERROR", dumps(expired(
                    f"too old resource version: {cursor} ({store.floor})").status()))
                break
            for ev in events:
                cursor = ev.rv
                if ev.rid != rt.id:
                    continue
                etype = self._translate(ev, matcher)
                if etype:
                    self._chunk(etype, ev.entry.data)
            cursor = max(cursor, current)
            now = time.monotonic()
            if deadline and now >= deadline:
                break
            if next_bm and now >= next_bm:
                self._bookmark(rt, cursor)
                next_bm = now + interval
        self.wfile.write(b"0\r\n\r\n")

    def _peer_gone(self):
        try:
            p = select.poll()
            p.register(self.connection.fileno(),
                       select.POLLRDHUP | select.POLLHUP | select.POLLERR)
            return bool(p.poll(0))
        except (OSError, ValueError):
            return True

    @staticmethod
    def _translate(ev, matcher):
        """The watch event type this watcher sees for ev, or None (selector transitions)."""
        if ev.type == "DELETED":
            return "DELETED" if matcher.match(ev.entry.obj) else None
        new_ok = matcher.match(ev.entry.obj)
        old_ok = ev.old is not None and matcher.match(ev.old.obj)
        if new_ok:
            return "MODIFIED" if old_ok else "ADDED"
        return "DELETED" if old_ok else None

    # -- writes --

    def _json(self, body):
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype == PROTOBUF:
            raise ApiError(415, "UnsupportedMediaType", f'the body of the request was in an '
                           f'unknown format - accepted media types include: application/json, '
                           f'application/yaml, {", ".join(PATCH_TYPES[:3])}')
        try:
            return json.loads(body or b"null")
        except ValueError as e:
            raise bad_request(f"the body of the request could not be decoded as JSON: {e}")

    def _check_body(self, rt, ns, obj, name=None):
        if not isinstance(obj, dict):
            raise bad_request("the body of the request must be a JSON object")
        if obj.get("kind") not in (None, rt.kind) or obj.get("apiVersion") not in (None, rt.gv):
            raise bad_request(f"the API version in the data ({obj.get('apiVersion')}) does not "
                              f"match the expected API version ({rt.gv})"
                              if obj.get("kind") in (None, rt.kind) else
                              f"the kind in the data ({obj.get('kind')}) does not match the "
                              f"expected kind ({rt.kind})")
        obj["apiVersion"], obj["kind"] = rt.gv, rt.kind
        obj = {"apiVersion": rt.gv, "kind": rt.kind, **obj}
        md = obj.get("metadata")
        if md is None:
            md = obj["metadata"] = {}
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced:
            if md.get("namespace") not in (None, "", ns):
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if name is not None and md.get("name") not in (None, "", name):
            raise bad_request(f"the name of the object ({md.get('name')}) does not match the "
                              f"name on the URL ({name})")
        return obj

    def create(self, rt, ns, body, dry):
        obj = self._check_body(rt, ns, self._json(body))
        md = obj["metadata"]
        if not md.get("name") and not md.get("generateName"):
            raise invalid(rt, "", "metadata.name: Required value: name or generateName is "
                          "required")
        if rt.namespaced and not self.server.store.namespace_exists(ns):
            raise not_found(NAMESPACES, ns)
        if rt is CSRS:
            obj = csr_prepare_create(obj, self.ident)
        e = self.server.store.create(rt, obj, dry)
        self._send(201, e.data + b"\n")

    def update(self, rt, ns, name, sub, body, dry):
        obj = self._check_body(rt, ns, self._json(body), name)
        obj["metadata"]["name"] = name
        e, created = self.server.store.update(rt, ns, name, lambda cur: obj, sub, dry,
                                              prepare=self._strategy(rt, sub))
        self._send(201 if created else 200, e.data + b"\n")

    def patch(self, rt, ns, name, sub, body, dry):
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        accepted = [t for t in PATCH_TYPES[:3]       # no strategic merge for custom resources
                    if not (t == PATCH_TYPES[1] and rt.crd)]
        if ctype not in accepted:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                           f"unknown format - accepted media types include: {', '.join(accepted)}")
        patch = self._json(body)

        def apply(cur):
            if cur is None:
                raise not_found(rt, name)
            try:
                if ctype == PATCH_TYPES[0]:
                    new = merge_patch(cur, patch)
                elif ctype == PATCH_TYPES[1]:
                    new = strategic_merge_patch(cur, patch)
                else:
                    new = json_patch(cur, patch)
            except ApiError:
                raise
            except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error "
                               f"in our request: {e}")
            if not isinstance(new, dict):
                raise bad_request("the patched object is not a JSON object")
            new = self._check_body(rt, ns, new, name)
            return new

        e, _ = self.server.store.update(rt, ns, name, apply, sub, dry,
                                        prepare=self._strategy(rt, sub))
        self._send(200, e.data + b"\n")

    @staticmethod
    def _strategy(rt, sub):
        """A resource's own update strategy (Store.update's prepare), if it has one."""
        if rt is CSRS:
            return lambda old, new: csr_prepare_update(old, new, sub)
        return None

    def delete_collection(self, rt, ns, q, dry):
        store = self.server.store
        matcher = Matcher(rt, ns, None, q.get("labelSelector"), q.get("fieldSelector"))
        with store.cond:
            items, rv, _, _ = store.list(rt, matcher)
            deleted = []
            for data in items:
                md = json.loads(data)["metadata"]
                try:
                    deleted.append(store.delete(rt, md.get("namespace"), md["name"],
                                                dry_run=dry).data)
                except ApiError:
                    pass
            rv = store.rv
        self._send(200, self._list_envelope(rt, rv, deleted))


# --------------------------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------------------------

class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, store, gate, ssl_ctx, bookmark_interval, verbose):
        self.store, self.gate, self.ssl_ctx = store, gate, ssl_ctx
        self.bookmark_interval, self.verbose = bookmark_interval, verbose
        self.hostile = HostileLog(gate.cond)
        self.this_conn = threading.local()  # .holder: the ConnHolder of this thread's connection
        self.auth_enabled = bool(ssl_ctx and ssl_ctx.verify_mode != ssl.CERT_NONE)
        self.identity = None             # an IdentitySetup with a CA or bootstrap tokens
        self.sa_issuer = SaIssuer()      # service-account tokens and their keys
        self.stopping = False
        self.listening = True
        self.listen_lock = threading.Lock()
        super().__init__(addr, ApiHandler)

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)       # no getfqdn()
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], CONN_ERRORS):
            super().handle_error(request, client_address)

    def finish_request(self, request, client_address):
        """Runs in the connection's own thread: TLS handshake here, not in the accept loop."""
        holder = ConnHolder(request)
        if not self.gate.track(holder):
            return
        conn = request
        try:
            if not self.gate.hold():     # black-holed: accepted, but not even a TLS handshake
                return
            if self.ssl_ctx:
                request.settimeout(10)
                conn = self.ssl_ctx.wrap_socket(request, server_side=True)
                conn.settimeout(None)
                if not self.gate.adopt(holder, conn):
                    return
            self.this_conn.holder = holder
            self.RequestHandlerClass(conn, client_address, self)
        except CONN_ERRORS:
            pass
        finally:
            self.gate.untrack(holder)
            if conn is not request:
                try:
                    conn.close()
                except OSError:
                    pass

    def serve_in_thread(self):
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True, name="api-accept").start()

    def stop_listening(self):
        with self.listen_lock:
            if self.listening:
                self.shutdown()
                self.socket.close()
                self.listening = False

    def start_listening(self):
        with self.listen_lock:
            if self.listening:
                return
            for attempt in range(50):
                s = socket.socket(self.address_family, self.socket_type)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(self.server_address)
                    break
                except OSError:
                    s.close()
                    if attempt == 49:
                        raise
                    time.sleep(0.1)
            s.listen(self.request_queue_size)
            self.socket = s
            self.listening = True
            self.serve_in_thread()


class ControlHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # as the API port: without it each answer on a kept-alive connection waits
    # ~40 ms for a delayed ACK (headers and body are separate writes)
    disable_nagle_algorithm = True
    server_version = "apiserver-double-control"

    def log_message(self, fmt, *args):
        if self.server.api.verbose:
            sys.stderr.write("control: %s\n" % (fmt % args))

    def _reply(self, code, obj):
        body = dumps(obj) + b"\n"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = do_PUT = lambda self: self.dispatch()

    def dispatch(self):
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        try:
            self._reply(200, self.route(self.command, u.path.rstrip("/"), q, body))
        except ApiError as e:
            self._reply(e.code, e.status())
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            self._reply(500, {"error": str(e)})

    def route(self, m, path, q, body):
        api, store, gate = self.server.api, self.server.api.store, self.server.api.gate
        if m == "GET" and path == "/state":
            with store.cond:
                return {"cut": gate.mode, "rv": store.rv, "floor": store.floor,
                        "port": api.server_address[1], "requests": gate.requests,
                        "requests_by_user_agent": dict(gate.by_ua),
                        "requests_by_path": dict(gate.by_path),
                        "requests_by_verb": dict(gate.by_verb),
                        "requests_by_verb_path": dict(gate.by_verb_path),
                        "requests_by_client_cn": dict(gate.by_client_cn),
                        "requests_by_bearer_user": dict(gate.by_bearer_user),
                        "requests_bearer_without_client_cert": dict(gate.bearer_no_cert),
                        "requests_unauthorized": dict(gate.unauthorized),
                        "requests_forbidden": dict(gate.forbidden),
                        "bytes_by_user_agent": gate.bytes_snapshot(),
                        "watches_open": gate.watches, "connections_open": len(gate.conns),
                        "faults": [list(f) for f in gate.faults],
                        "objects": {rid: len(o) for rid, o in store.objects.items()},
                        "csr": api.identity.signer.state()}
        if m == "POST" and path in ("/cut", "/outage"):
            # /outage?mode=hang is /cut?mode=blackhole by another name
            mode = q.get("mode", "refuse")
            mode = "blackhole" if mode == "hang" else mode
            if mode not in ("refuse", "blackhole"):
                raise bad_request("mode must be refuse, blackhole or hang")
            with store.cond:
                gate.mode = mode
                store.cond.notify_all()
            if mode == "refuse":
                api.stop_listening()
                gate.kill_all()
            else:
                api.start_listening()
            return {"cut": mode}
        if m == "POST" and path == "/drop-connections":
            # every open API connection (watches too) ends now; the port stays open, so
            # clients reconnect at once (what a load balancer's restart does to them)
            n = len(gate.conns)
            gate.kill_all()
            return {"dropped": n}
        if m == "POST" and path == "/restore":
            api.start_listening()
            with store.cond:
                gate.mode = "open"
                store.cond.notify_all()
            return {"cut": "open"}
        if m == "POST" and path == "/reset-counters":
            gate.reset()
            with store.cond:
                api.identity.signer.counts.clear()
            return {"requests": 0}
        if m == "POST" and path == "/csr":
            if q.get("action") not in ("approve", "deny"):
                raise bad_request("action must be approve or deny")
            return api.identity.signer.decide(q.get("name", ""), q["action"], q.get("reason", ""),
                                              q.get("message", ""))
        if m == "POST" and path == "/signer":
            signer = api.identity.signer
            with store.cond:
                if "auto_approve" in q:
                    signer.auto_approve = _truthy(q["auto_approve"])
                if "cert_lifetime" in q:
                    signer.lifetime = int(q["cert_lifetime"])
            return signer.state()
        if m == "POST" and path == "/bootstrap-token":
            return api.identity.add_token(q.get("token", ""), q.get("ttl"), q.get("expiration"),
                                          q.get("groups"))
        if m == "DELETE" and path == "/bootstrap-token":
            return api.identity.delete_token(q.get("id", ""))
        if m == "POST" and path == "/client-ca":
            if not api.auth_enabled:
                raise bad_request("the API port does not require client certificates")
            ctx = make_ssl_ctx(api.tls_cert, api.tls_key, q.get("path", ""))
            api.ssl_ctx = ctx
            gate.kill_all()
            return {"client_ca": q.get("path")}
        if m == "POST" and path == "/sa-token":
            return api.sa_issuer.mint(store, q)
        if m == "POST" and path == "/sa-rotate":
            return api.sa_issuer.rotate()
        if m == "POST" and path == "/issuer-discovery":
            if q.get("who") not in ("all", "serviceaccounts"):
                raise bad_request("who must be all or serviceaccounts")
            api.sa_issuer.who = q["who"]
            return {"who": api.sa_issuer.who}
        if m == "POST" and path == "/compact":
            return {"floor": store.compact()}
        if m == "POST" and path == "/fail":
            with store.cond:
                gate.faults.append([int(q.get("code", 500)), int(q.get("count", 1)),
                                    q.get("path", "/")])
            return {"faults": [list(f) for f in gate.faults]}
        if m == "POST" and path == "/objects":
            doc = json.loads(body)
            if isinstance(doc, list):
                objs = doc
            elif isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List"):
                objs = doc.get("items") or []
            else:
                objs = [doc]
            return {"items": [store.put_raw(o).obj for o in objs], "rv": store.rv}
        if path == "/objects" and m in ("GET", "DELETE"):
            rt = BY_KIND.get((q.get("apiVersion"), q.get("kind")))
            if rt is None:
                raise bad_request("apiVersion and kind of a served resource are required")
            ns = q.get("namespace") or ("default" if rt.namespaced else None)
            if m == "DELETE":
                return store.delete_raw(rt, ns, q.get("name", "")).obj
            if q.get("name"):
                e = store.get(rt, ns, q["name"])
                if e is None:
                    raise not_found(rt, q["name"])
                return e.obj
            items, rv, _, _ = store.list(rt, Matcher(rt, q.get("namespace"), None, "", ""))
            return {"items": [json.loads(i) for i in items], "rv": rv}
        if m == "GET" and path == "/heads":
            # latin-1 keeps every byte, so control characters come back as JSON escapes
            return {"heads": [h.decode("latin-1") for h in gate.heads_under(q.get("path", ""))]}
        if m == "POST" and path == "/hostile":
            return api.hostile.arm(q)
        if m == "DELETE" and path == "/hostile":
            api.hostile.disarm()
            return api.hostile.state()
        if m == "GET" and path == "/hostile":
            return api.hostile.state()
        if m == "POST" and path == "/shutdown":
            threading.Thread(target=self.server.stop_all, daemon=True).start()
            return {"shutdown": True}
        raise ApiError(404, "NotFound", f"no control endpoint {m} {path}")


class ControlServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr, api, done):
        self.api, self.done = api, done
        super().__init__(addr, ControlHandler)

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def stop_all(self):
        time.sleep(0.05)             # let the /shutdown reply go out
        self.done.set()


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

def make_ssl_ctx(cert, key, client_ca):
    """With client_ca, a client certificate is asked for and, if one comes, must verify
    against it (or the handshake fails); a client may also come without one, and then its
    bearer token, or its being anonymous, decides (see allowed())."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if client_ca:
        ctx.load_verify_locations(client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def write_file(path, data, mode=0o644):
    """Write data (bytes or str) to path through a temporary file and a rename."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def setup_pki_dir(d, pki, host):
    """--pki-dir D: the CA of D/ca.crt and D/ca.key (made now if they do not exist; the
    --signing-ca-* one if given), the API port's serving certificate D/apiserver.crt/.key
    (CN kube-apiserver; DNS kubernetes, kubernetes.default, kubernetes.default.svc,
    kubernetes.default.svc.cluster.local, localhost; IP 127.0.0.1, ::1, 10.96.0.1, --host)
    and an admin client certificate D/admin.crt/.key (CN kubernetes-admin, O system:masters).
    Returns the Pki."""
    import ipaddress
    os.makedirs(d, exist_ok=True)
    ca_crt, ca_key = os.path.join(d, "ca.crt"), os.path.join(d, "ca.key")
    if pki is None:
        pki = (Pki.load(ca_crt, ca_key) if os.path.exists(ca_crt) and os.path.exists(ca_key)
               else Pki.generate())
    write_file(ca_crt, pki.cert_pem)
    write_file(ca_key, pki.key_pem, 0o600)
    ips = ["127.0.0.1", "::1", CLUSTER_IP]
    try:
        if str(ipaddress.ip_address(host)) not in ips and not ipaddress.ip_address(
                host).is_unspecified:
            ips.append(str(ipaddress.ip_address(host)))
    except ValueError:
        pass
    crt, key = pki.keypair("kube-apiserver", dns=["kubernetes", "kubernetes.default",
                                                  "kubernetes.default.svc",
                                                  "kubernetes.default.svc.cluster.local",
                                                  "localhost"],
                           ips=ips, usages=("digital signature", "key encipherment",
                                            "server auth"))
    write_file(os.path.join(d, "apiserver.crt"), crt)
    write_file(os.path.join(d, "apiserver.key"), key, 0o600)
    crt, key = pki.keypair("kubernetes-admin", orgs=["system:masters"])
    write_file(os.path.join(d, "admin.crt"), crt)
    write_file(os.path.join(d, "admin.key"), key, 0o600)
    return pki


class IdentitySetup:
    """The identity side of the cluster: the CSR signer (always; it signs only with a CA),
    with a CA the cluster-info ConfigMap, and the bootstrap tokens."""

    def __init__(self, store, pki, pki_dir, auto_approve, lifetime):
        self.store, self.pki, self.pki_dir = store, pki, pki_dir
        self.signer = Signer(store, pki, auto_approve, lifetime)
        self.cluster_info = None
        self.server = None
        store.hooks.append(self.signer.hook)

    def start(self, server, tokens):
        """Once the API port is bound: cluster-info for server, the tokens, D/admin.conf."""
        self.server = server
        if self.pki:
            self.cluster_info = ClusterInfo(self.store, server, self.pki.cert_pem)
            self.store.hooks.append(self.cluster_info.hook)
            self.cluster_info.resign()
        for t in tokens:
            self.add_token(t)
        if self.pki_dir:
            with open(os.path.join(self.pki_dir, "admin.crt"), "rb") as c, \
                    open(os.path.join(self.pki_dir, "admin.key"), "rb") as k:
                fields = [("client-certificate-data", base64.b64encode(c.read()).decode()),
                          ("client-key-data", base64.b64encode(k.read()).decode())]
            write_file(os.path.join(self.pki_dir, "admin.conf"),
                       kubeconfig_yaml(server, self.pki.cert_pem, "kubernetes-admin", fields),
                       0o600)

    def add_token(self, token, ttl=None, expiration=None, groups=None):
        """The token's Secret (which re-signs cluster-info) and, with --pki-dir, the
        bootstrap kubeconfig D/bootstrap-<id>.conf."""
        m = BOOTSTRAP_TOKEN_RE.match(token or "")
        if not m:
            raise bad_request("a bootstrap token is ID.SECRET, [a-z0-9]{6}.[a-z0-9]{16}")
        if ttl:
            expiration = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                       time.gmtime(time.time() + float(ttl)))
        self.store.put_raw(bootstrap_token_secret(m.group(1), m.group(2), expiration, groups))
        out = {"id": m.group(1), "secret": f"kube-system/bootstrap-token-{m.group(1)}",
               "expiration": expiration}
        if self.pki_dir and self.pki and self.server:
            path = os.path.join(self.pki_dir, f"bootstrap-{m.group(1)}.conf")
            write_file(path, kubeconfig_yaml(self.server, self.pki.cert_pem,
                                             "tls-bootstrap-token-user", [("token", token)]),
                       0o600)
            out["kubeconfig"] = path
        return out

    def delete_token(self, tid):
        e = self.store.delete_raw(SECRETS, "kube-system", f"bootstrap-token-{tid}")
        return {"deleted": e.obj["metadata"]["name"]}


def server_url(scheme, host, port):
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="API port (0: pick a free one)")
    p.add_argument("--control-port", type=int, default=0)
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--client-ca", help="require client certificates signed by this CA")
    p.add_argument("--pki-dir", metavar="D", help="a cluster CA in D (made if D/ca.crt and "
                   "D/ca.key do not exist): HTTPS with D/apiserver.crt, client certificates "
                   "signed by the CA, the CA signs CSRs; also D/admin.conf")
    p.add_argument("--signing-ca-cert", metavar="F", help="the CA that signs CSRs (with "
                   "--signing-ca-key); with --pki-dir, used as D's CA")
    p.add_argument("--signing-ca-key", metavar="F")
    p.add_argument("--csr-auto-approve", action="store_true", help="approve CSRs that "
                   "yurt-manager's approver would (yurthub client and serving certificates)")
    p.add_argument("--cert-lifetime", type=int, default=3600, metavar="SECONDS",
                   help="lifetime of issued certificates (spec.expirationSeconds if smaller)")
    p.add_argument("--bootstrap-token", action="append", default=[], metavar="ID.SECRET",
                   help="a bootstrap token (repeatable): its Secret, and cluster-info signed "
                   "with it")
    p.add_argument("--seed", choices=("sample", "none"), default="sample")
    p.add_argument("--pods", type=int, default=0, help="also seed N bulk pods")
    p.add_argument("--node", action="append", help="node name (repeatable; default node-1)")
    p.add_argument("--pool", metavar="NAME", help="with --seed sample: a NodePool NAME of the "
                   "--node nodes, labelled on them, and its NodeBucket NAME-1")
    p.add_argument("--history", type=int, default=2000, help="watch event history length")
    p.add_argument("--bookmark-interval", type=float, default=1.0)
    p.add_argument("--ready-file")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    for t in args.bootstrap_token:
        if not BOOTSTRAP_TOKEN_RE.match(t):
            p.error(f"--bootstrap-token {t}: a token is ID.SECRET, [a-z0-9]{{6}}.[a-z0-9]{{16}}")
    if bool(args.signing_ca_cert) != bool(args.signing_ca_key):
        p.error("--signing-ca-cert and --signing-ca-key go together")
    if args.cert_lifetime <= 0:
        p.error("--cert-lifetime must be positive")
    pki = None
    if (args.pki_dir or args.signing_ca_cert) and x509 is None:
        p.error("--pki-dir and --signing-ca-cert need python3-cryptography")
    if args.signing_ca_cert:
        pki = Pki.load(args.signing_ca_cert, args.signing_ca_key)
    if args.pki_dir:
        pki = setup_pki_dir(args.pki_dir, pki, args.host)
        args.tls_cert = args.tls_cert or os.path.join(args.pki_dir, "apiserver.crt")
        args.tls_key = args.tls_key or os.path.join(args.pki_dir, "apiserver.key")
        args.client_ca = args.client_ca or os.path.join(args.pki_dir, "ca.crt")

    store = Store(history=args.history)
    gate = Gate(store.cond)
    ssl_ctx = make_ssl_ctx(args.tls_cert, args.tls_key, args.client_ca) if args.tls_cert else None
    api = ApiServer((args.host, args.port), store, gate, ssl_ctx, args.bookmark_interval,
                    args.verbose)
    api.tls_cert, api.tls_key = args.tls_cert, args.tls_key
    url = server_url("https" if ssl_ctx else "http", args.host, api.server_address[1])
    done = threading.Event()
    control = ControlServer((args.host, args.control_port), api, done)
    t0 = time.monotonic()
    seed(store, args.seed, args.node or ["node-1"], args.pods, api.server_address[1],
         args.pool)
    api.identity = IdentitySetup(store, pki, args.pki_dir, args.csr_auto_approve,
                                 args.cert_lifetime)
    api.identity.start(url, args.bootstrap_token)
    store.compact()
    if args.verbose:
        sys.stderr.write(f"seeded rv={store.rv} in {time.monotonic() - t0:.2f}s\n")
    api.serve_in_thread()
    threading.Thread(target=control.serve_forever, daemon=True, name="control").start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    if args.ready_file:
        tmp = f"{args.ready_file}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            ready = {"port": api.server_address[1], "control_port": control.server_address[1],
                     "pid": os.getpid(), "url": url}
            if pki:
                ready["ca_file"] = (os.path.join(args.pki_dir, "ca.crt") if args.pki_dir
                                    else args.signing_ca_cert)
            if args.pki_dir:
                ready["pki_dir"] = args.pki_dir
            json.dump(ready, f)
            f.write("\n")
        os.replace(tmp, args.ready_file)
    while not done.wait(1):
        pass
    api.stopping = True
    with store.cond:
        store.cond.notify_all()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
