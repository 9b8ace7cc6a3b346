// The one exception type the library throws at its edges (files, models, CLI and
// HTTP input). Messages are written for the user: what failed and what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace graft {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Invariant check that stays on in release builds (never for I/O or user input).
#define GRAFT_CHECK(cond, msg)                                                     \
  do {                                                                             \
    if (!(cond)) throw ::graft::Error(std::string("internal error: ") + (msg) +   \
                                      " (" #cond ") at " __FILE__ ":" +           \
                                      std::to_string(__LINE__));                   \
  } while (0)

}  // namespace graft
