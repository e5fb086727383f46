#!/bin/sh
# test_cli.sh - the yurthub binary from the outside: --version, --help, flag
# errors (exit 2, one line on stderr naming the flag), and `yurthub cache`
# ls/get/verify on a small cache directory built here.
#
# Usage: YURTHUB_BUILD=<build dir> sh tests/cli/test_cli.sh
# The binary is $YURTHUB_BUILD/src/yurthub.  Prints one line per failed check
# and, last, exactly one line "RESULT: N passed, M failed"; exits 1 if M > 0.

passed=0
failed=0

pass() {
	passed=$((passed + 1))
}

fail() {
	failed=$((failed + 1))
	printf 'FAIL: %s\n' "$*"
}

finish() {
	printf 'RESULT: %d passed, %d failed\n' "$passed" "$failed"
	if [ "$failed" -gt 0 ]; then
		exit 1
	fi
	exit 0
}

YH="${YURTHUB_BUILD:-}/src/yurthub"
if [ -z "${YURTHUB_BUILD:-}" ] || [ ! -x "$YH" ]; then
	fail "no executable yurthub at '$YH' (set YURTHUB_BUILD to the build directory)"
	finish
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/yurthub-cli.XXXXXX") || {
	fail "mktemp -d failed"
	finish
}
trap 'rm -rf "$T"' EXIT
trap 'rm -rf "$T"; exit 130' INT
trap 'rm -rf "$T"; exit 143' TERM

OUT="$T/stdout"
ERR="$T/stderr"

# run ARGS...: runs yurthub, stdout/stderr to $OUT/$ERR, status in $rc.
run() {
	"$YH" "$@" >"$OUT" 2>"$ERR"
	rc=$?
}

lines() {
	wc -l <"$1" | tr -d ' '
}

# expect_rc WANT WHAT
expect_rc() {
	if [ "$rc" -eq "$1" ]; then
		pass
	else
		fail "$2: exit status $rc, want $1 (stderr: $(head -c 300 "$ERR"))"
	fi
}

# expect_usage_error WHAT NEEDLE: exit 2, one line on stderr containing NEEDLE,
# nothing on stdout.
expect_usage_error() {
	expect_rc 2 "$1"
	n=$(lines "$ERR")
	if [ "$n" = 1 ]; then
		pass
	else
		fail "$1: $n lines on stderr, want exactly 1: $(head -c 300 "$ERR")"
	fi
	if grep -q -e "$2" "$ERR"; then
		pass
	else
		fail "$1: stderr does not name '$2': $(head -c 300 "$ERR")"
	fi
	if [ -s "$OUT" ]; then
		fail "$1: unexpected output on stdout: $(head -c 300 "$OUT")"
	else
		pass
	fi
}

# expect_stdout WHAT WANT_FILE: stdout is exactly the content of WANT_FILE.
expect_stdout() {
	if cmp -s "$OUT" "$2"; then
		pass
	else
		fail "$1: stdout differs; got: $(head -c 300 "$OUT" | tr '\n' '|') want: $(head -c 300 "$2" | tr '\n' '|')"
	fi
}

# ---- --version and --help ----

run --version
expect_rc 0 "--version"
if [ "$(lines "$OUT")" = 1 ] && grep -Eq '^yurthub [0-9]+\.[0-9]+\.[0-9]+[^ ]*$' "$OUT"; then
	pass
else
	fail "--version: want one line 'yurthub <version>', got: $(head -c 300 "$OUT")"
fi
if [ -s "$ERR" ]; then
	fail "--version: unexpected stderr: $(head -c 300 "$ERR")"
else
	pass
fi

run --help
expect_rc 0 "--help"
if grep -q '^Usage' "$OUT"; then
	pass
else
	fail "--help: no Usage line on stdout"
fi
if grep -q -e '--server-addr' "$OUT" && grep -q -e '--node-name' "$OUT"; then
	pass
else
	fail "--help: does not mention --server-addr and --node-name"
fi

# ---- flag errors ----

run --bogus
expect_usage_error "--bogus" '--bogus'

run --server-addr=https://a:6443 --node-name=n1 --bogus
expect_usage_error "--bogus after valid flags" '--bogus'

run --proxy-port=abc
expect_usage_error "--proxy-port=abc" 'proxy-port'

run --node-name=n1
expect_usage_error "missing --server-addr" 'server-addr'

run
expect_usage_error "no flags at all" 'server-addr'

run --server-addr=https://a:6443
expect_usage_error "missing --node-name" 'node-name'

run --server-addr=ftp://a --node-name=n1
expect_usage_error "bad --server-addr URL" 'server-addr'

run --node-name
expect_usage_error "flag without its argument" 'node-name'

# issue 11: 0 used to pass, and then every offline watch ended at once
run --server-addr=https://a:6443 --node-name=n1 --min-request-timeout=0
expect_usage_error "--min-request-timeout=0" 'min-request-timeout'

# ---- a cache directory ----

C="$T/cache"
POD_WEB='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"default","resourceVersion":"100"},"spec":{"nodeName":"node1"}}'
POD_DNS='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dns-1","namespace":"kube-system","resourceVersion":"101"},"spec":{"nodeName":"node1"}}'
NODE='{"apiVersion":"v1","kind":"Node","metadata":{"name":"node1","resourceVersion":"7"}}'
SVC='{"apiVersion":"v1","kind":"Service","metadata":{"name":"kubernetes","namespace":"default","resourceVersion":"55"}}'
VERSION='{"major":"1","minor":"28","gitVersion":"v1.28.2"}'

# put REL CONTENT: a 0600 file in a 0700 directory, as the hub writes them.
put() {
	(
		umask 077
		mkdir -p "$(dirname "$C/$1")" && printf '%s\n' "$2" >"$C/$1"
	) || fail "fixture: cannot write $1"
}

put kubelet/pods.v1.core/default/web-0 "$POD_WEB"
put kubelet/pods.v1.core/kube-system/dns-1 "$POD_DNS"
put kubelet/nodes.v1.core/node1 "$NODE"
put kube-proxy/services.v1.core/default/kubernetes "$SVC"
put version "$VERSION"

run cache ls "$C"
expect_rc 0 "cache ls DIR"
printf 'kube-proxy\nkubelet\n' >"$T/want"
expect_stdout "cache ls DIR" "$T/want"

run cache ls "$C" kubelet
expect_rc 0 "cache ls DIR kubelet"
printf 'nodes.v1.core\npods.v1.core\n' >"$T/want"
expect_stdout "cache ls DIR kubelet" "$T/want"

run cache ls "$C" kubelet pods.v1.core
expect_rc 0 "cache ls DIR kubelet pods.v1.core"
printf 'default/web-0\nkube-system/dns-1\n' >"$T/want"
expect_stdout "cache ls DIR kubelet pods.v1.core" "$T/want"

run cache ls "$C" kubelet pods.v1.core kube-system
expect_rc 0 "cache ls DIR kubelet pods.v1.core kube-system"
printf 'dns-1\n' >"$T/want"
expect_stdout "cache ls DIR kubelet pods.v1.core kube-system" "$T/want"

run cache get "$C" kubelet pods.v1.core default web-0
expect_rc 0 "cache get (namespaced)"
printf '%s\n' "$POD_WEB" >"$T/want"
expect_stdout "cache get (namespaced)" "$T/want"

run cache get "$C" kubelet nodes.v1.core node1
expect_rc 0 "cache get (cluster-scoped)"
printf '%s\n' "$NODE" >"$T/want"
expect_stdout "cache get (cluster-scoped)" "$T/want"

run cache get "$C" kubelet pods.v1.core default no-such-pod
expect_rc 1 "cache get of a missing object"
if grep -q 'no-such-pod' "$ERR"; then
	pass
else
	fail "cache get of a missing object: stderr does not name it: $(head -c 300 "$ERR")"
fi

run cache verify "$C"
expect_rc 0 "cache verify (clean)"
if grep -q 'verify: 4 objects, 0 problems' "$OUT"; then
	pass
else
	fail "cache verify (clean): want '4 objects, 0 problems', got: $(head -c 300 "$OUT")"
fi

# Corrupt one object: verify must notice it and name it.
printf 'not json{' >"$C/kubelet/pods.v1.core/default/web-0"
run cache verify "$C"
expect_rc 1 "cache verify (corrupted)"
if grep -q 'web-0' "$OUT"; then
	pass
else
	fail "cache verify (corrupted): the report does not name web-0: $(head -c 300 "$OUT")"
fi

run cache
if [ "$rc" -eq 2 ]; then
	pass
else
	fail "cache without a command: exit status $rc, want 2"
fi

finish
