// A trainer's resumable state (see state_snapshot.h).
#include "temper/core/state_snapshot.h"

#include "temper/core/error.h"

namespace temper {

const std::vector<float>& StateSnapshot::tensor(const std::string& name) const {
  for (const auto& [n, v] : tensors)
    if (n == name) return v;
  TEMPER_FAIL() << (from.empty() ? std::string("checkpoint") : from) << ": no tensor '" << name << "' ("
                << tensors.size() << " tensors in it)";
}

}  // namespace temper
