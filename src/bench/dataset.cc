#include "bench/dataset.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "graft/error.h"

#ifndef GRAFT_BENCH_SOURCE_DIR
#define GRAFT_BENCH_SOURCE_DIR "."
#endif

namespace graft::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Spec-Bench's categories in the paper's table order; question_id 81-160 are MT-Bench.
const std::vector<std::string> kSpecBenchOrder = {"mt_bench", "translation", "summarization",
                                                  "qa",       "math_reasoning", "rag"};

struct LineError {
  const std::string& file;
  int64_t line;
  Error operator()(const std::string& what) const {
    return Error(file + ":" + std::to_string(line) + ": " + what);
  }
};

std::string FieldString(const json& obj, const std::string& field, const LineError& err, const char* hint) {
  auto it = obj.find(field);
  if (it == obj.end()) throw err("missing field \"" + field + "\"" + hint);
  if (!it->is_string()) throw err("field \"" + field + "\" must be a string (got " + it->type_name() + ")");
  return it->get<std::string>();
}

// A string or a list of strings (conversation turns); every turn non-empty.
std::vector<std::string> FieldTurns(const json& obj, const std::string& field, const LineError& err,
                                    const char* hint) {
  auto it = obj.find(field);
  if (it == obj.end()) throw err("missing field \"" + field + "\"" + hint);
  std::vector<std::string> turns;
  if (it->is_string()) {
    turns.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const json& t : *it) {
      if (!t.is_string()) throw err("field \"" + field + "\" must be a string or a list of strings");
      turns.push_back(t.get<std::string>());
    }
  } else {
    throw err("field \"" + field + "\" must be a string or a list of strings (got " + it->type_name() + ")");
  }
  if (turns.empty()) throw err("field \"" + field + "\" is an empty list");
  for (size_t i = 0; i < turns.size(); ++i) {
    if (turns[i].empty()) throw err("field \"" + field + "\" has an empty prompt (turn " + std::to_string(i + 1) + ")");
  }
  return turns;
}

std::string IdOf(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Calls fn(object, LineError) for each non-blank line of a JSONL file.
template <typename Fn>
void ForEachLine(const std::string& path, Fn fn) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read dataset file " + path);
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    LineError err{path, n};
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::parse_error& e) {
      throw err(std::string("invalid JSON (") + e.what() + ")");
    }
    if (!obj.is_object()) throw err(std::string("expected a JSON object, got ") + obj.type_name());
    fn(obj, err);
  }
}

std::vector<BenchPrompt> LoadSpecBench(const std::string& path) {
  std::vector<BenchPrompt> out;
  ForEachLine(path, [&](const json& obj, const LineError& err) {
    BenchPrompt p;
    auto qid = obj.find("question_id");
    if (qid == obj.end()) throw err("missing field \"question_id\"");
    if (!qid->is_number_integer()) throw err("field \"question_id\" must be an integer");
    const int64_t id = qid->get<int64_t>();
    p.id = std::to_string(id);
    const std::string cat = FieldString(obj, "category", err, "");
    p.category = (id >= 81 && id <= 160) ? "mt_bench" : cat;
    p.turns = FieldTurns(obj, "turns", err, "");
    out.push_back(std::move(p));
  });
  return out;
}

std::vector<BenchPrompt> LoadLong(const std::string& path) {
  std::vector<BenchPrompt> out;
  ForEachLine(path, [&](const json& obj, const LineError& err) {
    const std::string input = FieldString(obj, "input", err, "");
    const std::vector<std::string> instr = FieldTurns(obj, "instructions", err, "");
    for (size_t k = 0; k < instr.size(); ++k) {
      BenchPrompt p;
      p.id = std::to_string(err.line) + (instr.size() > 1 ? "-" + std::to_string(k + 1) : "");
      p.category = "long";
      p.turns = {input + "\n\n" + instr[k]};
      out.push_back(std::move(p));
    }
  });
  return out;
}

}  // namespace

// EditEval's task is to return the edited code: its checker runs the answer as the code
// (InstructCoder's edit_eval/evaluation.py). The instruction and the code alone make a chat
// model explain the code instead, often in prose that repeats nothing (5 of the first 16
// answers did until 2026-12-05), so the prompt asks for the code, as a user editing code
// would. A task's "context" is the code around the one to edit, with {{Code}} at its place.
std::string CodeEditPrompt(const std::string& instruction, const std::string& context, const std::string& code) {
  auto fence = [](const std::string& s) {
    const size_t end = s.find_last_not_of(" \t\r\n");
    return "```python\n" + s.substr(0, end == std::string::npos ? 0 : end + 1) + "\n```\n\n";
  };
  std::string text = instruction + "\n\n";
  if (!context.empty()) {
    text += "The code sits in this context, where {{Code}} marks its place:\n\n" + fence(context) + "The code:\n\n";
  }
  return text + fence(code) + "Reply with the complete edited code only.";
}

namespace {

std::vector<BenchPrompt> LoadCodeEdit(const std::string& path) {
  std::vector<BenchPrompt> out;
  ForEachLine(path, [&](const json& obj, const LineError& err) {
    BenchPrompt p;
    auto tid = obj.find("task_id");
    p.id = tid != obj.end() ? IdOf(*tid) : std::to_string(err.line);
    p.category = "code_edit";
    std::string context;
    if (auto c = obj.find("context"); c != obj.end() && c->is_string()) context = c->get<std::string>();
    p.turns = {CodeEditPrompt(FieldString(obj, "instruction", err, ""), context, FieldString(obj, "input", err, ""))};
    out.push_back(std::move(p));
  });
  return out;
}

std::vector<BenchPrompt> LoadCustom(const DatasetSpec& spec) {
  const std::string stem = fs::path(spec.dataset).stem().string();
  std::vector<BenchPrompt> out;
  ForEachLine(spec.dataset, [&](const json& obj, const LineError& err) {
    BenchPrompt p;
    p.turns = FieldTurns(obj, spec.prompt_field, err, " (choose the prompt field with --prompt-field)");
    if (!spec.category_field.empty()) {
      auto it = obj.find(spec.category_field);
      if (it == obj.end()) {
        throw err("missing field \"" + spec.category_field + "\" (named by --category-field)");
      }
      p.category = IdOf(*it);
    } else if (auto it = obj.find("category"); it != obj.end()) {
      p.category = IdOf(*it);
    } else {
      p.category = stem;
    }
    if (!spec.id_field.empty()) {
      auto it = obj.find(spec.id_field);
      if (it == obj.end()) throw err("missing field \"" + spec.id_field + "\" (named by --id-field)");
      p.id = IdOf(*it);
    } else {
      p.id = std::to_string(err.line);
      for (const char* f : {"question_id", "id", "task_id"}) {
        if (auto it = obj.find(f); it != obj.end()) {
          p.id = IdOf(*it);
          break;
        }
      }
    }
    if (p.category.empty()) throw err("empty category");
    out.push_back(std::move(p));
  });
  return out;
}

// ClassEval skeletons (code_completion/classeval.jsonl, see its SOURCE.txt): {"id",
// "category", "prompt"}, the prompt already the instruction and the class to complete.
std::vector<BenchPrompt> LoadCodeCompletion(const std::string& path) {
  DatasetSpec spec;
  spec.dataset = path;
  spec.prompt_field = "prompt";
  spec.category_field = "category";
  spec.id_field = "id";
  return LoadCustom(spec);
}

}  // namespace

std::vector<std::string> BuiltinDatasets() { return {"spec_bench", "long", "code_edit", "code_completion"}; }

std::string SourceDir() {
  if (const char* s = std::getenv("GRAFT_SOURCE_DIR"); s != nullptr && *s != '\0') return s;
  return GRAFT_BENCH_SOURCE_DIR;
}

std::string DefaultDataDir() {
  if (const char* d = std::getenv("GRAFT_DATA_DIR"); d != nullptr && *d != '\0') return d;
  return (fs::path(SourceDir()) / ".." / "shared" / "data").lexically_normal().string();
}

std::vector<BenchPrompt> LoadDataset(const DatasetSpec& spec) {
  std::vector<BenchPrompt> all;
  std::string source;
  const auto builtins = BuiltinDatasets();
  if (std::find(builtins.begin(), builtins.end(), spec.dataset) != builtins.end()) {
    const std::string dir = spec.data_dir.empty() ? DefaultDataDir() : spec.data_dir;
    if (!fs::is_directory(dir)) {
      throw Error("data directory " + dir + " not found; pass --data-dir DIR (the folder holding spec_bench/, " +
                  "long/, code_edit/ and code_completion/) or set GRAFT_DATA_DIR");
    }
    const std::map<std::string, std::string> files = {{"spec_bench", "spec_bench/question.jsonl"},
                                                      {"long", "long/gov_report_summ.jsonl"},
                                                      {"code_edit", "code_edit/edit_eval.jsonl"},
                                                      {"code_completion", "code_completion/classeval.jsonl"}};
    source = (fs::path(dir) / files.at(spec.dataset)).string();
    if (!fs::is_regular_file(source)) {
      throw Error("dataset file " + source + " not found (is --data-dir " + dir + " the right folder?)");
    }
    if (spec.dataset == "spec_bench") all = LoadSpecBench(source);
    else if (spec.dataset == "long") all = LoadLong(source);
    else if (spec.dataset == "code_edit") all = LoadCodeEdit(source);
    else all = LoadCodeCompletion(source);
  } else {
    source = spec.dataset;
    if (!fs::is_regular_file(source)) {
      throw Error("dataset '" + source + "' is neither a built-in dataset (spec_bench, long, code_edit, " +
                  "code_completion) " +
                  "nor an existing JSONL file");
    }
    all = LoadCustom(spec);
  }
  if (all.empty()) throw Error("dataset " + source + " holds no prompts");

  std::set<std::string> ids;
  for (const BenchPrompt& p : all) {
    if (!ids.insert(p.category + "\x1f" + p.id).second) {
      throw Error("dataset " + source + ": prompt id '" + p.id + "' appears twice in category '" + p.category +
                  "' (choose a unique field with --id-field)");
    }
  }
  std::vector<BenchPrompt> out;
  std::map<std::string, int32_t> taken;
  for (BenchPrompt& p : all) {
    if (spec.per_category > 0 && taken[p.category] >= spec.per_category) continue;
    if (spec.max_prompts > 0 && static_cast<int32_t>(out.size()) >= spec.max_prompts) break;
    ++taken[p.category];
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> CategoryOrder(const std::vector<BenchPrompt>& prompts) {
  std::set<std::string> present;
  for (const auto& p : prompts) present.insert(p.category);
  std::vector<std::string> out;
  bool spec = !present.empty();
  for (const auto& c : present) {
    if (std::find(kSpecBenchOrder.begin(), kSpecBenchOrder.end(), c) == kSpecBenchOrder.end()) spec = false;
  }
  if (spec) {
    for (const auto& c : kSpecBenchOrder) {
      if (present.count(c)) out.push_back(c);
    }
    return out;
  }
  std::set<std::string> seen;
  for (const auto& p : prompts) {
    if (seen.insert(p.category).second) out.push_back(p.category);
  }
  return out;
}

}  // namespace graft::bench
