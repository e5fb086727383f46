#!/bin/sh
# test_install.sh - `make install` and `make deb`, checked from the outside.
#
# (a) A release build (build-pkg/ of the repository, reused between runs)
#     installed by meson into a DESTDIR: every file with its mode, the man
#     page rendered with warnings as failures, the systemd unit verified
#     offline, its command line and the manifest's parsed by the binary, the
#     hub's system calls checked against the unit's filter; then the
#     Makefile's install target with PREFIX=/usr.
# (b) The Debian package built by scripts/build-deb.sh (what `make deb`
#     runs), inspected with dpkg-deb and installed into a scratch root with
#     its maintainer scripts (dpkg --root, DPKG_ROOT-aware scripts).
#
# One "ok"/"FAIL" line per check, "SKIPPED: why" for a check that cannot
# run here; the last line is "RESULT: N passed, M failed".
set -u
ROOT=${YURTHUB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BP=${YURTHUB_PKG_BUILD:-$ROOT/build-pkg}
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/yurthub-pkg.XXXXXX")
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
START=$(date +%s)

pass=0
fail=0
ok() {
	pass=$((pass + 1))
	echo "ok   $*"
}
bad() {
	fail=$((fail + 1))
	echo "FAIL $*"
}
# check DESCRIPTION COMMAND...: ok when the command succeeds; its output
# is shown on failure, and its lines starting with "# " on success.
check() {
	_d=$1
	shift
	if "$@" >"$T/check.out" 2>&1; then
		ok "$_d"
		sed -n 's/^# /     /p' "$T/check.out"
	else
		bad "$_d"
		sed -n '1,25s/^/     /p' "$T/check.out"
	fi
}
# Count the "ok ..."/"FAIL ..." lines a helper printed (python checks).
tally() {
	while IFS= read -r line; do
		case $line in
		"ok "*) ok "${line#ok }" ;;
		"FAIL "*) bad "${line#FAIL }" ;;
		*) echo "     $line" ;;
		esac
	done
}
have() { command -v "$1" >/dev/null 2>&1; }

VERSION=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$ROOT/meson.build" | head -1)
ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)

# ---- helpers ---------------------------------------------------------------

# mode_is FILE OCTAL: a regular file with that mode
mode_is() {
	[ -f "$1" ] && [ ! -L "$1" ] || {
		echo "missing: $1"
		return 1
	}
	m=$(stat -c %a "$1")
	[ "$m" = "$2" ] || {
		echo "$1: mode $m, want $2"
		return 1
	}
}

# man_clean PAGE: groff and man render it without any warning
man_clean() {
	groff -man -Tutf8 -ww -z "$1" >"$T/groff.err" 2>&1 || return 1
	[ ! -s "$T/groff.err" ] || {
		cat "$T/groff.err"
		return 1
	}
	MANWIDTH=100 man --warnings=w -l "$1" >"$T/man.txt" 2>"$T/man.err" || return 1
	[ ! -s "$T/man.err" ] || {
		cat "$T/man.err"
		return 1
	}
}

# man_complete PAGE BINARY: the rendered page has the usual sections, every
# flag of --help (and the compatibility flags) and the cache commands.
man_complete() {
	MANWIDTH=200 man -l "$1" 2>/dev/null | col -bx >"$T/man.plain" || return 1
	for s in NAME SYNOPSIS DESCRIPTION OPTIONS "CACHE COMMANDS" FILES SIGNALS "EXIT STATUS" \
		EXAMPLES "SEE ALSO"; do
		grep -q "^$s\$" "$T/man.plain" || {
			echo "no section $s"
			return 1
		}
	done
	"$2" --help | sed -n 's/^  \(--[a-z0-9-]*\) .*/\1/p;s/^  \(--[a-z0-9-]*\)$/\1/p' >"$T/flags"
	"$2" --help | sed -n '/^Accepted for compatibility/,$p' | tr ' ' '\n' | grep '^--' >>"$T/flags"
	[ "$(wc -l <"$T/flags")" -ge 40 ] || {
		echo "too few flags in --help: $(wc -l <"$T/flags")"
		return 1
	}
	while read -r f; do
		grep -q -- "$f\([^a-z0-9-]\|\$\)" "$T/man.plain" || {
			echo "flag $f of --help is not in the man page"
			return 1
		}
	done <"$T/flags"
	"$2" cache --help | sed -n '2,$s/^  \([a-z][a-z]*\) DIR.*/\1/p' | while read -r c; do
		grep -q "^ *$c DIR" "$T/man.plain" || {
			echo "cache command $c is not in the man page"
			exit 1
		}
	done
}

# unit_verify UNIT BINARY MANDIR: systemd-analyze verify prints nothing (its
# warnings are failures), with ExecStart pointed at the installed binary.
unit_verify() {
	mkdir -p "$T/verify"
	sed "s|^ExecStart=[^ ]*yurthub |ExecStart=$2 |" "$1" >"$T/verify/yurthub.service"
	MANPATH=$3 SYSTEMD_LOG_COLOR=0 systemd-analyze verify "$T/verify/yurthub.service" \
		>"$T/verify.out" 2>&1
	rc=$?
	cat "$T/verify.out"
	[ "$rc" -eq 0 ] && [ ! -s "$T/verify.out" ]
}

# unit_has UNIT LINE...: each line is in the unit, exactly
unit_has() {
	u=$1
	shift
	for l in "$@"; do
		grep -qxF -- "$l" "$u" || {
			echo "not in the unit: $l"
			return 1
		}
	done
}

# unit_cmdline UNIT ENVFILE BINARY: the ExecStart words after systemd's
# expansion of the EnvironmentFile, the binary replaced by BINARY, written to
# $T/argv one a line.  OVR_ADDR / OVR_KUBECONFIG (when set) stand for an
# operator's edits of the file.
unit_cmdline() {
	line=$(sed -n 's/^ExecStart=//p' "$1")
	_bin=$3
	(
		YURTHUB_NODE_NAME=node-1
		. "$2"
		[ -n "${OVR_ADDR+x}" ] && YURTHUB_SERVER_ADDR=$OVR_ADDR
		[ -n "${OVR_KUBECONFIG+x}" ] && YURTHUB_KUBECONFIG=$OVR_KUBECONFIG
		eval "set -- $line"
		shift
		printf '%s\n' "$_bin"
		for a in "$@"; do printf '%s\n' "$a"; done
	) >"$T/argv"
}

# run_argv FILE EXTRA...: run the words of FILE (one a line, the first the
# binary) with EXTRA appended
run_argv() {
	_f=$1
	shift
	for w in "$@"; do printf '%s\n' "$w"; done | cat "$_f" - >"$T/argv.all"
	(
		set --
		while IFS= read -r w; do set -- "$@" "$w"; done <"$T/argv.all"
		"$@"
	)
}

# exposure UNIT: systemd-analyze security's overall exposure is at most 2.5
exposure() {
	systemd-analyze security --offline=yes "$1" >"$T/sec.out" 2>&1
	e=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$T/sec.out")
	echo "# systemd-analyze security: overall exposure ${e:-?}"
	[ -n "$e" ] && awk -v e="$e" 'BEGIN { exit !(e <= 2.5) }'
}

# ---- (a) meson install into a DESTDIR ---------------------------------------

echo "# (a) release build in $BP, meson install --destdir"
build_pkg() {
	if [ -f "$BP/build.ninja" ]; then
		meson configure "$BP" -Dprefix=/usr/local -Dsysconfdir=etc >/dev/null
	else
		meson setup "$BP" "$ROOT" --buildtype=release --prefix=/usr/local >/dev/null
	fi && ninja -C "$BP" >"$T/ninja.log" 2>&1 || {
		tail -30 "$T/ninja.log"
		return 1
	}
}
check "release build (meson setup/configure, ninja) in $(basename "$BP")" build_pkg

A=$T/a
check "meson install --destdir into a temporary directory" \
	meson install -C "$BP" --no-rebuild --quiet --destdir "$A"
P=$A/usr/local
check "binary \$PREFIX/bin/yurthub, mode 755" mode_is "$P/bin/yurthub" 755
check "man page \$PREFIX/share/man/man8/yurthub.8, mode 644" \
	mode_is "$P/share/man/man8/yurthub.8" 644
check "systemd unit \$PREFIX/lib/systemd/system/yurthub.service, mode 644" \
	mode_is "$P/lib/systemd/system/yurthub.service" 644
check "EnvironmentFile \$PREFIX/etc/default/yurthub, mode 644" \
	mode_is "$P/etc/default/yurthub" 644
check "static-pod manifest \$PREFIX/share/yurthub/yurthub.yaml, mode 644" \
	mode_is "$P/share/yurthub/yurthub.yaml" 644
only_these() {
	(cd "$A" && find . -type f -o -type l) | sort >"$T/files"
	printf '%s\n' ./usr/local/bin/yurthub ./usr/local/etc/default/yurthub \
		./usr/local/lib/systemd/system/yurthub.service \
		./usr/local/share/man/man8/yurthub.8 ./usr/local/share/yurthub/yurthub.yaml |
		sort | diff - "$T/files"
}
check "nothing else is installed (no tests, benchmarks, gen-man)" only_these
check "installed binary: --version prints yurthub $VERSION" \
	sh -c '[ "$("$1" --version)" = "yurthub $2" ]' sh "$P/bin/yurthub" "$VERSION"
check "debian/changelog has the version of meson.build ($VERSION)" \
	sh -c '[ "$(dpkg-parsechangelog -l "$1" -S Version)" = "$2" ]' sh \
	"$ROOT/debian/changelog" "$VERSION"

M=$P/share/man/man8/yurthub.8
check "man page: groff -man -Tutf8 -ww and man -l --warnings render it without warnings" \
	man_clean "$M"
check "man page: all sections, every flag of --help, every cache command" \
	man_complete "$M" "$P/bin/yurthub"
check "man page: names the installed paths of the unit and the EnvironmentFile" \
	sh -c 'grep -q "/usr/local/etc/default/yurthub" "$1" &&
		grep -q "/usr/local/lib/systemd/system/yurthub.service" "$1"' sh "$T/man.plain"

U=$P/lib/systemd/system/yurthub.service
if have systemd-analyze; then
	check "unit: systemd-analyze verify passes without a warning" \
		unit_verify "$U" "$P/bin/yurthub" "$P/share/man"
	check "unit: systemd-analyze security --offline exposure <= 2.5" exposure "$U"
else
	echo "SKIPPED: systemd-analyze is not installed (unit verification)"
fi
check "unit: service settings (simple, restart, EnvironmentFile, ExecStart, limits)" \
	unit_has "$U" "Type=simple" "Restart=on-failure" "RestartSec=5s" "LimitNOFILE=65536" \
	"EnvironmentFile=/usr/local/etc/default/yurthub" "Environment=YURTHUB_NODE_NAME=%H" \
	"ExecStartPre=+/bin/mkdir -p /etc/kubernetes/cache /var/lib/yurthub" "WantedBy=multi-user.target" \
	"ExecStart=/usr/local/bin/yurthub --server-addr=\${YURTHUB_SERVER_ADDR} --node-name=\${YURTHUB_NODE_NAME} --kubeconfig=\${YURTHUB_KUBECONFIG} \$YURTHUB_ARGS"
check "unit: hardening (read-only system but the cache and the root dir, CAP_NET_ADMIN only, filters)" \
	unit_has "$U" "ProtectSystem=strict" "ReadWritePaths=/etc/kubernetes/cache /var/lib/yurthub" \
	"ProtectHome=yes" "PrivateTmp=yes" "PrivateDevices=yes" "NoNewPrivileges=yes" \
	"CapabilityBoundingSet=CAP_NET_ADMIN" "AmbientCapabilities=" \
	"ProtectKernelTunables=yes" "ProtectKernelModules=yes" \
	"ProtectKernelLogs=yes" "ProtectControlGroups=yes" "ProtectClock=yes" \
	"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK" "RestrictNamespaces=yes" \
	"MemoryDenyWriteExecute=yes" "SystemCallFilter=@system-service" \
	"SystemCallFilter=~@privileged @resources" "SystemCallArchitectures=native"

D=$P/etc/default/yurthub
check "EnvironmentFile: valid sh syntax, sets the variables the unit uses" \
	sh -c 'sh -n "$1" && grep -q "^YURTHUB_SERVER_ADDR=" "$1" &&
		grep -q "^YURTHUB_KUBECONFIG=/etc/kubernetes/kubelet.conf$" "$1" &&
		grep -q "^YURTHUB_ARGS=" "$1"' sh "$D"
unedited_refused() {
	unit_cmdline "$U" "$D" "$P/bin/yurthub"
	run_argv "$T/argv" >"$T/run.out" 2>&1
	rc=$?
	cat "$T/run.out"
	[ "$rc" -eq 2 ] && grep -q -- "--server-addr is required" "$T/run.out"
}
check "unit + unedited EnvironmentFile: the hub refuses to start (exit 2, names --server-addr)" \
	unedited_refused
edited_parses() {
	OVR_ADDR=https://10.0.0.1:6443
	OVR_KUBECONFIG=
	unit_cmdline "$U" "$D" "$P/bin/yurthub"
	unset OVR_ADDR OVR_KUBECONFIG
	grep -qx -- "--server-addr=https://10.0.0.1:6443" "$T/argv" || return 1
	grep -qx -- "--node-name=node-1" "$T/argv" || return 1
	[ "$(run_argv "$T/argv" --version)" = "yurthub $VERSION" ]
}
check "unit + edited EnvironmentFile: every ExecStart flag is accepted by the binary" \
	edited_parses

Y=$P/share/yurthub/yurthub.yaml
"$PY" - "$Y" "$VERSION" "$T/manifest-argv" <<'EOF' | tally
import sys
path, version, argv_out = sys.argv[1:4]
try:
    import yaml
    pod = yaml.safe_load(open(path))
    print("ok manifest: parses as YAML (yaml.safe_load)")
except Exception as e:  # noqa
    print("FAIL manifest: parses as YAML: %s" % e)
    sys.exit(0)

def check(name, cond, detail=""):
    print(("ok manifest: " if cond else "FAIL manifest: ") + name + ("" if cond else " " + detail))

spec = pod.get("spec", {})
c = (spec.get("containers") or [{}])[0]
cmd = c.get("command", []) + c.get("args", [])
flags = dict(a[2:].split("=", 1) for a in cmd[1:] if a.startswith("--") and "=" in a)
check("a kube-system Pod with hostNetwork and system-node-critical priority",
      pod.get("kind") == "Pod" and pod["metadata"].get("namespace") == "kube-system"
      and spec.get("hostNetwork") is True
      and spec.get("priorityClassName") == "system-node-critical", str(spec)[:200])
check("image tagged with the version", c.get("image", "").endswith(":" + version), c.get("image"))
check("command yurthub with YurtHub's ports 10261/10267/10268 and address 127.0.0.1",
      cmd[:1] == ["yurthub"] and flags.get("proxy-port") == "10261"
      and flags.get("serve-port") == "10267" and flags.get("proxy-secure-port") == "10268"
      and flags.get("bind-address") == "127.0.0.1", str(flags))
check("flags --server-addr, --node-name=$(NODE_NAME), kubelet's kubeconfig, the cache path",
      "server-addr" in flags and flags.get("node-name") == "$(NODE_NAME)"
      and flags.get("kubeconfig") == "/etc/kubernetes/kubelet.conf"
      and flags.get("disk-cache-path") == "/etc/kubernetes/cache/", str(flags))
env = {e["name"]: e for e in c.get("env", [])}
check("NODE_NAME from spec.nodeName",
      env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
      == "spec.nodeName")
probe = c.get("livenessProbe", {}).get("httpGet", {})
check("livenessProbe GET 127.0.0.1:10267/v1/healthz",
      probe.get("host") == "127.0.0.1" and probe.get("port") == 10267
      and probe.get("path") == "/v1/healthz", str(probe))
vols = {v["name"]: v for v in spec.get("volumes", [])}
mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
host = {v.get("hostPath", {}).get("path"): n for n, v in vols.items()}
want = ["/etc/kubernetes", "/etc/kubernetes/cache", "/var/lib/yurthub", "/var/lib/kubelet/pki"]
check("hostPath volumes " + ", ".join(want) + ", each mounted at the same path",
      all(p in host and p in mounts and mounts[p]["name"] == host[p] for p in want),
      str(host) + " " + str(list(mounts)))
check("the cache is writable, kubelet's files are read-only",
      not mounts.get("/etc/kubernetes/cache", {}).get("readOnly", False)
      and mounts.get("/etc/kubernetes", {}).get("readOnly") is True
      and mounts.get("/var/lib/kubelet/pki", {}).get("readOnly") is True)
sc = c.get("securityContext", {})
caps = sc.get("capabilities", {})
check("no capability but NET_ADMIN (the dummy interface), no privilege escalation",
      caps.get("drop") == ["ALL"] and caps.get("add") == ["NET_ADMIN"]
      and sc.get("allowPrivilegeEscalation") is False, str(sc))
check("every volumeMount names a volume",
      all(m["name"] in vols for m in c.get("volumeMounts", [])))
with open(argv_out, "w") as f:
    for a in cmd[1:]:
        f.write(a.replace("$(NODE_NAME)", "node-1") + "\n")
EOF
manifest_parses() {
	[ -s "$T/manifest-argv" ] || return 1
	printf '%s\n' "$P/bin/yurthub" | cat - "$T/manifest-argv" >"$T/manifest-run"
	[ "$(run_argv "$T/manifest-run" --version)" = "yurthub $VERSION" ]
}
check "manifest: the binary accepts every flag of its command" manifest_parses

keeps_config() {
	echo "YURTHUB_ARGS=--v=1 # edited" >>"$D"
	meson install -C "$BP" --no-rebuild --quiet --destdir "$A" || return 1
	grep -q "^YURTHUB_ARGS=--v=1 # edited$" "$D"
}
check "a second install keeps an edited EnvironmentFile" keeps_config

# (c) The system calls of the hub (online, offline, stopping) under strace,
# against the unit's SystemCallFilter lines and RestrictAddressFamilies.
syscalls_allowed() {
	ports=$("$PY" -c 'import socket
ss=[socket.socket() for _ in range(2)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))')
	pp=${ports% *}
	sp=${ports#* }
	"$PY" "$ROOT/tests/double/apiserver.py" --port 0 --control-port 0 \
		--ready-file "$T/api.json" >"$T/api.log" 2>&1 &
	api=$!
	PIDS="$PIDS $api"
	i=0
	while [ ! -s "$T/api.json" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	port=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$T/api.json")
	ctl=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["control_port"])' "$T/api.json")
	# As root, without CAP_NET_ADMIN: the hub's netlink calls are traced
	# (it tries, is refused and goes on) but it makes no interface in the
	# host's network.
	nonetadmin=""
	if [ "$(id -u)" -eq 0 ] && have setpriv; then
		nonetadmin="setpriv --bounding-set=-net_admin --inh-caps=-net_admin --"
	fi
	$nonetadmin strace -f -qq -o "$T/trace" sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$T/hub.pid" \
		"$P/bin/yurthub" --server-addr="http://127.0.0.1:$port" --node-name=node-1 \
		--disk-cache-path="$T/cache/" --proxy-port="$pp" --serve-port="$sp" \
		--proxy-secure-port=0 --heartbeat-interval-seconds=1 >"$T/hub.log" 2>&1 &
	st=$!
	PIDS="$PIDS $st"
	i=0
	until curl -sf "http://127.0.0.1:$sp/v1/readyz" >/dev/null 2>&1 || [ $i -ge 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	ua="User-Agent: kubelet/v1.32"
	hp=http://127.0.0.1:$pp
	reqfail=""
	sleep 1.2 # a healthy upstream first
	curl -sf -H "$ua" "$hp/api/v1/pods" >/dev/null &&
		curl -sf -H "$ua" "$hp/api/v1/nodes/node-1" >/dev/null &&
		curl -sf -H "$ua" "$hp/api/v1/pods?watch=true&timeoutSeconds=1" >/dev/null &&
		curl -sf "http://127.0.0.1:$sp/metrics" >/dev/null &&
		curl -sf -X POST "http://127.0.0.1:$ctl/cut?mode=refuse" >/dev/null || reqfail="online"
	i=0 # offline: answered from the cache
	until curl -sf -H "$ua" "$hp/api/v1/nodes/node-1" 2>/dev/null | grep -q node-1 &&
		grep -q unhealthy "$T/hub.log" || [ $i -ge 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	curl -sf -H "$ua" "$hp/api/v1/pods" >/dev/null &&
		curl -sf -H "$ua" -X POST -H 'Content-Type: application/json' \
			-d '{"apiVersion":"v1","kind":"Event","metadata":{"name":"e1","namespace":"default"}}' \
			"$hp/api/v1/namespaces/default/events" >/dev/null || reqfail="$reqfail offline"
	kill -TERM "$(cat "$T/hub.pid")"
	wait "$st"
	kill "$api" 2>/dev/null
	wait "$api" 2>/dev/null
	[ -z "$reqfail" ] || {
		echo "requests through the hub failed: $reqfail"
		tail -5 "$T/hub.log"
		return 1
	}
	"$PY" - "$T/trace" "$U" <<'EOF'
import re, subprocess, sys
trace, unit = sys.argv[1:3]
out = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True).stdout
groups, cur = {}, None
for line in out.splitlines():
    if line.startswith("@"):
        cur = line.strip(); groups[cur] = []
    elif cur and line.strip() and not line.strip().startswith("#"):
        groups[cur].append(line.strip())
def expand(names):
    r = set()
    for n in names:
        r |= expand(groups.get(n, [])) if n.startswith("@") else {n}
    return r
allow, deny = None, set()
for line in open(unit):
    if line.startswith("SystemCallFilter="):
        v = line.split("=", 1)[1].split()
        if v and v[0].startswith("~"):
            deny |= expand([v[0][1:]] + v[1:])
        else:
            allow = expand(v) if allow is None else allow | expand(v)
    if line.startswith("RestrictAddressFamilies="):
        families = set(line.split("=", 1)[1].split())
used, fams, hub = set(), set(), False
for line in open(trace):
    # only what follows the exec of the hub (the shell before it is not the hub)
    if not hub:
        hub = re.match(r'^\d+\s+execve\("[^"]*/yurthub",.*= 0$', line.rstrip()) is not None
        continue
    m = re.match(r"^\d+\s+([a-z0-9_]+)\(", line)
    if m:
        used.add(m.group(1))
    m = re.match(r"^\d+\s+socket\((AF_[A-Z0-9]+)", line)
    if m:
        fams.add(m.group(1))
bad = sorted(s for s in used if allow is None or s not in allow or s in deny)
print("# %d different system calls seen, socket families %s" % (len(used), " ".join(sorted(fams))))
if bad or not fams <= families or len(used) < 20:
    print("not allowed by the unit:", bad, sorted(fams - families))
    sys.exit(1)
EOF
}
if have strace && have systemd-analyze && have curl; then
	check "unit: every system call and socket family the hub used is allowed" syscalls_allowed
else
	echo "SKIPPED: strace, systemd-analyze or curl missing (system call check)"
fi

# make install itself, with PREFIX=/usr (the unit's directory and /etc/default)
B=$T/b
make_install() {
	make -s -C "$ROOT" install BUILD="$BP" PREFIX=/usr DESTDIR="$B" >"$T/make.log" 2>&1 || {
		tail -20 "$T/make.log"
		return 1
	}
	mode_is "$B/usr/bin/yurthub" 755 && mode_is "$B/usr/share/man/man8/yurthub.8" 644 &&
		mode_is "$B/usr/lib/systemd/system/yurthub.service" 644 &&
		mode_is "$B/etc/default/yurthub" 644 && mode_is "$B/usr/share/yurthub/yurthub.yaml" 644 &&
		unit_has "$B/usr/lib/systemd/system/yurthub.service" \
			"EnvironmentFile=/etc/default/yurthub" &&
		grep -q "^ExecStart=/usr/bin/yurthub " "$B/usr/lib/systemd/system/yurthub.service" &&
		grep -q "/etc/default/yurthub" "$B/usr/share/man/man8/yurthub.8"
}
check "make install PREFIX=/usr DESTDIR=...: /usr/bin, /usr/lib/systemd/system, /etc/default" \
	make_install

# ---- (b) the Debian package ---------------------------------------------------

echo "# (b) the Debian package (scripts/build-deb.sh, as make deb)"
parent_before=$(ls -a "$(dirname "$ROOT")" | md5sum)
mkdir -p "$T/tmp" "$T/deb"
build_deb() {
	TMPDIR=$T/tmp sh "$ROOT/scripts/build-deb.sh" "$T/deb" >"$T/deb.out" 2>&1 || {
		tail -30 "$T/deb.out"
		return 1
	}
	DEB=$(tail -1 "$T/deb.out")
	[ -f "$DEB" ]
}
if check "dpkg-buildpackage -us -uc -b on a copy of the tree" build_deb; then
	DEB=$(tail -1 "$T/deb.out")
else
	DEB=$T/deb/none.deb
fi
check "nothing left beside the repository or in the temporary directory" \
	sh -c '[ "$(ls -a "$(dirname "$1")" | md5sum)" = "$2" ] && [ -z "$(ls -A "$3")" ]' sh \
	"$ROOT" "$parent_before" "$T/tmp"
check "the package build did not run the test suite" \
	sh -c '! grep -q "meson test\|ninja test\|dh_auto_test.*meson" "$1"' sh "$T/deb/build.log"

deb_info() {
	dpkg-deb -f "$DEB" Package Version Architecture >"$T/fields" || return 1
	printf 'Package: yurthub\nVersion: %s\nArchitecture: %s\n' "$VERSION" "$ARCH" |
		diff - "$T/fields" || return 1
	dep=$(dpkg-deb -f "$DEB" Depends)
	for lib in libc6 libcurl4 libgnutls30 libjansson4 libmicrohttpd12 libmnl0 libyajl2 libyaml-0-2 zlib1g; do
		echo "$dep" | grep -q "$lib" || {
			echo "Depends lacks $lib: $dep"
			return 1
		}
	done
}
check "dpkg-deb -I: yurthub $VERSION $ARCH, Depends from shlibs" deb_info
check "dpkg-deb -I: /etc/default/yurthub is a conffile" \
	sh -c 'dpkg-deb -I "$1" conffiles | grep -qx /etc/default/yurthub' sh "$DEB"
deb_scripts() {
	dpkg-deb -I "$DEB" postinst >"$T/postinst" || return 1
	grep -q "deb-systemd-helper" "$T/postinst" && grep -q "yurthub.service" "$T/postinst" || {
		echo "postinst has no dh_installsystemd snippet"
		return 1
	}
	! grep -q "deb-systemd-invoke.*start" "$T/postinst" || {
		echo "postinst starts the service"
		return 1
	}
}
check "dpkg-deb -I: dh_installsystemd maintainer scripts, service not started" deb_scripts
deb_contents() {
	dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ { print $1, $6 }' | sort -k2 >"$T/contents"
	cat >"$T/want" <<EOF
-rw-r--r-- ./etc/default/yurthub
-rw-r--r-- ./usr/share/doc/yurthub/changelog.gz
-rw-r--r-- ./usr/share/doc/yurthub/copyright
-rw-r--r-- ./usr/share/man/man8/yurthub.8.gz
-rw-r--r-- ./usr/share/yurthub/yurthub.yaml
-rwxr-xr-x ./usr/bin/yurthub
EOF
	# the unit: /lib/systemd/system on Debian 12, /usr/lib/... later
	grep -q -- "-rw-r--r-- \./\(usr/\)\{0,1\}lib/systemd/system/yurthub.service$" "$T/contents" || {
		echo "no unit"
		return 1
	}
	for f in $(awk '{ print $2 }' "$T/want"); do
		grep -qxF -- "$(grep -- " $f\$" "$T/want")" "$T/contents" || {
			echo "missing or wrong mode: $f"
			return 1
		}
	done
	# nothing else but docs
	awk '{ print $2 }' "$T/contents" | grep -v -e '^\./usr/share/doc/yurthub/' \
		-e '/systemd/system/yurthub\.service$' | while read -r f; do
		grep -q " $f\$" "$T/want" || {
			echo "unexpected: $f"
			exit 1
		}
	done
}
check "dpkg-deb -c: binary, man page, unit, conffile, manifest, docs with their modes" deb_contents

R=$T/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates"
touch "$R/var/lib/dpkg/status"
host_state() {
	find /etc/systemd/system /var/lib/systemd/deb-systemd-helper-enabled 2>/dev/null | sort | md5sum
}
host_before=$(host_state)
# The maintainer scripts run chrootless with DPKG_ROOT=$R (a scratch root has
# no shell to chroot into); dh_installsystemd's snippets honour DPKG_ROOT.
if dpkg --root="$R" --force-depends --force-not-root --force-script-chrootless \
	-i "$DEB" >"$T/dpkg.out" 2>&1; then
	ok "dpkg --root=DIR -i: installed with its maintainer scripts into a scratch root"
	check "dpkg --root: status 'install ok installed', conffile registered" \
		sh -c 'dpkg --root="$1" -s yurthub | grep -qx "Status: install ok installed" &&
			dpkg --root="$1" -s yurthub | grep -q "^ /etc/default/yurthub [0-9a-f]\{32\}$"' sh "$R"
	check "postinst recorded the unit's state in the scratch root, did not enable it" \
		sh -c '[ -f "$1/var/lib/systemd/deb-systemd-helper-enabled/yurthub.service.dsh-also" ] &&
			[ ! -e "$1/etc/systemd/system/multi-user.target.wants/yurthub.service" ]' sh "$R"
	check "the host's systemd state was not touched" \
		sh -c '[ "$(find /etc/systemd/system /var/lib/systemd/deb-systemd-helper-enabled 2>/dev/null | sort | md5sum)" = "$1" ]' \
		sh "$host_before"
else
	bad "dpkg --root=DIR -i into a scratch root (falling back to dpkg -x)"
	sed -n '1,15s/^/     /p' "$T/dpkg.out"
	rm -rf "$R"
	dpkg -x "$DEB" "$R"
fi
UNIT_R=$R/lib/systemd/system/yurthub.service
[ -f "$UNIT_R" ] || UNIT_R=$R/usr/lib/systemd/system/yurthub.service
check "scratch root: /usr/bin/yurthub --version prints yurthub $VERSION" \
	sh -c '[ "$("$1/usr/bin/yurthub" --version)" = "yurthub $2" ]' sh "$R" "$VERSION"
check "scratch root: /etc/default/yurthub, manifest, unit with /usr/bin and /etc paths" \
	sh -c 'mode_ok() { [ "$(stat -c %a "$1")" = "$2" ]; }
		mode_ok "$1/etc/default/yurthub" 644 && mode_ok "$1/usr/share/yurthub/yurthub.yaml" 644 &&
		grep -qx "EnvironmentFile=/etc/default/yurthub" "$2" &&
		grep -q "^ExecStart=/usr/bin/yurthub " "$2"' sh "$R" "$UNIT_R"
zcat "$R/usr/share/man/man8/yurthub.8.gz" >"$T/deb-yurthub.8" 2>/dev/null
man_clean_deb() {
	man_clean "$1" && grep -q "/etc/default/yurthub" "$1"
}
check "scratch root: the man page renders without warnings, names /etc/default/yurthub" \
	man_clean_deb "$T/deb-yurthub.8"
if have systemd-analyze; then
	mkdir -p "$T/rootman/man8"
	cp "$T/deb-yurthub.8" "$T/rootman/man8/yurthub.8"
	check "scratch root: the unit verifies" unit_verify "$UNIT_R" "$R/usr/bin/yurthub" "$T/rootman"
else
	echo "SKIPPED: systemd-analyze is not installed (unit verification)"
fi

echo "# took $(($(date +%s) - START)) s"
echo "RESULT: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
