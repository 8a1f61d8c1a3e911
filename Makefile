# The two commands of the README: `make run` (set up, build, run the main job) and `make test`
# (set up, build, run every test but the slow ones). `make bench` compares with PyTorch.
BUILD ?= build
JOBS ?= 2
CTEST_ARGS ?=

.PHONY: all setup build run test test-slow test-asan test-tsan bench bench-gemm clean

all: build

setup:
	scripts/bootstrap

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the built-in quickstart (SFT then GRPO on a tiny model from scratch), a new run
# directory each time; `temper train --resume DIR` continues one.
run: build
	$(BUILD)/bin/temper train --out runs/quickstart-$$(date +%Y%m%d-%H%M%S)

# ctest runs JOBS tests at once, each with its own OpenMP team: threads that spin while they wait would take the
# other test's cores (25 GRPO steps of EnvRollout's test: 0.22 s alone, 21 s beside a second copy; passive: 0.23 s).
test: build
	cd $(BUILD) && OMP_WAIT_POLICY=passive ctest --output-on-failure -LE slow -j $(JOBS) $(CTEST_ARGS)

test-slow: build
	cd $(BUILD) && OMP_WAIT_POLICY=passive ctest --output-on-failure -L slow $(CTEST_ARGS)

# Every test but the slow ones again under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer (any UB
# report fails its test), in its own build folder (CPU code only; the two MPI tests skip the leak check: OpenMPI's
# runtime keeps allocations until exit). Skipped there: the two tests that measure the process's memory (ulimit -v,
# peak RSS against the memory plan), which ASan's shadow memory and quarantine change.
ASAN_SKIP ?= ^(cli_absurd_sizes|cli_memory_plan_rss)$$
test-asan: setup
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEMPER_CUDA=OFF -DTEMPER_ASAN=ON
	cmake --build build-asan -j $(JOBS)
	cd build-asan && OMP_WAIT_POLICY=passive UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -LE slow -E '$(ASAN_SKIP)' -j $(JOBS) $(CTEST_ARGS)

# The thread pool, rollout engine, trainer and reward/environment program tests under ThreadSanitizer (build-tsan;
# what OpenMP leaves unchecked: tests/sanitizers/run_tsan.sh and tsan.supp).
TSAN_TESTS ?= test_core test_rollout test_rl test_env test_reward
test-tsan: setup
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEMPER_CUDA=OFF -DTEMPER_TSAN=ON
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	tests/sanitizers/run_tsan.sh build-tsan $(TSAN_TESTS)

# temper vs its peers side by side: the machine's rates (bench roofline), training step vs PyTorch, tokenizer vs HF
# tokenizers, model load (mmap vs copy), the RL step vs TRL (quickstart, and SmolLM2-135M-Instruct: ~20 min on 2
# cores), rollout decode vs PyTorch and llama.cpp (skipped unless built once with
# `bench/peers/llamacpp.sh build && bench/peers/llamacpp.sh models`, or LLAMACPP_BUILD=1 make bench);
# needs `scripts/bootstrap --python` (done here).
bench: build
	scripts/bootstrap --python
	$(BUILD)/bin/temper bench roofline
	bench/compare_train.sh
	$(BUILD)/bench/tokenizer_bench tests/data/tokenizer/smollm2/tokenizer.json tests/data/tokenizer/corpus.json --repeat 100
	.venv/bin/python bench/peers/hf_tokenizer.py tests/data/tokenizer/smollm2/tokenizer.json tests/data/tokenizer/corpus.json --repeat 100
	$(BUILD)/bin/temper bench load --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
	bench/compare_rl_step.sh $(BUILD)/bin/temper
	FROM=sft bench/compare_rl_step.sh $(BUILD)/bin/temper
	bench/compare_rl_step.sh $(BUILD)/bin/temper 2 3 .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
	WAIT_IDLE=1 TEMPER=$(BUILD)/bin/temper bench/compare_rollout.sh 2 64 32 1,8,32,64

bench-gemm: build
	$(BUILD)/bench/gemm_backends

clean:
	rm -rf $(BUILD)
