// `temper info [MODEL]`: what temper sees of a model (config, parameter count, memory for training)
// and of this machine (ISAs, threads, GEMM backend).
#pragma once

#include <string>

namespace temper::app {

struct InfoOptions {
  std::string model;
};

int info(const InfoOptions& o);

}  // namespace temper::app
