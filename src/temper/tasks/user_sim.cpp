#include "temper/tasks/user_sim.h"

#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/core/trim.h"
#include "temper/tasks/dataset.h"
#include "temper/tasks/jsonl_rows.h"

namespace temper::tasks {
namespace {

using nlohmann::json;

constexpr std::string_view kOpen = "<reasoning>", kClose = "</reasoning>", kHuman = "[HUMAN]:";

// One line of text per turn: the format puts one turn on a line.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return std::string(trim(s));
}

Problem parse_row(const json& row, const std::string& where, const std::string& default_id) {
  Problem p;
  auto h = row.find("history");
  if (h == row.end() || !h->is_array())
    field_error(where, "history", "a list of strings (the user's earlier turns)", h == row.end() ? nullptr : &*h);
  for (size_t i = 0; i < h->size(); ++i) {
    if (!(*h)[i].is_string()) field_error(where, "history[" + std::to_string(i) + "]", "a string", &(*h)[i]);
    p.history.push_back(one_line((*h)[i].get<std::string>()));
  }
  auto c = row.find("context");
  if (c == row.end() || !(c->is_string() || c->is_array()))
    field_error(where, "context", "a string or a list of {role, content}", c == row.end() ? nullptr : &*c);
  if (c->is_string()) {
    p.context = trim(c->get<std::string>());
  } else {
    for (size_t i = 0; i < c->size(); ++i) {
      const json& m = (*c)[i];
      std::string f = "context[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
          !m["content"].is_string())
        field_error(where, f, "an object {role: string, content: string}", &m);
      std::string role = m["role"].get<std::string>();
      for (char& ch : role) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      p.context += (p.context.empty() ? "" : "\n") + role + ": " + one_line(m["content"].get<std::string>());
    }
  }
  auto r = row.find("reply");
  if (r == row.end() || !r->is_string() || trim(r->get<std::string>()).empty())
    field_error(where, "reply", "a non-empty string (the real next user turn)", r == row.end() ? nullptr : &*r);
  p.answer = one_line(r->get<std::string>());
  std::string reasoning;
  if (auto x = row.find("reasoning"); x != row.end() && !x->is_null()) {
    if (!x->is_string()) field_error(where, "reasoning", "a string", &*x);
    reasoning = one_line(x->get<std::string>());
  }
  p.gold_solution = (reasoning.empty() ? "" : std::string(kOpen) + reasoning + std::string(kClose) + "\n") +
                    std::string(kHuman) + " " + p.answer;
  p.teacher_response = p.gold_solution;
  p.id = default_id;
  if (auto id = row.find("id"); id != row.end()) {
    if (id->is_string())
      p.id = id->get<std::string>();
    else if (id->is_number_integer())
      p.id = id->dump();
    else
      field_error(where, "id", "a string or integer", &*id);
  }
  if (auto u = row.find("user"); u != row.end()) {
    if (!u->is_string() && !u->is_number_integer()) field_error(where, "user", "a string or integer", &*u);
    p.user = u->is_string() ? u->get<std::string>() : u->dump();
  }
  p.prompt = user_sim_prompt(p.history, p.context);
  return p;
}

}  // namespace

SimReply parse_sim_reply(std::string_view t) {
  SimReply r;
  // Reasoning blocks, in order; a tag without its partner is stray.
  size_t pos = 0;
  while (true) {
    size_t o = t.find(kOpen, pos), cl = t.find(kClose, pos);
    if (o == std::string_view::npos && cl == std::string_view::npos) break;
    if (o != std::string_view::npos && (cl == std::string_view::npos || o < cl)) {
      size_t end = t.find(kClose, o + kOpen.size());
      size_t next_open = t.find(kOpen, o + kOpen.size());
      if (end == std::string_view::npos || (next_open != std::string_view::npos && next_open < end)) {
        ++r.stray_tags;
        pos = o + kOpen.size();
        continue;
      }
      std::string_view body = t.substr(o + kOpen.size(), end - o - kOpen.size());
      if (r.reasoning_blocks == 0) r.reasoning = trim(body);
      for (char ch : body)
        if (std::isalpha(static_cast<unsigned char>(ch))) r.reasoning_has_alpha = true;
      ++r.reasoning_blocks;
      pos = end + kClose.size();
    } else {
      ++r.stray_tags;
      pos = cl + kClose.size();
    }
  }
  size_t last = std::string_view::npos;
  for (size_t h = t.find(kHuman); h != std::string_view::npos; h = t.find(kHuman, h + kHuman.size()))
    ++r.human_tags, last = h;
  if (last == std::string_view::npos) {  // no tag: the text after the reasoning
    size_t close = t.rfind(kClose);
    r.reply = trim(close == std::string_view::npos ? t : t.substr(close + kClose.size()));
  } else {
    std::string_view after = t.substr(last + kHuman.size());
    r.reasoning_after_reply =
        after.find(kOpen) != std::string_view::npos || after.find(kClose) != std::string_view::npos;
    r.reply = trim(after);
  }
  return r;
}

std::vector<std::string> turn_words(std::string_view s) {
  std::vector<std::string> out;
  std::string w;
  for (char ch : s) {
    unsigned char u = static_cast<unsigned char>(ch);
    if (std::isalnum(u) || u >= 0x80 || ch == '\'') {
      w += static_cast<char>(std::tolower(u));
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

int64_t word_count(std::string_view s) {
  int64_t n = 0;
  bool in = false;
  for (char ch : s) {
    bool sp = std::isspace(static_cast<unsigned char>(ch)) != 0;
    if (!sp && !in) ++n;
    in = !sp;
  }
  return n;
}

std::string user_sim_prompt(const std::vector<std::string>& history, const std::string& context) {
  std::string s = "Earlier turns of this user:\n";
  for (const std::string& h : history) s += "- " + h + "\n";
  if (history.empty()) s += "(none)\n";
  s += "Conversation:\n" + context + "\nThe user's next turn:\n";
  return s;
}

std::vector<Problem> load_user_sim_jsonl(const std::string& path) {
  return read_jsonl_rows(path, "task 'user_sim' expects a JSONL file of conversations with history, context, reply",
                         parse_row);
}

UserSimConfig UserSimConfig::from_params(const TaskParams& params) {
  return {DatasetConfig::from_params(params, "user_sim")};
}

UserSimTask::UserSimTask(UserSimConfig cfg) : cfg_(std::move(cfg)) {
  load_splits(cfg_, "user_sim", load_user_sim_jsonl, train_, eval_);
}

int64_t UserSimTask::size(Split split) const {
  return static_cast<int64_t>(split == Split::train ? train_.size() : eval_.size());
}

Problem UserSimTask::problem(Split split, uint64_t index) const {
  const auto& rows = split == Split::train ? train_ : eval_;
  TEMPER_CHECK(index < rows.size()) << "task 'user_sim': index " << index << " out of range for the "
                                    << split_name(split) << " split of " << rows.size() << " conversations";
  return rows[index];
}

std::optional<std::string> UserSimTask::extract_answer(const std::string& completion) const {
  SimReply r = parse_sim_reply(completion);
  if (r.reply.empty()) return std::nullopt;
  return r.reply;
}

Verdict UserSimTask::verify(const Problem& p, const std::string& completion) const {
  Verdict v;
  SimReply r = parse_sim_reply(completion);
  if (!r.reply.empty()) v.extracted = r.reply;
  std::vector<std::string> got = turn_words(r.reply), want = turn_words(p.answer);
  std::map<std::string, int64_t> bag;
  for (const std::string& w : want) ++bag[w];
  int64_t common = 0;
  for (const std::string& w : got)
    if (auto it = bag.find(w); it != bag.end() && it->second > 0) --it->second, ++common;
  if (common > 0) {
    double prec = static_cast<double>(common) / static_cast<double>(got.size()),
           rec = static_cast<double>(common) / static_cast<double>(want.size());
    v.reward = 2 * prec * rec / (prec + rec);
  }
  v.correct = !got.empty() && got == want;
  return v;
}

}  // namespace temper::tasks
