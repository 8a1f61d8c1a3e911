#include "temper/reward/threaded_calls.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace temper::reward {

namespace {

using Clock = std::chrono::steady_clock;

// What one worker thread and the caller share: the worker fills items from `from` on until it is abandoned,
// saying which item it is on and since when (no wake-up per item: the caller sleeps until that item's deadline
// or the end).
struct Segment {
  explicit Segment(size_t n) : out(n), why(n) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<std::string>> out;
  std::vector<std::string> why;
  size_t current = 0;  // the item being computed; out.size(): all done
  Clock::time_point started;
  bool abandoned = false;
};

void work(std::shared_ptr<Segment> seg, std::function<std::string(size_t)> fn, size_t from,
          std::shared_ptr<std::atomic<int64_t>> abandoned) {
  const size_t n = seg->out.size();
  for (size_t i = from; i < n; ++i) {
    std::optional<std::string> r;
    std::string why;
    try {
      r = fn(i);
    } catch (const std::exception& e) {
      why = std::string("exception: ") + e.what();
    } catch (...) {
      why = "exception: not a std::exception";
    }
    std::lock_guard<std::mutex> lock(seg->mu);
    if (seg->abandoned) {  // the caller gave up on item i while fn ran: this thread is done
      --*abandoned;
      return;
    }
    seg->out[i] = std::move(r);
    seg->why[i] = std::move(why);
    seg->current = i + 1;
    seg->started = Clock::now();
    if (i + 1 == n) seg->cv.notify_all();
  }
}

}  // namespace

std::vector<std::optional<std::string>> ThreadedCalls::run(size_t n, std::function<std::string(size_t)> fn,
                                                           double timeout_s, std::vector<std::string>* why) {
  std::vector<std::optional<std::string>> out(n);
  if (why) why->assign(n, "");
  size_t next = 0;
  while (next < n) {
    auto seg = std::make_shared<Segment>(n);
    seg->current = next;
    seg->started = Clock::now();
    std::thread(work, seg, fn, next, abandoned_).detach();
    std::unique_lock<std::mutex> lock(seg->mu);
    for (;;) {
      for (; next < seg->current; ++next) {  // what the worker finished
        out[next] = std::move(seg->out[next]);
        if (!out[next]) {
          ++exceptions_;
          if (why) (*why)[next] = seg->why[next];
        }
      }
      if (next == n) break;
      if (timeout_s <= 0) {
        seg->cv.wait(lock, [&] { return seg->current == n; });
        continue;
      }
      const auto deadline =
          seg->started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
      if (Clock::now() < deadline) {
        seg->cv.wait_until(lock, deadline, [&] { return seg->current == n; });
        continue;
      }
      // item `next` hangs: abandon it with its thread, a fresh thread takes the rest
      seg->abandoned = true;
      ++*abandoned_;
      ++timeouts_;
      if (why) (*why)[next] = "still running after " + std::to_string(timeout_s) + " s: abandoned";
      ++next;
      break;
    }
  }
  return out;
}

}  // namespace temper::reward
