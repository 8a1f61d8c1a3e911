// Chat templates through the Jinja interpreter: renders equal transformers' apply_chat_template
// byte for byte (golden chat.json: SmolLM2's template from the GGUF, Qwen2-Instruct's and
// Llama-3-Instruct's, with SmolLM2's ids of two renders), the default system prompt the template
// writes, the end-of-turn text callers stop on, the named templates, a pinned strftime_now and
// the errors. The real-model matrix (tools, thinking, dates) is in test_jinja.cpp.
#include <gtest/gtest.h>

#include "temper/core/error.h"
#include "temper/text/chat_template.h"
#include "text_test_util.h"

using namespace temper;
using namespace temper::text;
using temper::test::golden_tokenizer;
using temper::test::load_json;

namespace {

std::vector<ChatMessage> conversation(const nlohmann::json& j) {
  std::vector<ChatMessage> v;
  for (const auto& m : j) v.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return v;
}

ChatTemplate model_template(const std::string& name) {
  const Tokenizer& tok = golden_tokenizer(name);
  return chat_template_resolve("auto", tok.chat_template(), chat_tokens(tok));
}

TEST(ChatTemplate, RendersEqualTransformers) {
  const auto g = load_json("tokenizer/chat.json");
  int n = 0;
  for (const auto& r : g["renders"]) {
    const auto& t = g["templates"][r["template"].get<std::string>()];
    const ChatTemplate tmpl(t["template"].get<std::string>(), ChatTokens{t["bos_token"].get<std::string>()});
    const auto conv = conversation(g["conversations"][r["conversation"].get<std::string>()]);
    const std::string got = tmpl.render(conv, r["add_generation_prompt"].get<bool>());
    EXPECT_EQ(got, r["text"].get<std::string>())
        << r["template"] << " / " << r["conversation"] << " / gen=" << r["add_generation_prompt"];
    if (r.contains("smollm2_ids")) {
      EXPECT_EQ(golden_tokenizer("smollm2").encode(got), r["smollm2_ids"].get<std::vector<int32_t>>());
    }
    ++n;
  }
  EXPECT_EQ(n, 18);
}

TEST(ChatTemplate, DefaultSystemOnlyWithoutSystemMessage) {
  const ChatTemplate smol = model_template("smollm2");
  const std::vector<ChatMessage> sys = {{"system", "S"}, {"user", "U"}};
  EXPECT_EQ(smol.render(sys, false), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
  const std::vector<ChatMessage> user = {{"user", "U"}};
  EXPECT_EQ(smol.render(user, false),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nU<|im_end|>\n");
  const std::vector<ChatMessage> none;
  EXPECT_EQ(smol.render(none, true), "<|im_start|>assistant\n");  // the loop never runs
}

TEST(ChatTemplate, EndOfTurnIsWhatFollowsAnAssistantMessage) {
  EXPECT_EQ(model_template("smollm2").end_of_turn(), "<|im_end|>");
  EXPECT_EQ(model_template("qwen2").end_of_turn(), "<|im_end|>");
  EXPECT_EQ(model_template("llama3").end_of_turn(), "<|eot_id|>");
  EXPECT_EQ(ChatTemplate("{% for m in messages %}[{{ m.content }}]{% endfor %}", {}).end_of_turn(), "");
  // A template that refuses the probe (Gemma-2 refuses a system turn, not this; this one refuses all).
  EXPECT_EQ(ChatTemplate("{{ raise_exception('no') }}", {}).end_of_turn(), "");
  EXPECT_EQ(
      ChatTemplate("{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}", {"<s>", "</s>"}).end_of_turn(),
      "</s>");
}

TEST(ChatTemplate, NamedOverride) {
  const std::vector<ChatMessage> conv = {{"user", " hi "}};
  EXPECT_EQ(chat_template_resolve("chatml", golden_tokenizer("smollm2").chat_template()).render(conv, true),
            "<|im_start|>user\n hi <|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chat_template_resolve("llama3", "").render(conv, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
  EXPECT_EQ(chat_template_named("llama3").end_of_turn(), "<|eot_id|>");
  EXPECT_EQ(chat_template_named("chatml").end_of_turn(), "<|im_end|>");
  EXPECT_EQ(chat_template_names(), (std::vector<std::string>{"chatml", "llama3"}));
  // The named llama3 equals the model's Llama-3 template on the golden conversations.
  const auto g = load_json("tokenizer/chat.json");
  const auto c = conversation(g["conversations"]["with_system"]);
  EXPECT_EQ(chat_template_named("llama3").render(c, true), model_template("llama3").render(c, true));
}

TEST(ChatTemplate, JsonMessagesToolsAndKwargs) {
  const ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls %}"
      "{{ m.tool_calls[0].function.arguments | tojson }}{% endif %};{% endfor %}{{ tools | length }}"
      "{{ documents is none }}{{ enable_thinking }}{{ add_generation_prompt }}",
      {"<s>", "</s>"});
  ChatRenderOptions o;
  o.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  o.kwargs = {{"enable_thinking", false}};
  o.add_generation_prompt = false;
  const auto msgs = nlohmann::ordered_json::parse(
      R"([{"role": "user", "content": "q"},
          {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"z": 1, "a": "é"}}}]}])");
  EXPECT_EQ(t.render(msgs, o), "<s>user:q;assistant:{\"z\": 1, \"a\": \"é\"};1TrueFalseFalse");
  o.kwargs = {{"bos_token", "<override>"}};  // kwargs win over the special tokens, as in transformers
  EXPECT_EQ(t.render(msgs, o).substr(0, 10), "<override>");
}

TEST(ChatTemplate, StrftimeNowUsesThePinnedClock) {
  std::tm t{};
  t.tm_year = 125;
  t.tm_mon = 0;
  t.tm_mday = 2;
  ChatRenderOptions o;
  o.now = t;
  const ChatTemplate tmpl("{{ strftime_now('%d %b %Y') }}", {});
  EXPECT_EQ(tmpl.render(nlohmann::ordered_json::array(), o), "02 Jan 2025");
  o.now.reset();  // the real clock: a date of the same shape
  EXPECT_EQ(tmpl.render(nlohmann::ordered_json::array(), o).size(), 11u);
}

TEST(ChatTemplate, Errors) {
  auto expect_msg = [](const std::function<void()>& fn, std::initializer_list<std::string> parts) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  expect_msg([] { chat_template_resolve("", "{% for m in messages %}{% include 'x' %}{% endfor %}"); },
             {"unsupported tag 'include'", ":1:27", "--chat-template chatml|llama3", "--raw"});
  expect_msg([] { chat_template_resolve("", ""); }, {"no chat template", "--chat-template"});
  expect_msg([] { chat_template_resolve("vicuna", "x"); }, {"unknown chat template name 'vicuna'", "chatml, llama3"});
  const ChatTemplate gemma_like(
      "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
      "supported') }}{% endif %}ok",
      {});
  const std::vector<ChatMessage> sys = {{"system", "S"}};
  expect_msg([&] { gemma_like.render(sys, true); }, {"System role not supported", ":1:"});
  expect_msg([] { ChatTemplate("x", {}).render(nlohmann::ordered_json::object(), {}); },
             {"messages must be a JSON list"});
  ChatRenderOptions o;
  o.kwargs = {{"messages", 1}};
  expect_msg([&] { ChatTemplate("x", {}).render(nlohmann::ordered_json::array(), o); },
             {"'messages' is set by render"});
}

}  // namespace
