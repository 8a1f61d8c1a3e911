// Persistent fork-join thread pool. run(n, fn) calls fn(task) for task in [0, n) across the pool
// (the caller works too) and returns when all are done.
// The threads are OpenMP's persistent team (libgomp), the same threads the BLAS (OpenBLAS's OpenMP
// build) and oneDNN use: on a 2-core machine a second pool of spinning threads would fight them.
// Leaves out: work stealing, futures, priorities. Nested calls run inline on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace temper {

// Non-owning callable reference (no allocation), valid for the duration of the call.
class TaskFn {
 public:
  template <class F>
  TaskFn(const F& f) : obj_(&f), call_([](const void* o, int64_t t) { (*static_cast<const F*>(o))(t); }) {}
  void operator()(int64_t t) const { call_(obj_, t); }

 private:
  const void* obj_;
  void (*call_)(const void*, int64_t);
};

// Results never depend on which thread ran a task: kernels give each task a disjoint output and reduce
// partials in a fixed order. A task that throws stops the run; the first exception is rethrown to the caller.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The threads work started on the calling thread uses: the pool's, or fewer under a ThreadLimit.
  int size() const;
  void run(int64_t num_tasks, TaskFn fn);

 private:
  int num_threads_;
};

int default_num_threads();    // TEMPER_THREADS, else the number of cores
int cores_bound();            // the cores this process may run on (mpirun binds ranks to cores by default)
ThreadPool& thread_pool();    // the process-wide pool
void set_num_threads(int n);  // resize the pool (and the BLAS's threads) to n
int num_threads();

// Work the calling thread starts (its kernels' fork-joins, the BLAS's and oneDNN's teams) uses at most n
// threads while this lives: two threads of one process that compute at once split the cores between them
// (rl.async: the explorer and the trainer). Results never depend on the count (see above). Nests; per thread.
class ThreadLimit {
 public:
  explicit ThreadLimit(int n);
  // A cap that moves: work started on the calling thread uses at most `live` threads as it reads when the work
  // starts (each fork-join reads it as it opens: the count changes between fork-joins, never within one). `live`
  // outlives this (core/core_split.h: two threads lending each other their cores).
  explicit ThreadLimit(const std::atomic<int>& live);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int prev_;
  const std::atomic<int>* prev_live_;
};

// The threads work started on the calling thread uses now (num_threads()), also set as this thread's OpenMP count
// (the BLAS's and oneDNN's teams follow it): call before handing work to them, so that a moving ThreadLimit reaches
// them too.
int backend_threads();

// Calls fn(begin, end) over [0, n) in chunks of at least `grain`, one contiguous chunk per task.
template <class F>
void parallel_for(int64_t n, int64_t grain, const F& fn) {
  if (n <= 0) return;
  ThreadPool& pool = thread_pool();
  const int64_t max_chunks = (n + grain - 1) / (grain < 1 ? 1 : grain), threads = pool.size();
  const int64_t chunks = max_chunks < threads ? max_chunks : threads;
  if (chunks <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  auto task = [&](int64_t t) {
    int64_t b = n * t / chunks, e = n * (t + 1) / chunks;
    fn(b, e);
  };
  pool.run(chunks, TaskFn(task));
}

// Calls fn(task) for every task in [0, n), dynamically scheduled across the pool.
template <class F>
void parallel_tasks(int64_t n, const F& fn) {
  if (n <= 0) return;
  thread_pool().run(n, TaskFn(fn));
}

}  // namespace temper
