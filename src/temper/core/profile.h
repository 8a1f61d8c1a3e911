// Opt-in phase profiler: TEMPER_PROFILE("attention") times the enclosing scope into a named bucket
// when profiling is on (profile_enable), and costs one branch when off. Single-threaded callers only
// (the training loop); kernels' worker threads are inside the measured scopes.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace temper {

void profile_enable(bool on);
bool profile_enabled();
void profile_reset();
void profile_add(const char* name, double seconds);
std::vector<std::pair<std::string, double>> profile_report();  // (bucket, seconds), largest first

class ProfileScope {
 public:
  explicit ProfileScope(const char* name) : name_(profile_enabled() ? name : nullptr) {
    if (name_) t0_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (name_) profile_add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }

 private:
  const char* name_;
  std::chrono::steady_clock::time_point t0_;
};

// Turns the profiler off for its lifetime when `mute` is true and the profiler is on (restored after): work the
// caller does not want in the buckets (bench rollout's decode profile mutes the engine steps that prefill).
class ProfileMute {
 public:
  explicit ProfileMute(bool mute) : muted_(mute && profile_enabled()) {
    if (muted_) profile_enable(false);
  }
  ~ProfileMute() {
    if (muted_) profile_enable(true);
  }
  ProfileMute(const ProfileMute&) = delete;
  ProfileMute& operator=(const ProfileMute&) = delete;

 private:
  bool muted_;
};

}  // namespace temper

#define TEMPER_PROFILE_CAT2(a, b) a##b
#define TEMPER_PROFILE_CAT(a, b) TEMPER_PROFILE_CAT2(a, b)
#define TEMPER_PROFILE(name) ::temper::ProfileScope TEMPER_PROFILE_CAT(temper_profile_, __LINE__)(name)
