// `temper flow sample RUN --out FILE` and `temper flow eval RUN`: a flow run's newest checkpoint (a `temper flow
// train` or `temper flow rl` run directory) sampled to a PNG (2-D: scatter over the true density; images: a
// grid, one row per class) or a CSV (label, then the sample's values), or evaluated (FD, MMD, precision/recall;
// distances to the true density on 2-D data) and printed as JSON.
#pragma once

#include <cstdint>
#include <string>

namespace temper::app {

struct FlowToolOptions {
  std::string run, out, sampler = "ode";
  int64_t n = 512, steps = 50, label = -1, seed = 1;
  double cfg = 1.0, noise = 0.7;
  int threads = 0;
};

int run_flow_sample(const FlowToolOptions& o);
int run_flow_eval(const FlowToolOptions& o);

}  // namespace temper::app
