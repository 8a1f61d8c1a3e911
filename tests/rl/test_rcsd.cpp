// Rubric-conditioned self-distillation: the teacher context (rubric and question), the per-token
// teacher-student gap as the advantage (clipped, scaled, replacing or added to GRPO's), a signal in
// groups whose outcomes are all equal, credit on the tokens the rubric-conditioned teacher prefers,
// and inside the trainer the advantages recomputed from the policy's own forward in the rubric context.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "rl/letter_task.h"
#include "rl/rubric_letters.h"
#include "temper/core/error.h"
#include "temper/rl/methods/rcsd.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

TEST(Rcsd, TeacherContextHoldsTheRubricAndTheQuestion) {
  tasks::Problem p;
  p.prompt = "2+2=";
  p.messages = {{"user", "2+2="}};
  tasks::Problem q = rcsd_teacher_problem(p, PromptCodec{}, "- writes {each} step", "Rubric:\n{rubric}\n\n{question}");
  EXPECT_EQ(q.asked, "Rubric:\n- writes {each} step\n\n2+2=");
  EXPECT_EQ(q.messages[0].content, q.asked);
  EXPECT_EQ(q.prompt, "2+2=");
  RcsdConfig no_rubric;
  no_rubric.tmpl = "{question}";  // the template must hold {rubric}
  EXPECT_THROW(Rcsd{no_rubric}, Error);
}

TEST(Rcsd, EqualOutcomesStillGetPerTokenCreditWhereTheRubricTeacherAgrees) {
  // Scripted teacher: with the rubric in its context it puts log-prob -0.5 on 'b' (token 2) and -3 on
  // anything else; the student recorded -2 everywhere. Every rollout has the same outcome (GRPO: 0).
  auto task = std::make_shared<RubricLetters>();
  PromptCodec c = codec();
  MethodEnv env;
  env.task = task;
  env.codec = &c;
  std::vector<std::vector<int32_t>> seen_prompts;
  env.score_batch = [&](const std::vector<std::vector<int32_t>>& prompts,
                        const std::vector<std::vector<int32_t>>& tokens, bool initial,
                        std::vector<std::vector<float>>& lp, std::vector<std::vector<float>>* dists) {
    EXPECT_FALSE(initial);
    EXPECT_EQ(dists, nullptr);
    lp.clear();
    for (size_t r = 0; r < prompts.size(); ++r) {
      seen_prompts.push_back(prompts[r]);
      lp.emplace_back();
      for (int32_t t : tokens[r]) lp.back().push_back(t == 2 ? -0.5f : -3.f);
    }
  };
  RcsdConfig cfg;
  cfg.clip = 0.75;
  Rcsd r(cfg);
  r.attach(env);
  Batch b;
  b.problems = {task->problem(tasks::Split::train, 0),
                task->problem(tasks::Split::train, 1)};  // 0: rubric "b"; 1: none
  for (int64_t g : {0, 1})
    for (int k = 0; k < 2; ++k) {
      Trajectory t;
      t.problem = t.group = g;
      t.tokens = {2, 1, 2, 3};  // "bab c"
      t.old_logprob.assign(4, -2.f);
      t.reward = 1;
      b.traj.push_back(t);
    }
  EXPECT_TRUE(r.advantages(b));
  // 'b': -0.5 - (-2) = 1.5, clipped to 0.75; others: -3 - (-2) = -1, clipped to -0.75.
  EXPECT_EQ(b.traj[0].advantage, (std::vector<float>{0.75f, -0.75f, 0.75f, -0.75f}));
  EXPECT_EQ(b.traj[2].advantage, std::vector<float>(4, 0.f));  // no rubric: no signal
  ASSERT_EQ(seen_prompts.size(), 2u);  // only the rubric group was scored, with the rubric in context
  std::vector<int32_t> expect = c.encode_prompt(rcsd_teacher_problem(b.problems[0], c, "b", cfg.tmpl));
  EXPECT_EQ(seen_prompts[0], expect);
  Metrics m;
  r.metrics(m);
  EXPECT_NEAR(value(m, "rcsd_clip_frac"), 1.0, 1e-12);
  EXPECT_NEAR(value(m, "rcsd_rubric_frac"), 0.5, 1e-12);
  // combine = "add": GRPO's advantage plus coef * A_t.
  cfg.combine = RcsdCombine::add;
  cfg.coef = 2;
  Rcsd add(cfg);
  add.attach(env);
  EXPECT_FALSE(add.advantages(b));
  for (Trajectory& t : b.traj) t.advantage.assign(4, 0.25f);
  add.adjust_advantages(b);
  EXPECT_EQ(b.traj[1].advantage, (std::vector<float>{1.75f, -1.25f, 1.75f, -1.25f}));
  EXPECT_EQ(b.traj[3].advantage, std::vector<float>(4, 0.25f));
}

TEST(Rcsd, InTheTrainerAdvantagesAreThePolicysOwnGapInTheRubricContext) {
  RlSetup s;
  auto task = std::make_shared<RubricLetters>();
  task->uniform_ = true;  // problems 0, 3, 6, ...: every sample scores 1 (GRPO advantage 0)
  Rcsd r(RcsdConfig{});
  RlConfig cfg = config();
  cfg.optimizer.lr.peak = 1e-30;  // the weights stay put, so the teacher forward can be recomputed after the step
  const std::vector<float> before(s.model.params(), s.model.params() + s.model.flat_size());
  RlTrainer t(s.model, task, codec(), cfg, s.safe, {&r});
  t.step();
  ASSERT_EQ(0, std::memcmp(before.data(), s.model.params(), before.size() * sizeof(float)));
  const Batch& b = t.last_batch();
  PromptCodec c = codec();
  int uniform_with_signal = 0;
  for (const Trajectory& x : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(x.problem)];
    if (task->rubric(p).empty()) {
      EXPECT_EQ(x.advantage, std::vector<float>(x.tokens.size(), 0.f));
      continue;
    }
    std::vector<int32_t> tok = c.encode_prompt(rcsd_teacher_problem(p, c, "b", RcsdConfig{}.tmpl));
    const size_t P = tok.size();
    tok.insert(tok.end(), x.tokens.begin(), x.tokens.end());
    std::vector<int32_t> tgt(tok.size(), -1);
    for (size_t i = 0; i < x.tokens.size(); ++i) tgt[P - 1 + i] = x.tokens[i];
    std::vector<float> lp(tok.size()), ent(tok.size());
    s.model.forward_logprobs(tok.data(), tgt.data(), 1, static_cast<int64_t>(tok.size()), lp.data(), ent.data());
    double any = 0;
    for (size_t i = 0; i < x.tokens.size(); ++i) {
      const double want = std::clamp(double(lp[P - 1 + i]) - double(x.old_logprob[i]), -5.0, 5.0);
      EXPECT_NEAR(x.advantage[i], want, 1e-4);
      any += std::fabs(x.advantage[i]);
    }
    if (std::stoul(p.id) % 3 == 0 && any > 1e-3) ++uniform_with_signal;
  }
  EXPECT_GT(uniform_with_signal, 0) << "groups with equal outcomes still carry per-token signal";
}

TEST(Rcsd, TheInitialTeacherIsTheFrozenStartingPolicy) {
  // teacher = "initial": after a real update moved the policy, the second step's advantages are the gap
  // under the frozen starting weights (the trainer's reference), not under the moved policy.
  RlSetup s;
  auto task = std::make_shared<RubricLetters>();
  Transformer start(s.model.config());
  copy_weights(s.model, start);
  RcsdConfig rc;
  rc.teacher = RcsdTeacher::initial;
  Rcsd r(rc);
  RlConfig cfg = config();
  cfg.optimizer.lr.peak = 5e-2;
  RlTrainer t(s.model, task, codec(), cfg, s.safe, {&r}, &start);
  t.step();
  t.step();
  const Batch& b = t.last_batch();
  PromptCodec c = codec();
  double err_initial = 0, err_policy = 0;
  int64_t n = 0;
  for (const Trajectory& x : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(x.problem)];
    if (task->rubric(p).empty()) continue;
    std::vector<int32_t> tok = c.encode_prompt(rcsd_teacher_problem(p, c, "b", rc.tmpl));
    const size_t P = tok.size();
    tok.insert(tok.end(), x.tokens.begin(), x.tokens.end());
    std::vector<int32_t> tgt(tok.size(), -1);
    for (size_t i = 0; i < x.tokens.size(); ++i) tgt[P - 1 + i] = x.tokens[i];
    std::vector<float> lp0(tok.size()), lp1(tok.size()), ent(tok.size());
    start.forward_logprobs(tok.data(), tgt.data(), 1, static_cast<int64_t>(tok.size()), lp0.data(), ent.data());
    s.model.forward_logprobs(tok.data(), tgt.data(), 1, static_cast<int64_t>(tok.size()), lp1.data(), ent.data());
    for (size_t i = 0; i < x.tokens.size(); ++i) {
      const double gap0 = std::clamp(double(lp0[P - 1 + i]) - double(x.old_logprob[i]), -5.0, 5.0);
      err_initial = std::max(err_initial, std::fabs(x.advantage[i] - gap0));
      ++n;
    }
    // The policy has moved since the rollout (one more update): its own gap differs.
    for (size_t i = 0; i < x.tokens.size(); ++i)
      err_policy = std::max(err_policy, std::fabs(double(lp1[P - 1 + i]) - double(lp0[P - 1 + i])));
  }
  ASSERT_GT(n, 0);
  EXPECT_LT(err_initial, 1e-4);
  EXPECT_GT(err_policy, 1e-2) << "the policy did not move: the test could not tell the teachers apart";
}

namespace {

// Mean over the rubric problems' first completion positions of KL(student(. | prompt) || teacher(. | rubric prompt)).
double student_teacher_kl(Transformer& student, Transformer& teacher, const std::shared_ptr<RubricLetters>& task,
                          const PromptCodec& c) {
  const int64_t V = student.config().vocab_size;
  double sum = 0;
  int64_t n = 0;
  for (uint64_t i = 0; i < 8; i += 2) {  // even ids carry the rubric
    tasks::Problem p = task->problem(tasks::Split::train, i);
    const std::vector<int32_t> completion = {2, 1, 2};
    std::vector<int32_t> a = c.encode_prompt(p),
                         b = c.encode_prompt(rcsd_teacher_problem(p, c, "b", RcsdConfig{}.tmpl));
    const size_t Pa = a.size(), Pb = b.size();
    a.insert(a.end(), completion.begin(), completion.end());
    b.insert(b.end(), completion.begin(), completion.end());
    std::vector<float> za(a.size() * static_cast<size_t>(V)), zb(b.size() * static_cast<size_t>(V));
    student.forward_logits(a.data(), 1, static_cast<int64_t>(a.size()), za.data());
    teacher.forward_logits(b.data(), 1, static_cast<int64_t>(b.size()), zb.data());
    for (size_t k = 0; k < completion.size(); ++k) {
      const float* x = za.data() + (Pa - 1 + k) * static_cast<size_t>(V);
      const float* y = zb.data() + (Pb - 1 + k) * static_cast<size_t>(V);
      auto lse = [&](const float* z) {
        double m = *std::max_element(z, z + V), s = 0;
        for (int64_t v = 0; v < V; ++v) s += std::exp(z[v] - m);
        return m + std::log(s);
      };
      const double la = lse(x), lb = lse(y);
      for (int64_t v = 0; v < V; ++v) sum += std::exp(x[v] - la) * ((x[v] - la) - (y[v] - lb));
      ++n;
    }
  }
  return sum / static_cast<double>(n);
}

}  // namespace

TEST(Rcsd, ReverseKlModeDistilsTheRubricTeachersWholeDistribution) {
  // mode = "reverse_kl" with the frozen starting teacher: trajectories carry the teacher's log-probs over
  // the whole vocabulary (as the starting weights give them in the rubric context), the advantages are 0
  // (replace), and ten updates shrink the student's KL to the rubric-conditioned teacher, both on the
  // rollouts the updates see and on fixed positions measured apart.
  RlSetup s;
  auto task = std::make_shared<RubricLetters>();
  Transformer start(s.model.config());
  copy_weights(s.model, start);
  RcsdConfig rc;
  rc.teacher = RcsdTeacher::initial;
  rc.mode = RcsdMode::reverse_kl;
  Rcsd r(rc);
  RlConfig cfg = config();
  cfg.optimizer.lr.peak = 3e-3;
  PromptCodec c = codec();
  const double before = student_teacher_kl(s.model, start, task, c);
  RlTrainer t(s.model, task, c, cfg, s.safe, {&r}, &start);
  Metrics m = t.step();
  const Batch& b = t.last_batch();
  EXPECT_EQ(b.reverse_kl_coef, 1.0);
  const int64_t V = s.model.config().vocab_size;
  int checked = 0;
  for (const Trajectory& x : b.traj) {
    EXPECT_EQ(x.advantage, std::vector<float>(x.tokens.size(), 0.f));
    const tasks::Problem& p = b.problems[static_cast<size_t>(x.problem)];
    if (task->rubric(p).empty() || x.tokens.empty()) {
      EXPECT_TRUE(x.loss_terms.teacher_logq.empty());
      continue;
    }
    ASSERT_EQ(x.loss_terms.teacher_logq.size(), x.tokens.size() * static_cast<size_t>(V));
    if (checked++ > 2) continue;
    expect_teacher_logq(start, c, p, "b", rc.tmpl, x, 7);
  }
  EXPECT_GT(checked, 0);
  EXPECT_GT(value(m, "reverse_kl"), 0);
  double last = 0;
  for (int i = 0; i < 10; ++i) last = value(t.step(), "reverse_kl");
  EXPECT_LT(last, 0.8 * value(m, "reverse_kl")) << "the KL the updates see";
  const double after = student_teacher_kl(s.model, start, task, c);
  EXPECT_LT(after, 0.7 * before) << "KL to the rubric teacher: " << before << " -> " << after;
  std::printf("reverse KL on fixed positions: %.4f -> %.4f; on the updates' rollouts: %.4f -> %.4f\n", before, after,
              value(m, "reverse_kl"), last);
}

namespace {

// RubricLetters whose reference answer is the problem's id, so that a writer prompted with "{answer}" alone reads
// which problem it writes for.
class AnswerIsId : public RubricLetters {
 public:
  tasks::Problem problem(tasks::Split s, uint64_t i) const override {
    tasks::Problem p = RubricLetters::problem(s, i);
    p.answer = p.id;
    return p;
  }
};

// One trajectory of two tokens per entry of `ids` (an id may repeat, as a replayed problem does).
Batch writer_batch(const AnswerIsId& task, const std::vector<uint64_t>& ids) {
  Batch b;
  for (uint64_t i : ids) {
    b.problems.push_back(task.problem(tasks::Split::train, i));
    Trajectory t;
    t.problem = t.group = static_cast<int64_t>(b.problems.size() - 1);
    t.tokens = {1, 2};
    t.old_logprob.assign(2, -2.f);
    b.traj.push_back(t);
  }
  return b;
}

}  // namespace

TEST(Rcsd, TheRubricWriterWritesOncePerProblemAndTheCheckpointKeepsWhatItWrote) {
  // A scripted writer answers "Rubric for <id>" (id 5: only whitespace, so none; id 7: ends inside a UTF-8
  // character, as a rubric cut at rubric_max_new may). The teacher scores every token -1 (the student -2: A_t = 1).
  auto task = std::make_shared<AnswerIsId>();
  const PromptCodec c = codec();
  PromptCodec seen = c;
  std::vector<std::string> asked;  // the teacher prompts, as the model is asked them
  seen.encode_prompt = [&](const tasks::Problem& p) {
    asked.push_back(p.shown());
    return c.encode_prompt(p);
  };
  MethodEnv env;
  env.task = task;
  env.codec = &seen;
  env.score_batch = [](const std::vector<std::vector<int32_t>>&, const std::vector<std::vector<int32_t>>& tokens, bool,
                       std::vector<std::vector<float>>& lp, std::vector<std::vector<float>>*) {
    lp.clear();
    for (const auto& t : tokens) lp.emplace_back(t.size(), -1.f);
  };
  std::vector<std::vector<std::string>> calls;
  auto writer = [&calls](const std::vector<std::string>& prompts, int64_t max_new) {
    EXPECT_EQ(max_new, 7);
    calls.push_back(prompts);
    std::vector<std::string> out;
    for (const std::string& id : prompts)
      out.push_back(id == "5" ? " \n" : id == "7" ? "Rubric for 7\xe2\x80" : "Rubric for " + id + "\n");
    return out;
  };
  RcsdConfig cfg;
  cfg.rubric_writer = "scripted.gguf";  // not loaded: the scripted writer stands for it
  cfg.rubric_prompt = "{answer}";
  cfg.rubric_max_new = 7;
  Rcsd r(cfg, writer);
  r.attach(env);
  EXPECT_EQ(r.save_state(), "") << "nothing written yet: no state (a checkpoint from before the writer resumes)";
  auto q = [&](uint64_t i) { return task->problem(tasks::Split::train, i).prompt; };  // the question

  // Step 1: the odd ids have no dataset rubric; 1 appears twice but is asked once; 0 and 2 keep theirs ("b").
  Batch b = writer_batch(*task, {0, 1, 2, 3, 5, 1});
  EXPECT_TRUE(r.advantages(b));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (std::vector<std::string>{"1", "3", "5"}));
  EXPECT_EQ(asked, (std::vector<std::string>{"Rubric:\nb\n\n" + q(0), "Rubric:\nRubric for 1\n\n" + q(1),
                                             "Rubric:\nb\n\n" + q(2), "Rubric:\nRubric for 3\n\n" + q(3),
                                             "Rubric:\nRubric for 1\n\n" + q(1)}));
  for (size_t k = 0; k < b.traj.size(); ++k)
    EXPECT_EQ(b.traj[k].advantage, std::vector<float>(2, k == 4 ? 0.f : 1.f)) << "trajectory " << k;
  Metrics m;
  r.metrics(m);
  EXPECT_EQ(value(m, "rcsd_rubrics_written"), 2);  // 1 and 3; 5's empty answer is none
  EXPECT_NEAR(value(m, "rcsd_rubric_frac"), 5.0 / 6.0, 1e-12);

  // Step 2: only 7 is new (8 has a dataset rubric; 5 was answered empty and is not asked again).
  asked.clear();
  b = writer_batch(*task, {1, 3, 5, 7, 8});
  r.advantages(b);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], (std::vector<std::string>{"7"}));
  ASSERT_EQ(asked.size(), 4u);
  EXPECT_EQ(asked[2], "Rubric:\nRubric for 7\xe2\x80\n\n" + q(7));  // trailing whitespace only is trimmed
  m.clear();
  r.metrics(m);
  EXPECT_EQ(value(m, "rcsd_rubrics_written"), 3);

  // Step 3: nothing new, nothing asked.
  b = writer_batch(*task, {1, 5, 7});
  r.advantages(b);
  EXPECT_EQ(calls.size(), 2u);

  // The checkpoint: a fresh method that loads the state asks nothing for these problems and puts the same rubrics
  // (byte for byte, the cut character too) in the teacher prompts.
  const std::string state = r.save_state();
  ASSERT_FALSE(state.empty());
  asked.clear();
  b = writer_batch(*task, {1, 3, 5, 7});
  r.advantages(b);
  const std::vector<std::string> want = asked;
  std::vector<std::vector<std::string>> calls_before = calls;
  Rcsd resumed(cfg, writer);
  resumed.attach(env);
  resumed.load_state(state);
  asked.clear();
  b = writer_batch(*task, {1, 3, 5, 7});
  resumed.advantages(b);
  EXPECT_EQ(calls, calls_before) << "the resumed method asked the writer again";
  EXPECT_EQ(asked, want);
  m.clear();
  resumed.metrics(m);
  EXPECT_EQ(value(m, "rcsd_rubrics_written"), 3);
  EXPECT_EQ(resumed.save_state(), state);
  // Without the state, the same batch asks the writer for 1, 3, 5 and 7 again.
  Rcsd fresh(cfg, writer);
  fresh.attach(env);
  b = writer_batch(*task, {1, 3, 5, 7});
  fresh.advantages(b);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2], (std::vector<std::string>{"1", "3", "5", "7"}));

  // A broken state is refused, naming the method.
  for (const std::string bad : {"{}", "not json", R"({"written": {"1": "%%%"}})"}) {
    try {
      resumed.load_state(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rcsd: the checkpointed"), std::string::npos) << e.what();
    }
  }
  // Without a writer there is nothing to save.
  Rcsd plain{RcsdConfig{}};
  plain.attach(env);
  b = writer_batch(*task, {0, 1});
  plain.advantages(b);
  EXPECT_EQ(plain.save_state(), "");
}
