#!/bin/sh
# meson install script: install the example EnvironmentFile of yurthub.service
# as DIR/yurthub, unless a file is there already (an operator's settings are
# never overwritten by a reinstall).  Honours DESTDIR.
#   install-default.sh SOURCE DIR
set -eu
src=$1
dir=${DESTDIR:-}$2
if [ -e "$dir/yurthub" ]; then
	[ -n "${MESON_INSTALL_QUIET:-}" ] || echo "Keeping $dir/yurthub"
	exit 0
fi
mkdir -p "$dir"
cp "$src" "$dir/yurthub.tmp"
chmod 0644 "$dir/yurthub.tmp"
mv "$dir/yurthub.tmp" "$dir/yurthub"
[ -n "${MESON_INSTALL_QUIET:-}" ] || echo "Installing $src to $dir/yurthub"
