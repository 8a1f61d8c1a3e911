// The built-in quickstart: `temper train` with no recipe. A tiny Llama-shaped model created from
// scratch with a byte-level tokenizer (256 byte tokens + <|endoftext|>, <|im_start|>, <|im_end|>),
// SFT on gold step-by-step solutions of multi-step arithmetic, then GRPO; on CPU in minutes.
#pragma once

#include <string>

#include "temper/model/config.h"
#include "temper/text/tokenizer.h"

namespace temper::app {

const std::string& quickstart_recipe();  // TOML (recipes/quickstart.toml is the same text)
ModelConfig quickstart_model_config();
text::Tokenizer byte_tokenizer();        // ids 0..255 = bytes; 256 <|endoftext|> (EOS/pad); 257, 258 chat markers

}  // namespace temper::app
