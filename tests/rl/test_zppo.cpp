// ZPPO on hand-made groups of the arithmetic task with a byte codec and the gold teacher: the prompt
// buffer admits below 0.5, keeps, graduates at 0.5, evicts the oldest when full, samples distinct
// entries reproducibly and survives save/load; hard groups get a BCQ (one correct teacher response and
// one wrong student rollout in identical tags, order 50/50 over seeds) and an NCQ (the distinct wrong
// answers listed), each answered by the student as its own group and scored against the original
// answer, within the aug_ratio cap; replay brings buffered questions back by their train index;
// inject mode adds the teacher's response as an off-policy member. Through the trainer: reformulated
// groups are out of the rollout statistics and only completion tokens are in the loss (the candidates are
// prompt). (Resume with the buffer in the checkpoint: tests/e2e/train_resume.sh.)
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "rl/arithmetic_env.h"
#include "rl/byte_codec.h"
#include "rl/letter_task.h"
#include "temper/rl/methods/zppo.h"
#include "temper/tasks/arithmetic.h"

using namespace temper;
using namespace temper::rl;

namespace {

using test::byte_codec;
using test::ids;
using test::kEos;
using test::occurrences;

struct Env : test::ArithmeticEnv {
  MethodEnv env() {
    // The student on a reformulated prompt: member 0 writes the right answer (read from the prompt's
    // candidates is beyond a fake; it is told), the others a wrong one.
    MethodEnv e = method_env(1024, [this](int64_t i, const rollout::RolloutRequest& r) {
      return test::scripted_group(i, r.group_size, "#### " + answer_, "#### 999");
    });
    e.group_size = 4;
    e.seed = 11;
    e.score_tokens = [](const std::vector<int32_t>&, const std::vector<int32_t>& tokens, std::vector<float>& lp,
                        std::vector<float>& ent) {
      lp.assign(tokens.size(), -1.5f);
      ent.assign(tokens.size(), 0.125f);
    };
    return e;
  }
  std::string answer_;
};

Trajectory traj(const tasks::Task& task, const tasks::Problem& p, int64_t group, int64_t member,
                const std::string& text) {
  Trajectory t;
  t.group = group;
  t.problem = group;
  t.member = member;
  t.prompt = ids(p.prompt);
  t.tokens = ids(text);
  t.tokens.push_back(kEos);
  t.text = text;
  t.sample_logprob.assign(t.tokens.size(), -0.1f);
  t.old_logprob.assign(t.tokens.size(), -0.2f);
  t.entropy.assign(t.tokens.size(), 0.5f);
  tasks::Verdict v = task.verify(p, text);
  t.reward = v.reward;
  t.correct = v.correct;
  t.scored = true;
  return t;
}

// A batch of task problems 0..n-1 (train indices first..): `right[g]` of 4 members answer correctly.
Batch batch(const tasks::Task& task, uint64_t first, const std::vector<int>& right) {
  Batch b;
  for (size_t g = 0; g < right.size(); ++g) {
    b.problems.push_back(task.problem(tasks::Split::train, first + g));
    b.problems.back().index = static_cast<int64_t>(first + g);
    const tasks::Problem& p = b.problems.back();
    const std::vector<std::string> wrong = {"1+1=5\n#### 5", "1+1=5\n#### 5", "x\n#### 6", "no answer line"};
    for (int m = 0; m < 4; ++m)
      b.traj.push_back(
          traj(task, p, static_cast<int64_t>(g), m, m < right[g] ? "#### " + p.answer : wrong[static_cast<size_t>(m)]));
  }
  return b;
}

}  // namespace

TEST(Zppo, PromptBufferAdmitsGraduatesEvictsAndSurvivesSaveLoad) {
  PromptBuffer buf(3);
  using E = PromptBuffer::Event;
  EXPECT_EQ(buf.visit(10, 0.0, 0.5), E::admitted);
  EXPECT_EQ(buf.visit(11, 0.25, 0.5), E::admitted);
  EXPECT_EQ(buf.visit(12, 0.5, 0.5), E::none);  // at the threshold: not hard
  EXPECT_EQ(buf.visit(10, 0.25, 0.5), E::stayed);
  EXPECT_EQ(buf.visit(12, 0.0, 0.5), E::admitted);
  EXPECT_EQ(buf.entries(), (std::vector<int64_t>{10, 11, 12}));
  EXPECT_EQ(buf.visit(13, 0.0, 0.5), E::admitted);  // full: 10, the oldest, is evicted
  EXPECT_EQ(buf.entries(), (std::vector<int64_t>{11, 12, 13}));
  EXPECT_EQ(buf.evicted_total(), 1);
  EXPECT_EQ(buf.visit(12, 0.75, 0.5), E::graduated);
  EXPECT_FALSE(buf.contains(12));
  EXPECT_EQ(buf.admitted_at_zero(), 3);  // 10, 12, 13
  EXPECT_EQ(buf.graduated_from_zero(), 1);
  EXPECT_EQ(buf.visit(11, 0.5, 0.5), E::graduated);
  EXPECT_EQ(buf.graduated_from_zero(), 1);  // 11 was admitted at 0.25

  PromptBuffer big(100);
  for (int64_t i = 0; i < 40; ++i) big.visit(i, i % 2 ? 0.0 : 0.25, 0.5);
  std::vector<int64_t> s1 = big.sample(10, 7), s2 = big.sample(10, 7), s3 = big.sample(10, 8);
  EXPECT_EQ(s1, s2);
  EXPECT_NE(s1, s3);
  EXPECT_EQ(std::set<int64_t>(s1.begin(), s1.end()).size(), 10u);
  EXPECT_EQ(big.sample(100, 1).size(), 40u);
  std::vector<int> hits(40, 0);  // uniform: every entry drawn about 1000 * 10 / 40 = 250 times
  for (uint64_t seed = 0; seed < 1000; ++seed)
    for (int64_t i : big.sample(10, seed)) ++hits[static_cast<size_t>(i)];
  for (int h : hits) EXPECT_NEAR(h, 250, 60);

  PromptBuffer back(100);
  back.load(big.save());
  EXPECT_EQ(back.entries(), big.entries());
  EXPECT_EQ(back.sample(10, 7), s1);
  EXPECT_EQ(back.admitted_at_zero(), 20);
  EXPECT_EQ(back.save(), big.save());
  EXPECT_THROW(back.load("admitted=1\n"), Error);
}

TEST(Zppo, HardGroupsGetABcqAndAnNcqAnsweredAsTheirOwnGroups) {
  Env e;
  ZppoConfig c;
  c.aug_ratio = 1.0;           // cap: 2 prompts for 2 new questions
  c.match_candidates = false;  // each candidate whole (the matched form: BcqCandidatesArePlainAndEquallyLong)
  Zppo z(c, make_gold_teacher());
  MethodEnv env = e.env();
  z.attach(env);
  EXPECT_TRUE(z.extra_problems(0, 2).empty());  // nothing buffered yet
  Batch b = batch(*e.task, 100, {0, 4});        // group 0 all wrong, group 1 all right
  const tasks::Problem orig = b.problems[0];
  e.answer_ = orig.answer;
  const size_t before = b.traj.size();
  z.after_reward(b);

  EXPECT_EQ(z.buffer().entries(), (std::vector<int64_t>{100}));
  ASSERT_EQ(b.problems.size(), 4u);
  const tasks::Problem& bcq = b.problems[2];
  const tasks::Problem& ncq = b.problems[3];
  EXPECT_EQ(bcq.index, -1);
  EXPECT_EQ(bcq.answer, orig.answer);
  EXPECT_EQ(bcq.id, orig.id + "#bcq");
  EXPECT_EQ(bcq.asked.rfind(orig.prompt, 0), 0u);  // the question first, then the candidates
  EXPECT_EQ(bcq.prompt, orig.prompt);              // the checker still reads the plain question
  EXPECT_NE(bcq.asked.find("<candidate>\n" + orig.gold_solution + "\n</candidate>\n"), std::string::npos) << bcq.asked;
  const bool has_wrong = bcq.asked.find("<candidate>\n1+1=5\n#### 5\n</candidate>\n") != std::string::npos ||
                         bcq.asked.find("<candidate>\nx\n#### 6\n</candidate>\n") != std::string::npos ||
                         bcq.asked.find("<candidate>\nno answer line\n</candidate>\n") != std::string::npos;
  EXPECT_TRUE(has_wrong) << bcq.asked;
  EXPECT_EQ(occurrences(bcq.asked, "<candidate>"), 2u);
  EXPECT_EQ(occurrences(bcq.asked, "</candidate>"), 2u);
  EXPECT_NE(bcq.asked.find("One is correct and one is wrong."), std::string::npos);
  // NCQ: the distinct parsable wrong answers, first seen first; two traces.
  EXPECT_NE(ncq.asked.find("The following answers are all WRONG: 5, 6."), std::string::npos) << ncq.asked;
  EXPECT_EQ(occurrences(ncq.asked, "<candidate>"), 2u);
  EXPECT_EQ(ncq.id, orig.id + "#ncq");

  // The student answered both as their own groups of G = 4, scored against the original answer.
  ASSERT_EQ(b.traj.size(), before + 8);
  ASSERT_EQ(e.requests.size(), 2u);
  EXPECT_EQ(e.requests[0].prompt, ids(bcq.asked));
  EXPECT_EQ(e.requests[1].prompt, ids(ncq.asked));
  for (size_t i = before; i < b.traj.size(); ++i) {
    const Trajectory& t = b.traj[i];
    const int64_t want = i < before + 4 ? 2 : 3;
    EXPECT_EQ(t.group, want);
    EXPECT_EQ(t.problem, want);
    EXPECT_EQ(t.prompt, ids(b.problems[static_cast<size_t>(want)].asked));
    EXPECT_TRUE(t.scored);
    EXPECT_EQ(t.correct, t.member == 0);
    EXPECT_EQ(t.tags, std::vector<std::string>{want == 2 ? "zppo_bcq" : "zppo_ncq"});
  }
  Metrics m;
  z.metrics(m);
  EXPECT_EQ(test::value(m, "zppo_bcq"), 1);
  EXPECT_EQ(test::value(m, "zppo_ncq"), 1);
  EXPECT_EQ(test::value(m, "zppo_bcq_acc"), 0.25);
  EXPECT_EQ(test::value(m, "zppo_hard_frac"), 0.5);
  EXPECT_EQ(test::value(m, "zppo_all_wrong_frac"), 0.5);
  EXPECT_EQ(test::value(m, "zppo_teacher_acc"), 1.0);

  // Next step: the buffered question is replayed (floor(0.25 * 4) = 1) with its train index; a visit at
  // accuracy 0.5 graduates it, which counts toward the graduation rate of questions admitted at 0.
  std::vector<tasks::Problem> extra = z.extra_problems(1, 4);
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(extra[0].index, 100);
  EXPECT_EQ(extra[0].prompt, orig.prompt);
  Batch b2 = batch(*e.task, 100, {2});
  z.after_reward(b2);
  EXPECT_EQ(z.buffer().size(), 0);
  Metrics m2;
  z.metrics(m2);
  EXPECT_EQ(test::value(m2, "zppo_graduated"), 1);
  EXPECT_EQ(test::value(m2, "zppo_graduated_zero_rate"), 1.0);
  EXPECT_EQ(test::value(m2, "zppo_bcq"), 0);  // not hard any more
}

TEST(Zppo, CandidateOrderIsRandomAndTheCapHolds) {
  Env e;
  ZppoConfig c;
  c.ncq = false;
  c.match_candidates = false;  // the gold solution whole, to find it
  Zppo z(c, make_gold_teacher());
  z.attach(e.env());
  int teacher_first = 0;
  const int n = 400;
  for (int step = 0; step < n; ++step) {
    z.extra_problems(step, 8);
    Batch b = batch(*e.task, 1000 + static_cast<uint64_t>(step) * 8, {0, 0, 0, 0, 0, 0, 0, 1});  // 8 hard
    const size_t p0 = b.problems.size();
    z.after_reward(b);
    ASSERT_EQ(b.problems.size(), p0 + 2);  // cap: ceil(0.25 * 8) = 2 BCQs
    for (size_t k = p0; k < b.problems.size(); ++k) {
      const tasks::Problem& q = b.problems[k];
      const std::string gold = q.gold_solution;
      size_t at_gold = q.asked.find("<candidate>\n" + gold + "\n</candidate>");
      ASSERT_NE(at_gold, std::string::npos);
      EXPECT_EQ(occurrences(q.asked, "<candidate>\n"), 2u);
      teacher_first += at_gold == q.asked.find("<candidate>");
    }
  }
  EXPECT_NEAR(teacher_first, n, 3 * 20);  // of 2n BCQs, half teacher-first (binomial sd = sqrt(2n)/2 = 14)
  // A long candidate keeps its last tokens.
  PromptCodec codec = byte_codec();
  EXPECT_EQ(zppo_candidate(codec, "abcdefghij\n#### 7\n", 8), "<candidate>\n...j\n#### 7\n</candidate>\n");
  EXPECT_EQ(zppo_candidate(codec, "  short\n", 8), "<candidate>\nshort\n</candidate>\n");
}

TEST(Zppo, BcqCandidatesArePlainAndEquallyLong) {
  PromptCodec codec = byte_codec();  // one token per byte
  EXPECT_EQ(zppo_plain("**Step 1:**  add  `3`\r\n\n\n__so__ 3+4=7   \n#### 7\n"), "Step 1: add 3\nso 3+4=7\n#### 7");
  EXPECT_EQ(zppo_plain("a_b * c, 2**3, x__y"),
            "a_b * c, 2**3, x__y");  // single marks, and doubles inside words, are text
  EXPECT_EQ(zppo_plain("<candidate>\n3+4=7\n</candidate> ok"), "3+4=7\nok");  // echoed tags
  // The teacher's short solution and the student's long wrong rollout: both cut to the shorter one's 12 bytes.
  auto [t, s] = zppo_bcq_candidates(codec, "3+4=7\n#### 7\n", "Let me think... **3+4** is 8.\n\n3+4=8\n#### 8", 128);
  EXPECT_EQ(t, "<candidate>\n...3+4=7\n#### 7\n</candidate>\n");  // "..." opens both when either was cut
  EXPECT_EQ(s, "<candidate>\n...3+4=8\n#### 8\n</candidate>\n");
  // Both longer than the budget: both cut to it, both marked.
  std::tie(t, s) = zppo_bcq_candidates(codec, "abcdefghij", "klmnopqrstuvwxyz", 4);
  EXPECT_EQ(t, "<candidate>\n...ghij\n</candidate>\n");
  EXPECT_EQ(s, "<candidate>\n...wxyz\n</candidate>\n");
  // The longer is cut to the shorter: "..." opens both, so the mark does not tell which one was cut.
  std::tie(t, s) = zppo_bcq_candidates(codec, "12345678", "abc", 128);
  EXPECT_EQ(t, "<candidate>\n...678\n</candidate>\n");
  EXPECT_EQ(s, "<candidate>\n...abc\n</candidate>\n");
  // A cut inside a UTF-8 character drops the partial character ("\xC3\xA9" is e-acute; 4 bytes kept of its 5).
  std::tie(t, s) = zppo_bcq_candidates(codec,
                                       "\xC3\xA9"
                                       "123",
                                       "abcd", 128);
  EXPECT_EQ(t, "<candidate>\n...123\n</candidate>\n");
  EXPECT_EQ(s, "<candidate>\n...abcd\n</candidate>\n");
  // An empty candidate could only be the student's: refused (the method skips such rollouts, below).
  EXPECT_THROW(zppo_bcq_candidates(codec, "abcdef", " ** \n", 4), Error);

  // Through the method (the default, match_candidates = true): every BCQ's two candidate bodies are equally long (in
  // bytes, which are this codec's tokens).
  Env e;
  ZppoConfig c;
  c.ncq = false;
  ASSERT_TRUE(c.match_candidates);
  Zppo z(c, make_gold_teacher());
  z.attach(e.env());
  int bcqs = 0;
  for (int step = 0; step < 20; ++step) {
    z.extra_problems(step, 8);
    Batch b = batch(*e.task, 3000 + static_cast<uint64_t>(step) * 8, {0, 0, 0, 0, 0, 0, 0, 1});
    const size_t p0 = b.problems.size();
    z.after_reward(b);
    for (size_t k = p0; k < b.problems.size(); ++k, ++bcqs) {
      const std::string& q = b.problems[k].asked;
      std::vector<size_t> lens;
      for (size_t at = q.find("<candidate>\n"); at != std::string::npos; at = q.find("<candidate>\n", at + 1)) {
        const size_t body = at + 12, end = q.find("\n</candidate>", body);
        ASSERT_NE(end, std::string::npos) << q;
        lens.push_back(end - body);
      }
      ASSERT_EQ(lens.size(), 2u) << q;
      EXPECT_EQ(lens[0], lens[1]) << q;
    }
  }
  EXPECT_EQ(bcqs, 40);
}

TEST(Zppo, QuestionsWithoutATeacherResponseLeaveTheirSlotToOthers) {
  // The dataset teacher knows responses for half the questions: the cap of 2 BCQs is still met.
  Env e;
  ZppoConfig c;
  c.ncq = false;
  c.match_candidates = false;  // the teacher's response whole, to find it
  c.teacher_ratio = 1.0;       // the teacher asked about every hard question (the default 0.25: test_zppo_rewrite)
  Zppo z(c, make_dataset_teacher());
  z.attach(e.env());
  for (int step = 0; step < 30; ++step) {
    z.extra_problems(step, 8);
    Batch b = batch(*e.task, 5000 + static_cast<uint64_t>(step) * 8, {0, 0, 0, 0, 0, 0, 0, 0});
    for (size_t i = 0; i < b.problems.size(); i += 2) b.problems[i].teacher_response = b.problems[i].gold_solution;
    z.after_reward(b);
    Metrics m;
    z.metrics(m);
    EXPECT_EQ(test::value(m, "zppo_bcq"), 2) << "step " << step;
    for (size_t k = 8; k < b.problems.size(); ++k)  // built only from questions the teacher answered
      EXPECT_NE(b.problems[k].asked.find(b.problems[k].gold_solution), std::string::npos);
  }
}

TEST(Zppo, InjectAddsTheTeachersResponseAsAnOffPolicyMember) {
  Env e;
  ZppoConfig c;
  c.mode = ZppoMode::inject;
  Zppo z(c, make_gold_teacher());
  z.attach(e.env());
  z.extra_problems(0, 3);
  Batch b = batch(*e.task, 200, {0, 1, 3});  // groups 0 and 1 are hard
  z.after_reward(b);
  ASSERT_EQ(b.problems.size(), 3u);  // no new prompts
  ASSERT_EQ(b.traj.size(), 14u);
  for (size_t i = 12; i < 14; ++i) {
    const Trajectory& t = b.traj[i];
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    EXPECT_EQ(t.group, static_cast<int64_t>(i - 12));
    EXPECT_EQ(t.member, 4);
    EXPECT_TRUE(t.lineage.off_policy);
    EXPECT_TRUE(t.correct);
    EXPECT_EQ(t.text, p.gold_solution);
    std::vector<int32_t> want = ids(p.gold_solution);
    want.push_back(kEos);
    EXPECT_EQ(t.tokens, want);
    EXPECT_EQ(t.old_logprob, std::vector<float>(want.size(), -1.5f));  // the current policy's
    EXPECT_EQ(t.sample_logprob, t.old_logprob);
  }
  Metrics m;
  z.metrics(m);
  EXPECT_EQ(test::value(m, "zppo_injected"), 2);
  EXPECT_THROW(Zppo(c, nullptr), Error);  // inject needs a teacher
  ZppoConfig bad;
  bad.hard_threshold = 0;
  EXPECT_THROW(Zppo(bad, make_gold_teacher()), Error);
}

namespace {

// The letters task's teacher: "aaaaaa" is always correct.
class LetterTeacher : public Teacher {
 public:
  std::string name() const override { return "letters"; }
  std::vector<std::vector<std::string>> respond(const std::vector<tasks::Problem>& ps, int64_t, uint64_t) override {
    return std::vector<std::vector<std::string>>(ps.size(), {"aaaaaa"});
  }
};

ZppoConfig letter_zppo() {
  ZppoConfig c;
  c.aug_ratio = 0.5;
  c.replay_ratio = 0.5;
  c.candidate_tokens = 6;
  c.match_candidates = false;  // the teacher's "aaaaaa" whole whatever the student wrote
  c.bcq_template = "{candidates}{question}";
  c.ncq_template = "{wrong_answers}{candidates}{question}";
  return c;
}

}  // namespace

TEST(Zppo, ThroughTheTrainerCandidatesArePromptAndReformulatedGroupsAreNotRolloutStatistics) {
  using namespace temper::test;
  RlSetup s;
  Transformer model(test::small_config(Arch::llama, 160));  // room for two candidates in the prompt
  model.init_random(3, 0.05f);
  RlConfig rc = config();
  rc.advantage.scale = RewardScale::batch_active;
  rc.epochs = 2;
  auto teacher = std::make_shared<LetterTeacher>();
  Zppo z(letter_zppo(), teacher);
  RlTrainer t(model, s.task, codec(), rc, s.safe, {&z});
  t.step();
  Metrics m1 = t.step();
  const Batch& b = t.last_batch();
  int reformulated = 0, replayed = 0, bcq = 0;
  double acc = 0, originals = 0;
  for (const Trajectory& x : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(x.problem)];
    EXPECT_EQ(x.loss_mask.size(), x.tokens.size());  // the loss covers the completion, never the prompt
    if (p.index < 0) {
      ++reformulated;
      // The candidates are prompt: the trajectory's prompt is the reformulated question, candidate blocks included (the
      // teacher's "aaaaaa" in a BCQ), and what the loss covers is the student's own completion after it.
      EXPECT_EQ(x.prompt, codec().encode_prompt(p));
      EXPECT_NE(p.asked.find("<candidate>"), std::string::npos) << p.asked;
      EXPECT_GT(x.prompt.size(), codec().encode_text(p.prompt).size() + 20) << p.asked;
      if (p.id.size() > 4 && p.id.compare(p.id.size() - 4, 4, "#bcq") == 0) {
        bcq += 1;
        EXPECT_NE(p.asked.find("<candidate>\naaaaaa\n</candidate>"), std::string::npos) << p.asked;
      }
      continue;
    }
    replayed += static_cast<size_t>(x.problem) >= 4;
    acc += x.correct, originals += 1;
  }
  EXPECT_GT(reformulated, 0);
  EXPECT_GT(bcq, 0);
  EXPECT_GT(replayed, 0);
  EXPECT_NEAR(value(m1, "accuracy"), acc / originals, 1e-12);  // reformulated groups are not rollout statistics
  EXPECT_GT(value(m1, "zppo_buffer"), 0);
}
