# Thin wrapper around CMake; CMakeLists.txt is the build of record.
BUILD ?= build
PREFIX ?= $(CURDIR)/$(BUILD)/install
CMAKE_FLAGS ?=

.PHONY: all deps build install test demo clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j$$(nproc)

install: build
	cmake --install $(BUILD)

test: deps install
	cd $(BUILD) && ctest --output-on-failure -j2 --timeout 600

demo: deps install
	$(PREFIX)/bin/tally demo --plugin $(PREFIX)/lib/libnccl-net-tally.so

clean:
	rm -rf $(BUILD)
