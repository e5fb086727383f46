#!/bin/sh
# make demo: a hub in front of the project's test API server, used by kubectl.
# Starts both on free loopback ports with a temporary cache directory, shows
# kubectl working through the hub, and stops everything it started.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
WORK=$(mktemp -d /tmp/yurthub-demo.XXXXXX)
DOUBLE_PID=""
HUB_PID=""
cleanup() {
	[ -n "$HUB_PID" ] && kill "$HUB_PID" 2>/dev/null && wait "$HUB_PID" 2>/dev/null
	[ -n "$DOUBLE_PID" ] && kill "$DOUBLE_PID" 2>/dev/null && wait "$DOUBLE_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

/usr/bin/python3 "$ROOT/tests/double/apiserver.py" --port 0 --control-port 0 \
	--ready-file "$WORK/double.json" --seed sample --node node1 --node node2 \
	>"$WORK/double.log" 2>&1 &
DOUBLE_PID=$!
i=0
while [ ! -s "$WORK/double.json" ]; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "the test API server did not start"; exit 1; }
	sleep 0.1
done
API_PORT=$(/usr/bin/python3 -c "import json;print(json.load(open('$WORK/double.json'))['port'])")
CONTROL_PORT=$(/usr/bin/python3 -c "import json;print(json.load(open('$WORK/double.json'))['control_port'])")
PROXY_PORT=$(free_port)
SERVE_PORT=$(free_port)

"$BUILD/src/yurthub" --server-addr="http://127.0.0.1:$API_PORT" --node-name=node1 \
	--proxy-port="$PROXY_PORT" --serve-port="$SERVE_PORT" --proxy-secure-port=0 \
	--disk-cache-path="$WORK/cache" --heartbeat-interval-seconds=1 >"$WORK/hub.log" 2>&1 &
HUB_PID=$!
i=0
until curl -sf "http://127.0.0.1:$SERVE_PORT/v1/readyz" >/dev/null; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "the hub did not start"; cat "$WORK/hub.log"; exit 1; }
	sleep 0.1
done

export KUBECONFIG=/dev/null
K="kubectl --server http://127.0.0.1:$PROXY_PORT"
say "the cloud (a test API server) on :$API_PORT, the hub on :$PROXY_PORT"
say "kubectl through the hub"
run $K get nodes
run $K get pods -A -o wide
say "kubelet lists its pods through the hub: the answer is cached"
run curl -s -A "kubelet/v1.30.2" -o /dev/null -w "HTTP %{http_code}, %{size_download} bytes\n" \
	"http://127.0.0.1:$PROXY_PORT/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1"
run curl -s -A "kubelet/v1.30.2" -o /dev/null -w "HTTP %{http_code}, %{size_download} bytes\n" \
	"http://127.0.0.1:$PROXY_PORT/api/v1/nodes/node1"
sleep 0.5
run "$BUILD/src/yurthub" cache ls "$WORK/cache" kubelet pods.v1.core
run "$BUILD/src/yurthub" cache views "$WORK/cache" kubelet pods.v1.core
say "a change through the hub"
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: default\ndata:\n  greeting: hello\n' >"$WORK/cm.yaml"
run $K apply -f "$WORK/cm.yaml"
run $K get configmap demo -o jsonpath='{.data.greeting}{"\n"}'
say "the hub's own endpoints on :$SERVE_PORT"
run curl -s "http://127.0.0.1:$SERVE_PORT/v1/readyz"
echo
curl -s "http://127.0.0.1:$SERVE_PORT/metrics" | grep -E '^yurthub_(requests_total|upstream_healthy|cache_writes_total)' | head -8
if [ -x "$ROOT/scripts/demo-offline.sh" ]; then
	. "$ROOT/scripts/demo-offline.sh"
fi
say "done: stopping the hub and the test API server"
