// The prompt codec: a recipe's user template phrases each problem inside the chat template (or raw text),
// the system prompt comes first, rows with their own chat messages are left alone, and a template without
// {question} is refused with a message.
#include <gtest/gtest.h>

#include <memory>

#include "temper/app/codec.h"
#include "temper/core/error.h"
#include "temper/text/tokenizer.h"

using namespace temper;

namespace {
std::shared_ptr<const text::Tokenizer> smollm2() {
  const std::string dir = std::string(TEMPER_SOURCE_DIR) + "/tests/data/tokenizer/smollm2/";
  return std::make_shared<text::Tokenizer>(
      text::Tokenizer::from_hf_files(dir + "tokenizer.json", dir + "tokenizer_config.json"));
}
}  // namespace

TEST(PromptCodec, UserTemplatePhrasesTheProblemInsideTheChatTemplate) {
  auto tok = smollm2();
  tasks::Problem p;
  p.prompt = "8+13=";
  const auto ids = app::make_codec(tok, {}, "chat", "Be brief.", "Calculate {question} then {question}.").encode_prompt(p);
  EXPECT_EQ(tok->decode(ids, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nCalculate 8+13= then 8+13=.<|im_end|>\n"
            "<|im_start|>assistant\n");
  // without a system prompt SmolLM2's template writes its own
  const std::string smol = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "chat").encode_prompt(p), false),
            smol + "<|im_start|>user\n8+13=<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "raw", "", "Q: {question}").encode_prompt(p), false), "Q: 8+13=");
  tasks::Problem m;  // a dataset row with its own messages keeps them as they are
  m.prompt = "ignored";
  m.messages = {{"user", "hi"}};
  EXPECT_EQ(tok->decode(app::make_codec(tok, {}, "chat", "", "Calculate {question}").encode_prompt(m), false),
            smol + "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  try {
    app::make_codec(tok, {}, "chat", "", "Calculate this");
    FAIL() << "a template without {question} was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("{question}"), std::string::npos) << e.what();
  }
}
