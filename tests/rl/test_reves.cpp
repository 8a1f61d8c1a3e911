// REVES and sequential revision on the arithmetic task with a byte codec and a scripted policy: the
// revise loop stops each problem at its first correct attempt and shows the previous attempt with
// the feedback; verdicts parse; only recoveries produce records, #revision == #verification == turns
// with (turns-1) False and one True; rebalancing adds True verifications from first-try-correct
// attempts; augmented prompts are drawn as extra groups, verification prompts are scored by their
// verdict, and the pool survives save/load. Through the trainer and the evaluator as well.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "rl/byte_codec.h"
#include "rl/letter_task.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/methods/reves.h"
#include "temper/tasks/arithmetic.h"

using namespace temper;
using namespace temper::rl;
using test::byte_codec;
using test::ids;
using test::kEos;

namespace {

// A scripted policy: the question a prompt asks is its first line; it answers it right from the round
// solve_at[question] on (counting the prompts seen for that question), wrong before; verification
// prompts get `verdict`.
struct Script {
  std::shared_ptr<tasks::ArithmeticTask> task = std::make_shared<tasks::ArithmeticTask>(tasks::ArithmeticConfig{});
  PromptCodec codec = byte_codec();
  std::map<std::string, int> solve_at;  // question prompt -> round it is solved (absent: never)
  std::map<std::string, int> seen;
  std::map<std::string, std::string> answer;
  std::vector<rollout::RolloutRequest> requests;
  std::string verdict = "#### False";
  GenerateFn generate() {
    return [this](const std::vector<rollout::RolloutRequest>& reqs) {
      requests.insert(requests.end(), reqs.begin(), reqs.end());
      std::vector<rollout::Completion> out;
      for (size_t i = 0; i < reqs.size(); ++i) {
        std::string prompt = codec.decode(reqs[i].prompt);
        std::string q = prompt.substr(0, prompt.find('\n'));
        bool verification = prompt.find("Proposed answer") != std::string::npos;
        int round = seen[q]++;
        std::string text = verification ? verdict
                           : solve_at.count(q) && round >= solve_at[q] ? "#### " + answer[q]
                                                                       : "try " + std::to_string(round) + "\n#### 9999";
        for (int64_t m = 0; m < reqs[i].group_size; ++m) out.push_back(test::scripted_completion(static_cast<int64_t>(i), m, text));
      }
      return out;
    };
  }
  VerifyFn verify() {
    return [this](const tasks::Problem& p, const std::string& t) { return task->verify(p, t); };
  }
};

}  // namespace

TEST(Reves, ReviseStopsAtTheFirstCorrectAttemptAndShowsThePreviousOne) {
  Script s;
  std::vector<tasks::Problem> ps;
  for (uint64_t i = 0; i < 3; ++i) {
    ps.push_back(s.task->problem(tasks::Split::train, i));
    s.answer[ps.back().prompt] = ps.back().answer;
  }
  s.solve_at[ps[0].prompt] = 0;  // at once
  s.solve_at[ps[1].prompt] = 2;  // after two revisions
  ReviseSettings rs;
  rs.rounds = 4;
  rs.max_new = 32;
  rs.context = 512;
  RevisionConfig cfg;
  std::vector<RevisionTrace> tr = revise(ps, rs, cfg, s.codec, s.generate(), s.verify());
  EXPECT_EQ(tr[0].solved_at, 0);
  EXPECT_EQ(tr[0].attempts.size(), 1u);
  EXPECT_EQ(tr[1].solved_at, 2);
  EXPECT_EQ(tr[1].correct, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(tr[2].solved_at, -1);
  EXPECT_EQ(tr[2].attempts.size(), 5u);  // first try + 4 revisions
  // Round 2's prompt for problem 1 shows round 1's attempt and the feedback.
  tasks::Problem rev = revision_problem(ps[1], tr[1].attempts[1], cfg, s.codec);
  EXPECT_EQ(rev.asked, ps[1].prompt +
                           "\nPrevious attempt:\ntry 1\n#### 9999\nFeedback: The previous answer is incorrect.\n"
                           "Write a corrected solution.\n");
  EXPECT_EQ(rev.answer, ps[1].answer);
  EXPECT_EQ(rev.index, -1);
  bool asked = false;
  for (auto& r : s.requests) asked = asked || r.prompt == ids(rev.asked);
  EXPECT_TRUE(asked);
  // Rounds shrink to the unsolved: 3 + 2 + 2 + 1 + 1 requests.
  EXPECT_EQ(s.requests.size(), 9u);
  // A long attempt keeps its last tokens.
  cfg.attempt_tokens = 6;
  EXPECT_NE(revision_problem(ps[1], "0123456789\n#### 5", cfg, s.codec).asked.find("Previous attempt:\n...#### 5\n"),
            std::string::npos);

  EXPECT_EQ(parse_verdict("reasoning\n#### True"), true);
  EXPECT_EQ(parse_verdict("#### false."), false);
  EXPECT_EQ(parse_verdict("VERDICT: \\boxed{True}"), true);
  EXPECT_EQ(parse_verdict("#### maybe"), std::nullopt);
  EXPECT_EQ(parse_verdict("no verdict"), std::nullopt);
  tasks::Problem v = verification_problem(ps[1], "#### 3", false, RevisionConfig{}, s.codec);
  EXPECT_TRUE(is_verification(v));
  EXPECT_EQ(v.answer, "False");
  EXPECT_EQ(verify_verdict(v, "#### False").reward, 1.0);
  EXPECT_EQ(verify_verdict(v, "#### True").reward, 0.0);
  EXPECT_EQ(verify_verdict(v, "#### 3").reward, 0.0);
}

TEST(Reves, OnlyRecoveriesProduceRecordsWithOneTrueVerification) {
  RevisionTrace at_once{{"a"}, {true}, 0}, never{{"a", "b", "c"}, {false, false, false}, -1};
  RevisionTrace later{{"a0", "a1", "a2", "a3"}, {false, false, false, true}, 3};
  EXPECT_TRUE(reves_records(1, at_once, true).empty());
  EXPECT_TRUE(reves_records(1, never, true).empty());
  std::vector<RevesRecord> r = reves_records(7, later, true);
  ASSERT_EQ(r.size(), 6u);  // 3 turns: 3 revision + 3 verification prompts
  int rev = 0, ver = 0, trues = 0;
  for (const RevesRecord& x : r) {
    EXPECT_EQ(x.index, 7);
    (x.verification ? ver : rev) += 1;
    trues += x.verification && x.label;
  }
  EXPECT_EQ(rev, 3);
  EXPECT_EQ(ver, 3);
  EXPECT_EQ(trues, 1);
  EXPECT_EQ(r[0].attempt, "a0");  // revision after attempt 0
  EXPECT_EQ(r[1].attempt, "a1");  // verification of the revised attempt 1 (False)
  EXPECT_FALSE(r[1].label);
  EXPECT_EQ(r[5].attempt, "a3");
  EXPECT_TRUE(r[5].label);
  EXPECT_EQ(reves_records(7, later, false).size(), 3u);
}

namespace {

// "+"/"-" chains left to right: "12+7-3=" -> "16".
std::string evaluate_chain(const std::string& q) {
  long v = 0, cur = 0;
  char op = '+';
  for (char ch : q) {
    if (ch >= '0' && ch <= '9') { cur = cur * 10 + (ch - '0'); continue; }
    v = op == '+' ? v + cur : v - cur;
    cur = 0;
    op = ch;
  }
  return std::to_string(v);
}

int rule(const std::string& q) { return static_cast<int>(tasks::stable_hash(q) % 5); }  // 4: never within 3 rounds

}  // namespace

TEST(Reves, AugmentsDrawsExtraPromptsScoresVerdictsAndSavesThePool) {
  Script s;
  tasks::ArithmeticConfig ac;
  ac.ops = "+-";
  s.task = std::make_shared<tasks::ArithmeticTask>(ac);
  RevesConfig c;
  c.seeds = 40;
  c.rounds = 3;
  c.refresh_every = 10;
  c.aug_ratio = 1.0;
  Reves r(c);
  MethodEnv env;
  env.task = s.task;
  env.codec = &s.codec;
  env.max_new = 32;
  env.context = 1024;
  env.group_size = 2;
  env.seed = 3;
  env.generate = [&s](const std::vector<rollout::RolloutRequest>& reqs) {
    for (const auto& q : reqs) {  // script each question by its rule before the scripted policy answers
      std::string prompt = s.codec.decode(q.prompt);
      std::string question = prompt.substr(0, prompt.find('\n'));
      if (rule(question) < 4) s.solve_at[question] = rule(question);
      s.answer[question] = evaluate_chain(question);
    }
    return s.generate()(reqs);
  };
  env.verify = s.verify();
  r.attach(env);
  std::vector<tasks::Problem> extra = r.extra_problems(0, 4);

  // Expected from the rule: seeds with rule 1..3 recover after that many turns; rule 0 is right at once.
  int64_t recovered = 0, at_once = 0, turns = 0;
  for (auto& [q, n] : s.seen) {
    if (q.find(':') != std::string::npos) continue;  // only the questions themselves
    int k = rule(q);
    at_once += k == 0;
    if (k >= 1 && k <= 3) ++recovered, turns += k;
  }
  ASSERT_GT(recovered, 3);
  ASSERT_GT(at_once, 0);
  int64_t rev = 0, ver = 0, trues = 0;
  for (const RevesRecord& x : r.pool()) {
    (x.verification ? ver : rev) += 1;
    trues += x.verification && x.label;
  }
  EXPECT_EQ(rev, turns);
  const int64_t falses = turns - recovered;
  EXPECT_EQ(trues, recovered + std::min(at_once, std::max<int64_t>(0, falses - recovered)));  // rebalanced
  EXPECT_EQ(ver - trues, falses);

  ASSERT_EQ(extra.size(), 4u);  // floor(1.0 x 4) drawn
  for (const tasks::Problem& p : extra) {
    EXPECT_EQ(p.index, -1);
    EXPECT_TRUE(p.id.size() > 4 && (p.id.substr(p.id.size() - 4) == "#rev" || p.id.substr(p.id.size() - 4) == "#ver")) << p.id;
  }
  // Verification prompts are scored by their verdict against the label (the script says False).
  Batch b;
  for (const RevesRecord& x : r.pool())
    if (x.verification) {
      b.problems.push_back(r.build(x));
      Trajectory t;
      t.problem = static_cast<int64_t>(b.problems.size()) - 1;
      t.group = t.problem;
      t.text = "#### False";
      b.traj.push_back(t);
    }
  r.after_rollout(b);
  for (const Trajectory& t : b.traj) {
    EXPECT_TRUE(t.scored);
    EXPECT_EQ(t.correct, b.problems[static_cast<size_t>(t.problem)].answer == "False");
  }
  // No augmentation between refreshes; the pool survives save/load.
  size_t pool = r.pool().size();
  s.requests.clear();
  r.extra_problems(3, 4);
  EXPECT_TRUE(s.requests.empty());
  EXPECT_EQ(r.pool().size(), pool);
  Reves back(c);
  back.attach(env);
  back.load_state(r.save_state());
  EXPECT_EQ(back.save_state(), r.save_state());
  EXPECT_EQ(back.extra_problems(4, 4).size(), 4u);
  EXPECT_THROW(back.load_state("{\"pool\": 3}"), Error);
  Metrics m;
  r.metrics(m);
  EXPECT_NEAR(test::value(m, "reves_aug_recovered"), static_cast<double>(recovered) / 40.0, 1e-12);
  EXPECT_NEAR(test::value(m, "reves_aug_first_correct"), static_cast<double>(at_once) / 40.0, 1e-12);

  // A small context: records whose prompt leaves no room to answer are not kept.
  env.context = 72;
  Reves tight(c);
  tight.attach(env);
  s.seen.clear();
  tight.extra_problems(0, 4);
  for (const RevesRecord& x : tight.pool()) EXPECT_LE(s.codec.encode_prompt(tight.build(x)).size() + 2, 72u);
  EXPECT_LT(tight.pool().size(), r.pool().size());
}

TEST(Reves, TheRevisionCurveCountsEachProblemFromTheRoundItWasSolvedIn) {
  std::vector<RevisionTrace> tr(5);
  tr[0].solved_at = -1;  // never
  tr[1].solved_at = 0;   // first attempt
  tr[2].solved_at = 2;
  tr[3].solved_at = 3;
  tr[4].solved_at = 2;
  const std::vector<double> c = solved_within(tr, 3);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_DOUBLE_EQ(c[0], 0.2);
  EXPECT_DOUBLE_EQ(c[1], 0.2);
  EXPECT_DOUBLE_EQ(c[2], 0.6);
  EXPECT_DOUBLE_EQ(c[3], 0.8);
  EXPECT_EQ(solved_within(tr, 1), (std::vector<double>{0.2, 0.2}));  // later rounds than asked: not counted
  EXPECT_EQ(solved_within({}, 2), (std::vector<double>{0.0, 0.0, 0.0}));
  EXPECT_THROW(solved_within(tr, -1), Error);
}

TEST(Reves, EvaluatorReportsTheShareSolvedWithinEachRevisionRound) {
  // A random tiny model on the letters task: solved_within is non-decreasing, starts at the plain
  // accuracy and rises with revisions only by problems solved in later rounds.
  using namespace temper::test;
  RlSetup setup;
  EvalConfig ec = eval_config(12, 4);
  ec.revisions = 3;
  ec.greedy = false;
  ec.revision.revision_template = "{attempt}{question}";  // letters only: the codec knows no other characters
  auto task = std::make_shared<LetterTask>();
  EvalResult e = evaluate(setup.model, task, codec(), ec, setup.safe);
  ASSERT_EQ(e.solved_within.size(), 4u);
  for (size_t k = 1; k < 4; ++k) EXPECT_GE(e.solved_within[k], e.solved_within[k - 1]);
  EXPECT_DOUBLE_EQ(e.solved_within[0], e.accuracy);
  ec.samples = 2;
  EXPECT_THROW(evaluate(setup.model, task, codec(), ec, setup.safe), Error);
}
