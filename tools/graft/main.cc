// graft: speculative decoding that drafts less and retrieves more.
//   graft generate | bench | index | serve | tune   (graft <command> --help)
#include <CLI/CLI.hpp>

#include <cstdio>
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

int main(int argc, char** argv) {
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
