// Benchmark prompt sets: the built-in datasets under shared/data and custom JSONL files.
//
//   spec_bench  spec_bench/question.jsonl (Spec-Bench, 480 prompts). Six categories in the
//               paper's order: mt_bench (question_id 81-160, two turns run as a
//               conversation), translation, summarization, qa, math_reasoning, rag.
//   long        long/gov_report_summ.jsonl: one prompt per (document, instruction),
//               text = input + "\n\n" + instruction; category "long".
//   code_edit   code_edit/edit_eval.jsonl: the instruction, the code to edit (and the
//               code around it) in fences, and a request for the edited code
//               (CodeEditPrompt); category "code_edit".
//   FILE.jsonl  one JSON object per line; the prompt field (a string, or a list of strings
//               = conversation turns) and the category field are chosen by flags.
//
// Pure C++ (no llama.h): prompts are text; tokenizing is the harness's job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace graft::bench {

struct BenchPrompt {
  std::string id;                  // question_id / task_id / "<line>"; unique within a dataset
  std::string category;            // grouping key of the report tables
  std::vector<std::string> turns;  // user turns, >= 1; turn k+1 follows the model's answer to turn k
};

struct DatasetSpec {
  std::string dataset = "spec_bench";  // built-in name or a path to a .jsonl file
  std::string data_dir;                // holds spec_bench/, long/, code_edit/, code_completion/ (built-ins)
  std::string prompt_field = "turns";  // custom files: string or list of strings
  std::string category_field;          // custom files: "" = "category" when present, else the file stem
  std::string id_field;                // custom files: "" = question_id, id or task_id when present, else the line
  int32_t per_category = 0;            // first K prompts of each category (0 = all)
  int32_t max_prompts = 0;             // at most this many prompts in all (0 = no limit)
};

// The source tree graft was built from: $GRAFT_SOURCE_DIR, else the configure-time
// CMAKE_SOURCE_DIR (scripts/ and .venv/ live there).
std::string SourceDir();

// Names accepted as `dataset` besides a file path.
std::vector<std::string> BuiltinDatasets();

// The default data directory: $GRAFT_DATA_DIR, else $GRAFT_SOURCE_DIR/../shared/data,
// else <source dir this binary was built from>/../shared/data. May not exist.
std::string DefaultDataDir();

// Loads and selects prompts (file order; per_category then max_prompts). Throws
// graft::Error naming the file and 1-based line for malformed JSON, a line that is not
// an object, a missing or mistyped field, or an empty turn; and for a missing file or
// data directory (saying which flag fixes it) or a dataset with no prompts.
std::vector<BenchPrompt> LoadDataset(const DatasetSpec& spec);

// A code_edit prompt: `instruction`, then `context` (the code around the code to edit,
// "{{Code}}" at its place; "" for none), then `code`, each in a ```python fence without its
// trailing blank space, then "Reply with the complete edited code only.". EditEval checks
// the answer as the edited code; without the request a chat model often explains the code.
std::string CodeEditPrompt(const std::string& instruction, const std::string& context, const std::string& code);

// Categories in order of first appearance (Spec-Bench's own order for spec_bench).
std::vector<std::string> CategoryOrder(const std::vector<BenchPrompt>& prompts);

}  // namespace graft::bench
