# The two commands of the README: `make run` (set up, build, run the main job) and `make test`
# (set up, build, run every test but the slow ones). `make bench` compares with PyTorch.
BUILD ?= build
JOBS ?= 2
CTEST_ARGS ?=

.PHONY: all setup build run test test-slow bench bench-gemm clean

all: build

setup:
	scripts/bootstrap

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Until the RL loop lands, the main job is the training-step benchmark's smoke run.
run: build
	$(BUILD)/bin/temper bench train --quick

test: build
	cd $(BUILD) && ctest --output-on-failure -LE slow -j $(JOBS) $(CTEST_ARGS)

test-slow: build
	cd $(BUILD) && ctest --output-on-failure -L slow $(CTEST_ARGS)

# temper vs PyTorch on the same shape, side by side; needs `scripts/bootstrap --python`.
bench: build
	scripts/bootstrap --python
	bench/compare_train.sh

bench-gemm: build
	$(BUILD)/bench/gemm_backends

clean:
	rm -rf $(BUILD)
