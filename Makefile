# Thin wrapper over CMake. `make` builds build/drover; `make check` runs every test; `make demo`
# shows drover on a fake GPU inventory.
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all deps check demo clean asan bench

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

clean:
	rm -rf $(BUILD) build-asan
