# Thin wrapper over CMake. `make` builds build/drover (and checks the layers: docs/ARCHITECTURE.md);
# `make check` runs every test, listing those that cannot run on this machine as skipped
# (DROVER_NO_SKIP=1 makes them fail, as in CI: .ci/run); `make demo` shows drover on a fake GPU
# inventory.
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all deps check demo clean asan bench fuzz install

all: $(BUILD)/Makefile
	@$(MAKE) --no-print-directory -C $(BUILD)

deps:
	@scripts/install-deps

$(BUILD)/Makefile: CMakeLists.txt
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

check: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@$(MAKE) --no-print-directory -C $(BUILD)
	@cd $(BUILD) && ctest --output-on-failure -j2

demo: deps all
	@scripts/demo.sh $(BUILD)/drover

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DDROVER_SANITIZE=ON" check

# libFuzzer harnesses (tests/fuzz/README.md): each runs FUZZ_SECONDS; fails if any finds a crash,
# which is left in build-fuzz/crashes/ with the command that reproduces it.
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/fuzz.sh build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh run

# Installs the binary, the systemd unit, the man page, the docs and bash/zsh completion under
# PREFIX (default /usr/local), staged under DESTDIR for packaging.
PREFIX ?= /usr/local
DESTDIR ?=
install: $(BUILD)/Makefile
	@$(MAKE) --no-print-directory -C $(BUILD) drover
	@DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
