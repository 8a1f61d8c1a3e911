// FNV-1a 64 (Fowler, Noll, Vo; http://www.isthe.com/chongo/tech/comp/fnv/): the one copy of the hash that names
// files and picks streams, stable across platforms and runs. Leaves out: any finaliser (tasks' stable_hash adds
// splitmix64 on top).
#pragma once

#include <cstdint>
#include <string_view>

namespace temper {

inline constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;  // the standard offset basis, 14695981039346656037
// The standard basis with its last decimal digit lost (1469598103934665603): the image feature cache's file names
// (flow/image_features.cpp) were made with it and stay readable only with it. Not for new uses.
inline constexpr uint64_t kFnv1aShortBasis = 1469598103934665603ull;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;  // 1099511628211

constexpr uint64_t fnv1a(std::string_view s, uint64_t basis = kFnv1aBasis) {
  uint64_t h = basis;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * kFnv1aPrime;
  return h;
}

}  // namespace temper
