#include "temper/spotlight/work_queue.h"

#include <algorithm>

namespace temper::spotlight {

WorkQueue::WorkQueue(int64_t tries) : t0_(std::chrono::steady_clock::now()), tries_(std::max<int64_t>(tries, 1)) {}

double WorkQueue::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::vector<int64_t> WorkQueue::add(std::vector<ExploreRequest> requests) {
  std::vector<int64_t> ids;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (ExploreRequest& r : requests) {
      r.id = next_id_++, r.failures = 0;
      if (r.step <= started_) {
        ++n_.expired;
        continue;
      }
      ids.push_back(r.id);
      pending_.push_back(r);
      ++n_.added;
    }
  }
  cv_.notify_all();
  return ids;
}

std::optional<ExploreRequest> WorkQueue::pull(int worker) {
  std::lock_guard<std::mutex> g(mu_);
  while (!pending_.empty()) {
    ExploreRequest r = pending_.front();
    pending_.pop_front();
    if (r.step <= started_) {
      ++n_.expired;
      continue;
    }
    in_flight_[r.id] = {worker, r};
    return r;
  }
  return std::nullopt;
}

bool WorkQueue::commit(int worker, ExploreResult r) {
  bool kept = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = in_flight_.find(r.request);
    if (it == in_flight_.end() || it->second.first != worker) return false;
    const ExploreRequest& q = it->second.second;
    r.step = q.step, r.group = q.group, r.label = q.label, r.worker = worker;
    r.arrived = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (q.step <= started_) {
      ++n_.late;
    } else {
      results_[q.step].push_back(std::move(r));
      ++n_.committed;
      kept = true;
    }
    in_flight_.erase(it);
  }
  cv_.notify_all();
  return kept;
}

std::vector<int64_t> WorkQueue::worker_lost(int worker) {
  std::vector<int64_t> requeued;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (it->second.first != worker) {
        ++it;
        continue;
      }
      ExploreRequest r = it->second.second;
      it = in_flight_.erase(it);
      if (++r.failures >= tries_) {
        ++n_.dropped;
      } else if (r.step <= started_) {
        ++n_.expired;
      } else {
        ++n_.requeued;
        requeued.push_back(r.id);
        pending_.push_front(r);
      }
    }
  }
  cv_.notify_all();
  return requeued;
}

std::vector<ExploreResult> WorkQueue::take(int64_t step) {
  std::vector<ExploreResult> out;
  {
    std::lock_guard<std::mutex> g(mu_);
    started_ = std::max(started_, step);
    auto it = results_.find(step);
    if (it != results_.end()) out = std::move(it->second);
    results_.erase(results_.begin(), results_.upper_bound(step));
    for (auto p = pending_.begin(); p != pending_.end();) {
      if (p->step <= started_) {
        ++n_.expired;
        p = pending_.erase(p);
      } else {
        ++p;
      }
    }
  }
  cv_.notify_all();
  // Arrival order depends on timing; the order of the results does not.
  std::sort(out.begin(), out.end(),
            [](const ExploreResult& a, const ExploreResult& b) { return a.request < b.request; });
  return out;
}

bool WorkQueue::step_done_locked(int64_t step) const {
  const auto of_step = [step](const ExploreRequest& r) { return r.step == step; };
  return std::none_of(pending_.begin(), pending_.end(), of_step) &&
         std::none_of(in_flight_.begin(), in_flight_.end(), [&](const auto& e) { return of_step(e.second.second); });
}

bool WorkQueue::step_done(int64_t step) const {
  std::lock_guard<std::mutex> g(mu_);
  return step_done_locked(step);
}

bool WorkQueue::wait_step_done(int64_t step, double timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_until(lk, deadline, [&] { return step_done_locked(step); });
}

std::vector<ExploreResult> WorkQueue::committed_ahead() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<ExploreResult> out;
  for (const auto& [step, rs] : results_)
    if (step > started_) out.insert(out.end(), rs.begin(), rs.end());
  return out;
}

void WorkQueue::restore_committed(std::vector<ExploreResult> r) {
  std::lock_guard<std::mutex> g(mu_);
  for (ExploreResult& e : r) {
    next_id_ = std::max(next_id_, e.request + 1);
    results_[e.step].push_back(std::move(e));
  }
}

QueueCounters WorkQueue::counters() const {
  std::lock_guard<std::mutex> g(mu_);
  return n_;
}

bool WorkQueue::has_pending() const {
  std::lock_guard<std::mutex> g(mu_);
  return !pending_.empty();
}

std::optional<int64_t> WorkQueue::held_by(int worker) const {
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& [id, e] : in_flight_)
    if (e.first == worker) return id;
  return std::nullopt;
}

}  // namespace temper::spotlight
