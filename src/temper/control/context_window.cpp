#include "temper/control/context_window.h"

#include <algorithm>

#include "temper/control/control_env.h"
#include "temper/core/error.h"

namespace temper::control {

ContextWindow::ContextWindow(int64_t n, int64_t window) : n_(n), w_(window) {
  TEMPER_CHECK(n >= 1 && window >= 1) << "context window: n " << n << " and window " << window << " must be >= 1";
  buf_.assign(static_cast<size_t>(n * w_ * kItem), 0.f);
}

void ContextWindow::clear() {
  std::fill(buf_.begin(), buf_.end(), 0.f);
}

void ContextWindow::push(const float* abstract, const float* reward) {
  for (int64_t i = 0; i < n_; ++i) {
    float* row = buf_.data() + i * w_ * kItem;
    std::copy_backward(row, row + (w_ - 1) * kItem, row + w_ * kItem);
    const float* a = abstract + ControlEnv::kAbstractDim * i;
    row[0] = a[0], row[1] = a[1], row[2] = a[2], row[3] = a[3], row[4] = reward[i], row[5] = 1.f;
  }
}

}  // namespace temper::control
