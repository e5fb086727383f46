#!/bin/sh
# Run every test suite of a build directory and sum their results.
# cmocka suites report "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)";
# script suites report a line "RESULT: N passed, M failed".  A suite that
# crashes or exits non-zero without reporting counts as one failure.
# The last line is the plain total: "N passed, M failed".
set -u
B=${1:-build-san}
B=$(cd "$B" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export YURTHUB_BUILD=$B YURTHUB_ROOT=$ROOT
LOG=$B/test-logs
mkdir -p "$LOG"

SUITES="
tests/test_buf tests/test_fsutil tests/test_meta tests/test_selector tests/test_selectable tests/test_key
tests/test_view tests/test_disk tests/test_disk_spare tests/test_disk_fixtures tests/test_disk_faults tests/test_store_fault
tests/test_config tests/test_cache_cmd tests/test_json_scan tests/test_stream tests/test_cache tests/test_list_bounds tests/test_views_behind tests/test_local_changes tests/test_requestinfo
tests/test_base64 tests/test_kubeconfig tests/test_patch tests/test_podendpoints tests/test_kinds tests/test_outbox tests/test_upstream tests/test_framing tests/test_local_json tests/test_offline_authz
tests/test_filter tests/test_rewrite tests/test_follow tests/test_informer tests/test_dummy tests/test_sharedcache tests/test_leaderhub
tests/test_x509 tests/test_client_ca tests/test_jws tests/test_satoken tests/test_certstore tests/test_certmgr tests/test_csrclient tests/test_hubfiles
tests/contract_disk
tests/crash_test
tests/fault/test_order_check tests/fault/test_write_order tests/fault/test_disk_faults_inject
tests/fault/test_cache_faults
tests/test_etcd_client tests/contract_etcd tests/test_etcd_store tests/test_etcd_pool tests/test_etcd_abandoned tests/etcd_crash
py:scripts/check_layers.py
script:tests/cli/test_cli.sh
script:tests/pkg/test_install.sh
script:scripts/run-fuzz.sh
py:tests/double/selftest.sh
py:tests/e2e/test_online.py
py:tests/e2e/test_real_clients.py
py:tests/e2e/test_tls.py
py:tests/e2e/test_client_certs.py
py:tests/e2e/test_dummy_if.py
py:tests/e2e/test_identity.py
py:tests/e2e/test_balance.py
py:tests/e2e/test_offline.py
py:tests/e2e/test_deletions.py
py:tests/e2e/test_offline_api.py
py:tests/e2e/test_offline_writes.py
py:tests/e2e/test_memory.py
py:tests/e2e/test_outage.py
py:tests/e2e/test_filters.py
py:tests/e2e/test_filter_store.py
py:tests/e2e/test_filter_odd.py
py:tests/e2e/test_filter_follow.py
py:tests/e2e/test_filter_startup.py
py:tests/e2e/test_multiplexer.py
py:tests/e2e/test_pool.py
py:tests/e2e/test_autonomy.py
py:tests/e2e/test_follow_node.py
py:tests/e2e/test_migrate.py
py:tests/e2e/test_etcd_hub.py
py:tests/e2e/test_etcd_abandoned.py
py:tests/e2e/test_store_garbage.py
py:tests/e2e/test_etcd_nospace.py
py:tests/e2e/test_hostile_upstream.py
py:tests/e2e/test_memory_bounds.py
py:tests/e2e/test_hostile_client.py
py:tests/e2e/test_disk_faults.py
py:tests/e2e/test_store_lost_writes.py
py:tests/e2e/test_security.py
py:tests/e2e/test_offline_tokens.py
py:tests/e2e/test_metrics.py
py:tests/e2e/test_logs.py
py:tests/e2e/test_flapping.py
py:tests/e2e/test_request_path.py
py:tests/e2e/test_upgrade.py
py:tests/e2e/test_bad_headers.py
"

total_pass=0
total_fail=0
total_skip=0
for s in $SUITES; do
	case $s in
	script:*) cmd="sh $ROOT/${s#script:}"; name=$(basename "${s#script:}") ;;
	py:*.sh) cmd="sh $ROOT/${s#py:}"; name=$(basename "${s#py:}") ;;
	py:*) cmd="/usr/bin/python3 $ROOT/${s#py:}"; name=$(basename "${s#py:}") ;;
	*) cmd="$B/$s"; name=$(basename "$s") ;;
	esac
	out="$LOG/$name.log"
	timeout 1200 $cmd >"$out" 2>&1
	rc=$?
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
	r=$(sed -n 's/^RESULT: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$out" | tail -1)
	if [ -n "$r" ]; then
		p=${r% *}
		f=${r#* }
	fi
	p=${p:-0}
	f=${f:-0}
	# skipped (cmocka's count, or a script's "SKIPPED: why" lines): not passed
	k=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
	[ -n "$k" ] || k=$(grep -c '^SKIPPED' "$out")
	total_skip=$((total_skip + k))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	if [ "$f" -eq 0 ]; then
		echo "ok    $name ($p passed$([ "$k" -gt 0 ] && echo ", $k skipped"))"
	else
		echo "FAIL  $name ($p passed, $f failed; exit $rc) - log follows:"
		tail -40 "$out" | sed 's/^/    /'
	fi
done
[ "$total_skip" -eq 0 ] || echo "$total_skip skipped (the reasons are in $LOG)"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
