# Sourced by scripts/demo.sh: the offline part.  Uses $K, $WORK, $CONTROL_PORT,
# $PROXY_PORT, $SERVE_PORT and say/run from there.
say "kubectl lists pods on node1 (the hub caches kubelet's view of them)"
run $K get pods -A --field-selector spec.nodeName=node1
say "cutting the link to the cloud"
run curl -s -X POST "http://127.0.0.1:$CONTROL_PORT/cut?mode=refuse" -o /dev/null
curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/version"
i=0
until curl -s "http://127.0.0.1:$SERVE_PORT/metrics" | grep -q '^yurthub_upstream_healthy{.*} 0'; do
	i=$((i + 1)); [ $i -gt 50 ] && break
	sleep 0.1
done
say "offline: kubectl still answers, from the hub's cache"
run $K get pods -A --field-selector spec.nodeName=node1 || true
run $K get nodes node1 || true
say "offline: a list nobody cached is refused (not answered \"empty\"), deletes too"
run $K get secrets -A || true
run $K delete configmap demo || true
say "the link comes back"
run curl -s -X POST "http://127.0.0.1:$CONTROL_PORT/restore" -o /dev/null
i=0
until curl -s "http://127.0.0.1:$SERVE_PORT/metrics" | grep -q '^yurthub_upstream_healthy{.*} 1'; do
	i=$((i + 1)); [ $i -gt 100 ] && break
	sleep 0.1
done
run $K delete configmap demo
