# Convenience wrapper around CMake. `make test` is the test command named in the README.
BUILD ?= build/release
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all build test test-asan test-portable fuzz fuzz-smoke demo demo-reverse bench bench-compare clean

all: build

# scripts/setup.sh installs missing Debian packages (compiler, CMake, OpenBLAS); a no-op otherwise.
$(BUILD)/CMakeCache.txt:
	@scripts/setup.sh
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Release build: the float suite with 1 and 2 threads, and the double build's suite
# (finite-difference gradient checks). Ends with "N passed, N failed".
test: build
	scripts/run_tests.sh $(BUILD)

# Debug + AddressSanitizer + UndefinedBehaviorSanitizer (clang when available).
test-asan:
	$(MAKE) test BUILD=build/asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DQKV_SANITIZE=ON -DQKV_BUILD_BENCH=OFF $(if $(shell command -v clang),-DCMAKE_C_COMPILER=clang,)"

# No BLAS, no OpenMP: plain C11 + libm.
test-portable:
	$(MAKE) test BUILD=build/portable CMAKE_FLAGS="-DQKV_WITH_BLAS=OFF -DQKV_WITH_OPENMP=OFF -DQKV_BUILD_BENCH=OFF"

# libFuzzer targets of every parser (tests/*/fuzz_*.c; clang, ASan + UBSan) in build/fuzz:
# `make fuzz` builds them, `make fuzz FUZZ_TIME=N` also runs each N seconds, `make fuzz-smoke`
# runs each 20 s (CI). scripts/fuzz.sh prints per target its executions and "0 crashes" or the
# crashing input (build/fuzz/crashes/), and fails on any crash, leak, hang or sanitizer report.
FUZZ_TIME ?=
fuzz:
	@scripts/setup.sh
	JOBS=$(JOBS) scripts/fuzz.sh $(if $(FUZZ_TIME),--time $(FUZZ_TIME),--build-only)

fuzz-smoke:
	@scripts/setup.sh
	JOBS=$(JOBS) scripts/fuzz.sh --time 20

# The main job: a G2P Transformer trained on the shipped CMUdict for a few minutes (scripts/demo.sh).
demo:
	scripts/demo.sh

# The small synthetic demo: a 2-layer encoder learns to reverse digit strings (seconds).
demo-reverse: build
	$(BUILD)/demo_attention $(DEMO_ARGS)

bench: build
	$(BUILD)/bench_gemm
	$(BUILD)/bench_attention
	$(BUILD)/bench_decode

# qkv against PyTorch in the same run (issue 4): tables on stdout, raw results under
# build/bench-compare/. COMPARE_ARGS e.g. "--quick" or "--only S,gpt2 --reps 3" (bench/compare.sh).
bench-compare: build
	BUILD=$(BUILD) bash bench/compare.sh $(COMPARE_ARGS)

clean:
	rm -rf build
