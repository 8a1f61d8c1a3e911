#include "temper/rl/derived_problem.h"

#include <algorithm>

#include "temper/core/error.h"

namespace temper::rl {

tasks::Problem derive_problem(const tasks::Problem& p, const PromptCodec& codec,
                              const std::function<std::string(const std::string& question)>& wrap) {
  tasks::Problem q = p;
  if (q.messages.empty()) {
    q.prompt = wrap(p.phrased ? p.prompt : codec.ask(p.prompt));
    q.phrased = true;
  } else {  // chat messages are sent as they are (no user template): the last user message takes the text
    auto it = std::find_if(q.messages.rbegin(), q.messages.rend(), [](const tasks::Message& m) { return m.role == "user"; });
    TEMPER_CHECK(it != q.messages.rend()) << "problem " << p.id << " has chat messages but no user message";
    it->content = wrap(it->content);
    q.prompt = it->content;
  }
  return q;
}

}  // namespace temper::rl
