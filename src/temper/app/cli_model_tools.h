// The options of the commands that use a model as it is: `temper info`, `convert`, `logits`, `tokenize`,
// `detokenize`, `generate` (their code: info.h, convert.h, logits.h, tokenize.h, generate.h).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "temper/app/cli_common.h"
#include "temper/app/convert.h"
#include "temper/app/generate.h"
#include "temper/app/info.h"
#include "temper/app/logits.h"
#include "temper/app/tokenize.h"

namespace temper::app {

CLI::App* add_info_command(CLI::App& app, InfoOptions& o);
CLI::App* add_convert_command(CLI::App& app, ConvertOptions& o);
CLI::App* add_logits_command(CLI::App& app, LogitsOptions& o);
CLI::App* add_tokenize_command(CLI::App& app, TokenizeOptions& o);
CLI::App* add_detokenize_command(CLI::App& app, TokenizeOptions& o);
CLI::App* add_generate_command(CLI::App& app, GenerateOptions& o);

// The six above, in that order, appended to COMMANDS.
void add_model_tool_commands(CLI::App& app, std::vector<Command>& commands);

}  // namespace temper::app
