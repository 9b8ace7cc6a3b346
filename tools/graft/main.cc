// graft: speculative decoding that drafts less and retrieves more.
//   graft generate | bench | index | serve | tune   (graft <command> --help)
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "commands.h"
#include "graft/backend.h"
#include "graft/error.h"

#ifndef GRAFT_VERSION
#define GRAFT_VERSION "0.0.0"
#endif

namespace {

// llama.cpp's CPU threads are an OpenMP team that busy-waits between parallel regions
// for GOMP_SPINCOUNT iterations (libgomp's default: 300000). On a quiet machine the
// spinning saves a wake-up per region; when anything else wants the cores (another
// process, a second thread team) the spinners steal them and decoding collapses.
// libgomp reads the variable once, when it loads (before main), so the first start
// sets our default and runs itself again. A value the user set wins, and so does
// OMP_WAIT_POLICY. kSpinCount: the measurement is on docs/results.md, "OpenMP spinning on shared cores".
constexpr const char* kSpinCount = "3000";

void UseSpinPolicy(char** argv) {
  // Set (by the user, or by us before the restart): libgomp has read it.
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("GOMP_SPINCOUNT", kSpinCount, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: go on with libgomp's default
}

}  // namespace

int main(int argc, char** argv) {
  UseSpinPolicy(argv);
  CLI::App app{"graft: lossless speculative decoding (draft, prune, retrieve, graft, verify)"};
  app.set_version_flag("--version", [] {
    return std::string("graft ") + GRAFT_VERSION + "\n" + graft::LlamaBuildInfo() +
           " from llama-cpp-python " GRAFT_LLAMA_CPP_PYTHON;
  });
  app.require_subcommand(1);
  std::function<int()> run;
  graft::cli::AddGenerateCommand(app, &run);
  graft::cli::AddIndexCommand(app, &run);
  graft::cli::AddBenchCommand(app, &run);
  graft::cli::AddServeCommand(app, &run);
  graft::cli::AddTuneCommand(app, &run);
  // llama.cpp spells the draft model "-md"; CLI11 allows one-letter short names only.
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    const std::string a = argv[i];
    args.push_back(a == "-md" ? "--model-draft" : a.rfind("-md=", 0) == 0 ? "--model-draft=" + a.substr(4) : a);
  }
  try {
    app.parse(args);  // CLI11 takes the arguments in reverse order
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // prints the error (or help) and returns its exit code
  }
  try {
    return run ? run() : 0;
  } catch (const graft::Error& e) {
    fprintf(stderr, "graft: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fprintf(stderr, "graft: unexpected error: %s\n", e.what());
    return 2;
  }
}
