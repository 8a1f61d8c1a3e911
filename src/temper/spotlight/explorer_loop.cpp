#include "temper/spotlight/explorer_loop.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include "temper/core/clock.h"
#include "temper/core/error.h"

namespace temper::spotlight {

Message SeedScorer::answer(const Message& request) {
  const auto first = request.head.at("first_seed").get<uint64_t>();
  const auto count = request.head.at("count").get<int64_t>();
  std::vector<uint64_t> seeds(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) seeds[static_cast<size_t>(i)] = first + static_cast<uint64_t>(i);
  const std::vector<double> r = score(request.head.at("label").get<int32_t>(), seeds);
  return {MsgType::result, {{"seeds", seeds}}, to_blob(r)};
}

int explorer_serve(int fd, const ScorerFactory& make) {
  const auto t0 = std::chrono::steady_clock::now();
  SocketReader in(fd);
  std::optional<Message> m = in.next();
  if (!m) return kNoSetup;
  TEMPER_CHECK(m->type == MsgType::setup)
      << "spotlight explorer: expected the setup message first, got " << msg_type_name(m->type);
  std::unique_ptr<Scorer> scorer = make(*m);
  // Tests: every request takes at least this long, so a kill lands while the explorer holds one.
  const double min_request_s = m->head.value("min_request_s", 0.0);
  int64_t version = scorer->loaded_version();
  if (version >= 0) write_all(fd, encode({MsgType::pull, {{"version", version}, {"ready_s", seconds_since(t0)}}, {}}));
  while ((m = in.next())) {
    if (m->type == MsgType::stop) return 0;
    if (m->type == MsgType::weights) {
      // Read in place: the blob's buffer (operator new's) is aligned for floats.
      const std::span<const float> p(reinterpret_cast<const float*>(m->blob.data()), m->blob.size() / sizeof(float));
      TEMPER_CHECK(static_cast<int64_t>(p.size()) == scorer->param_count() && m->blob.size() % sizeof(float) == 0)
          << "spotlight explorer: weights of " << m->blob.size() << " bytes for a model of " << scorer->param_count()
          << " parameters";
      scorer->set_params(p);
      const bool first = version < 0;
      version = m->head.at("version").get<int64_t>();
      if (first) write_all(fd, encode({MsgType::pull, {{"version", version}, {"ready_s", seconds_since(t0)}}, {}}));
      continue;
    }
    TEMPER_CHECK(m->type == MsgType::request && version >= 0)
        << "spotlight explorer: unexpected " << msg_type_name(m->type) << (version < 0 ? " before any weights" : "");
    const auto t = std::chrono::steady_clock::now();
    Message out = scorer->answer(*m);
    if (const double left = min_request_s - seconds_since(t); left > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(left));
    out.type = MsgType::result;
    out.head["id"] = m->head.at("id"), out.head["version"] = version, out.head["seconds"] = seconds_since(t);
    write_all(fd, encode(out));
  }
  return 0;
}

}  // namespace temper::spotlight
