#!/bin/sh
# Run every libFuzzer target of a fuzz build (meson -Dfuzz=true, see
# docs/fuzzing.md) for a while, one after the other, from its corpus in
# fuzz/corpus/<target>/ and with its dictionary from fuzz/dict/.
#
#   scripts/run-fuzz.sh <build-dir> <seconds-per-target> [--keep] [target...]
#
# Without arguments (as scripts/run-tests.sh runs it): build-fuzz/ of the
# source tree, or $YURTHUB_FUZZ_BUILD, for $YURTHUB_FUZZ_SECONDS (12) each.
# A target passes when it runs its time without a finding.  New inputs go to
# a scratch directory, so the corpora in the repository do not change -
# unless --keep is given: then each target's corpus is replaced by the old
# corpus and the new inputs minimized together (-set_cover_merge=1, the
# smallest set of -merge=1's kind that keeps every edge); the inputs of
# fixed findings, named regress-*, are always kept.  A finding is
# left as <build-dir>/fuzz-logs/<target>-crash-<sha1> (or -leak-, -timeout-,
# -oom-); reproduce it with <build-dir>/fuzz/<target> <that file>.
# Per target one line with its figures; the last line is
# "RESULT: N passed, M failed", as scripts/run-tests.sh sums it.
set -u
ROOT=${YURTHUB_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
if [ $# -eq 0 ]; then
	set -- "${YURTHUB_FUZZ_BUILD:-$ROOT/build-fuzz}" "${YURTHUB_FUZZ_SECONDS:-12}"
fi
if [ $# -lt 2 ] || [ ! -d "$1/fuzz" ]; then
	echo "usage: run-fuzz.sh <build-dir> <seconds-per-target> [--keep] [target...]" >&2
	echo "no fuzz build in ${1:-?}: make fuzz" >&2
	echo "RESULT: 0 passed, 1 failed"
	exit 1
fi
B=$1
SECS=$2
shift 2
KEEP=0
if [ "${1:-}" = "--keep" ]; then
	KEEP=1
	shift
fi
B=$(cd "$B" && pwd)
LOG=$B/fuzz-logs
mkdir -p "$LOG"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The dictionary of a target (fuzz/dict/), or nothing.
dict_of() {
	case $1 in
	fuzz_request) d=request ;;
	fuzz_selector) d=selector ;;
	fuzz_kubeconfig) d=yaml ;;
	fuzz_patch) d=patch ;;
	fuzz_etcd_client) d=etcd ;;
	fuzz_x509) d=pem ;;
	fuzz_jws | fuzz_satoken) d=jws ;;
	fuzz_offline_authz) d=offline_authz ;;
	fuzz_list_stream | fuzz_watch_stream | fuzz_rewrite | fuzz_meta | fuzz_view | fuzz_journal | fuzz_outbox | fuzz_podendpoints | fuzz_selectable | fuzz_json_scan)
		d=json ;;
	*) return 0 ;;
	esac
	echo "-dict=$ROOT/fuzz/dict/$d.dict"
}

# "<execs> execs, <n>/s, cov <c>, ft <f>, corpus <k> files" from a log.
figures() {
	last=$(grep -aE '^#[0-9]+' "$1" | tail -1)
	execs=$(sed -n 's/^stat::number_of_executed_units: //p' "$1")
	rate=$(sed -n 's/^stat::average_exec_per_sec: //p' "$1")
	cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p')
	echo "${execs:-?} execs, ${rate:-?}/s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?} files"
}

# Replace the target's corpus by the old one and the new inputs, minimized.
keep() {
	t=$1 work=$2
	merged=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-merge-$t.XXXXXX")
	# the smallest set with the same edges: set-cover merge, hit counts ignored
	if "$B/fuzz/$t" -set_cover_merge=1 -use_counters=0 -rss_limit_mb=2048 -timeout=10 "$merged" \
		"$ROOT/fuzz/corpus/$t" "$work" >"$LOG/$t.merge.log" 2>&1; then
		# inputs of fixed findings (regress-*) stay, whatever they cover
		find "$ROOT/fuzz/corpus/$t" -name 'regress-*' -exec cp {} "$merged" \;
		rm -rf "$ROOT/fuzz/corpus/$t"
		mkdir -p "$ROOT/fuzz/corpus"
		cp -r "$merged" "$ROOT/fuzz/corpus/$t"
		echo "      corpus kept: $(ls "$ROOT/fuzz/corpus/$t" | wc -l) files"
	else
		echo "      merge failed, corpus unchanged (see $LOG/$t.merge.log)"
	fi
	rm -rf "$merged"
}

targets=${*:-$(cd "$B/fuzz" && ls | grep -E '^fuzz_[a-z0-9_]+$')}
pass=0
fail=0
for t in $targets; do
	exe=$B/fuzz/$t
	if [ ! -x "$exe" ]; then
		echo "FAIL  $t: no such target in $B/fuzz"
		fail=$((fail + 1))
		continue
	fi
	mkdir -p "$ROOT/fuzz/corpus/$t"
	work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-$t.XXXXXX")
	out=$LOG/$t-${SECS}s.log # a long run beside a short one keeps its own
	# -timeout is per input; the whole run is bounded by max_total_time
	timeout $((SECS + 300)) "$exe" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 \
		-print_final_stats=1 -artifact_prefix="$LOG/$t-" $(dict_of "$t") \
		"$work" "$ROOT/fuzz/corpus/$t" >"$out" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		pass=$((pass + 1))
		echo "ok    $t: $(figures "$out")"
		[ "$KEEP" -eq 1 ] && keep "$t" "$work"
	else
		fail=$((fail + 1))
		echo "FAIL  $t (exit $rc): $(ls "$LOG/$t"-* 2>/dev/null | tr '\n' ' ')- log follows:"
		{
			grep -aE 'ERROR:|invariant|SUMMARY' "$out" | head -4
			grep -aE '^ *#[0-9]+ 0x.* in .*/(src|fuzz)/' "$out" | head -8
		} | sed 's/^ */    /'
	fi
	rm -rf "$work"
done
echo "RESULT: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
