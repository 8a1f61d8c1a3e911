// `temper tabular front RUN`: the front a tabular run learned at (start, u0), from its newest verified checkpoint;
// for the Pareto methods each point with the return its tracking policy realises when rolled out; and the exact
// front (set value iteration) beside it when the product is small enough, with which points match. Reads only.
#pragma once

#include <string>

namespace temper::app {

struct TabularFrontOptions {
  std::string run;
  bool json = false;      // one JSON object on stdout instead of the table
  bool fallback = false;  // the previous good checkpoint when the newest fails its checksums
};

int tabular_front(const TabularFrontOptions& o);

}  // namespace temper::app
