#include "temper/core/thread_pool.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <thread>

#include "temper/core/error.h"
#include "temper/core/thread_count.h"

extern "C" void openblas_set_num_threads(int);

namespace temper {

namespace {
thread_local int t_limit = 0;                           // ThreadLimit's cap on this thread (0: none)
thread_local const std::atomic<int>* t_live = nullptr;  // a moving ThreadLimit's cap (null: t_limit's)
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {}

int ThreadPool::size() const {
  const int cap = t_live ? t_live->load(std::memory_order_relaxed) : t_limit;
  return cap > 0 && cap < num_threads_ ? cap : num_threads_;
}

ThreadPool::~ThreadPool() = default;

void ThreadPool::run(int64_t num_tasks, TaskFn fn) {
  if (num_tasks <= 0) return;
  const int threads = size();
  if (threads == 1 || num_tasks == 1 || omp_in_parallel()) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t);
    return;
  }
  // An exception must not leave an OpenMP region (that terminates): the first one is kept, the
  // remaining tasks are skipped, and it is rethrown on the calling thread.
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  int team = static_cast<int>(num_tasks < threads ? num_tasks : threads);
#pragma omp parallel num_threads(team)
  {
    for (;;) {
      int64_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= num_tasks || failed.load(std::memory_order_relaxed)) break;
      try {
        fn(t);
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

int cores_bound() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return default_num_threads();
  return std::max(1, CPU_COUNT(&set));
}

int default_num_threads() {
  if (const char* e = std::getenv("TEMPER_THREADS")) {
    const int n = parse_thread_count(e);
    TEMPER_CHECK(n > 0) << "TEMPER_THREADS='" << e << "': expected an integer " << thread_count_range();
    return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> p;
  return p;
}
void apply_backend_threads(int n) {
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}
}  // namespace

ThreadPool& thread_pool() {
  auto& p = pool_slot();
  if (!p) {
    p = std::make_unique<ThreadPool>(default_num_threads());
    apply_backend_threads(p->size());
  }
  return *p;
}

void set_num_threads(int n) {
  TEMPER_CHECK(n >= 1) << "thread count must be >= 1, got " << n;
  auto& p = pool_slot();
  if (!p || p->size() != n) p = std::make_unique<ThreadPool>(n);
  apply_backend_threads(n);
}

int num_threads() {
  return thread_pool().size();
}

// omp_set_num_threads sets the calling thread's own count (an OpenMP ICV): the BLAS (OpenBLAS's OpenMP build
// reads omp_get_max_threads() per call) and oneDNN follow it on this thread only.
ThreadLimit::ThreadLimit(int n) : prev_(t_limit), prev_live_(t_live) {
  TEMPER_CHECK(n >= 1) << "thread limit must be >= 1, got " << n;
  t_limit = n;
  t_live = nullptr;
  backend_threads();
}

ThreadLimit::ThreadLimit(const std::atomic<int>& live) : prev_(t_limit), prev_live_(t_live) {
  t_live = &live;
  backend_threads();
}

ThreadLimit::~ThreadLimit() {
  t_limit = prev_;
  t_live = prev_live_;
  backend_threads();
}

int backend_threads() {
  const int n = thread_pool().size();
  if (!omp_in_parallel()) omp_set_num_threads(n);
  return n;
}

}  // namespace temper
