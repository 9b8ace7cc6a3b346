// Test helper: where scripts/setup.sh puts the models ($GRAFT_MODEL_DIR, else
// ~/.cache/graft/models). Header-only, for test binaries.
#pragma once

#include <cstdlib>
#include <string>

namespace graft::testing {

inline std::string ModelPath(const std::string& name) {
  const char* d = std::getenv("GRAFT_MODEL_DIR");
  const char* home = std::getenv("HOME");
  const std::string dir = d != nullptr ? d : std::string(home != nullptr ? home : ".") + "/.cache/graft/models";
  return dir + "/" + name;
}

}  // namespace graft::testing
