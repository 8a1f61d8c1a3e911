// ZPPO's teacher rewrite and teacher cap (issue 42): a teacher model restates both BCQ candidates (and the NCQ traces)
// with one prompt, so the teacher's and the student's candidates share one style; a rewrite that changes a candidate's
// verdict, or that the teacher does not finish, is dropped for the original text (a BCQ keeps both rewrites or
// neither); the gold and dataset teachers cannot write, so there the plain stripping stays ("teacher" is refused);
// and the teacher samples only ceil(teacher_ratio x new) hard questions a step (0.25, the spec's rho_aug).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/scratch.h"
#include "rl/arithmetic_env.h"
#include "rl/byte_codec.h"
#include "rl/letter_task.h"
#include "temper/rl/methods/zppo.h"
#include "temper/tasks/arithmetic.h"

using namespace temper;
using namespace temper::rl;

namespace {

using test::ids;
using test::kEos;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A teacher model stand-in: answers a question with its gold solution, and a rewrite request with one fixed style
// ("We work it out.\n" and the response's last line); `flip` makes it correct wrong answers instead (a rewrite
// that changes the verdict); `silent` returns nothing for rewrites (unfinished within max_new).
class WritingTeacher : public Teacher {
 public:
  std::string name() const override { return "model"; }
  std::vector<std::vector<std::string>> respond(const std::vector<tasks::Problem>& ps, int64_t, uint64_t) override {
    std::vector<std::vector<std::string>> out(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
      if (!ends_with(ps[i].id, "#rewrite")) {
        asked.push_back(ps[i].id);
        out[i].push_back(ps[i].gold_solution);
        continue;
      }
      rewrites.push_back(ps[i].prompt);
      if (silent) continue;
      const std::string& q = ps[i].prompt;
      std::string response = q.substr(q.find("Solution:\n") + 10);
      std::string last = response.substr(response.rfind('\n') == std::string::npos ? 0 : response.rfind('\n') + 1);
      if (flip) last = "#### " + answers.at(ps[i].id.substr(0, ps[i].id.size() - 8));
      out[i].push_back("We work it out.\n" + last);
    }
    return out;
  }
  std::vector<std::string> asked, rewrites;
  std::map<std::string, std::string> answers;  // problem id -> answer (for flip)
  bool flip = false, silent = false;
};

struct Env : test::ArithmeticEnv {
  MethodEnv env() {  // every member of every reformulated group answers wrong
    MethodEnv e = method_env(4096, [](int64_t i, const rollout::RolloutRequest& r) {
      return test::scripted_group(i, r.group_size, "#### 999", "#### 999");
    });
    e.group_size = 4;
    e.seed = 11;
    return e;
  }
};

// Problems first.. of the train split; every group all wrong: members write "1+1=5\n#### 100005" and "**x**\n####
// 100006".
Batch all_wrong(const tasks::Task& task, uint64_t first, size_t n) {
  Batch b;
  for (size_t g = 0; g < n; ++g) {
    b.problems.push_back(task.problem(tasks::Split::train, first + g));
    b.problems.back().index = static_cast<int64_t>(first + g);
    const tasks::Problem& p = b.problems.back();
    for (int m = 0; m < 4; ++m) {
      Trajectory t;
      t.group = t.problem = static_cast<int64_t>(g);
      t.member = m;
      t.text = m % 2 ? "**x**\n#### 100006" : "1+1=5\n#### 100005";
      t.tokens = ids(t.text);
      t.tokens.push_back(kEos);
      tasks::Verdict v = task.verify(p, t.text);
      t.reward = v.reward, t.correct = v.correct, t.scored = true;
      b.traj.push_back(t);
    }
  }
  return b;
}

// Attaches z to e's env and runs its first step: n new questions from train index `first`, all of them hard (every
// member wrong); returns the batch after z's after_reward.
Batch first_step(Zppo& z, Env& e, uint64_t first, int64_t n) {
  z.attach(e.env());
  z.extra_problems(0, n);
  Batch b = all_wrong(*e.task, first, static_cast<size_t>(n));
  z.after_reward(b);
  return b;
}

std::vector<std::string> candidate_bodies(const std::string& q) {
  std::vector<std::string> out;
  for (size_t at = q.find("<candidate>\n"); at != std::string::npos; at = q.find("<candidate>\n", at + 1))
    out.push_back(q.substr(at + 12, q.find("\n</candidate>", at) - at - 12));
  return out;
}

}  // namespace

TEST(ZppoRewrite, TheTeacherModelRestatesBothCandidatesWithOnePrompt) {
  Env e;
  ZppoConfig c;
  c.aug_ratio = 1.0;  // 2 prompts for 2 new questions: a BCQ and an NCQ of the first hard question
  ASSERT_EQ(c.rewrite, ZppoRewrite::automatic);
  auto teacher = std::make_shared<WritingTeacher>();
  Zppo z(c, teacher);
  Batch b = first_step(z, e, 100, 2);
  ASSERT_EQ(b.problems.size(), 4u);
  const tasks::Problem& bcq = b.problems[2];
  ASSERT_TRUE(ends_with(bcq.id, "#bcq")) << bcq.id;
  const tasks::Problem* orig = bcq.id == b.problems[0].id + "#bcq" ? &b.problems[0] : &b.problems[1];
  // Both candidates in the teacher's one style: "We work it out." then the answer line, the right one and a wrong one.
  std::vector<std::string> bodies = candidate_bodies(bcq.asked);
  ASSERT_EQ(bodies.size(), 2u) << bcq.asked;
  std::set<std::string> got(bodies.begin(), bodies.end());
  const std::string right = "We work it out.\n#### " + orig->answer;
  EXPECT_TRUE(got.count(right)) << bcq.asked;
  EXPECT_TRUE(got.count("We work it out.\n#### 100005") || got.count("We work it out.\n#### 100006")) << bcq.asked;
  // The NCQ's two traces restated too; the wrong answers listed as the student wrote them.
  const tasks::Problem& ncq = b.problems[3];
  EXPECT_NE(ncq.asked.find("The following answers are all WRONG: 100005, 100006."), std::string::npos) << ncq.asked;
  EXPECT_EQ(candidate_bodies(ncq.asked),
            (std::vector<std::string>{"We work it out.\n#### 100005", "We work it out.\n#### 100006"}));
  // Four rewrite requests with one prompt: the template around the plain question and the response (trimmed).
  ASSERT_EQ(teacher->rewrites.size(), 4u);
  const std::string head =
      "Restate the solution below as short step-by-step reasoning in plain sentences, then its "
      "final answer line exactly as the solution gives it. Do not correct it, even if it is "
      "wrong.\n\nQuestion: " +
      orig->prompt + "\n\nSolution:\n";
  std::set<std::string> responses;
  for (const std::string& r : teacher->rewrites) {
    ASSERT_EQ(r.rfind(head, 0), 0u) << r;
    responses.insert(r.substr(head.size()));
  }
  EXPECT_TRUE(responses.count(orig->gold_solution));
  EXPECT_TRUE(responses.count("1+1=5\n#### 100005") && responses.count("**x**\n#### 100006"));
  Metrics m;
  z.metrics(m);
  EXPECT_EQ(test::value(m, "zppo_rewritten"), 4);
  EXPECT_EQ(test::value(m, "zppo_rewrite_dropped"), 0);
  // The request of a chat problem is one user message.
  tasks::Problem chat = *orig;
  chat.messages = {{"system", "s"}, {"user", orig->prompt}};
  tasks::Problem req = zppo_rewrite_request(chat, "Q: {question} A: {response}", "  x\n");
  EXPECT_EQ(req.prompt, "Q: " + orig->prompt + " A: x");
  ASSERT_EQ(req.messages.size(), 1u);
  EXPECT_EQ(req.messages[0].content, req.prompt);
  EXPECT_TRUE(req.asked.empty());
}

TEST(ZppoRewrite, ARewriteThatChangesTheVerdictOrNeverCameIsDropped) {
  for (bool flip : {true, false}) {
    SCOPED_TRACE(flip ? "the teacher corrects the wrong candidate" : "the teacher does not finish");
    Env e;
    ZppoConfig c;
    c.aug_ratio = 1.0;
    c.ncq = false;
    c.match_candidates = false;  // the originals whole, to find them
    auto teacher = std::make_shared<WritingTeacher>();
    teacher->flip = flip;
    teacher->silent = !flip;
    Zppo z(c, teacher);
    z.attach(e.env());
    z.extra_problems(0, 1);
    Batch b = all_wrong(*e.task, 300, 1);
    teacher->answers[b.problems[0].id] = b.problems[0].answer;
    z.after_reward(b);
    ASSERT_EQ(b.problems.size(), 2u);
    // flip: the teacher's own rewrite stays correct but the student's becomes correct too: both dropped (one
    // writer for both candidates); the originals are shown.
    const std::vector<std::string> bodies = candidate_bodies(b.problems[1].asked);
    ASSERT_EQ(bodies.size(), 2u);
    std::set<std::string> got(bodies.begin(), bodies.end());
    EXPECT_TRUE(got.count(b.problems[0].gold_solution)) << b.problems[1].asked;
    EXPECT_TRUE(got.count("1+1=5\n#### 100005") || got.count("**x**\n#### 100006")) << b.problems[1].asked;
    Metrics m;
    z.metrics(m);
    EXPECT_EQ(test::value(m, "zppo_rewritten"), 0);
    EXPECT_EQ(test::value(m, "zppo_rewrite_dropped"), 2);
    EXPECT_EQ(teacher->rewrites.size(), 2u);
  }
}

TEST(ZppoRewrite, TextTeachersStripAndTeacherRewriteNeedsAModel) {
  Env e;
  ZppoConfig c;
  c.aug_ratio = 1.0;
  c.ncq = false;
  Zppo z(c, make_gold_teacher());  // auto: the gold solution cannot restate anything
  Batch b = first_step(z, e, 400, 1);
  ASSERT_EQ(b.problems.size(), 2u);
  const std::vector<std::string> bodies = candidate_bodies(b.problems[1].asked);
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[0].size(), bodies[1].size());  // stripped and matched
  Metrics m;
  z.metrics(m);
  EXPECT_EQ(test::value(m, "zppo_rewritten"), 0);
  c.rewrite = ZppoRewrite::teacher;
  test::expect_error([&] { Zppo(c, make_gold_teacher()); },
                     {"rl.zppo.rewrite = \"teacher\"", "\"gold\" teacher only gives its fixed text"});
  test::expect_error([&] { Zppo(c, make_dataset_teacher()); }, {"\"dataset\" teacher"});
  EXPECT_NO_THROW(Zppo(c, std::make_shared<WritingTeacher>()));
  // strip: a model teacher is not asked to rewrite.
  c.rewrite = ZppoRewrite::strip;
  auto teacher = std::make_shared<WritingTeacher>();
  Zppo s(c, teacher);
  Batch b2 = first_step(s, e, 400, 1);
  EXPECT_EQ(b2.problems.size(), 2u);
  EXPECT_TRUE(teacher->rewrites.empty());
  c.rewrite_template = "no response key";
  test::expect_error([&] { c.validate(); }, {"rl.zppo.rewrite_template must contain {response}"});
}

TEST(ZppoTeacherCap, TheTeacherSamplesOnlyTheCappedHardQuestions) {
  // 8 new questions, all hard: the teacher is asked ceil(0.25 x 8) = 2 of them per step, the first two of the step's
  // seeded order, which are the ones the budget of 2 prompts goes to (BCQ + NCQ of the first, or a BCQ each when
  // NCQs are off). A second round of the same step asks nothing more. teacher_ratio = 1 asks all 8.
  EXPECT_EQ(ZppoConfig{}.teacher_ratio, 0.25);
  Env e;
  for (double ratio : {0.25, 1.0}) {
    ZppoConfig c;
    c.ncq = false;
    c.rewrite = ZppoRewrite::strip;
    c.teacher_ratio = ratio;
    auto teacher = std::make_shared<WritingTeacher>();
    Zppo z(c, teacher);
    z.attach(e.env());
    for (int step = 0; step < 5; ++step) {
      teacher->asked.clear();
      z.extra_problems(step, 8);
      Batch b = all_wrong(*e.task, 1000 + static_cast<uint64_t>(step) * 8, 8);
      z.after_reward(b);
      ASSERT_EQ(teacher->asked.size(), ratio < 1 ? 2u : 8u) << "step " << step;
      ASSERT_EQ(b.problems.size(), 10u);
      std::set<std::string> built, asked(teacher->asked.begin(), teacher->asked.end());
      for (size_t k = 8; k < 10; ++k) built.insert(b.problems[k].id.substr(0, b.problems[k].id.size() - 4));
      if (ratio < 1) {
        EXPECT_EQ(built, asked);  // the sampled questions are the ones that got the prompts
      }
      Metrics m;
      z.metrics(m);
      EXPECT_EQ(test::value(m, "zppo_teacher_questions"), ratio < 1 ? 2 : 8);
      Batch again = all_wrong(*e.task, 5000 + static_cast<uint64_t>(step) * 8, 8);  // another round
      z.after_reward(again);
      EXPECT_EQ(teacher->asked.size(), ratio < 1 ? 2u : 8u);
    }
  }
  // A teacher that knows half the questions: with the cap, a step gets as many BCQs as the 2 sampled questions
  // have responses, and questions with none get an NCQ in the freed slot.
  ZppoConfig c;
  c.rewrite = ZppoRewrite::strip;
  Zppo z(c, make_dataset_teacher());
  z.attach(e.env());
  int64_t bcq = 0, ncq = 0;
  for (int step = 0; step < 30; ++step) {
    z.extra_problems(step, 8);
    Batch b = all_wrong(*e.task, 7000 + static_cast<uint64_t>(step) * 8, 8);
    for (size_t i = 0; i < b.problems.size(); i += 2) b.problems[i].teacher_response = b.problems[i].gold_solution;
    z.after_reward(b);
    Metrics m;
    z.metrics(m);
    EXPECT_EQ(test::value(m, "zppo_teacher_questions"), 2);
    EXPECT_EQ(test::value(m, "zppo_bcq") + test::value(m, "zppo_ncq"), 2);
    bcq += static_cast<int64_t>(test::value(m, "zppo_bcq"));
    ncq += static_cast<int64_t>(test::value(m, "zppo_ncq"));
  }
  std::printf("30 steps, teacher knows half: %lld BCQs, %lld NCQs\n", static_cast<long long>(bcq),
              static_cast<long long>(ncq));
  EXPECT_GT(bcq, 10);
  EXPECT_LT(bcq, 45);
  EXPECT_EQ(bcq + ncq, 60);
}
