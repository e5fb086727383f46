#!/bin/sh
# Put the real Kubernetes clients that tests/e2e/test_real_clients.py drives
# (through tests/e2e/clients.py) inside the work tree; nothing is installed
# system-wide:
#
#   build-clients/kubernetes-client/usr/bin/kubectl   Debian's kubernetes-client
#                                                     (kubectl 1.20), apt-get download + dpkg -x
#   tests/clients/node/node_modules/                  @kubernetes/client-node, npm ci from the
#                                                     committed package-lock.json (needs Node >= 20)
#
# kubectl of the machine image and python3-kubernetes (scripts/deps.sh) are
# the other two clients.  Idempotent and silent when everything is in place;
# exits 1 with one clear message when a registry cannot be reached.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KDIR=$ROOT/build-clients/kubernetes-client
KUBECTL=$KDIR/usr/bin/kubectl
NODEDIR=$ROOT/tests/clients/node
LOG=$ROOT/build-clients/clients.log
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

fail() {
	echo "clients.sh: $*" >&2
	[ -s "$LOG" ] && tail -15 "$LOG" | sed 's/^/    /' >&2
	exit 1
}

mkdir -p "$ROOT/build-clients"
: >"$LOG"

# ---- kubectl 1.20 from Debian's kubernetes-client ----

kubectl_ok() {
	[ -x "$KUBECTL" ] && "$KUBECTL" version --client 2>/dev/null | grep -q 'GitVersion:"v1\.20\.'
}

if ! kubectl_ok; then
	tmp=$(mktemp -d "$ROOT/build-clients/.download.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	chmod 0755 "$tmp" # apt's download user may write there: no "unsandboxed" warning
	if ! (cd "$tmp" && apt-get download kubernetes-client) >>"$LOG" 2>&1; then
		# no package lists yet, or old ones
		$SUDO apt-get update -q >>"$LOG" 2>&1 || true
		(cd "$tmp" && apt-get download kubernetes-client) >>"$LOG" 2>&1 ||
			fail "cannot download Debian's kubernetes-client (are Debian's apt repositories reachable?)"
	fi
	deb=$(ls "$tmp"/kubernetes-client_*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || fail "apt-get download left no kubernetes-client .deb"
	ver=$(dpkg-deb -f "$deb" Version)
	case $ver in
	*1.20.*) ;;
	*) fail "Debian's kubernetes-client is $ver here; the tests want 1.20 (Debian 12)" ;;
	esac
	rm -rf "$tmp/x"
	dpkg-deb -x "$deb" "$tmp/x" >>"$LOG" 2>&1 || fail "dpkg-deb -x $deb failed"
	rm -rf "$KDIR"
	mv "$tmp/x" "$KDIR"
	rm -rf "$tmp"
	trap - EXIT
	kubectl_ok || fail "the unpacked $KUBECTL does not run as kubectl 1.20"
fi

# ---- @kubernetes/client-node for Node.js ----

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get install -y -q nodejs npm >>"$LOG" 2>&1 || {
		$SUDO apt-get update -q >>"$LOG" 2>&1 || true
		$SUDO apt-get install -y -q nodejs npm >>"$LOG" 2>&1 ||
			fail "cannot install Node.js and npm with apt-get"
	}
fi
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$major" -ge 20 ] ||
	fail "Node.js $(node --version 2>/dev/null) is too old: @kubernetes/client-node 1.x needs 20 or newer"

# npm ci again whenever package-lock.json changed since the last install
want=$(sha256sum "$NODEDIR/package-lock.json" | cut -d' ' -f1)
stamp=$NODEDIR/node_modules/.yurthub-lock-sha256
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] ||
	[ ! -f "$NODEDIR/node_modules/@kubernetes/client-node/package.json" ]; then
	(cd "$NODEDIR" && npm ci --no-audit --no-fund --loglevel=error) >>"$LOG" 2>&1 ||
		fail "npm ci in tests/clients/node failed (is the npm registry reachable?)"
	echo "$want" >"$stamp"
fi
exit 0
