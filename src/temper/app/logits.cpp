#include "temper/app/logits.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/app/id_list.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"

namespace temper::app {

int logits(const LogitsOptions& o) {
  std::vector<int32_t> ids = parse_id_list(o.ids, "--ids");
  LoadedModel lm = load_model(o.model);
  std::fprintf(stderr, "temper logits: loaded %s (%s) in %.2f s\n", o.model.c_str(), lm.format.c_str(), lm.load_seconds);
  const int64_t T = static_cast<int64_t>(ids.size()), V = lm.model->config().vocab_size;
  std::vector<float> out(static_cast<size_t>(T * V));
  lm.model->forward_logits(ids.data(), 1, T, out.data());
  nlohmann::json j;
  j["ids"] = ids;
  std::vector<int32_t> top1;
  for (int64_t t = 0; t < T; ++t) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (out[t * V + v] > out[t * V + best]) best = v;
    top1.push_back(static_cast<int32_t>(best));
  }
  j["top1"] = top1;
  if (o.full) {
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t t = 0; t < T; ++t) rows.push_back(std::vector<float>(out.begin() + t * V, out.begin() + (t + 1) * V));
    j["logits"] = rows;
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace temper::app
