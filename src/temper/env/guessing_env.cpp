#include "temper/env/guessing_env.h"

#include <limits>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::env {

namespace {

using ojson = nlohmann::ordered_json;
constexpr uint64_t kFamily = 0x6775657373ull;  // "guess"

// The guess in a text: its last number when that is a whole number that fits in int64.
std::optional<int64_t> last_integer(const std::string& text) {
  const std::optional<std::string> n = last_number(text);
  if (!n || n->find('.') != std::string::npos) return std::nullopt;
  const std::string digits = (*n)[0] == '-' ? n->substr(1) : *n;
  if (digits.size() > 18) return std::nullopt;
  const int64_t v = std::stoll(digits);
  return (*n)[0] == '-' ? -v : v;
}

}  // namespace

GuessOptions GuessOptions::from_params(const ojson& params) {
  TEMPER_CHECK(params.is_object()) << "env 'guess': params must be an object, got " << params.dump();
  for (auto& [k, v] : params.items())
    TEMPER_CHECK(k == "n" || k == "seed") << "env 'guess': no param '" << k << "' (known: n, seed)";
  GuessOptions o;
  if (auto n = params.find("n"); n != params.end()) {
    TEMPER_CHECK(n->is_number_integer() && n->get<int64_t>() >= 2 && n->get<int64_t>() <= 1000000000)
        << "env 'guess': param n must be an integer in [2, 1000000000], got " << n->dump();
    o.n = n->get<int64_t>();
  }
  if (auto s = params.find("seed"); s != params.end()) {
    TEMPER_CHECK(s->is_number_integer() && s->get<int64_t>() >= 0)
        << "env 'guess': param seed must be an integer >= 0, got " << s->dump();
    o.seed = s->get<uint64_t>();
  }
  return o;
}

int64_t guess_secret(const GuessOptions& opt, uint64_t seed, bool eval, uint64_t index) {
  Rng rng(mix_seed(seed, kFamily), 2 * index + (eval ? 1 : 0));
  const uint64_t span = static_cast<uint64_t>(opt.n);
  const uint64_t limit = std::numeric_limits<uint32_t>::max() - std::numeric_limits<uint32_t>::max() % span;
  for (;;) {  // n <= 10^9 < 2^32: one u32 per try, the biased tail rejected
    const uint32_t x = rng.next_u32();
    if (x < limit) return 1 + static_cast<int64_t>(x % span);
  }
}

std::string guess_prompt(int64_t n) {
  return "I'm thinking of a number between 1 and " + std::to_string(n) + ". Guess it; I'll say higher or lower.";
}

EnvReply GuessingEnvironment::reset(const std::string& episode, const ojson& row) {
  EnvReply r;
  State st;
  try {
    TEMPER_CHECK(row.is_object()) << "env 'guess': the row must be an object, got " << row.dump();
    if (auto s = row.find("secret"); s != row.end()) {
      TEMPER_CHECK(s->is_number_integer() && s->get<int64_t>() >= 1 && s->get<int64_t>() <= opt_.n)
          << "env 'guess': row.secret must be an integer in [1, " << opt_.n << "], got " << s->dump();
      st.secret = s->get<int64_t>();
    } else {
      const RowDraw d = row_draw(row, opt_.seed, "guess");
      st.secret = guess_secret(opt_, d.seed, d.eval, d.index);
    }
  } catch (const Error& e) {
    r.ok = false;
    r.error = e.what();
    ++failures_;
    return r;
  }
  r.messages = ojson::array({ojson{{"role", "user"}, {"content", guess_prompt(opt_.n)}}});
  std::lock_guard<std::mutex> lock(mu_);
  episodes_[episode] = st;
  return r;
}

EnvReply GuessingEnvironment::step(const std::string& episode, const ojson& message) {
  EnvReply r;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = episodes_.find(episode);
  if (it == episodes_.end()) {
    r.ok = false;
    r.error = "env 'guess': step for episode '" + episode + "', which was never reset or is closed";
    return r;
  }
  State& st = it->second;
  ++st.turns;
  const std::optional<int64_t> g = last_integer(message_text(message));
  std::string reply;
  if (!g) {
    reply = "Please answer with a number.";
  } else if (*g < st.secret) {
    reply = "higher";
  } else if (*g > st.secret) {
    reply = "lower";
  } else {
    reply = "correct";
    r.reward = 1;
    r.done = true;
    r.correct = true;
    r.components = {{"turns", static_cast<double>(st.turns)}};
  }
  r.messages = ojson::array({ojson{{"role", "user"}, {"content", reply}}});
  return r;
}

void GuessingEnvironment::close(const std::string& episode) {
  std::lock_guard<std::mutex> lock(mu_);
  episodes_.erase(episode);
}

}  // namespace temper::env
