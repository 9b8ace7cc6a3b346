// The study tools' reading of `graft bench` results.json files (replay_retrieval,
// tie_margins).
#pragma once

#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace graft_bench {

// Parses the JSON file at `path`; throws std::runtime_error naming the file when it
// cannot be read or parsed.
inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

// Whether a results.json row kept its prompt and output tokens (`graft bench
// --save-outputs`; without it prompt_tokens is a count and there are no output_tokens).
inline bool HasSavedTokens(const nlohmann::json& row) {
  return row.is_object() && row.contains("prompt_tokens") && row["prompt_tokens"].is_array() &&
         row.contains("output_tokens") && row["output_tokens"].is_array();
}

}  // namespace graft_bench
