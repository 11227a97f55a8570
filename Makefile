# SPDX-License-Identifier: Apache-2.0
# Thin wrapper around CMake; CMakeLists.txt is the build of record.
BUILD ?= build
PREFIX ?= $(CURDIR)/$(BUILD)/install
CMAKE_FLAGS ?=

.PHONY: all deps build install install-programs test demo clean images

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j$$(nproc)

install: build
	cmake --install $(BUILD)

# What is installed (the programs, the plugin, their man pages and package files), built alone:
# the demo needs none of the test programs.
INSTALLED_TARGETS = tally tally-reducer nccl-net-tally tally_package_files

install-programs: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j$$(nproc) --target $(INSTALLED_TARGETS)
	cmake --install $(BUILD)

test: deps install
	cd $(BUILD) && ctest --output-on-failure -j2 --timeout 600

demo: deps install-programs
	$(PREFIX)/bin/tally demo --plugin $(PREFIX)/lib/libnccl-net-tally.so

clean:
	rm -rf $(BUILD)

# The container images from docker/, built from the packages and checked from the inside
# (docs/packaging.md). With no Docker engine it uses buildah; where no registry answers, set
# IMAGE_FLAGS="--bootstrap-base --pytorch-base docker.io/library/debian:bookworm".
images:
	scripts/build-images.sh $(IMAGE_FLAGS)

# Sanitizer runs (docs/testing.md): the functional test folders, built in their own folder with
# only the targets those tests need. Left out: system/packaging (builds a .deb and Docker files, no
# code of ours runs differently), system/soak and system/reliability (long multi-process runs;
# CI runs most of system/reliability under TSan, below, and
# `make test-tsan SAN_TEST_DIRS=system/reliability` runs all of it), and tools/ (its bench,
# bench_cli and gloo are performance runs, far too slow instrumented; driver is network-namespace
# emulation, root only; commands is CLI plumbing around the same libraries, whose doctor and
# launch spawn many processes).
# fuzz replays the seed corpora and saved crashes through the fuzz targets' checks.
SAN_TEST_DIRS = common kernels transport protocol worker_client reducer plugin system/functional \
  system/security system/fuzz
# Ninja's per-folder targets: each folder's test programs and what they depend on, nothing else.
SAN_TARGETS = $(foreach d,$(SAN_TEST_DIRS),test/$(d)/all)
# Tests that cannot run under a sanitizer for a reason of the tool, not of Tally (ctest -E
# regexes). ASan + UBSan: none.
ASAN_EXCLUDE ?=
# TSan: `tally demo` forks its workers while its signal watcher thread runs (tools/bench
# RunGuard), and TSan cannot follow a fork of a multi-threaded process: the children die in its
# runtime ("dup thread with used id"). The demo's plugin and reducer paths are the same ones
# CollNetMatrix and CollNetVersion run under TSan; it runs under ASan.
TSAN_EXCLUDE ?= ^functional\.Demo\.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SAN_JOBS ?= $$(nproc)
# -O1 -g1: about a third less compile time than -O2 -g, and stack traces keep file:line.
SAN_CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
                   "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1"
COMMA := ,

# $(call san_test,BUILD_DIR,SANITIZERS,EXCLUDE_REGEX)
define san_test
	cmake -S . -B $(1) -G Ninja -DTALLY_SANITIZE=$(2) $(SAN_CMAKE_FLAGS) $(CMAKE_FLAGS)
	cmake --build $(1) -j$(SAN_JOBS) --target $(SAN_TARGETS)
	@fail=""; for d in $(SAN_TEST_DIRS); do \
	  echo "== $(2): test/$$d"; \
	  ctest --test-dir $(1)/test/$$d --output-on-failure -j2 --timeout 600 \
	    $(if $(3),-E '$(3)') || fail="$$fail $$d"; \
	done; \
	if [ -n "$$fail" ]; then echo "$(2): failures in:$$fail"; exit 1; fi
endef

.PHONY: test-asan test-tsan fuzz fuzz-run fuzz-seeds

test-asan: export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
# intercept_send=0: the send interceptors check the buffer after sendmsg returns, when the
# peer may already have answered and the caller freed it (a report of the tool, not a real read).
test-asan: export ASAN_OPTIONS ?= intercept_send=0:detect_leaks=1:strict_string_checks=1:check_initialization_order=1
test-asan: deps
	$(call san_test,$(ASAN_BUILD),address$(COMMA)undefined,$(ASAN_EXCLUDE))

# die_after_fork=0: tests that fork before starting threads keep working in the child.
test-tsan: export TSAN_OPTIONS ?= intercept_send=0:second_deadlock_stack=1:history_size=4:die_after_fork=0
test-tsan: deps
	$(call san_test,$(TSAN_BUILD),thread,$(TSAN_EXCLUDE))

# libFuzzer targets (clang; ASan + UBSan), in their own build folder. fuzz-run runs each for
# FUZZ_SECONDS and fails on the first crash of any target (the input is kept under
# $(FUZZ_BUILD)/fuzz-crashes/); docs/testing.md says how a crash becomes a regression test.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = fuzz_wire fuzz_tcp_wire fuzz_reducer_session

$(FUZZ_BUILD)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DTALLY_FUZZ=ON $(CMAKE_FLAGS)

fuzz: deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j$(SAN_JOBS) --target $(FUZZ_TARGETS) tally_fuzz_seeds

fuzz-run: fuzz
	test/system/fuzz/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# What CI runs after `make test` (.ci/run, docs/testing.md): the functional tests under
# ASan + UBSan and under TSan, then every fuzz target for CI_FUZZ_SECONDS. The other test folders
# under sanitizers (`make test-asan`/`test-tsan` without overrides) are for developers: CI's
# 30 minutes on 2 cores do not hold all three instrumented builds of everything.
# The functional suite's second run over libfabric (functional_ofi.*) is left to `make test`:
# under the sanitizers it would double the time, and libfabric's own threads are not
# instrumented, so TSan could not judge them.
CI_SAN_TEST_DIRS ?= system/functional
# Under TSan also the failover suites. Those that run in one process (test/worker_client:
# losses, rejoins, joins called off, wire attacks, slow links, over raw and threaded TCP links, in
# every progress mode): about 4 minutes more. And the multi-process ones (test/system/reliability:
# reducers killed, frozen and restarted under the mixed workload, workers killed and frozen, over
# TCP and, for failover, over libfabric's tcp provider), whose workers are
# the test program exec'd again (test/support/exec_workers.h) so that TSan instruments them while
# a thread of the test injects the faults: about 4 to 5 minutes more on two idle cores (45 CPU
# seconds of build, 8 CPU minutes of tests, libfabric's half 5 of them). Of their seeded cases
# only the first seed or two of each kind of fault run (CI_TSAN_EXTRA_SEEDS leaves out the rest,
# which repeat the same paths at other moments; the same set as failover_ofi.extra_seeds in
# test/system/reliability/CMakeLists.txt), and the pressure cases, which are no failover and
# whose half-second reducer I/O bounds an instrumented run under load can miss (`make test-tsan
# SAN_TEST_DIRS=system/reliability` runs them). libfabric itself is not instrumented: TSan checks
# Tally's side of the ofi transport, not libfabric's threads.
CI_TSAN_EXTRA_DIRS ?= worker_client system/reliability
CI_TSAN_EXTRA_SEEDS = ^failover\..*/(kill_seed[3-6]|stop_seed[45]|seed[2-6])|^failover_ofi\.extra_seeds|^reliability\.Pressure\.
CI_FUZZ_SECONDS ?= 30
CI_SAN_EXCLUDE = ^functional_ofi\.

.PHONY: ci-sanitizers
ci-sanitizers:
	$(MAKE) test-asan SAN_TEST_DIRS="$(CI_SAN_TEST_DIRS)" ASAN_EXCLUDE='$(CI_SAN_EXCLUDE)'
	$(MAKE) test-tsan SAN_TEST_DIRS="$(CI_SAN_TEST_DIRS) $(CI_TSAN_EXTRA_DIRS)" \
	  TSAN_EXCLUDE='$(TSAN_EXCLUDE)|$(CI_SAN_EXCLUDE)|$(CI_TSAN_EXTRA_SEEDS)'
	$(MAKE) fuzz-run FUZZ_SECONDS=$(CI_FUZZ_SECONDS)

# Rewrites the committed seed corpora (test/system/fuzz/corpus/) from the current wire format.
fuzz-seeds: $(BUILD)/build.ninja
	cmake --build $(BUILD) --target tally_fuzz_seeds
	$(BUILD)/test/system/fuzz/tally_fuzz_seeds test/system/fuzz/corpus
