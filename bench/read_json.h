// The study tools' results.json reader (replay_retrieval, tie_margins).
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

}  // namespace graft_bench
