// graft index build | stats | query: the corpus datastore (token suffix array).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_options.h"
#include "commands.h"
#include "graft/error.h"
#include "graft/retrieval_datastore.h"
#include "progress.h"

namespace graft::cli {
namespace {

struct IndexFlags {
  std::string model;
  std::vector<std::string> inputs;
  std::string input_list;
  std::string jsonl_field;
  std::string output;
  std::string index;
  std::string prompt;
  int32_t budget = 16;
  int32_t threads = 2;
  bool raw = true;
};

// One document per text file, or per JSONL line (the field given; strings, or arrays
// of strings joined by newlines). Malformed lines are errors naming file and line.
// `where` gets each document's file, or file:line, for later errors.
std::vector<std::string> ReadDocuments(const std::vector<std::string>& inputs, const std::string& field,
                                       std::vector<std::string>* where) {
  std::vector<std::string> docs;
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot read input " + path);
    if (field.empty()) {
      docs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      where->push_back(path);
      continue;
    }
    std::string line;
    int64_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const std::exception& e) {
        throw Error(path + ":" + std::to_string(lineno) + ": malformed JSON: " + e.what());
      }
      if (!j.is_object() || !j.contains(field)) {
        throw Error(path + ":" + std::to_string(lineno) + ": no field '" + field + "'");
      }
      const auto& v = j[field];
      where->push_back(path + ":" + std::to_string(lineno));
      if (v.is_string()) {
        docs.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        std::string s;
        for (const auto& x : v) {
          if (!x.is_string()) throw Error(path + ":" + std::to_string(lineno) + ": field '" + field + "' is not text");
          s += x.get<std::string>() + "\n";
        }
        docs.push_back(s);
      } else {
        throw Error(path + ":" + std::to_string(lineno) + ": field '" + field + "' is not text");
      }
    }
  }
  return docs;
}

int RunBuild(IndexFlags f) {
  if (!f.input_list.empty()) {
    std::ifstream in(f.input_list);
    if (!in) throw Error("cannot read input list " + f.input_list);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) f.inputs.push_back(line);
    }
  }
  if (f.inputs.empty()) throw Error("give at least one --input FILE (or --input-list FILE)");
  if (f.output.empty()) throw Error("give the output path with -o INDEX");
  ModelOptions mo;
  mo.vocab_only = true;
  auto model = Model::Load(f.model.empty() ? DefaultTargetPath() : f.model, mo);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> where;
  std::vector<std::string> docs = ReadDocuments(f.inputs, f.jsonl_field, &where);
  // Tokenize in parallel chunks of documents.
  std::vector<std::vector<Token>> toks(docs.size());
  // A redraw per percent on a terminal, a line per 10% in logs.
  const ProgressOptions po{.prefix = "index", .tty_step = 1, .line_step = 10};
  const std::string tok_label = "tokenizing " + std::to_string(docs.size()) + " documents";
  ProgressBar tp(po);
  std::atomic<size_t> next{0}, done_bytes{0};
  size_t total_bytes = 0;
  for (const auto& d : docs) total_bytes += d.size();
  std::mutex mu;
  // A worker's failure (text the tokenizer refuses) stops the others and is thrown here
  // with the document's name: an exception left in a std::thread would abort.
  std::string failure;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, f.threads); ++t) {
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < docs.size();) try {
        // Long documents are tokenized in ~1 MB pieces cut at newlines.
        const std::string& d = docs[i];
        size_t pos = 0;
        while (pos < d.size()) {
          size_t end = std::min(d.size(), pos + (1 << 20));
          if (end < d.size()) {
            const size_t nl = d.rfind('\n', end);
            if (nl != std::string::npos && nl > pos) end = nl + 1;
          }
          std::vector<Token> piece = model->Tokenize(d.substr(pos, end - pos), false, false);
          toks[i].insert(toks[i].end(), piece.begin(), piece.end());
          pos = end;
        }
        done_bytes += d.size();
        std::lock_guard<std::mutex> lock(mu);
        tp.Update(total_bytes ? static_cast<double>(done_bytes) / total_bytes : 1.0, tok_label);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (failure.empty()) failure = where[i] + ": " + e.what();
        next = docs.size();
      }
    });
  }
  for (auto& t : pool) t.join();
  if (!failure.empty()) {
    tp.Finish();
    throw Error(failure);
  }
  tp.Update(1.0, tok_label);
  tp.Finish();
  std::vector<Token> all;
  size_t n = 0;
  for (const auto& t : toks) n += t.size() + 1;
  all.reserve(n);
  for (auto& t : toks) {
    if (t.empty()) continue;
    all.insert(all.end(), t.begin(), t.end());
    all.push_back(kDatastoreSeparator);
    std::vector<Token>().swap(t);
  }
  const double t_tok = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string build_label = "building suffix array over " + std::to_string(all.size()) + " tokens";
  ProgressBar bp(po);
  const auto t1 = std::chrono::steady_clock::now();
  BuildDatastore(all, model->VocabFingerprint(), f.output, [&](double x) { bp.Update(x, build_label); });
  const double t_sa = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  bp.Update(1.0, build_label);
  bp.Finish();
  printf("wrote %s: %zu tokens from %zu documents; tokenize %.1f s (%.2f M tokens/s), build %.1f s (%.2f M tokens/s)\n",
         f.output.c_str(), all.size(), docs.size(), t_tok, all.size() / 1e6 / t_tok, t_sa, all.size() / 1e6 / t_sa);
  return 0;
}

int RunStats(const IndexFlags& f) {
  auto ds = Datastore::Open(f.index);
  ds->Verify();
  const DatastoreStats s = ds->Stats();
  printf("index %s\n  version %u\n  tokens %lld (separators included)\n  documents %lld\n  file %.1f MiB\n"
         "  tokenizer fingerprint %016llx\n  checksums ok\n",
         f.index.c_str(), s.version, static_cast<long long>(s.tokens), static_cast<long long>(s.documents),
         s.file_bytes / 1048576.0, static_cast<unsigned long long>(s.tokenizer_fingerprint));
  return 0;
}

int RunQuery(const IndexFlags& f) {
  ModelOptions mo;
  mo.vocab_only = true;
  auto model = Model::Load(f.model.empty() ? DefaultTargetPath() : f.model, mo);
  auto ds = Datastore::Open(f.index, model->VocabFingerprint());
  const std::vector<Token> ctx = model->Tokenize(f.prompt, false, false);
  CandidateTrie trie;
  const auto t0 = std::chrono::steady_clock::now();
  ds->Query(ctx, f.budget, &trie);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  printf("context: %zu tokens; %d candidates in %.1f us\n", ctx.size(), trie.size(), us);
  for (int32_t i = 0; i < trie.size(); ++i) {
    int depth = 0;
    for (int32_t p = trie.parent[i]; p >= 0; p = trie.parent[p]) ++depth;
    printf("%*s%-20s p=%.3f path=%.3f\n", 2 * depth, "", ("'" + model->TokenToPiece(trie.token[i]) + "'").c_str(),
           trie.prob[i], trie.path_prob[i]);
  }
  return 0;
}

}  // namespace

void AddIndexCommand(CLI::App& app, std::function<int()>* run) {
  auto f = std::make_shared<IndexFlags>();
  CLI::App* idx = app.add_subcommand("index", "build and inspect corpus datastores");
  idx->require_subcommand(1);
  CLI::App* build = idx->add_subcommand("build", "tokenize text / JSONL files and build a suffix-array index");
  build->add_option("-m,--model", f->model, "model whose tokenizer to use (default: the default target)");
  build->add_option("--input", f->inputs, "input files (text, or JSONL with --jsonl-field)");
  build->add_option("--input-list", f->input_list, "a file naming one input file per line");
  build->add_option("--jsonl-field", f->jsonl_field, "JSONL field holding the text");
  build->add_option("-o,--output", f->output, "index file to write (atomically)")->required();
  build->add_option("-t,--threads", f->threads, "tokenizer threads");
  build->callback([f, run] { *run = [f] { return RunBuild(*f); }; });
  CLI::App* stats = idx->add_subcommand("stats", "show what an index holds and check its checksums");
  stats->add_option("index", f->index, "index file")->required();
  stats->callback([f, run] { *run = [f] { return RunStats(*f); }; });
  CLI::App* query = idx->add_subcommand("query", "show what an index proposes after a text");
  query->add_option("index", f->index, "index file")->required();
  query->add_option("-m,--model", f->model, "model whose tokenizer to use (default: the default target)");
  query->add_option("-p,--prompt", f->prompt, "context text")->required();
  query->add_option("--budget", f->budget, "candidate nodes");
  query->callback([f, run] { *run = [f] { return RunQuery(*f); }; });
}

}  // namespace graft::cli
