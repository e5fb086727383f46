# yurthub in C - the commands a newcomer types.  The build itself is meson;
# this file only installs what is missing and calls it.
#
#   make test    install deps, build with ASan+UBSan, run every test
#   make         release build in build/
#   make bench   benchmarks (release build), figures on stdout
#   make demo    a hub against the test double, with a kubectl session

PREFIX ?= /usr/local
DESTDIR ?=
BUILD := build
SANBUILD := build-san

.PHONY: all deps build test bench demo clean format

all: build

deps:
	@sh scripts/deps.sh

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) --buildtype=release --prefix=$(PREFIX) >/dev/null

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(SANBUILD)/build.ninja: | deps
	meson setup $(SANBUILD) --buildtype=debug -Db_sanitize=address,undefined \
		-Db_lundef=false -Dc_args=-fno-sanitize-recover=all >/dev/null

test: deps $(SANBUILD)/build.ninja
	ninja -C $(SANBUILD)
	scripts/run-tests.sh $(SANBUILD)

# The proxy benchmark first: the disk benchmark deletes many files at its end,
# which slows inode creation for a while on some file systems.
bench: build
	/usr/bin/python3 bench/proxy_bench.py $(BUILD)
	/usr/bin/python3 bench/offline_bench.py $(BUILD)
	$(BUILD)/bench/etcd_bench 10000 3 1000
	bench/run-disk-bench.sh $(BUILD)/bench/disk_bench

demo: build
	scripts/demo.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(SANBUILD)
