#!/bin/sh
# Install the Debian packages this project builds and tests with, if any is missing.
# Idempotent and quiet when everything is present; needs root (or sudo) only when it installs.
set -eu

PKGS="gcc make pkg-config meson ninja-build clang libclang-rt-14-dev
libmicrohttpd-dev libgnutls28-dev libcurl4-openssl-dev libyajl-dev libjansson-dev libyaml-dev libmnl-dev
zlib1g-dev libcmocka-dev openssl nginx-light
etcd-server etcd-client python3 python3-kubernetes python3-cryptography curl valgrind
prometheus"

# packaging (make install checks, make deb): tests/pkg/test_install.sh
PKGS="$PKGS dpkg-dev debhelper fakeroot build-essential python3-yaml man-db groff-base strace"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps.sh: installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q $missing >/tmp/yurthub-deps.log 2>&1; then
	$SUDO apt-get update -q >>/tmp/yurthub-deps.log 2>&1 || true
	$SUDO apt-get install -y -q $missing >>/tmp/yurthub-deps.log 2>&1 || {
		echo "deps.sh: apt-get failed, see /tmp/yurthub-deps.log" >&2
		tail -20 /tmp/yurthub-deps.log >&2
		exit 1
	}
fi
