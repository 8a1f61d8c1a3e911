// What `temper train` finds in a run directory and the promises it keeps about it: a directory is
// fresh (nothing of a run in it), unstarted (a run's config.toml and maybe its first metrics, but no
// complete checkpoint: it died or was stopped before one) or checkpointed. `--resume` continues a
// checkpointed run and starts an unstarted one over from its config.toml, so every directory a run
// leaves can be continued with one command. A resume keeps the run's resolved config unless changes are
// allowed; what changed is listed (key, before, after) and recorded in DIR/history.jsonl beside every
// start, resume and restart.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace temper::app {

enum class RunDirKind { fresh, unstarted, checkpointed };
RunDirKind inspect_run_dir(const std::string& dir);

// A run's recorded config: DIR/config.toml, else (lost) its newest checkpoint's copy.
std::string recorded_config(const std::string& dir);

// An unstarted run's outputs (metrics, samples, TensorBoard events, report, curriculum plan, partial
// checkpoints) removed before it starts over; config.toml and history.jsonl stay.
void clear_run_outputs(const std::string& dir);

// --fallback: the checkpoints newer than the one resumed from (damaged) moved to DIR/damaged/, out of the way of
// the steps that replace them and of keep-last pruning; returns their names.
std::vector<std::string> set_aside_newer_checkpoints(const std::string& dir, int64_t step);

struct ConfigChange {
  std::string key, before, after;  // TOML literals; "" where the key is absent on that side
};
// Keys whose resolved values differ between two resolved recipes (Recipe::resolved()), in key order;
// `ignored` keys (run.out: where the run is, not how it trains) left out.
std::vector<ConfigChange> config_changes(const std::map<std::string, std::string>& before,
                                         const std::map<std::string, std::string>& after,
                                         const std::vector<std::string>& ignored = {"run.out"});
std::string describe_changes(const std::vector<ConfigChange>& changes);  // "rl.lr (1e-5 -> 2e-5), ..."

// Appends one JSON line to DIR/history.jsonl (time and the event's fields), written atomically.
void append_history(const std::string& dir, nlohmann::json event);

}  // namespace temper::app
