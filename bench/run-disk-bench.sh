#!/bin/sh
# make bench: the disk benchmark on this machine's own file system ($TMPDIR,
# default /var/tmp) and, when run as root with mkfs.ext4 and a loop device, on a
# fresh journaled ext4 - the file system an edge node's cache normally lives on -
# and on a fresh ext4 without a journal, the kind of this machine's root file
# system (where removed inodes slow the creation of new ones: the commit lag
# figures), but one that no other process churns.
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
	for kind in journaled no-journal; do
		rm -f "$img"
		truncate -s 4G "$img"
		if [ $kind = journaled ]; then
			mkfs.ext4 -q -F "$img"
		else
			mkfs.ext4 -q -F -O ^has_journal "$img"
		fi
		if mount -o loop "$img" "$mnt" 2>/dev/null; then
			echo "== disk benchmark on a fresh $kind ext4 (loop device on $DIR)"
			"$BIN" "$mnt"
			umount "$mnt"
		else
			echo "== (no loop mount possible here: $kind ext4 figures skipped)"
		fi
	done
fi
