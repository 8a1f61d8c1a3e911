// Chat templates: renders equal transformers' apply_chat_template byte for byte (golden chat.json:
// SmolLM2's template from the GGUF, Qwen2-Instruct's and Llama-3-Instruct's), the default system
// prompt taken from the template, named overrides and the errors.
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

TEST(ChatTemplate, RendersEqualTransformers) {
  const auto g = load_json("tokenizer/chat.json");
  int n = 0;
  for (const auto& r : g["renders"]) {
    const auto& t = g["templates"][r["template"].get<std::string>()];
    const ChatTemplate tmpl = chat_template_parse(t["template"].get<std::string>(), t["bos_token"].get<std::string>());
    const auto conv = conversation(g["conversations"][r["conversation"].get<std::string>()]);
    const std::string got = chat_template_render(tmpl, conv, r["add_generation_prompt"].get<bool>());
    EXPECT_EQ(got, r["text"].get<std::string>())
        << r["template"] << " / " << r["conversation"] << " / gen=" << r["add_generation_prompt"];
    if (r.contains("smollm2_ids")) {
      EXPECT_EQ(golden_tokenizer("smollm2").encode(got), r["smollm2_ids"].get<std::vector<int32_t>>());
    }
    ++n;
  }
  EXPECT_EQ(n, 18);
}

TEST(ChatTemplate, RecognisesFormatsAndDefaultSystem) {
  const ChatTemplate smol = chat_template_parse(golden_tokenizer("smollm2").chat_template());
  EXPECT_EQ(smol.name(), "chatml");
  EXPECT_EQ(smol.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_FALSE(smol.trim_content);
  const ChatTemplate qwen = chat_template_parse(golden_tokenizer("qwen2").chat_template());
  EXPECT_EQ(qwen.default_system, "You are a helpful assistant.");
  const ChatTemplate llama = chat_template_parse(golden_tokenizer("llama3").chat_template(), "<|begin_of_text|>");
  EXPECT_EQ(llama.name(), "llama3");
  EXPECT_EQ(llama.bos, "<|begin_of_text|>");
  EXPECT_TRUE(llama.trim_content);
  // Qwen2.5's structure: the default system prompt in an else branch, a system message built from
  // messages[0] in the other (a reconstruction of its shape, not the full template).
  const ChatTemplate q25 = chat_template_parse(
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
      "helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}...<|im_start|>...{%- endfor %}");
  EXPECT_EQ(q25.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  // No default system prompt (Qwen3-style): nothing is inserted.
  const ChatTemplate plain = chat_template_parse("{{'<|im_start|>' + message['role'] + '\\n'}}<|im_end|>");
  EXPECT_EQ(plain.default_system, "");
}

TEST(ChatTemplate, DefaultSystemOnlyWithoutSystemMessage) {
  const ChatTemplate smol = chat_template_parse(golden_tokenizer("smollm2").chat_template());
  const std::vector<ChatMessage> sys = {{"system", "S"}, {"user", "U"}};
  EXPECT_EQ(chat_template_render(smol, sys, false), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
  const std::vector<ChatMessage> none;
  EXPECT_EQ(chat_template_render(smol, none, true), "<|im_start|>assistant\n");  // loop never runs
}

TEST(ChatTemplate, NamedOverride) {
  const std::vector<ChatMessage> conv = {{"user", " hi "}};
  EXPECT_EQ(
      chat_template_render(chat_template_resolve("chatml", golden_tokenizer("smollm2").chat_template()), conv, true),
      "<|im_start|>user\n hi <|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chat_template_render(chat_template_resolve("llama3", ""), conv, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
  EXPECT_EQ(chat_template_resolve("auto", golden_tokenizer("qwen2").chat_template()).default_system,
            "You are a helpful assistant.");
  EXPECT_EQ(chat_template_names(), (std::vector<std::string>{"chatml", "llama3"}));
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
  expect_msg([] { chat_template_parse("{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"); },
             {"not recognised", "[INST]", "--chat-template chatml|llama3", "--raw"});
  expect_msg([] { chat_template_parse("<|start_header_id|><|end_header_id|><|eot_id|>Cutting Knowledge Date: x"); },
             {"Llama-3.1", "--chat-template llama3"});
  expect_msg([] { chat_template_resolve("", ""); }, {"no chat template", "--chat-template"});
  expect_msg([] { chat_template_resolve("vicuna", "x"); }, {"unknown chat template name 'vicuna'", "chatml, llama3"});
}

}  // namespace
