#include "temper/rl/refitted_head.h"

#include <algorithm>
#include <sstream>

#include "temper/core/error.h"

namespace temper::rl {

void RefitConfig::visit(KeyVisitor& v) {
  v("rounds", rounds, "fits of the head in all");
  v("refit_every", refit_every, "steps between fits (rounds > 1)");
}

void RefitConfig::validate(const std::string& section) const {
  TEMPER_CHECK(rounds >= 1) << section << ".rounds must be >= 1, got " << rounds;
  TEMPER_CHECK(rounds == 1 || refit_every >= 1)
      << section << ".refit_every must be >= 1 (steps between fits) when rounds > 1, got " << refit_every;
}

std::string RefittedHead::save(const std::string& tag) const {
  if (!head_.fitted()) return {};
  std::ostringstream o;
  o.precision(17);
  o << tag << ' ' << steps_ << ' ' << fits_ << ' ' << stats_.accuracy << ' ' << stats_.real << ' ' << stats_.gen << '\n'
    << head_.save();
  return o.str();
}

void RefittedHead::load(const std::string& s, const std::string& tag) {
  if (s.rfind(tag + " ", 0) != 0) {
    head_.load(s);
    fits_ = head_.fitted() ? 1 : 0;
    return;
  }
  const size_t nl = s.find('\n');
  std::istringstream in(s.substr(0, nl));
  std::string t;
  in >> t >> steps_ >> fits_ >> stats_.accuracy >> stats_.real >> stats_.gen;
  TEMPER_CHECK(in && nl != std::string::npos && steps_ >= 0 && fits_ >= 1)
      << tag << ": bad checkpointed state '" << s.substr(0, std::min<size_t>(nl, 80)) << "'";
  head_.load(s.substr(nl + 1));
}

}  // namespace temper::rl
