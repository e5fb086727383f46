#!/bin/sh
# make bench: the disk benchmark on this machine's own file system ($TMPDIR,
# default /var/tmp) and, when run as root with mkfs.ext4 and a loop device, on a
# fresh journaled ext4 - the file system an edge node's cache normally lives on.
set -eu
BIN=${1:-build/bench/disk_bench}
DIR=${TMPDIR:-/var/tmp}

echo "== disk benchmark on $DIR ($(df -T "$DIR" | awk 'NR==2{print $2}'))"
"$BIN" "$DIR"

if [ "$(id -u)" -eq 0 ] && command -v mkfs.ext4 >/dev/null && [ -e /dev/loop-control ]; then
	img=$(mktemp "$DIR/yurthub-bench-ext4.XXXXXX")
	mnt=$(mktemp -d "$DIR/yurthub-bench-mnt.XXXXXX")
	cleanup() {
		umount "$mnt" 2>/dev/null || true
		rm -rf "$img" "$mnt"
	}
	trap cleanup EXIT
	truncate -s 4G "$img"
	mkfs.ext4 -q -F "$img"
	if mount -o loop "$img" "$mnt" 2>/dev/null; then
		echo "== disk benchmark on a fresh journaled ext4 (loop device on $DIR)"
		"$BIN" "$mnt"
	else
		echo "== (no loop mount possible here: journaled ext4 figures skipped)"
	fi
fi
