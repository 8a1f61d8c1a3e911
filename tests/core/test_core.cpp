// Core: errors carry file:line and message; Philox matches the published known-answer vectors and
// fills identically for any thread count; the thread pool covers every task once; tensor views
// share memory; dtype conversions round as torch does; ISA selection honours support.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/huge_pages.h"
#include "temper/core/arena.h"
#include "temper/core/atomic_file.h"
#include "temper/core/base64.h"
#include "temper/core/core_split.h"
#include "temper/core/cpu_features.h"
#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/fnv1a.h"
#include "temper/core/log.h"
#include "temper/core/memory_info.h"
#include "temper/core/rng.h"
#include "temper/core/state_snapshot.h"
#include "temper/core/tensor.h"
#include "temper/core/thread_pool.h"

using namespace temper;

TEST(Error, CheckThrowsWithMessageAndLocation) {
  try {
    int x = 3;
    TEMPER_CHECK(x == 4) << "x was " << x;
    FAIL() << "no throw";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("x was 3"), std::string::npos) << m;
    EXPECT_NE(m.find("test_core.cpp:"), std::string::npos) << m;
    EXPECT_NE(m.find("x == 4"), std::string::npos) << m;
  }
  EXPECT_NO_THROW({ TEMPER_CHECK(1 + 1 == 2) << "never"; });
}

TEST(Rng, PhiloxKnownAnswers) {
  // Random123 kat_vectors for philox4x32-10: counter and key all zero / all ones.
  auto z = philox4x32(0, 0, 0);
  EXPECT_EQ(z[0], 0x6627e8d5u);
  EXPECT_EQ(z[1], 0xe169c58du);
  EXPECT_EQ(z[2], 0xbc57ac4cu);
  EXPECT_EQ(z[3], 0x9b00dbd8u);
  auto o = philox4x32(~0ull, ~0ull, ~0ull);
  EXPECT_EQ(o[0], 0x408f276du);
  EXPECT_EQ(o[1], 0x41c83b0eu);
  EXPECT_EQ(o[2], 0xa20bc7c6u);
  EXPECT_EQ(o[3], 0x6d5451fdu);
}

TEST(Rng, StreamsAreReproducibleAndIndependentOfThreads) {
  std::vector<float> a(100003), b(100003);
  set_num_threads(1);
  rng_fill_normal(5, 3, a);
  set_num_threads(2);
  rng_fill_normal(5, 3, b);
  set_num_threads(default_num_threads());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  double mean = 0, var = 0;
  for (float x : a) mean += x;
  mean /= a.size();
  for (float x : a) var += (x - mean) * (x - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.02);
  Rng r1(5, 1), r2(5, 2);
  EXPECT_NE(r1.next_u32(), r2.next_u32());
  Rng c(5, 1, 10);  // a cursor restored from its offset continues the same stream
  Rng d(5, 1);
  for (int i = 0; i < 10; ++i) d.next_u32();
  EXPECT_EQ(c.next_u32(), d.next_u32());
  for (int i = 0; i < 1000; ++i) {
    float u = d.uniform();
    EXPECT_GE(u, 0.f);
    EXPECT_LT(u, 1.f);
  }
}

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<std::atomic<int>> hits(1000);
    parallel_tasks(1000, [&](int64_t t) { hits[t]++; });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    std::vector<int> cover(777, 0);
    parallel_for(777, 10, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) cover[i]++;
    });
    for (int c : cover) EXPECT_EQ(c, 1);
    // Nested calls run inline.
    std::atomic<int> inner{0};
    parallel_tasks(4, [&](int64_t) { parallel_tasks(5, [&](int64_t) { inner++; }); });
    EXPECT_EQ(inner.load(), 20);
  }
  set_num_threads(default_num_threads());
}

TEST(ThreadPool, TaskExceptionReachesTheCaller) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_tasks(100, [&](int64_t t) {
                   ran++;
                   TEMPER_CHECK(t != 37) << "task " << t << " failed";
                 }),
                 Error);
    EXPECT_LE(ran.load(), 100);
    parallel_tasks(10, [&](int64_t) {});  // the pool still works
  }
  set_num_threads(default_num_threads());
}

// rl.async's explorer and trainer: a side that waits lends its share; a moving ThreadLimit follows the count from
// one call to the next, on its own thread only, and reaches OpenMP's count (the BLAS's and oneDNN's teams).
TEST(CoreSplit, AWaitingSideLendsItsShareAndAMovingLimitFollows) {
  CoreSplit split(1, 2);
  EXPECT_EQ(split.threads(0).load(), 1);
  EXPECT_EQ(split.threads(1).load(), 2);
  split.set_working(1, false);
  EXPECT_EQ(split.threads(0).load(), 3);
  {
    CoreSplit::Waiting lend(split, 0);  // both wait: each may take all
    EXPECT_EQ(split.threads(0).load(), 3);
    EXPECT_EQ(split.threads(1).load(), 3);
  }
  split.set_working(1, true);
  EXPECT_EQ(split.threads(0).load(), 1);
  {
    CoreSplit::Waiting lend(split, 0);
    EXPECT_EQ(split.threads(1).load(), 3);
  }
  EXPECT_EQ(split.threads(1).load(), 2);
  EXPECT_THROW(CoreSplit(0, 1), Error);
  EXPECT_THROW(split.set_working(2, true), Error);

  set_num_threads(2);
  CoreSplit pair(1, 1);
  {
    ThreadLimit follow(pair.threads(0));
    EXPECT_EQ(num_threads(), 1);
    EXPECT_EQ(omp_get_max_threads(), 1);
    pair.set_working(1, false);
    EXPECT_EQ(num_threads(), 2);
    EXPECT_EQ(backend_threads(), 2);
    EXPECT_EQ(omp_get_max_threads(), 2);
    {
      ThreadLimit fixed(1);  // nests: a fixed cap inside, the moving one again after it
      pair.set_working(1, true);
      pair.set_working(1, false);
      EXPECT_EQ(num_threads(), 1);
    }
    EXPECT_EQ(num_threads(), 2);
    pair.set_working(1, true);
    EXPECT_EQ(backend_threads(), 1);
    EXPECT_EQ(omp_get_max_threads(), 1);
    int other = 0;
    std::thread([&] { other = num_threads(); }).join();
    EXPECT_EQ(other, 2);  // another thread keeps the pool's count
    std::vector<int> cover(100, 0);
    parallel_for(100, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) cover[i]++;
    });
    for (int c : cover) EXPECT_EQ(c, 1);
  }
  EXPECT_EQ(num_threads(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  set_num_threads(default_num_threads());
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::zeros({4, 3});
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.nbytes(), 48u);
  Tensor rows = t.slice(1, 3);
  EXPECT_EQ(rows.shape(), Shape({2, 3}));
  rows.data<float>()[0] = 7.f;
  EXPECT_EQ(t.data<float>()[3], 7.f);
  Tensor r = t.reshape({12});
  EXPECT_EQ(r.data<float>()[3], 7.f);
  EXPECT_THROW(t.reshape({5}), Error);
  EXPECT_THROW(t.slice(2, 5), Error);
  Tensor c = t.clone();
  c.data<float>()[3] = 1.f;
  EXPECT_EQ(t.data<float>()[3], 7.f);
  Tensor h = t.to(DType::bf16);
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(bf16_to_f32(h.data<uint16_t>()[3]), 7.f);
  EXPECT_THROW(t.checked_data<double>(DType::f64), Error);
  float ext[6] = {1, 2, 3, 4, 5, 6};
  Tensor w = Tensor::wrap(ext, {2, 3}, DType::f32);
  EXPECT_FALSE(w.owns_memory());
  EXPECT_EQ(w.slice(1, 2).data<float>()[0], 4.f);
}

TEST(DType, Bf16AndF16RoundToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);   // halfway 1 + 2^-8: ties to even (down)
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);   // halfway 1 + 3*2^-8: ties to even (up)
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);             // overflow -> inf
  EXPECT_EQ(f32_to_f16(5.9604645e-8f), 0x0001);    // smallest subnormal
  EXPECT_EQ(f32_to_f16(1.00048828125f), 0x3c00);   // halfway 1 + 2^-11: ties to even
  for (uint32_t h = 0; h < 0x7c00; ++h) EXPECT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h) << h;
  DType t;
  EXPECT_TRUE(dtype_from_name("bf16", &t));
  EXPECT_EQ(t, DType::bf16);
  EXPECT_FALSE(dtype_from_name("f8", &t));
}

TEST(Arena, BumpsAlignedAndChecksOverflow) {
  Arena a(1024);
  float* p = a.alloc<float>(3);
  float* q = a.alloc<float>(3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<char*>(q) - reinterpret_cast<char*>(p), 64);
  EXPECT_THROW(a.alloc<float>(1000), Error);
  a.reset();
  EXPECT_EQ(a.used(), 0u);
}

TEST(CpuFeatures, ScalarAlwaysAndSelectionHonoursSupport) {
  EXPECT_TRUE(cpu_isa_supported(Isa::scalar));
  auto isas = cpu_supported_isas();
  ASSERT_FALSE(isas.empty());
  Isa saved = cpu_isa();
  for (Isa i : isas) {
    cpu_set_isa(i);
    EXPECT_EQ(cpu_isa(), i);
  }
  cpu_set_isa(saved);
  Isa x;
  EXPECT_TRUE(isa_from_name("avx2", &x));
  EXPECT_FALSE(isa_from_name("sse", &x));
}

TEST(Log, SinkReceivesEnabledLevelsOnly) {
  std::vector<std::pair<LogLevel, std::string>> got;
  log_set_sink([&](LogLevel l, std::string_view m) { got.emplace_back(l, std::string(m)); });
  LogLevel saved = log_level();
  log_set_level(LogLevel::warn);
  TEMPER_LOG(info) << "hidden " << 1;
  TEMPER_LOG(warn) << "shown " << 2;
  TEMPER_LOG(error) << "also " << 3;
  log_set_level(saved);
  log_set_sink(nullptr);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, LogLevel::warn);
  EXPECT_EQ(got[0].second, "shown 2");
  EXPECT_EQ(got[1].second, "also 3");
}

TEST(Base64, Rfc4648VectorsRoundTripAndBadInput) {
  const std::pair<const char*, const char*> v[] = {{"", ""},        {"f", "Zg=="},        {"fo", "Zm8="},
                                                   {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : v) {
    EXPECT_EQ(temper::base64_encode(plain), coded);
    EXPECT_EQ(temper::base64_decode(coded), std::optional<std::string>(plain));
  }
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  EXPECT_EQ(temper::base64_decode(temper::base64_encode(all)), std::optional<std::string>(all));
  for (const char* bad : {"Zg=", "Z!==", "Zg==Zg==", "Z===", "=g=="})
    EXPECT_EQ(temper::base64_decode(bad), std::nullopt) << bad;
}

TEST(Fnv1a, KnownAnswersAndTheShortBasisValuesInUse) {
  // The published FNV-1a 64 vectors.
  static_assert(temper::fnv1a("") == 0xcbf29ce484222325ull);
  EXPECT_EQ(temper::fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(temper::fnv1a("foobar"), 0x85944171f73967e8ull);
  // The short basis: the image feature cache's file name for tests/flow's tiny settings, as the cache wrote it
  // before this hash moved here (image-features-d5f85091054bcef1.bin); a change would orphan every cache file.
  const std::string key =
      "temper image features v1; data shapes image 8 channels 3 classes 6; arch cnn conv 4 hidden dim 8 "
      "train_images 200 steps 20 batch 16 lr 0.002 weight_decay 0.0001 seed 7 params 686";
  EXPECT_EQ(temper::fnv1a(key, temper::kFnv1aShortBasis), 0xd5f85091054bcef1ull);
  EXPECT_EQ(temper::fnv1a("temper", temper::kFnv1aShortBasis), 0x41f6c03689de9626ull);
}

TEST(AtomicFile, ReplacesWholeKeepsTheOldOnErrorAndLeavesNoTemporary) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("temper-atomic-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "f.txt").string();
  auto read = [&] {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  temper::write_text_atomic(path, "first");
  temper::write_text_atomic(path, "second");
  EXPECT_EQ(read(), "second");
  EXPECT_THROW(temper::write_file_atomic(path,
                                         [](const std::string& tmp) {
                                           std::ofstream(tmp) << "half";
                                           TEMPER_FAIL() << "writer failed";
                                         }),
               temper::Error);
  EXPECT_EQ(read(), "second");
  // Threads writing the same path at once: each its own temporary, the file one of the whole texts.
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] { temper::write_text_atomic(path, std::string(1000, static_cast<char>('a' + t))); });
  for (auto& t : ts) t.join();
  const std::string last = read();
  ASSERT_EQ(last.size(), 1000u);
  EXPECT_EQ(last, std::string(1000, last[0]));
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename() == "f.txt" ? 1 : 100;
  EXPECT_EQ(entries, 1u);
  fs::remove_all(dir);
}

// zero_and_release: the range reads as zeros up to its unaligned ends, its neighbours keep their values, and its
// whole pages are no longer resident (mincore) while the partial pages at its ends still are.
TEST(MemoryInfo, ZeroAndReleaseZeroesTheRangeAndGivesItsWholePagesBack) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = 16, bytes = pages * page;
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* f = static_cast<float*>(m);
  const size_t n = bytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) f[i] = 1.0f + static_cast<float>(i % 7);
  const size_t lo = page / sizeof(float) + 3, hi = 12 * page / sizeof(float) + 5;  // [page 1 + 12 B, page 12 + 20 B)
  temper::zero_and_release(f + lo, (hi - lo) * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const float want = i >= lo && i < hi ? 0.0f : 1.0f + static_cast<float>(i % 7);
    ASSERT_EQ(f[i], want) << "float " << i;
  }
  // Reading the released pages above maps the shared zero page, which mincore need not count: ask before reading.
  for (size_t i = lo; i < hi; ++i) f[i] = 2.0f;
  temper::zero_and_release(f + lo, (hi - lo) * sizeof(float));
  std::vector<unsigned char> resident(pages);
  ASSERT_EQ(::mincore(m, bytes, resident.data()), 0);
  for (size_t p = 0; p < pages; ++p)
    EXPECT_EQ(resident[p] & 1, p >= 2 && p < 12 ? 0 : 1) << "page " << p << " (whole pages 2..11 released)";
  EXPECT_EQ(f[lo - 1], 1.0f + static_cast<float>((lo - 1) % 7));
  EXPECT_EQ(f[lo], 0.0f);
  EXPECT_EQ(f[hi - 1], 0.0f);
  EXPECT_EQ(f[hi], 1.0f + static_cast<float>(hi % 7));
  ::munmap(m, bytes);
}

// advise_huge_pages: where the system's THP mode takes the advice (`madvise` or `always`), a 64 MiB buffer advised
// before it is written is backed by huge pages (its smaps entry's AnonHugePages); in `madvise` mode the same buffer
// without the advice is not (the advice is what did it); where the mode is `never`, skipped.
TEST(MemoryInfo, HugePageAdviceBacksADenseBufferWhereTheSystemAllows) {
  const std::string mode = temper::test::thp_mode();
  if (mode.empty() || mode.find("[never]") != std::string::npos) GTEST_SKIP() << "THP mode: '" << mode << "'";
  const size_t bytes = size_t{64} << 20;
  for (bool advise : {true, false}) {
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    if (advise) {
      ASSERT_TRUE(temper::advise_huge_pages(m, bytes));
    }
    std::memset(m, 1, bytes);
    const int64_t huge_kb = temper::test::anon_huge_kb(m);
    ::munmap(m, bytes);
    if (advise) {
      EXPECT_GT(huge_kb, 0) << "THP mode '" << mode << "': no huge page behind the advised buffer";
    } else if (mode.find("[madvise]") != std::string::npos) {
      EXPECT_EQ(huge_kb, 0) << "THP mode '" << mode << "': huge pages behind a buffer nobody advised";
    }
  }
}

TEST(StateSnapshot, TensorByNameAndARefusalNamingTheCheckpoint) {
  temper::StateSnapshot s;
  s.tensors = {{"a", {1.f, 2.f}}, {"b", {3.f}}};
  EXPECT_EQ(s.tensor("b"), std::vector<float>{3.f});
  EXPECT_TRUE(s.state.is_object());
  s.from = "run/checkpoints/step-4";
  try {
    s.tensor("c");
    FAIL() << "no throw";
  } catch (const temper::Error& e) {
    EXPECT_NE(std::string(e.what()).find("run/checkpoints/step-4: no tensor 'c' (2 tensors in it)"), std::string::npos)
        << e.what();
  }
}
