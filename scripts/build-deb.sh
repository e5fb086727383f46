#!/bin/sh
# Build the Debian package (debian/) without writing anything beside the
# repository: dpkg-buildpackage puts its results in the parent directory of
# the source tree, so it runs on a copy in a temporary directory.  The .deb
# is copied to OUTDIR (default: build-deb/ of the repository).
#   scripts/build-deb.sh [OUTDIR]
# Prints the path of the .deb as its last line.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/build-deb}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
VERSION=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/yurthub-deb.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
SRC=$TMP/yurthub-$VERSION
mkdir "$SRC"

# The source: what git knows (tracked or new, not ignored) and still exists,
# so no build directories; without git, the tree minus build dirs and .git.
cd "$ROOT"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done; :' sh |
		tar --null -T - -cf - | tar -xf - -C "$SRC"
else
	tar --exclude='./build*' --exclude=./.git --exclude='./debian/.debhelper' \
		-cf - . | tar -xf - -C "$SRC"
fi

# -b: binary only; nocheck: no test suite (see debian/rules).
NCPU=$(nproc 2>/dev/null || echo 2)
cd "$SRC"
if ! DEB_BUILD_OPTIONS="nocheck parallel=$NCPU" dpkg-buildpackage -us -uc -b \
	>"$TMP/build.log" 2>&1; then
	tail -40 "$TMP/build.log" >&2
	cp "$TMP/build.log" "$OUT/build.log"
	echo "build-deb: dpkg-buildpackage failed; log in $OUT/build.log" >&2
	exit 1
fi
cp "$TMP/build.log" "$OUT/build.log"
for f in "$TMP"/*.deb "$TMP"/*.buildinfo "$TMP"/*.changes; do
	[ -e "$f" ] && cp "$f" "$OUT/"
done
ls "$OUT"/yurthub_"$VERSION"_*.deb
