#include "temper/rl/derived_problem.h"

#include <algorithm>

#include "temper/core/error.h"

namespace temper::rl {

tasks::Problem derive_problem(const tasks::Problem& p, const PromptCodec& codec, const std::string& what,
                              const std::function<std::string(const std::string& question)>& wrap) {
  tasks::Problem q = p;
  q.asked = wrap(p.asked.empty() ? codec.ask(p.prompt) : p.asked);
  if (!q.messages.empty()) {
    auto it =
        std::find_if(q.messages.rbegin(), q.messages.rend(), [](const tasks::Message& m) { return m.role == "user"; });
    TEMPER_CHECK(it != q.messages.rend()) << what << ": problem " << p.id << " has chat messages but no user message";
    it->content = wrap(it->content);
  }
  return q;
}

std::string fill_template(const std::string& tmpl, const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  out.reserve(tmpl.size());
  for (size_t i = 0; i < tmpl.size();) {
    bool hit = false;
    for (const auto& [key, val] : values) {
      if (tmpl.compare(i, key.size(), key) == 0) {
        out += val;
        i += key.size();
        hit = true;
        break;
      }
    }
    if (!hit) out += tmpl[i++];
  }
  return out;
}

}  // namespace temper::rl
