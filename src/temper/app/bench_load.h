// `temper bench load --model M`: model load time (open + weights into a Transformer, tokenizer
// included) with the file mmapped vs copied into memory, best of N, and the resident memory after
// each load. Prints one JSON line per mode.
#pragma once

#include <string>

namespace temper::app {

struct BenchLoadOptions {
  std::string model;
  int repeat = 3;
};

int bench_load(const BenchLoadOptions& o);

}  // namespace temper::app
