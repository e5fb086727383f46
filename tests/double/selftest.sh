#!/bin/sh
# Self-test of the kube-apiserver test double (tests/double/apiserver.py).
#
#   sh tests/double/selftest.sh
#
# Starts the double on free 127.0.0.1 ports (read from its ready file) and checks it with curl,
# kubectl and the python3-kubernetes client. Ends with "RESULT: N passed, M failed"; exits
# non-zero when a check failed. Every double it starts is stopped by PID on exit.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
TMP=$(mktemp -d "${TMPDIR:-/tmp}/apiserver-double-selftest.XXXXXX")
PIDS=""
PASS=0
FAIL=0

cleanup() {
    for pid in $PIDS; do kill "$pid" 2>/dev/null; done
    for pid in $PIDS; do wait "$pid" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() { PASS=$((PASS + 1)); echo "ok   - $1"; }
nok() {
    FAIL=$((FAIL + 1)); echo "FAIL - $1"
    if [ -n "${2:-}" ]; then printf '%s\n' "$2" | tail -n 8 | sed 's/^/       /'; fi
}
# check NAME COMMAND...: passes when COMMAND exits 0
check() {
    name=$1; shift
    if out=$("$@" 2>&1); then ok "$name"; else nok "$name" "$out"; fi
}
# jget FILE EXPR: evaluate a python expression on the JSON document d read from FILE
jget() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
# jtest FILE EXPR: exit 0 when the python expression is true for the JSON document d in FILE
jtest() {
    "$PY" -c 'import json,sys
d=json.load(open(sys.argv[1]))
r=eval(sys.argv[2])
sys.exit(0 if r else "false: " + sys.argv[2] + " on " + json.dumps(d)[:600])' "$1" "$2"
}
# lines FILE: the watch events of FILE as a JSON list, for jtest
events() { "$PY" -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1]) if l.strip()]))' "$1" > "$1.json"; }
# certificate helpers (python3-cryptography): make a CSR body, check an issued
# certificate, check cluster-info's signatures, make a service-account-like JWT
cat > "$TMP/idtool.py" <<'EOF'
# idtool.py: certificate helpers for selftest.sh (python3-cryptography)
import base64, datetime, hashlib, hmac, ipaddress, json, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID


def csr_body(args):
    """csr OUT KEYOUT CN ORGS(comma) DNS(comma) IPS(comma) SIGNER USAGES(comma) [EXP]:
    a CertificateSigningRequest (generateName csr-) with a new P-256 key."""
    out, keyout, cn, orgs, dns, ips, signer, usages = args[:8]
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs.split(",") if o]
                     + [x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    b = x509.CertificateSigningRequestBuilder().subject_name(name)
    sans = [x509.DNSName(d) for d in dns.split(",") if d] + [
        x509.IPAddress(ipaddress.ip_address(i)) for i in ips.split(",") if i]
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    pem = b.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    spec = {"request": base64.b64encode(pem).decode(), "signerName": signer,
            "usages": [u for u in usages.split(",") if u]}
    if len(args) > 8:
        spec["expirationSeconds"] = int(args[8])
    with open(out, "w") as f:
        json.dump({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                   "metadata": {"generateName": "csr-"}, "spec": spec}, f)
    with open(keyout, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


def verify_signed_by(cert, ca):
    pub = ca.public_key()
    if isinstance(pub, rsa.RSAPublicKey):
        pub.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(),
                   cert.signature_hash_algorithm)
    else:
        pub.verify(cert.signature, cert.tbs_certificate_bytes,
                   ec.ECDSA(cert.signature_hash_algorithm))
    assert cert.issuer == ca.subject, (cert.issuer, ca.subject)


def load_cert(path_or_csr_json):
    data = open(path_or_csr_json, "rb").read()
    if data.lstrip().startswith(b"{"):
        data = base64.b64decode(json.loads(data)["status"]["certificate"])
    return x509.load_pem_x509_certificate(data)


def cert_check(args):
    """cert FILE|CSR.json CA key=value...: the certificate verifies against CA and has
    cn=, orgs=a,b, dns=a,b, ips=a,b, eku=clientAuth|serverAuth, ku=a,b, lifetime=SECONDS
    (not-after minus now, within 10 s), backdate=SECONDS (now minus not-before, at most)."""
    cert, ca = load_cert(args[0]), x509.load_pem_x509_certificate(open(args[1], "rb").read())
    verify_signed_by(cert, ca)
    want = dict(a.split("=", 1) for a in args[2:])
    now = datetime.datetime.utcnow()
    cn = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = san.get_values_for_type(x509.DNSName)
        ips = [str(i) for i in san.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        dns, ips = [], []
    try:
        eku = sorted(e._name for e in cert.extensions.get_extension_for_class(
            x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        eku = []
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    kus = sorted(n for n in ("digital_signature", "key_encipherment", "content_commitment",
                             "data_encipherment", "key_agreement", "key_cert_sign", "crl_sign")
                 if getattr(ku, n))
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert not bc.ca, "a CA certificate"
    got = {"cn": ",".join(cn), "orgs": ",".join(orgs), "dns": ",".join(dns), "ips": ",".join(ips),
           "eku": ",".join(eku), "ku": ",".join(kus)}
    for k in ("cn", "orgs", "dns", "ips", "eku", "ku"):
        if k in want:
            assert got[k] == want[k], (k, got[k], want[k])
    left = (cert.not_valid_after - now).total_seconds()
    if "lifetime" in want:
        assert abs(left - int(want["lifetime"])) < 10, ("lifetime", left, want["lifetime"])
    back = (now - cert.not_valid_before).total_seconds()
    assert back >= 0, ("not yet valid", back)
    if "backdate" in want:
        assert back <= int(want["backdate"]) + 10, ("backdate", back)
    print("ok", got, "valid for", round(left), "s, backdated", round(back), "s")


def cluster_info(args):
    """clusterinfo CM.json URL CA TOKEN [TOKEN...]: the kubeconfig has one cluster with this
    server and CA, and each token's jws-kubeconfig-<id> verifies (kubeadm's detached JWS);
    no other jws keys."""
    cm, url, ca = json.load(open(args[0])), args[1], open(args[2], "rb").read()
    kc = cm["data"]["kubeconfig"]
    assert kc.count("- cluster:") == 1 and f"    server: {url}\n" in kc, kc
    assert "certificate-authority-data: " + base64.b64encode(ca).decode() + "\n" in kc, kc
    ids = set()
    for tok in args[3:]:
        tid, secret = tok.split(".")
        ids.add(tid)
        header, empty, sig = cm["data"][f"jws-kubeconfig-{tid}"].split(".")
        assert empty == "", "the payload is not detached"
        assert json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))) == {
            "alg": "HS256", "kid": tid}
        assert "=" not in header + sig
        payload = base64.urlsafe_b64encode(kc.encode()).decode().rstrip("=")
        want = base64.urlsafe_b64encode(hmac.new(secret.encode(), f"{header}.{payload}".encode(),
                                                 hashlib.sha256).digest()).decode().rstrip("=")
        assert hmac.compare_digest(sig, want), (sig, want)
    keys = {k for k in cm["data"] if k.startswith("jws-kubeconfig-")}
    assert keys == {f"jws-kubeconfig-{i}" for i in ids}, keys


def jwt(args):
    """jwt SUB: an (unsigned-looking) service-account style JWT."""
    seg = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")  # noqa
    print(seg({"alg": "RS256", "kid": "x"}) + "." + seg({"sub": args[0], "iss": "test"}) + ".c2ln")


if __name__ == "__main__":
    {"csr": csr_body, "cert": cert_check, "clusterinfo": cluster_info, "jwt": jwt}[sys.argv[1]](
        sys.argv[2:])
EOF
idt() { "$PY" "$TMP/idtool.py" "$@"; }

# start_double NAME ARGS...: sets PORT, CPORT, DPID
start_double() {
    name=$1; shift
    ready=$TMP/$name.ready
    "$PY" "$HERE/apiserver.py" --port 0 --control-port 0 --ready-file "$ready" "$@" \
        > "$TMP/$name.log" 2>&1 &
    DPID=$!
    PIDS="$PIDS $DPID"
    i=0
    while [ ! -s "$ready" ]; do
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 "$DPID" 2>/dev/null; then
            echo "double $name did not start:"; cat "$TMP/$name.log"; return 1
        fi
        sleep 0.1
    done
    PORT=$(jget "$ready" 'd["port"]')
    CPORT=$(jget "$ready" 'd["control_port"]')
    [ "$(jget "$ready" 'd["pid"]')" = "$DPID" ]
}

ctl() { curl -sS -m 10 -X "$1" "http://127.0.0.1:$CPORT$2" ${3:+-d "$3"}; }

# kubectl with a private, empty configuration and discovery cache
export KUBECONFIG="$TMP/kubeconfig"
: > "$KUBECONFIG"
kc() { kubectl --server "http://127.0.0.1:$PORT" --cache-dir "$TMP/kcache" "$@"; }

for tool in curl kubectl timeout; do
    command -v $tool > /dev/null || { echo "missing $tool"; echo "RESULT: 0 passed, 1 failed"; exit 1; }
done

# ---------------------------------------------------------------------------------------------
echo "# sample cluster (nodes node-a, node-b)"
if ! start_double main --seed sample --node node-a --node node-b --bookmark-interval 0.5; then
    echo "RESULT: $PASS passed, $((FAIL + 1)) failed"; exit 1
fi
API="http://127.0.0.1:$PORT"
ok "double started, ready file has port $PORT, control port $CPORT and its pid"

check "healthz/livez/readyz say ok" sh -c "[ \"\$(curl -s $API/healthz)\$(curl -s $API/livez)\$(curl -s $API/readyz)\" = okokok ]"
curl -s "$API/version" > "$TMP/version.json"
check "/version is a 1.32 server" jtest "$TMP/version.json" 'd["gitVersion"].startswith("v1.32") and d["major"]=="1"'
curl -s "$API/api" > "$TMP/api.json"
check "/api lists v1" jtest "$TMP/api.json" 'd["kind"]=="APIVersions" and d["versions"]==["v1"]'
curl -s -H 'Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json' "$API/apis" > "$TMP/apis.json"
check "/apis with an aggregated-discovery Accept falls back to APIGroupList" jtest "$TMP/apis.json" \
    'd["kind"]=="APIGroupList" and {"apps","coordination.k8s.io","discovery.k8s.io","events.k8s.io","example.com"} <= {g["name"] for g in d["groups"]}'
curl -s "$API/api/v1" > "$TMP/v1.json"
check "/api/v1 resources: kinds, scopes, verbs, short names, status subresources" jtest "$TMP/v1.json" \
    '(lambda r: r["pods"]["shortNames"]==["po"] and r["nodes"]["namespaced"] is False and r["namespaces"]["shortNames"]==["ns"] and r["services"]["shortNames"]==["svc"] and r["configmaps"]["shortNames"]==["cm"] and "watch" in r["pods"]["verbs"] and r["pods/status"]["verbs"]==["get","patch","update"] and r["nodes"]["kind"]=="Node")({x["name"]: x for x in d["resources"]})'
curl -s "$API/apis/example.com/v1" > "$TMP/crd.json"
check "/apis/example.com/v1 serves the widgets CRD" jtest "$TMP/crd.json" 'd["resources"][0]["name"]=="widgets" and d["resources"][0]["namespaced"]'
check "/openapi/v2 is 404" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' $API/openapi/v2) = 404 ]"
curl -s "$API/openapi/v3" > "$TMP/oa.json"
check "/openapi/v3 lists group versions" jtest "$TMP/oa.json" '"api/v1" in d["paths"] and d["paths"]["apis/apps/v1"]["serverRelativeURL"].startswith("/openapi/v3/apis/apps/v1?hash=")'
curl -s "$API$(jget "$TMP/oa.json" 'd["paths"]["api/v1"]["serverRelativeURL"]')" > "$TMP/oav1.json"
check "/openapi/v3/api/v1 has a schema with x-kubernetes-group-version-kind per kind" jtest "$TMP/oav1.json" \
    '{"group":"","version":"v1","kind":"ConfigMap"} in d["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]["x-kubernetes-group-version-kind"]'

# --- kubectl ----------------------------------------------------------------------------------
check "kubectl version --client" kubectl version --client
kc get pods -A > "$TMP/k-pods.txt" 2>&1
check "kubectl get pods -A lists the seeded pods" sh -c "grep -q '^kube-system *kube-proxy-' $TMP/k-pods.txt && grep -q '^default *web-' $TMP/k-pods.txt && grep -q coredns $TMP/k-pods.txt"
kc get nodes > "$TMP/k-nodes.txt" 2>&1
check "kubectl get nodes" sh -c "grep -q '^node-a ' $TMP/k-nodes.txt && grep -q '^node-b ' $TMP/k-nodes.txt"
check "kubectl get by short names (svc, ep, cm, ns, lease, wd)" kc get svc,ep,cm,ns,lease,wd -A

cat > "$TMP/deploy.yaml" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: hello, namespace: default, labels: {app: hello}}
spec:
  replicas: 2
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec:
      containers:
      - {name: hello, image: "nginx:1.27", env: [{name: A, value: "1"}], ports: [{containerPort: 80}]}
      - {name: sidecar, image: "busybox:1.36"}
EOF
cat > "$TMP/cm.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: demo, namespace: default}
data: {key: v1, gone: x}
EOF
check "kubectl apply -f deployment (create)" sh -c "kubectl --server $API --cache-dir $TMP/kcache apply -f $TMP/deploy.yaml | grep -q 'deployment.apps/hello created'"
sed -i 's/replicas: 2/replicas: 3/; s/nginx:1.27/nginx:1.28/' "$TMP/deploy.yaml"
check "kubectl apply -f deployment (strategic merge patch)" sh -c "kubectl --server $API --cache-dir $TMP/kcache apply -f $TMP/deploy.yaml | grep -q 'deployment.apps/hello configured'"
kc get deploy hello -o json > "$TMP/deploy.json" 2>&1
check "the patched deployment: replicas, image, both containers, generation 2" jtest "$TMP/deploy.json" \
    'd["spec"]["replicas"]==3 and [c["image"] for c in d["spec"]["template"]["spec"]["containers"]]==["nginx:1.28","busybox:1.36"] and d["metadata"]["generation"]==2'
check "kubectl apply -f configmap (create)" sh -c "kubectl --server $API --cache-dir $TMP/kcache apply -f $TMP/cm.yaml | grep -q 'configmap/demo created'"
sed -i 's/key: v1, gone: x/key: v2/' "$TMP/cm.yaml"
check "kubectl apply -f configmap (patch)" sh -c "kubectl --server $API --cache-dir $TMP/kcache apply -f $TMP/cm.yaml | grep -q 'configmap/demo configured'"
check "the configmap was patched (key changed, removed key gone)" sh -c "[ \"\$(kubectl --server $API --cache-dir $TMP/kcache get cm demo -o jsonpath='{.data}')\" = '{\"key\":\"v2\"}' ]"
printf 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 3}\n' > "$TMP/w.yaml"
kc apply -f "$TMP/w.yaml" > /dev/null 2>&1
sed -i 's/size: 3/size: 4/' "$TMP/w.yaml"
check "kubectl apply of a custom resource twice (merge patch)" sh -c "kubectl --server $API --cache-dir $TMP/kcache apply -f $TMP/w.yaml | grep -q configured && [ \"\$(kubectl --server $API --cache-dir $TMP/kcache get widget w1 -o jsonpath='{.spec.size}')\" = 4 ]"
check "kubectl delete configmap" sh -c "kubectl --server $API --cache-dir $TMP/kcache delete cm demo | grep -q 'configmap \"demo\" deleted'"
check "kubectl get of the deleted configmap is NotFound" sh -c "kubectl --server $API --cache-dir $TMP/kcache get cm demo 2>&1 | grep -q NotFound"
check "kubectl delete -f deployment" sh -c "kubectl --server $API --cache-dir $TMP/kcache delete -f $TMP/deploy.yaml | grep -q deleted"

(kc get cm -n default --watch > "$TMP/k-watch.txt" 2>&1 &
 KPID=$!; sleep 6; kill $KPID 2>/dev/null) &
WPID=$!
sleep 2.5
ctl POST /objects '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"seen-by-kubectl","namespace":"default"}}' > /dev/null
wait $WPID
check "kubectl get --watch shows a configmap created meanwhile" grep -q seen-by-kubectl "$TMP/k-watch.txt"

# --- python3-kubernetes -----------------------------------------------------------------------
check "python3-kubernetes: list pods with field_selector spec.nodeName" "$PY" - "$API" <<'EOF'
import sys
from kubernetes import client
c = client.Configuration(); c.host = sys.argv[1]
v1 = client.CoreV1Api(client.ApiClient(c))
pods = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-b").items
names = sorted(p.metadata.name for p in pods)
assert len(pods) >= 2 and {p.spec.node_name for p in pods} == {"node-b"}, names
assert any(n.startswith("kube-proxy-") for n in names), names
assert len(v1.list_pod_for_all_namespaces().items) > len(pods)
assert [n.metadata.name for n in v1.list_node().items] == ["node-a", "node-b"]
assert v1.read_namespaced_service("kube-dns", "kube-system").spec.cluster_ip == "10.96.0.10"
EOF
check "python3-kubernetes: a watch receives MODIFIED after a patch" "$PY" - "$API" <<'EOF'
import sys, threading, time
from kubernetes import client, watch
c = client.Configuration(); c.host = sys.argv[1]
v1 = client.CoreV1Api(client.ApiClient(c))
cm = v1.create_namespaced_config_map("default", {"metadata": {"name": "pywatch"}, "data": {"a": "1"}})
def patch():
    time.sleep(0.5)
    v1.patch_namespaced_config_map("pywatch", "default", {"data": {"a": "2"}})
threading.Thread(target=patch, daemon=True).start()
w = watch.Watch()
for ev in w.stream(v1.list_namespaced_config_map, "default", timeout_seconds=10,
                   resource_version=cm.metadata.resource_version):
    assert ev["type"] == "MODIFIED" and ev["object"].data == {"a": "2"}, ev
    w.stop()
    break
else:
    sys.exit("no event")
EOF
OLDRV=$(curl -s "$API/api/v1/namespaces/default/configmaps" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')
ctl POST /objects '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after-old-rv","namespace":"default"}}' > /dev/null
ctl POST /compact > /dev/null
check "python3-kubernetes: a watch from an rv older than /compact gets 410" "$PY" - "$API" "$OLDRV" <<'EOF'
import sys
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
c = client.Configuration(); c.host = sys.argv[1]
v1 = client.CoreV1Api(client.ApiClient(c))
try:
    for ev in watch.Watch().stream(v1.list_namespaced_config_map, "default",
                                   resource_version=sys.argv[2], timeout_seconds=5):
        sys.exit("unexpected event %s" % ev["type"])
    sys.exit("no error")
except ApiException as e:
    assert e.status == 410 and "too old resource version" in e.reason, (e.status, e.reason)
EOF
curl -sN -m 5 "$API/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$OLDRV" > "$TMP/w410"
events "$TMP/w410"
check "curl: the 410 watch is one ERROR event with an Expired Status, then the stream ends" jtest "$TMP/w410.json" \
    'len(d)==1 and d[0]["type"]=="ERROR" and d[0]["object"]["code"]==410 and d[0]["object"]["reason"]=="Expired" and d[0]["object"]["message"].startswith("too old resource version: ")'

# --- lists ------------------------------------------------------------------------------------
curl -s "$API/api/v1/pods?labelSelector=app%20in%20(web,coredns),tier!=frontend" > "$TMP/l1.json"
check "labelSelector in / != " jtest "$TMP/l1.json" '{i["metadata"]["labels"]["app"] for i in d["items"]}=={"coredns"} and len(d["items"])==2'
curl -s "$API/api/v1/pods?labelSelector=k8s-app,!tier" > "$TMP/l2.json"
check "labelSelector exists / !exists" jtest "$TMP/l2.json" 'len(d["items"])==4 and all("k8s-app" in i["metadata"]["labels"] for i in d["items"])'
curl -s "$API/api/v1/pods?fieldSelector=metadata.namespace%3D%3Dkube-system,spec.nodeName!=node-a,status.phase=Running" > "$TMP/l3.json"
check "fieldSelector ==, != and status.phase" jtest "$TMP/l3.json" '{(i["metadata"]["namespace"], i["spec"]["nodeName"]) for i in d["items"]}=={("kube-system","node-b")} and len(d["items"])==2'
curl -s "$API/api/v1/configmaps?limit=2" > "$TMP/p1.json"
TOKEN=$(jget "$TMP/p1.json" 'd["metadata"]["continue"]')
curl -s "$API/api/v1/configmaps?limit=100&continue=$TOKEN" > "$TMP/p2.json"
curl -s "$API/api/v1/configmaps" > "$TMP/pall.json"
check "limit + continue pages through the whole list once" "$PY" -c '
import json,sys
p1,p2,a=(json.load(open(f)) for f in sys.argv[1:])
n=lambda l:[(i["metadata"]["namespace"],i["metadata"]["name"]) for i in l["items"]]
assert len(p1["items"])==2 and p1["metadata"]["remainingItemCount"]==len(a["items"])-2
assert n(p1)+n(p2)==n(a) and "continue" not in p2["metadata"], (n(p1),n(p2),n(a))' "$TMP/p1.json" "$TMP/p2.json" "$TMP/pall.json"
ctl POST /objects '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"zz-later","namespace":"default"}}' > /dev/null
curl -s "$API/api/v1/configmaps?limit=100&continue=$TOKEN" > "$TMP/p3.json"
check "a continue token lists the snapshot of its resourceVersion" jtest "$TMP/p3.json" '"zz-later" not in [i["metadata"]["name"] for i in d["items"]] and d["metadata"]["resourceVersion"]=='"'$(jget "$TMP/p1.json" 'd["metadata"]["resourceVersion"]')'"
ctl POST /compact > /dev/null
curl -s "$API/api/v1/configmaps?limit=100&continue=$TOKEN" > "$TMP/p4.json"
check "a continue token older than the compaction gets 410 Expired with a fresh token" jtest "$TMP/p4.json" 'd["code"]==410 and d["reason"]=="Expired" and d["metadata"]["continue"]'
curl -s "$API/api/v1/configmaps?limit=1&resourceVersion=0" > "$TMP/p5.json"
check "resourceVersion=0 ignores limit (watch-cache semantics)" jtest "$TMP/p5.json" 'len(d["items"])>1 and "continue" not in d["metadata"]'
curl -s -m 10 "$API/api/v1/nodes?resourceVersion=99999999" > "$TMP/p6.json"
check "a list for a future resourceVersion is 504 Too large resource version" jtest "$TMP/p6.json" 'd["code"]==504 and "Too large resource version" in d["message"]'

# --- writes and errors ------------------------------------------------------------------------
code() { curl -s -o "$TMP/body.json" -w '%{http_code}' "$@"; }
POD='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"app":"p"}},"spec":{"nodeName":"node-a","containers":[{"name":"a","image":"a:1","env":[{"name":"X","value":"1"}]},{"name":"b","image":"b:1"}]}}'
check "POST creates (201) with uid, creationTimestamp, resourceVersion" sh -c "[ \$(curl -s -o $TMP/created.json -w '%{http_code}' -H 'Content-Type: application/json' -d '$POD' $API/api/v1/namespaces/default/pods) = 201 ] && $PY -c 'import json; m=json.load(open(\"$TMP/created.json\"))[\"metadata\"]; assert m[\"uid\"] and m[\"creationTimestamp\"] and int(m[\"resourceVersion\"])>1000'"
check "POST again is 409 AlreadyExists" sh -c "[ \$(curl -s -o $TMP/ae.json -w '%{http_code}' -d '$POD' $API/api/v1/namespaces/default/pods) = 409 ] && grep -q AlreadyExists $TMP/ae.json"
check "POST into a missing namespace is 404" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -d '$POD' $API/api/v1/namespaces/nope/pods) = 404 ]"
[ "$(code -X PATCH -H 'Content-Type: application/strategic-merge-patch+json' -d '{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}],"spec":{"containers":[{"name":"a","image":"a:2","env":[{"name":"Y","value":"2"}]}]}}' "$API/api/v1/namespaces/default/pods/p1")" = 200 ] || true
check "strategic merge patch merges containers and env by name, drops \$ directives" jtest "$TMP/body.json" \
    '[(c["name"],c["image"]) for c in d["spec"]["containers"]]==[("a","a:2"),("b","b:1")] and [e["name"] for e in d["spec"]["containers"][0]["env"]]==["X","Y"] and not any(k.startswith("$") for k in d["spec"])'
code -X PATCH -H 'Content-Type: application/json-patch+json' -d '[{"op":"replace","path":"/spec/containers/1/image","value":"b:2"},{"op":"add","path":"/metadata/labels/extra","value":"yes"},{"op":"remove","path":"/metadata/labels/app"}]' "$API/api/v1/namespaces/default/pods/p1" > /dev/null
check "JSON patch (RFC 6902) add/replace/remove" jtest "$TMP/body.json" 'd["spec"]["containers"][1]["image"]=="b:2" and d["metadata"]["labels"]=={"extra":"yes"}'
code -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"labels":{"extra":null,"m":"1"}},"status":{"phase":"Failed"}}' "$API/api/v1/namespaces/default/pods/p1" > /dev/null
check "merge patch; status is ignored on the main resource" jtest "$TMP/body.json" 'd["metadata"]["labels"]=={"m":"1"} and d["status"]["phase"]=="Pending"'
code -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"labels":{"ignored":"1"}},"status":{"phase":"Running","podIP":"10.244.0.99"}}' "$API/api/v1/namespaces/default/pods/p1/status" > /dev/null
check "PATCH pods/status changes only the status" jtest "$TMP/body.json" 'd["status"]["phase"]=="Running" and "ignored" not in d["metadata"]["labels"]'
check "apply-patch+yaml is 415" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H 'Content-Type: application/apply-patch+yaml' -d '{}' $API/api/v1/namespaces/default/pods/p1) = 415 ]"
check "strategic merge patch on a custom resource is 415" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H 'Content-Type: application/strategic-merge-patch+json' -d '{}' $API/apis/example.com/v1/namespaces/default/widgets/widget-red) = 415 ]"
curl -s "$API/api/v1/namespaces/default/pods/p1" > "$TMP/p1.json"
STALE=$(jget "$TMP/created.json" 'd["metadata"]["resourceVersion"]')
check "PUT with a stale resourceVersion is 409 Conflict" sh -c "$PY -c 'import json,sys; d=json.load(open(\"$TMP/p1.json\")); d[\"metadata\"][\"resourceVersion\"]=\"$STALE\"; print(json.dumps(d))' > $TMP/put.json && [ \$(curl -s -o $TMP/conf.json -w '%{http_code}' -X PUT --data-binary @$TMP/put.json $API/api/v1/namespaces/default/pods/p1) = 409 ] && grep -q '\"reason\":\"Conflict\"' $TMP/conf.json"
check "PUT with the current resourceVersion is 200" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary @$TMP/p1.json $API/api/v1/namespaces/default/pods/p1) = 200 ]"
check "PUT of a missing lease creates it (201)" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -X PUT -d '{\"metadata\":{\"name\":\"new\"},\"spec\":{\"holderIdentity\":\"x\"}}' $API/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/new) = 201 ]"
check "PUT nodes/status changes only the status" sh -c "curl -s $API/api/v1/nodes/node-a | $PY -c 'import json,sys; d=json.load(sys.stdin); d[\"status\"][\"phase\"]=\"X\"; d[\"spec\"][\"unschedulable\"]=True; print(json.dumps(d))' > $TMP/node.json && curl -s -X PUT --data-binary @$TMP/node.json $API/api/v1/nodes/node-a/status | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d[\"status\"][\"phase\"]==\"X\" and \"unschedulable\" not in d[\"spec\"], d[\"spec\"]'"
check "DELETE returns the object, then GET is 404" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -X DELETE $API/api/v1/namespaces/default/pods/p1) = 200 ] && [ \$(curl -s -o /dev/null -w '%{http_code}' $API/api/v1/namespaces/default/pods/p1) = 404 ] && [ \$(curl -s -o /dev/null -w '%{http_code}' -X DELETE $API/api/v1/namespaces/default/pods/p1) = 404 ]"
check "deletecollection with a label selector" sh -c "curl -s -X DELETE '$API/apis/example.com/v1/namespaces/default/widgets?labelSelector=color%20in%20(red,blue)' > /dev/null && [ \"\$(curl -s $API/apis/example.com/v1/namespaces/default/widgets | $PY -c 'import json,sys; print(sorted(i[\"metadata\"][\"name\"] for i in json.load(sys.stdin)[\"items\"]))')\" = \"['w1', 'widget-green']\" ]"
check "Accept: protobuf only is 406 NotAcceptable" sh -c "[ \$(curl -s -o $TMP/406.json -w '%{http_code}' -H 'Accept: application/vnd.kubernetes.protobuf' $API/api/v1/pods) = 406 ] && grep -q NotAcceptable $TMP/406.json"
check "Accept: protobuf,json is answered in JSON" sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code} %{content_type}' -H 'Accept: application/vnd.kubernetes.protobuf,application/json' $API/api/v1/pods)\" = '200 application/json' ]"
check "Accept: as=Table is answered with a plain JSON list" sh -c "curl -s -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json' $API/api/v1/nodes | grep -q '\"kind\":\"NodeList\"'"

# --- watch ------------------------------------------------------------------------------------
RV=$(curl -s "$API/api/v1/namespaces/default/configmaps" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')
# From $RV: the events are replayed from the history whenever the watch
# connects; the timeout only has to outlast a loaded machine.
curl -sN -m 20 "$API/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=$RV&labelSelector=team%20in%20(a,b)&allowWatchBookmarks=true&timeoutSeconds=8" > "$TMP/wsel" &
CPID=$!
for labels in '{"team":"c"}' '{"team":"a"}' '{"team":"b"}' '{"team":"z"}' '{"team":"a"}'; do
    ctl POST /objects "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"sel\",\"namespace\":\"default\",\"labels\":$labels}}" > /dev/null
done
ctl DELETE "/objects?apiVersion=v1&kind=ConfigMap&namespace=default&name=sel" > /dev/null
wait $CPID
events "$TMP/wsel"
check "watch with a label selector: ADDED/MODIFIED/DELETED on entering and leaving it" jtest "$TMP/wsel.json" \
    '[e["type"] for e in d if e["type"]!="BOOKMARK"]==["ADDED","MODIFIED","DELETED","ADDED","DELETED"]'
check "watch: bookmarks arrive with the current resourceVersion; timeoutSeconds ends the stream" jtest "$TMP/wsel.json" \
    'd[-1]["type"]=="BOOKMARK" and int(d[-1]["object"]["metadata"]["resourceVersion"])>=max(int(e["object"]["metadata"]["resourceVersion"]) for e in d)'
curl -sN -m 10 "$API/api/v1/namespaces/kube-system/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1" > "$TMP/wsie"
events "$TMP/wsie"
check "sendInitialEvents: ADDED for all, then a BOOKMARK annotated initial-events-end" jtest "$TMP/wsie.json" \
    '[e["type"] for e in d[:5]]==["ADDED"]*4+["BOOKMARK"] and d[4]["object"]["metadata"]["annotations"]=={"k8s.io/initial-events-end":"true"}'
check "sendInitialEvents without resourceVersionMatch is 422" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' '$API/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true') = 422 ]"
curl -sN -m 10 "$API/api/v1/watch/namespaces/default/services/kubernetes?timeoutSeconds=1" > "$TMP/wlegacy"
events "$TMP/wlegacy"
check "legacy /api/v1/watch/... path with rv='' starts with ADDED" jtest "$TMP/wlegacy.json" 'len(d)==1 and d[0]["type"]=="ADDED" and d[0]["object"]["metadata"]["name"]=="kubernetes"'
check "watch events are one per chunk" sh -c "$PY - $PORT <<'EOF'
import socket, sys
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
s.sendall(b'GET /api/v1/namespaces/kube-system/pods?watch=1&timeoutSeconds=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
data = b''
while True:
    b = s.recv(65536)
    if not b: break
    data += b
head, body = data.split(b'\r\n\r\n', 1)
assert b'Transfer-Encoding: chunked' in head, head
chunks = []
while True:
    size, rest = body.split(b'\r\n', 1)
    n = int(size, 16)
    if n == 0: break
    chunks.append(rest[:n]); body = rest[n + 2:]
assert len(chunks) == 4 and all(c.endswith(b'\n') and c.count(b'\n') == 1 for c in chunks), chunks
EOF"

# --- cuts -------------------------------------------------------------------------------------
curl -sN "$API/api/v1/pods?watch=1&allowWatchBookmarks=true" > "$TMP/wcut" 2>/dev/null &
CPID=$!
sleep 0.8
ctl POST "/cut?mode=refuse" > /dev/null
T0=$(date +%s%N)
curl -s -m 5 "$API/version" > /dev/null; RC=$?
T1=$(date +%s%N)
check "refuse: a request fails fast (rc=$RC, $(((T1 - T0) / 1000000)) ms)" sh -c "[ $RC = 7 ] && [ $(((T1 - T0) / 1000000)) -lt 1000 ]"
sleep 0.3
check "refuse: the open watch was closed" sh -c "! kill -0 $CPID 2>/dev/null"
wait $CPID 2>/dev/null
ctl POST /objects '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"made-during-cut","namespace":"default"},"spec":{"nodeName":"node-a","containers":[{"name":"c","image":"c"}]}}' > /dev/null
ctl POST /restore > /dev/null
check "restore: the same port answers again, with what changed during the cut" sh -c "curl -s -m 5 $API/api/v1/namespaces/default/pods/made-during-cut | grep -q made-during-cut"
RV=$(curl -s "$API/api/v1/pods" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')
curl -sN "$API/api/v1/pods?watch=1&resourceVersion=$RV&allowWatchBookmarks=true" > "$TMP/wbh" 2>/dev/null &
CPID=$!
sleep 1
ctl POST "/cut?mode=blackhole" > /dev/null
sleep 0.2
N1=$(wc -c < "$TMP/wbh")
curl -s -m 2 "$API/version" > /dev/null; RC=$?
check "blackhole: a request times out (rc=$RC)" [ "$RC" = 28 ]
ctl DELETE "/objects?apiVersion=v1&kind=Pod&namespace=default&name=made-during-cut" > /dev/null
sleep 1.2
N2=$(wc -c < "$TMP/wbh")
check "blackhole: the open watch is silent (no events, no bookmarks)" [ "$N1" = "$N2" ]
ctl POST /restore > /dev/null
sleep 0.8
kill $CPID 2>/dev/null; wait $CPID 2>/dev/null
events "$TMP/wbh"
check "restore: the watch resumes with the DELETED that happened during the blackhole" jtest "$TMP/wbh.json" \
    '[e["object"]["metadata"]["name"] for e in d if e["type"]=="DELETED"]==["made-during-cut"]'
check "restore: requests work again" sh -c "curl -s -m 5 $API/version | grep -q gitVersion"

# --- control port -----------------------------------------------------------------------------
ctl GET /state > "$TMP/state.json"
check "/state counts requests per user agent (kubectl, OpenAPI-Generator, curl) and path" jtest "$TMP/state.json" \
    'd["cut"]=="open" and d["requests"]>50 and d["requests_by_user_agent"]["kubectl"]>0 and d["requests_by_user_agent"]["OpenAPI-Generator"]>0 and d["requests_by_user_agent"]["curl"]>0 and d["requests_by_path"]["/api/v1/nodes"]>0 and d["requests_by_verb"]["watch"]>0'
ctl POST /reset-counters > /dev/null
curl -s "$API/api/v1/nodes" > /dev/null
ctl GET /state > "$TMP/state.json"
check "/reset-counters" jtest "$TMP/state.json" 'd["requests"]==1 and d["requests_by_verb_path"]=={"list /api/v1/nodes":1}'
ctl POST "/fail?code=503&count=1&path=/api/v1/nodes" > /dev/null
check "/fail injects one error Status" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' $API/api/v1/nodes) = 503 ] && [ \$(curl -s -o /dev/null -w '%{http_code}' $API/api/v1/nodes) = 200 ]"

# ---------------------------------------------------------------------------------------------
echo "# protocol upgrades: exec, attach, port-forward"
POD=$(kc get pods -n default -o name | head -1 | cut -d/ -f2)
OUT=$(printf 'through the double\n' | timeout 30 kubectl --server "$API" --cache-dir "$TMP/kcache" exec -i "$POD" -- cat 2>/dev/null)
check "kubectl exec -i POD -- cat: stdin back on stdout, over WebSocket (got '$OUT')" [ "$OUT" = "through the double" ]
OUT=$(timeout 30 kubectl --server "$API" --cache-dir "$TMP/kcache" exec "$POD" -- echo a b 2>/dev/null)
check "kubectl exec POD -- echo a b (got '$OUT')" [ "$OUT" = "a b" ]
check "SPDY/3.1: 101 with the stream protocol, then a raw echo" "$PY" -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"POST /api/v1/namespaces/default/pods/%s/exec?command=cat HTTP/1.1\r\nHost: x\r\n"
          b"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: "
          b"v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\nhello" % sys.argv[2].encode())
data = b""
while b"hello" not in data.partition(b"\r\n\r\n")[2]:
    more = s.recv(4096)
    assert more, data
    data += more
head = data.partition(b"\r\n\r\n")[0].decode()
assert head.startswith("HTTP/1.1 101") and "X-Stream-Protocol-Version: v4.channel.k8s.io" in head, head
' "$PORT" "$POD"
check "an exec of a pod that does not exist is 404 NotFound" sh -c "curl -s -H 'Connection: Upgrade' -H 'Upgrade: SPDY/3.1' -X POST '$API/api/v1/namespaces/default/pods/nope/exec?command=cat' | grep -q '\"reason\":\"NotFound\"'"

curl -s "$API/apis/apps.openyurt.io/v1beta2/nodepools" > "$TMP/np0.json"
check "without --pool no NodePool is seeded (the CRD is served, empty)" jtest "$TMP/np0.json" 'd["kind"]=="NodePoolList" and d["items"]==[]'

# ---------------------------------------------------------------------------------------------
echo "# OpenYurt's NodePool and NodeBucket (--pool hangzhou, nodes edge-1 and edge-2)"
if start_double pool --node edge-1 --node edge-2 --pool hangzhou --bookmark-interval 0.5; then
    API="http://127.0.0.1:$PORT"
    curl -s "$API/apis" > "$TMP/y-apis.json"
    check "/apis: apps.openyurt.io with two versions, v1beta2 first and preferred" jtest "$TMP/y-apis.json" \
        '[(g["versions"], g["preferredVersion"]["version"]) for g in d["groups"] if g["name"]=="apps.openyurt.io"]==[([{"groupVersion":"apps.openyurt.io/v1beta2","version":"v1beta2"},{"groupVersion":"apps.openyurt.io/v1alpha1","version":"v1alpha1"}],"v1beta2")]'
    curl -s "$API/apis/apps.openyurt.io" > "$TMP/y-group.json"
    check "/apis/apps.openyurt.io is the same APIGroup" jtest "$TMP/y-group.json" \
        'd["kind"]=="APIGroup" and [v["version"] for v in d["versions"]]==["v1beta2","v1alpha1"] and d["preferredVersion"]["groupVersion"]=="apps.openyurt.io/v1beta2"'
    curl -s "$API/apis/apps.openyurt.io/v1beta2" > "$TMP/y-b2.json"
    check "/apis/apps.openyurt.io/v1beta2: nodepools, cluster-scoped, short name np, category yurt, /status" jtest "$TMP/y-b2.json" \
        '(lambda r: set(r)=={"nodepools","nodepools/status"} and r["nodepools"]["namespaced"] is False and r["nodepools"]["kind"]=="NodePool" and r["nodepools"]["shortNames"]==["np"] and r["nodepools"]["categories"]==["yurt"] and "watch" in r["nodepools"]["verbs"])({x["name"]: x for x in d["resources"]})'
    curl -s "$API/apis/apps.openyurt.io/v1alpha1" > "$TMP/y-a1.json"
    check "/apis/apps.openyurt.io/v1alpha1: nodebuckets, cluster-scoped, short name nb" jtest "$TMP/y-a1.json" \
        '(lambda r: r["nodebuckets"]["namespaced"] is False and r["nodebuckets"]["kind"]=="NodeBucket" and r["nodebuckets"]["shortNames"]==["nb"] and "nodepools" not in r)({x["name"]: x for x in d["resources"]})'
    check "/apis/apps.openyurt.io/v1beta1 is 404 (a version not served)" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' $API/apis/apps.openyurt.io/v1beta1/nodepools) = 404 ]"
    curl -s "$API/openapi/v3" > "$TMP/y-oa.json"
    check "/openapi/v3 lists both group versions" jtest "$TMP/y-oa.json" '"apis/apps.openyurt.io/v1beta2" in d["paths"] and "apis/apps.openyurt.io/v1alpha1" in d["paths"]'
    curl -s "$API/apis/apps.openyurt.io/v1beta2/nodepools" > "$TMP/y-np.json"
    check "list nodepools: the pool, its nodes in status.nodes" jtest "$TMP/y-np.json" \
        'd["kind"]=="NodePoolList" and d["apiVersion"]=="apps.openyurt.io/v1beta2" and [(i["metadata"]["name"], i["status"]["nodes"], "namespace" in i["metadata"]) for i in d["items"]]==[("hangzhou",["edge-1","edge-2"],False)]'
    curl -s "$API/apis/apps.openyurt.io/v1beta2/nodepools/hangzhou" > "$TMP/y-np1.json"
    check "get nodepools/hangzhou" jtest "$TMP/y-np1.json" 'd["kind"]=="NodePool" and d["spec"]["type"]=="Edge" and d["status"]["readyNodeNum"]==2'
    curl -s "$API/apis/apps.openyurt.io/v1alpha1/nodebuckets?labelSelector=openyurt.io/pool-name%3Dhangzhou" > "$TMP/y-nb.json"
    check "list nodebuckets by label openyurt.io/pool-name: hangzhou-1 with the nodes, owned by the pool" jtest "$TMP/y-nb.json" \
        '[(i["metadata"]["name"], i["nodes"], i["numNodes"], i["metadata"]["ownerReferences"][0]["kind"]) for i in d["items"]]==[("hangzhou-1",[{"name":"edge-1"},{"name":"edge-2"}],2,"NodePool")]'
    curl -s "$API/apis/apps.openyurt.io/v1alpha1/nodebuckets?labelSelector=openyurt.io/pool-name%3Dother" > "$TMP/y-nb0.json"
    check "list nodebuckets of another pool: empty" jtest "$TMP/y-nb0.json" 'd["items"]==[]'
    curl -s "$API/api/v1/nodes?labelSelector=apps.openyurt.io/nodepool%3Dhangzhou" > "$TMP/y-nodes.json"
    check "the pool's nodes carry apps.openyurt.io/nodepool=hangzhou" jtest "$TMP/y-nodes.json" \
        'sorted(i["metadata"]["name"] for i in d["items"])==["edge-1","edge-2"]'
    check "kubectl get np,nb (short names)" sh -c "[ \"\$(kubectl --server $API --cache-dir $TMP/kcache-pool get np,nb -o name 2>&1 | tr '\n' ' ')\" = 'nodepool.apps.openyurt.io/hangzhou nodebucket.apps.openyurt.io/hangzhou-1 ' ]"
    RV=$(jget "$TMP/y-np.json" 'd["metadata"]["resourceVersion"]')
    curl -sN -m 10 "$API/apis/apps.openyurt.io/v1beta2/nodepools?watch=1&resourceVersion=$RV&fieldSelector=metadata.name%3Dshanghai&allowWatchBookmarks=true&timeoutSeconds=3" > "$TMP/y-w" &
    CPID=$!
    ctl POST /objects '{"apiVersion":"apps.openyurt.io/v1beta2","kind":"NodePool","metadata":{"name":"shanghai"},"spec":{"type":"Cloud"}}' > /dev/null
    ctl POST /objects '{"apiVersion":"apps.openyurt.io/v1beta2","kind":"NodePool","metadata":{"name":"shanghai"},"spec":{"type":"Cloud"},"status":{"nodes":["edge-3"]}}' > /dev/null
    ctl DELETE "/objects?apiVersion=apps.openyurt.io/v1beta2&kind=NodePool&name=shanghai" > /dev/null
    wait $CPID
    events "$TMP/y-w"
    check "watch nodepools by name: ADDED, MODIFIED, DELETED, bookmarks" jtest "$TMP/y-w.json" \
        '[e["type"] for e in d if e["type"]!="BOOKMARK"]==["ADDED","MODIFIED","DELETED"] and d[1]["object"]["status"]["nodes"]==["edge-3"] and d[-1]["type"]=="BOOKMARK"'
    check "PATCH nodepools/status changes only the status" sh -c "curl -s -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{\"spec\":{\"type\":\"Cloud\"},\"status\":{\"readyNodeNum\":1}}' $API/apis/apps.openyurt.io/v1beta2/nodepools/hangzhou/status | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d[\"status\"][\"readyNodeNum\"]==1 and d[\"spec\"][\"type\"]==\"Edge\", d'"
    check "strategic merge patch on a NodePool is 415 (a custom resource)" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H 'Content-Type: application/strategic-merge-patch+json' -d '{}' $API/apis/apps.openyurt.io/v1beta2/nodepools/hangzhou) = 415 ]"
    kill "$DPID" 2>/dev/null
else
    nok "pool double started"
fi

# ---------------------------------------------------------------------------------------------
echo "# 10000 bulk pods"
if start_double bulk --seed none --pods 10000 --node node-a; then
    API="http://127.0.0.1:$PORT"
    OUT=$(curl -s -o "$TMP/big.raw" -w '%{http_code} %{time_total}' -H 'Accept-Encoding: gzip' "$API/api/v1/pods")
    check "gzip: a 10k-pod list with Accept-Encoding: gzip starts with 1f 8b ($OUT)" sh -c "[ \"\$(head -c 2 $TMP/big.raw | od -An -tx1 | tr -d ' ')\" = 1f8b ]"
    OUT=$(curl -s --compressed -o "$TMP/big.json" -w '%{time_total}' "$API/api/v1/pods")
    check "gzip: curl --compressed decodes 10000 pods of 2-4 KB ($OUT s)" "$PY" -c '
import json,sys; b=open(sys.argv[1],"rb").read(); d=json.loads(b); n=len(d["items"])
assert n==10000, n
assert 2000 < len(b)/n < 4000, len(b)/n' "$TMP/big.json"
    OUT=$(curl -s -o /dev/null -w '%{time_total}' "$API/api/v1/pods")
    check "a 10k-pod list without gzip is served in < 1 s ($OUT s)" "$PY" -c "import sys; sys.exit(0 if $OUT < 1 else 1)"
    check "small responses are not compressed" sh -c "! curl -s -D - -o /dev/null -H 'Accept-Encoding: gzip' '$API/api/v1/pods?limit=5' | grep -qi 'content-encoding'"
    check "a node's pods via fieldSelector out of 10k" sh -c "[ \$(curl -s '$API/api/v1/pods?fieldSelector=spec.nodeName=node-a' | $PY -c 'import json,sys; print(len(json.load(sys.stdin)[\"items\"]))') -ge 90 ]"
    ctl POST /shutdown > /dev/null
    i=0     # wait up to 5 s for it to exit (a zombie until reaped), then reap it
    while [ $i -lt 50 ] && ps -o stat= -p "$DPID" 2>/dev/null | grep -qv Z; do
        sleep 0.1; i=$((i + 1))
    done
    [ $i -lt 50 ] || kill "$DPID" 2>/dev/null
    wait "$DPID"; RC=$?
    check "POST /shutdown stops the double (exit status $RC)" [ "$RC" = 0 ]
else
    nok "bulk double started"
fi

# ---------------------------------------------------------------------------------------------
if command -v openssl > /dev/null; then
    echo "# TLS with client certificates"
    D=$TMP/tls
    mkdir -p "$D"
    (cd "$D" &&
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=double-ca &&
        openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 &&
        printf 'subjectAltName=IP:127.0.0.1\n' > ext &&
        openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2 -extfile ext &&
        openssl req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj "/O=system:nodes/CN=system:node:node-a" &&
        openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cli.crt -days 2 &&
        openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=other-ca &&
        openssl req -newkey rsa:2048 -nodes -keyout other.key -out other.csr -subj "/CN=stranger" &&
        openssl x509 -req -in other.csr -CA other-ca.crt -CAkey other-ca.key -CAcreateserial -out other.crt -days 2) > "$TMP/openssl.log" 2>&1
    if start_double tls --tls-cert "$D/srv.crt" --tls-key "$D/srv.key" --client-ca "$D/ca.crt" --node node-a; then
        API="https://127.0.0.1:$PORT"
        check "TLS: a client certificate signed by --client-ca is accepted" sh -c "curl -s --cacert $D/ca.crt --cert $D/cli.crt --key $D/cli.key $API/api/v1/nodes | grep -q NodeList"
        check "TLS: a client certificate from another CA is refused at the handshake" sh -c "! curl -s -m 5 --cacert $D/ca.crt --cert $D/other.crt --key $D/other.key $API/api/v1/nodes"
        check "TLS: without a certificate nor a token, a request is anonymous: 403 for nodes, 200 for /version" sh -c \
            "[ \$(curl -s -o /dev/null -w '%{http_code}' -m 5 --cacert $D/ca.crt $API/api/v1/nodes) = 403 ] && [ \$(curl -s -o /dev/null -w '%{http_code}' -m 5 --cacert $D/ca.crt $API/version) = 200 ]"
        check "TLS: a bearer token without a client certificate is served, and counted" sh -c \
            "curl -s -m 5 --cacert $D/ca.crt -H 'Authorization: Bearer pod-token' $API/api/v1/nodes | grep -q NodeList && curl -s http://127.0.0.1:$CPORT/state | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d[\"requests_bearer_without_client_cert\"]=={\"/api/v1/nodes\":1} and d[\"requests_by_bearer_user\"]=={\"token:pod-token\":1}, d'"
        check "TLS: kubectl with a client certificate" sh -c "kubectl --server $API --certificate-authority $D/ca.crt --client-certificate $D/cli.crt --client-key $D/cli.key --cache-dir $TMP/kcache-tls get pods -A | grep -q kube-proxy"
        # The flake of test_tls.py's "certificate A is not presented after the switch": a
        # connection whose handshake was under way when the CA was switched was not closed
        # (it had no fd to shut down yet) and was served, and counted, after the switch.
        check "TLS: POST /client-ca drops a connection whose handshake straddles it, and counts nothing from it" \
            "$PY" - "$PORT" "$CPORT" "$D/ca.crt" "$D/cli.crt" "$D/cli.key" "$D/other-ca.crt" <<'EOF'
import http.client, json, socket, ssl, sys
port, cport, ca, crt, key, other_ca = int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:]
def state():
    c = http.client.HTTPConnection("127.0.0.1", cport, timeout=10)
    c.request("GET", "/state")
    return json.loads(c.getresponse().read())["requests_by_client_cn"]
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(crt, key)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3   # the client is done before the server is
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ctx.wrap_bio(inc, out, server_hostname="127.0.0.1")
sock = socket.create_connection(("127.0.0.1", port), timeout=10)
while True:                       # up to the client's last flight, which is held back
    try:
        tls.do_handshake()
        break
    except ssl.SSLWantReadError:
        sock.sendall(out.read())
        data = sock.recv(65536)
        if not data:
            sys.exit("the double closed the connection during the handshake")
        inc.write(data)
c = http.client.HTTPConnection("127.0.0.1", cport, timeout=10)
c.request("POST", "/client-ca?path=" + other_ca)   # the double waits in its handshake now
assert c.getresponse().status == 200
before = state()
tls.write(b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
sock.sendall(out.read())
answer = b""
try:
    while True:
        data = sock.recv(65536)
        if not data:
            break
        inc.write(data)
        try:
            answer += tls.read(65536)
        except ssl.SSLWantReadError:
            pass
except (ssl.SSLError, OSError):
    pass
after = state()
if answer.startswith(b"HTTP/1.1 200") or after != before:
    sys.exit("a handshake begun before the switch was served after it: %r, %s -> %s"
             % (answer[:40], before, after))
EOF
        kill "$DPID" 2>/dev/null
    else
        nok "TLS double started"
    fi

    echo "# CSRs signed by an openssl-made RSA CA (--signing-ca-cert/--signing-ca-key), plain HTTP"
    if "$PY" -c 'import cryptography' 2> /dev/null && start_double sign --seed none --signing-ca-cert "$D/ca.crt" --signing-ca-key "$D/ca.key"; then
        API="http://127.0.0.1:$PORT"
        CSRS=/apis/certificates.k8s.io/v1/certificatesigningrequests
        (cd "$D" && openssl req -new -newkey rsa:2048 -nodes -keyout o.key -out o.csr -subj "/O=system:nodes/CN=system:node:node-o" \
            -addext "subjectAltName=DNS:node-o,IP:192.0.2.7") >> "$TMP/openssl.log" 2>&1
        for n in o-1 o-2; do
            "$PY" -c 'import base64,json,sys; print(json.dumps({"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":sys.argv[2]},"spec":{"request":base64.b64encode(open(sys.argv[1],"rb").read()).decode(),"signerName":"kubernetes.io/kubelet-serving","usages":["digital signature","key encipherment","server auth"]}}))' "$D/o.csr" $n > "$TMP/$n.json"
            curl -s -H 'Content-Type: application/json' --data-binary @"$TMP/$n.json" "$API$CSRS" > "$TMP/$n.out"
        done
        check "an openssl CSR is created over plain HTTP (credentials ignored: username system:anonymous)" jtest "$TMP/o-1.out" \
            'd["metadata"]["name"]=="o-1" and d["spec"]["username"]=="system:anonymous" and d["status"]=={}'
        # what `kubectl certificate approve|deny` does, in JSON (kubectl sends that PUT in
        # protobuf, which the double answers 415)
        decide() {     # NAME Approved|Denied REASON
            curl -s "$API$CSRS/$1" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["status"].setdefault("conditions",[]).append({"type":sys.argv[1],"status":"True","reason":sys.argv[2],"message":"by hand"}); print(json.dumps(d))' "$2" "$3" \
                | curl -s -X PUT -H 'Content-Type: application/json' --data-binary @- "$API$CSRS/$1/approval"
        }
        decide o-1 Approved KubectlApprove > /dev/null
        check "PUT /approval (Approved): issued by the RSA CA (openssl verify), with the SANs and server auth" sh -c \
            "curl -s $API$CSRS/o-1 | $PY -c 'import base64,json,sys; sys.stdout.write(base64.b64decode(json.load(sys.stdin)[\"status\"][\"certificate\"]).decode())' > $D/o-1.crt && openssl verify -CAfile $D/ca.crt $D/o-1.crt && openssl x509 -in $D/o-1.crt -noout -text | grep -q 'DNS:node-o, IP Address:192.0.2.7' && openssl x509 -in $D/o-1.crt -noout -text | grep -q 'TLS Web Server Authentication' && openssl x509 -in $D/o-1.crt -noout -subject | grep -q 'O = system:nodes, CN = system:node:node-o'"
        decide o-2 Denied KubectlDeny > /dev/null
        check "PUT /approval (Denied): Denied, no certificate" sh -c \
            "curl -s $API$CSRS/o-2 | $PY -c 'import json,sys; d=json.load(sys.stdin)[\"status\"]; assert [c[\"type\"] for c in d[\"conditions\"]]==[\"Denied\"] and \"certificate\" not in d, d'"
        check "without client authentication bearer tokens are ignored (a wrong bootstrap token is served)" sh -c \
            "curl -s -H 'Authorization: Bearer abcdef.0000000000000000' $API/api/v1/namespaces | grep -q NamespaceList"
        curl -s "$API/api/v1/namespaces/kube-public/configmaps/cluster-info" > "$TMP/sign-ci.json"
        check "cluster-info carries the signing CA and this plain-HTTP server, and no signatures without tokens" \
            idt clusterinfo "$TMP/sign-ci.json" "$API" "$D/ca.crt"
        kill "$DPID" 2>/dev/null
    else
        nok "signing double started (python3-cryptography?)"
    fi
fi

# ---------------------------------------------------------------------------------------------
if "$PY" -c 'import cryptography' 2> /dev/null; then
    echo "# identity: a cluster CA, CSRs, bootstrap tokens (--pki-dir, --bootstrap-token, --csr-auto-approve)"
    TOK=abcdef.0123456789abcdef
    PKI=$TMP/pki
    CSRS=/apis/certificates.k8s.io/v1/certificatesigningrequests
    if start_double id --node node-a --pki-dir "$PKI" --bootstrap-token $TOK --csr-auto-approve --cert-lifetime 120; then
        API="https://127.0.0.1:$PORT"
        # curl without credentials, with the bootstrap token, as the admin; the CA of $PKI
        # verifies the server each time
        anon() { curl -s -m 10 --cacert "$PKI/ca.crt" "$@"; }
        boot() { curl -s -m 10 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $TOK" "$@"; }
        admin() { curl -s -m 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
        check "ready file: the https url and the CA file" jtest "$TMP/id.ready" \
            'd["url"]=="https://127.0.0.1:%d" % d["port"] and d["ca_file"]=="'"$PKI"'/ca.crt" and d["pki_dir"]=="'"$PKI"'"'
        check "--pki-dir wrote ca, apiserver and admin certificates and keys, admin.conf, bootstrap-abcdef.conf" sh -c \
            "for f in ca.crt ca.key apiserver.crt apiserver.key admin.crt admin.key admin.conf bootstrap-abcdef.conf; do [ -s $PKI/\$f ] || exit 1; done; [ \$(stat -c %a $PKI/ca.key) = 600 ]"
        check "the API port's certificate: signed by the CA, server auth, the kubernetes names and 10.96.0.1" \
            idt cert "$PKI/apiserver.crt" "$PKI/ca.crt" cn=kube-apiserver eku=serverAuth \
            dns=kubernetes,kubernetes.default,kubernetes.default.svc,kubernetes.default.svc.cluster.local,localhost \
            ips=127.0.0.1,::1,10.96.0.1
        check "the admin certificate (O system:masters) signed by the same CA is a client: nodes" sh -c \
            "curl -s -m 10 --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key $API/api/v1/nodes | grep -q NodeList"
        check "kubectl --kubeconfig D/admin.conf" sh -c "kubectl --kubeconfig $PKI/admin.conf --cache-dir $TMP/kcache-id get nodes -o name | grep -qx node/node-a"

        # cluster-info and anonymous requests
        anon "$API/api/v1/namespaces/kube-public/configmaps/cluster-info" > "$TMP/ci.json"
        check "kube-public/cluster-info is readable without credentials" jtest "$TMP/ci.json" 'd["kind"]=="ConfigMap" and "kubeconfig" in d["data"]'
        check "cluster-info: one cluster (this server, the CA), jws-kubeconfig-abcdef = HS256 detached JWS, kid abcdef, key = the secret" \
            idt clusterinfo "$TMP/ci.json" "$API" "$PKI/ca.crt" $TOK
        check "anonymous: /version and /healthz are 200, /api and nodes 403, a watch of cluster-info 403" sh -c \
            "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt $API/version)\$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt $API/healthz)\$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt $API/api)\$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt $API/api/v1/nodes)\$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt '$API/api/v1/namespaces/kube-public/configmaps?watch=1&fieldSelector=metadata.name=cluster-info')\" = 200200403403403 ]"
        anon "$API/api/v1/nodes" > "$TMP/anon.json"
        check "anonymous: the 403 is a Forbidden Status for system:anonymous, as kube-apiserver words it" jtest "$TMP/anon.json" \
            'd["code"]==403 and d["reason"]=="Forbidden" and d["message"]=="nodes is forbidden: User \"system:anonymous\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"'
        check "a bootstrap token with a wrong secret is 401 Unauthorized" sh -c \
            "[ \$(curl -s -o $TMP/401.json -w '%{http_code}' --cacert $PKI/ca.crt -H 'Authorization: Bearer abcdef.0123456789abcdee' $API$CSRS) = 401 ] && grep -q '\"reason\":\"Unauthorized\"' $TMP/401.json"

        # a yurthub client certificate, by bootstrap token
        idt csr "$TMP/c1.json" "$TMP/c1.key" system:node:node-a openyurt:yurthub,system:nodes "" "" \
            kubernetes.io/kube-apiserver-client "digital signature,key encipherment,client auth"
        boot -H 'Content-Type: application/json' --data-binary @"$TMP/c1.json" "$API$CSRS" > "$TMP/c1-created.json"
        check "the bootstrap token creates a CSR: 201, username system:bootstrap:abcdef, its groups, empty status" jtest "$TMP/c1-created.json" \
            'd["kind"]=="CertificateSigningRequest" and d["metadata"]["name"].startswith("csr-") and d["spec"]["username"]=="system:bootstrap:abcdef" and d["spec"]["groups"]==["system:bootstrappers","system:bootstrappers:kubeadm:default-node-token","system:authenticated"] and d["status"]=={}'
        C1=$(jget "$TMP/c1-created.json" 'd["metadata"]["name"]')
        C1RV=$(jget "$TMP/c1-created.json" 'd["metadata"]["resourceVersion"]')
        boot "$API$CSRS/$C1" > "$TMP/c1.csr.json"
        check "auto-approved by yurt-manager's rule (AutoApproved) and issued at once" jtest "$TMP/c1.csr.json" \
            '[(c["type"],c["status"],c["reason"],c["message"]) for c in d["status"]["conditions"]]==[("Approved","True","AutoApproved","Auto approving yurthub node client certificate")] and d["status"]["certificate"]'
        check "the client certificate: verifies against the CA, the CSR's subject, client auth, 120 s (--cert-lifetime), backdated 12 s" \
            idt cert "$TMP/c1.csr.json" "$PKI/ca.crt" cn=system:node:node-a orgs=openyurt:yurthub,system:nodes eku=clientAuth \
            ku=digital_signature,key_encipherment dns= ips= lifetime=120 backdate=12
        boot -N "$API$CSRS?watch=1&resourceVersion=$C1RV&fieldSelector=metadata.name%3D$C1&timeoutSeconds=1" > "$TMP/c1w"
        events "$TMP/c1w"
        check "a watch of the CSR from its creation: MODIFIED with the approval, then MODIFIED with the certificate" jtest "$TMP/c1w.json" \
            '[(e["type"], [c["type"] for c in e["object"]["status"].get("conditions", [])], bool(e["object"]["status"].get("certificate"))) for e in d]==[("MODIFIED",["Approved"],False),("MODIFIED",["Approved"],True)]'
        check "the bootstrap token may list CSRs but not nodes (403 for system:bootstrap:abcdef)" sh -c \
            "[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt -H 'Authorization: Bearer $TOK' $API$CSRS) = 200 ] && [ \$(curl -s -o $TMP/b403.json -w '%{http_code}' --cacert $PKI/ca.crt -H 'Authorization: Bearer $TOK' $API/api/v1/nodes) = 403 ] && grep -q 'system:bootstrap:abcdef.* cannot list resource' $TMP/b403.json"
        "$PY" -c 'import base64,json,sys; sys.stdout.write(base64.b64decode(json.load(open(sys.argv[1]))["status"]["certificate"]).decode())' "$TMP/c1.csr.json" > "$TMP/c1.crt"
        check "the issued certificate is a client of the API port: nodes as system:node:node-a" sh -c \
            "curl -s -m 10 --cacert $PKI/ca.crt --cert $TMP/c1.crt --key $TMP/c1.key $API/api/v1/nodes | grep -q NodeList"

        # the serving certificate, with the client certificate
        idt csr "$TMP/s1.json" "$TMP/s1.key" system:node:node-a system:nodes \
            kubernetes,kubernetes.default,kubernetes.default.svc,kubernetes.default.svc.cluster.local \
            10.96.0.1,169.254.2.1,127.0.0.1 kubernetes.io/kubelet-serving "digital signature,key encipherment,server auth"
        curl -s -m 10 --cacert "$PKI/ca.crt" --cert "$TMP/c1.crt" --key "$TMP/c1.key" -H 'Content-Type: application/json' \
            --data-binary @"$TMP/s1.json" "$API$CSRS" > "$TMP/s1-created.json"
        check "a serving CSR made with the client certificate: username and groups from its CN and O" jtest "$TMP/s1-created.json" \
            'd["spec"]["username"]=="system:node:node-a" and d["spec"]["groups"]==["openyurt:yurthub","system:nodes","system:authenticated"]'
        admin "$API$CSRS/$(jget "$TMP/s1-created.json" 'd["metadata"]["name"]')" > "$TMP/s1.csr.json"
        check "the serving certificate: auto-approved, signed by the CA, server auth, the DNS and IP SANs asked for" \
            idt cert "$TMP/s1.csr.json" "$PKI/ca.crt" cn=system:node:node-a orgs=system:nodes eku=serverAuth \
            dns=kubernetes,kubernetes.default,kubernetes.default.svc,kubernetes.default.svc.cluster.local \
            ips=10.96.0.1,169.254.2.1,127.0.0.1 lifetime=120

        # a pod's bearer token, without a client certificate
        SA=$(idt jwt system:serviceaccount:default:app)
        check "a bearer token that is not a bootstrap token, without a client certificate, is served (a pod's token)" sh -c \
            "curl -s -m 10 --cacert $PKI/ca.crt -H 'Authorization: Bearer $SA' $API/api/v1/namespaces/default/pods | grep -q PodList"
        ctl GET /state > "$TMP/id-state.json"
        check "/state: requests by bearer user, bearer requests without a client certificate by path, CSR counters" jtest "$TMP/id-state.json" \
            'd["requests_by_bearer_user"]["system:bootstrap:abcdef"]>=4 and d["requests_by_bearer_user"]["system:serviceaccount:default:app"]==1 and d["requests_bearer_without_client_cert"]["/api/v1/namespaces/default/pods"]==1 and d["requests_bearer_without_client_cert"]["'"$CSRS"'"]>=2 and d["requests_by_client_cn"]["system:node:node-a"]==2 and d["requests_unauthorized"]=={"'"$CSRS"'":1} and d["requests_forbidden"]["system:bootstrap:abcdef list /api/v1/nodes"]==1 and {k: d["csr"][k] for k in ("created","approved","auto_approved","issued","pending","denied","failed")}=={"created":2,"approved":2,"auto_approved":2,"issued":2,"pending":0,"denied":0,"failed":0}'

        # what the approver leaves alone; manual decisions; the signer's own checks
        idt csr "$TMP/c2.json" "$TMP/c2.key" system:node:node-a openyurt:yurthub,system:nodes,acme "" "" \
            kubernetes.io/kube-apiserver-client "digital signature,key encipherment,client auth"
        C2=$(boot -H 'Content-Type: application/json' --data-binary @"$TMP/c2.json" "$API$CSRS" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["name"])')
        admin "$API$CSRS/$C2" > "$TMP/c2.csr.json"
        check "a client CSR with an organization yurt-manager does not know (acme) stays pending" jtest "$TMP/c2.csr.json" 'd["status"]=={}'
        ctl POST "/csr?name=$C2&action=deny" > "$TMP/c2-denied.json"
        check "POST /csr?action=deny: Denied, no certificate" jtest "$TMP/c2-denied.json" \
            '[(c["type"],c["status"]) for c in d["status"]["conditions"]]==[("Denied","True")] and "certificate" not in d["status"]'
        check "POST /csr?action=approve of a denied CSR is 409" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -X POST 'http://127.0.0.1:$CPORT/csr?name=$C2&action=approve') = 409 ]"
        idt csr "$TMP/s2.json" "$TMP/s2.key" system:node:node-a system:nodes "" "" \
            kubernetes.io/kubelet-serving "digital signature,key encipherment,server auth"
        S2=$(admin -H 'Content-Type: application/json' --data-binary @"$TMP/s2.json" "$API$CSRS" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["name"])')
        ctl POST "/csr?name=$S2&action=approve" > /dev/null
        admin "$API$CSRS/$S2" > "$TMP/s2.csr.json"
        check "a serving CSR without SANs: not auto-approved; approved by hand, the signer fails it (SignerValidationFailure)" jtest "$TMP/s2.csr.json" \
            '[(c["type"],c["reason"]) for c in d["status"]["conditions"]]==[("Approved","TestDoubleApprove"),("Failed","SignerValidationFailure")] and d["status"]["conditions"][1]["message"]=="DNS or IP subjectAltName is required" and "certificate" not in d["status"]'
        ctl POST "/signer?auto_approve=false" > /dev/null
        idt csr "$TMP/c3.json" "$TMP/c3.key" system:node:node-a openyurt:yurthub,system:nodes "" "" \
            kubernetes.io/kube-apiserver-client "digital signature,key encipherment,client auth"
        C3=$(boot -H 'Content-Type: application/json' --data-binary @"$TMP/c3.json" "$API$CSRS" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["name"])')
        ctl GET /state > "$TMP/id-state2.json"
        check "POST /signer?auto_approve=false: a yurthub CSR stays pending" jtest "$TMP/id-state2.json" \
            'd["csr"]["pending"]==1 and d["csr"]["denied"]==1 and d["csr"]["failed"]==1 and d["csr"]["auto_approve"] is False'
        admin "$API$CSRS/$C3" > "$TMP/c3.csr.json"
        "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["status"]={"conditions":[{"type":"Approved","status":"True","reason":"R"},{"type":"Denied","status":"True","reason":"R"}]}; print(json.dumps(d))' "$TMP/c3.csr.json" > "$TMP/c3-both.json"
        check "/approval with both Approved and Denied is 422 (mutually exclusive)" sh -c \
            "[ \$(curl -s -o $TMP/both.json -w '%{http_code}' --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key -X PUT --data-binary @$TMP/c3-both.json $API$CSRS/$C3/approval) = 422 ] && grep -q 'mutually exclusive' $TMP/both.json"
        check "/status may not add Approved (422 Forbidden)" sh -c \
            "[ \$(curl -s -o $TMP/st.json -w '%{http_code}' --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{\"status\":{\"conditions\":[{\"type\":\"Approved\",\"status\":\"True\"}]}}' $API$CSRS/$C3/status) = 422 ] && grep -q 'may not add a condition of type' $TMP/st.json"
        "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["status"]={"conditions":[{"type":"Approved","status":"True","reason":"KubectlApprove","message":"This CSR was approved by kubectl certificate approve."}]}; print(json.dumps(d))' "$TMP/c3.csr.json" > "$TMP/c3-approve.json"
        check "PUT /approval as kubectl certificate approve does (in JSON): approved, then issued; kubectl get csr -o json sees it" sh -c \
            "curl -s -m 10 --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key -X PUT --data-binary @$TMP/c3-approve.json $API$CSRS/$C3/approval > /dev/null && kubectl --kubeconfig $PKI/admin.conf --cache-dir $TMP/kcache-id get csr $C3 -o json > $TMP/c3.json2 && $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [c[\"reason\"] for c in d[\"status\"][\"conditions\"]]==[\"KubectlApprove\"] and d[\"status\"][\"certificate\"] and d[\"status\"][\"conditions\"][0][\"lastUpdateTime\"], d[\"status\"]' $TMP/c3.json2"
        check "a spec change on the main resource is ignored (spec is immutable)" sh -c \
            "curl -s -m 10 --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"signerName\":\"example.com/x\"}}' $API$CSRS/$C3 | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d[\"metadata\"][\"labels\"]=={\"a\":\"b\"} and d[\"spec\"][\"signerName\"]==\"kubernetes.io/kube-apiserver-client\", d'"

        # validation and discovery
        idt csr "$TMP/v1.json" "$TMP/v1.key" system:node:x system:nodes "" "" kubernetes.io/kube-apiserver-client "client auth" 599
        check "expirationSeconds 599 is 422 (may not be less than 600 seconds)" sh -c \
            "[ \$(curl -s -o $TMP/v1.out -w '%{http_code}' --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key --data-binary @$TMP/v1.json $API$CSRS) = 422 ] && grep -q 'spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds' $TMP/v1.out"
        check "a request that is not a CERTIFICATE REQUEST, no signerName, no usages: 422 with the three causes" sh -c \
            "curl -s -m 10 --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key -d '{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"request\":\"$(printf -- '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' | base64 -w0)\"}}' $API$CSRS | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d[\"code\"]==422 and [c[\"field\"] for c in d[\"details\"][\"causes\"]]==[\"spec.request\",\"spec.usages\",\"spec.signerName\"] and \"PEM block type must be CERTIFICATE REQUEST\" in d[\"message\"], d'"
        check "usages that are not a list, or a request that is not base64: 400" sh -c \
            "[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key -d '{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"request\":\"\",\"signerName\":\"a.b/c\",\"usages\":\"client auth\"}}' $API$CSRS)\$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key -d '{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"request\":\"!!\",\"signerName\":\"a.b/c\",\"usages\":[\"client auth\"]}}' $API$CSRS) = 400400 ]"
        admin "$API/apis" > "$TMP/id-apis.json"
        admin "$API/apis/certificates.k8s.io/v1" > "$TMP/id-certs.json"
        check "discovery: certificates.k8s.io/v1 with certificatesigningrequests (csr), /approval and /status" sh -c \
            "jtest() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \"\$@\"; }; jtest $TMP/id-apis.json '[g[\"preferredVersion\"][\"groupVersion\"] for g in d[\"groups\"] if g[\"name\"]==\"certificates.k8s.io\"]==[\"certificates.k8s.io/v1\"]' && jtest $TMP/id-certs.json '(lambda r: set(r)=={\"certificatesigningrequests\",\"certificatesigningrequests/approval\",\"certificatesigningrequests/status\"} and r[\"certificatesigningrequests\"][\"shortNames\"]==[\"csr\"] and r[\"certificatesigningrequests\"][\"namespaced\"] is False)({x[\"name\"]: x for x in d[\"resources\"]})'"

        # bootstrap tokens added and removed at run time
        TOK2=ghijkl.0123456789ghijkl
        ctl POST "/bootstrap-token?token=$TOK2&ttl=3600" > "$TMP/tok2.json"
        check "POST /bootstrap-token adds the Secret kube-system/bootstrap-token-ghijkl and D/bootstrap-ghijkl.conf" sh -c \
            "grep -q '\"secret\":\"kube-system/bootstrap-token-ghijkl\"' $TMP/tok2.json && grep -q 'token: $TOK2' $PKI/bootstrap-ghijkl.conf && curl -s --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key $API/api/v1/namespaces/kube-system/secrets/bootstrap-token-ghijkl | grep -q 'bootstrap.kubernetes.io/token'"
        anon "$API/api/v1/namespaces/kube-public/configmaps/cluster-info" > "$TMP/ci2.json"
        check "cluster-info is signed for the new token too" idt clusterinfo "$TMP/ci2.json" "$API" "$PKI/ca.crt" $TOK $TOK2
        check "the new token authenticates (kubectl with D/bootstrap-ghijkl.conf lists CSRs)" sh -c \
            "kubectl --kubeconfig $PKI/bootstrap-ghijkl.conf --cache-dir $TMP/kcache-id2 get csr -o name | grep -q $C1"
        ctl DELETE "/bootstrap-token?id=ghijkl" > /dev/null
        anon "$API/api/v1/namespaces/kube-public/configmaps/cluster-info" > "$TMP/ci3.json"
        check "DELETE /bootstrap-token: the token is 401 and its signature leaves cluster-info" sh -c \
            "[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt -H 'Authorization: Bearer $TOK2' $API$CSRS) = 401 ] && $PY $TMP/idtool.py clusterinfo $TMP/ci3.json $API $PKI/ca.crt $TOK"
        ctl POST "/bootstrap-token?token=zzzzzz.0123456789zzzzzz&expiration=2001-01-01T00:00:00Z" > /dev/null
        anon "$API/api/v1/namespaces/kube-public/configmaps/cluster-info" > "$TMP/ci4.json"
        check "an expired token is 401 and does not sign cluster-info" sh -c \
            "[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert $PKI/ca.crt -H 'Authorization: Bearer zzzzzz.0123456789zzzzzz' $API$CSRS) = 401 ] && $PY $TMP/idtool.py clusterinfo $TMP/ci4.json $API $PKI/ca.crt $TOK"
        ctl POST /reset-counters > /dev/null
        ctl GET /state > "$TMP/id-state3.json"
        check "/reset-counters zeroes the bearer, 401/403 and CSR counters (pending stays)" jtest "$TMP/id-state3.json" \
            'd["requests_by_bearer_user"]=={} and d["requests_bearer_without_client_cert"]=={} and d["requests_unauthorized"]=={} and d["requests_forbidden"]=={} and d["csr"]["created"]==0 and d["csr"]["issued"]==0 and d["csr"]["pending"]==0'
        kill "$DPID" 2>/dev/null
        cp "$PKI/admin.crt" "$TMP/admin-before.crt"
        cp "$PKI/admin.key" "$TMP/admin-before.key"
        if start_double id2 --seed none --pki-dir "$PKI" --cert-lifetime 3600; then
            API="https://127.0.0.1:$PORT"
            check "a double restarted on the same --pki-dir keeps the CA: the admin certificate of the first run still works" sh -c \
                "curl -s -m 10 --cacert $PKI/ca.crt --cert $TMP/admin-before.crt --key $TMP/admin-before.key $API/api/v1/namespaces | grep -q NamespaceList && ! cmp -s $TMP/admin-before.crt $PKI/admin.crt"
            idt csr "$TMP/e1.json" "$TMP/e1.key" system:node:node-a openyurt:yurthub,system:nodes "" "" \
                kubernetes.io/kube-apiserver-client "digital signature,key encipherment,client auth" 900
            E1=$(curl -s -m 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" --data-binary @"$TMP/e1.json" "$API$CSRS" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["name"])')
            ctl POST "/csr?name=$E1&action=approve" > "$TMP/e1.csr.json"
            check "without --csr-auto-approve a yurthub CSR waits for POST /csr?action=approve; expirationSeconds 900 < --cert-lifetime 3600: 900 s, backdated 90 s" \
                sh -c "curl -s -m 10 --cacert $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key $API$CSRS/$E1 > $TMP/e1.csr.json && $PY $TMP/idtool.py cert $TMP/e1.csr.json $PKI/ca.crt lifetime=900 backdate=90"
            ctl POST "/signer?cert_lifetime=3" > /dev/null
            idt csr "$TMP/e2.json" "$TMP/e2.key" system:node:node-a openyurt:yurthub,system:nodes "" "" \
                kubernetes.io/kube-apiserver-client "digital signature,key encipherment,client auth"
            E2=$(curl -s -m 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" --data-binary @"$TMP/e2.json" "$API$CSRS" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["name"])')
            ctl POST "/csr?name=$E2&action=approve" > /dev/null
            curl -s -m 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$API$CSRS/$E2" \
                | "$PY" -c 'import base64,json,sys; sys.stdout.write(base64.b64decode(json.load(sys.stdin)["status"]["certificate"]).decode())' > "$TMP/e2.crt"
            check "POST /signer?cert_lifetime=3: a 3 s certificate; once expired, its open connection gets 401 and a new one fails the handshake" "$PY" - "$PORT" "$PKI/ca.crt" "$TMP/e2.crt" "$TMP/e2.key" <<'EOF'
import http.client, ssl, sys, time
port, ca, crt, key = int(sys.argv[1]), *sys.argv[2:]
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(crt, key)
c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
def get():
    c.request("GET", "/api/v1/namespaces")
    r = c.getresponse()
    r.read()
    return r.status
assert get() == 200
time.sleep(3.5)
assert get() == 401
try:
    c2 = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    c2.request("GET", "/version")      # TLS 1.3: the server's alert comes with the answer
    c2.getresponse().read()
    sys.exit("the expired certificate made a new connection")
except (ssl.SSLError, OSError, http.client.HTTPException):
    pass
EOF
            kill "$DPID" 2>/dev/null
        else
            nok "restarted identity double started"
        fi
    else
        nok "identity double started"
    fi
else
    echo "# identity: skipped, python3-cryptography is missing"
    nok "python3-cryptography (scripts/deps.sh installs it)"
fi

echo "RESULT: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
