// Subcommands of the graft CLI. Each Add*Command registers its flags and, when
// chosen, sets `*run` to the function main() calls after parsing.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "graft/backend.h"

namespace graft::cli {

void AddGenerateCommand(CLI::App& app, std::function<int()>* run);
void AddIndexCommand(CLI::App& app, std::function<int()>* run);
void AddBenchCommand(CLI::App& app, std::function<int()>* run);
void AddServeCommand(CLI::App& app, std::function<int()>* run);
void AddTuneCommand(CLI::App& app, std::function<int()>* run);

// The prompt as the model should see it: through the model's chat template unless
// `raw` (then BOS + text).
std::vector<Token> EncodePrompt(const Model& model, const std::string& text, const std::string& system, bool raw);

}  // namespace graft::cli
