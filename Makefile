# yurthub in C - the commands a newcomer types.  The build itself is meson;
# this file only installs what is missing and calls it.
#
#   make test    install deps and the test clients, build with ASan+UBSan, run every test
#   make         release build in build/
#   make bench   benchmarks (release build), figures on stdout; LAG_BASELINE=<build
#                dir of another version> adds it to the commit lag benchmark
#   make fuzz    libFuzzer targets (clang) in build-fuzz/, see docs/fuzzing.md
#   make demo    a hub against the test double, with a kubectl session
#   make soak    64 clients for 10 minutes with the link flapping (release, ASan),
#                then a shorter run under valgrind; figures in docs/soak.md
#   make install [PREFIX=/usr/local] [DESTDIR=]   binary, man page, systemd unit,
#                example config and static-pod manifest, see docs/install.md
#   make deb     the Debian package, left in build-deb/

PREFIX ?= /usr/local
DESTDIR ?=
BUILD := build
SANBUILD := build-san
FUZZBUILD := build-fuzz

.PHONY: all deps clients build test fuzz bench demo soak clean format
.PHONY: install deb

all: build

deps:
	@sh scripts/deps.sh

# The real clients the end-to-end tests drive (kubectl 1.20, @kubernetes/client-node),
# inside the work tree: build-clients/ and tests/clients/node/node_modules/.
clients: deps
	@sh scripts/clients.sh

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) --buildtype=release --prefix=$(PREFIX) >/dev/null

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(SANBUILD)/build.ninja: | deps
	meson setup $(SANBUILD) --buildtype=debug -Db_sanitize=address,undefined \
		-Db_lundef=false -Dc_args=-fno-sanitize-recover=all >/dev/null

# The fuzz targets: the core library instrumented for libFuzzer (clang),
# with ASan+UBSan.  make test runs each briefly (scripts/run-fuzz.sh).
$(FUZZBUILD)/build.ninja: | deps
	CC=clang meson setup $(FUZZBUILD) -Dfuzz=true --buildtype=debugoptimized \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fno-sanitize-recover=all >/dev/null

fuzz: deps $(FUZZBUILD)/build.ninja
	ninja -C $(FUZZBUILD)

# The release binary too: test_memory.py measures what a node pays, which
# the sanitizer build's allocator does not show.
test: deps clients $(SANBUILD)/build.ninja $(FUZZBUILD)/build.ninja $(BUILD)/build.ninja
	ninja -C $(SANBUILD)
	ninja -C $(FUZZBUILD)
	ninja -C $(BUILD) src/yurthub
	scripts/run-tests.sh $(SANBUILD)

# The proxy benchmark first: the disk benchmark deletes many files at its end,
# which slows inode creation for a while on some file systems.
bench: build
	$(BUILD)/bench/decode_bench
	/usr/bin/python3 bench/proxy_bench.py $(BUILD)
	/usr/bin/python3 bench/offline_bench.py $(BUILD)
	/usr/bin/python3 bench/outage_bench.py $(BUILD)
	/usr/bin/python3 bench/filter_bench.py $(BUILD)
	/usr/bin/python3 bench/mux_bench.py $(BUILD)
	$(BUILD)/bench/etcd_bench 10000 3 1000
	bench/run-disk-bench.sh $(BUILD)/bench/disk_bench
	/usr/bin/python3 bench/commit_lag_bench.py $(BUILD) $(LAG_BASELINE)

demo: build
	scripts/demo.sh $(BUILD)

soak: build $(SANBUILD)/build.ninja
	ninja -C $(SANBUILD) src/yurthub
	/usr/bin/python3 tests/soak/soak.py --build $(BUILD) --seconds 600 --clients 64
	/usr/bin/python3 tests/soak/soak.py --build $(SANBUILD) --seconds 600 --clients 64
	/usr/bin/python3 tests/soak/soak.py --build $(BUILD) --valgrind --seconds 120 --clients 16

# The release build of $(BUILD)/, installed by meson.  With PREFIX=/usr the
# EnvironmentFile goes to /etc/default, else to $(PREFIX)/etc/default; an
# existing one is kept.  DESTDIR is made absolute (meson would take a relative
# one as relative to the build directory).
INSTALL_SYSCONFDIR = $(if $(filter /usr,$(PREFIX)),/etc,etc)
install: build
	meson configure $(BUILD) -Dprefix=$(PREFIX) -Dsysconfdir=$(INSTALL_SYSCONFDIR) >/dev/null
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir=$(abspath $(DESTDIR)))

# dpkg-buildpackage on a copy of the tree (nothing is written beside the
# repository); the .deb is copied to build-deb/.
deb: deps
	sh scripts/build-deb.sh build-deb

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(SANBUILD) $(FUZZBUILD) build-pkg build-deb build-clients
