// Dataset loading: the built-in sets (over the tests/data fixtures) and custom JSONL files, and the
// errors a user sees for malformed input (file:line, the field, the flag that fixes it).
#include "bench/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "graft/error.h"

namespace graft::bench {
namespace {

namespace fs = std::filesystem;

class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& name = "data.jsonl") {
    dir_ = fs::temp_directory_path() / ("graft_dataset_test_" + std::to_string(getpid()) + "_" + std::to_string(n_++));
    fs::create_directories(dir_);
    path_ = (dir_ / name).string();
    std::ofstream(path_) << content;
  }
  ~TempFile() { fs::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  static inline int n_ = 0;
  fs::path dir_;
  std::string path_;
};

std::string ErrorOf(const DatasetSpec& spec) {
  try {
    LoadDataset(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The repository's fixtures (tests/data, see its README.md): subsets of the built-in sets
// in the same layout. The built-in default (DefaultDataDir) is not used: it may be absent.
std::string FixtureDir() { return (fs::path(SourceDir()) / "tests" / "data").string(); }

// A spec for a built-in dataset over the fixtures; fails the test when they are missing.
DatasetSpec FixtureSpec(const std::string& dataset) {
  DatasetSpec spec;
  spec.dataset = dataset;
  spec.data_dir = FixtureDir();
  EXPECT_TRUE(fs::is_directory(spec.data_dir)) << "test fixtures not found in " << spec.data_dir
                                               << " (set GRAFT_SOURCE_DIR to the source tree)";
  return spec;
}

TEST(Dataset, SpecBenchCategoriesAndTurns) {
  DatasetSpec spec = FixtureSpec("spec_bench");
  const auto all = LoadDataset(spec);
  EXPECT_EQ(all.size(), 24u);  // the first 4 records of each category
  spec.per_category = 4;
  EXPECT_EQ(LoadDataset(spec).size(), 24u);
  spec.per_category = 2;
  const auto some = LoadDataset(spec);
  ASSERT_EQ(some.size(), 12u);
  EXPECT_EQ(CategoryOrder(some),
            (std::vector<std::string>{"mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"}));
  for (const auto& p : some) {
    EXPECT_EQ(p.turns.size(), p.category == "mt_bench" ? 2u : 1u) << p.id;
  }
  EXPECT_EQ(some[0].id, "81");
  spec.per_category = 0;
  spec.max_prompts = 5;
  EXPECT_EQ(LoadDataset(spec).size(), 5u);
}

TEST(Dataset, LongAndCodeEdit) {
  DatasetSpec spec = FixtureSpec("long");
  const auto lng = LoadDataset(spec);
  ASSERT_EQ(lng.size(), 2u);
  EXPECT_EQ(lng[0].category, "long");
  EXPECT_EQ(lng[1].id, "2");
  EXPECT_NE(lng[0].turns[0].find("\n\nPlease help me summarize this government report."), std::string::npos);
  spec.dataset = "code_edit";
  EXPECT_EQ(LoadDataset(spec).size(), 40u);
  spec.max_prompts = 3;
  const auto ce = LoadDataset(spec);
  ASSERT_EQ(ce.size(), 3u);
  EXPECT_EQ(ce[0].id, "EditEval/0");
  EXPECT_EQ(ce[0].category, "code_edit");
  // The instruction, the code fenced, and the request for the edited code (CodeEditPrompt).
  const std::string& t = ce[0].turns.at(0);
  EXPECT_EQ(t.rfind("Change the function so that it checks if all numbers", 0), 0u) << t;
  EXPECT_NE(t.find("\n\n```python\nfrom typing import List\n\ndef has_close_elements("), std::string::npos) << t;
  EXPECT_NE(t.find("    return False\n```\n\nReply with the complete edited code only."), std::string::npos) << t;
}

TEST(Dataset, CodeCompletion) {
  DatasetSpec spec = FixtureSpec("code_completion");
  const auto cc = LoadDataset(spec);
  ASSERT_EQ(cc.size(), 3u);  // the fixture: the first 3 of ClassEval's 100 skeletons
  EXPECT_EQ(cc[0].id, "ClassEval_0");
  EXPECT_EQ(cc[2].id, "ClassEval_2");
  EXPECT_EQ(cc[0].category, "code_completion");
  ASSERT_EQ(cc[0].turns.size(), 1u);
  const std::string& t = cc[0].turns[0];
  EXPECT_EQ(t.rfind("Complete the following Python class. Implement every method.\n\nimport logging\n", 0), 0u) << t;
  EXPECT_NE(t.find("class AccessGatewayFilter:"), std::string::npos) << t;
  spec.per_category = 1;
  EXPECT_EQ(LoadDataset(spec).size(), 1u);
}

TEST(Dataset, CodeEditPromptFencesTheCodeAndItsContext) {
  EXPECT_EQ(CodeEditPrompt("Fix it.", "", "def f():\n    return 1\n\n  \n"),
            "Fix it.\n\n```python\ndef f():\n    return 1\n```\n\nReply with the complete edited code only.");
  EXPECT_EQ(CodeEditPrompt("Fix it.", "class A:\n{{Code}}\n\n", "    x = 1"),
            "Fix it.\n\nThe code sits in this context, where {{Code}} marks its place:\n\n"
            "```python\nclass A:\n{{Code}}\n```\n\nThe code:\n\n```python\n    x = 1\n```\n\n"
            "Reply with the complete edited code only.");
}

TEST(Dataset, CustomFieldsAndDefaults) {
  TempFile f(
      "{\"q\": \"hello\", \"kind\": \"a\", \"id\": 7}\n"
      "\n"
      "{\"q\": [\"one\", \"two\"], \"kind\": \"b\"}\n"
      "{\"q\": \"again\", \"kind\": \"a\"}\n",
      "mine.jsonl");
  DatasetSpec spec;
  spec.dataset = f.path();
  spec.prompt_field = "q";
  spec.category_field = "kind";
  auto ps = LoadDataset(spec);
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[0].id, "7");
  EXPECT_EQ(ps[1].id, "3");  // the line number when no id field
  EXPECT_EQ(ps[1].turns, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(CategoryOrder(ps), (std::vector<std::string>{"a", "b"}));
  spec.per_category = 1;
  EXPECT_EQ(LoadDataset(spec).size(), 2u);
  // Without --category-field and no "category" key: the file stem.
  spec.category_field.clear();
  spec.per_category = 0;
  EXPECT_EQ(LoadDataset(spec)[0].category, "mine");
}

TEST(Dataset, MalformedLineNamesFileAndLine) {
  TempFile f("{\"turns\": [\"ok\"]}\n{\"turns\": [\"ok\"]}\n{\"turns\": [\"broken\"\n");
  DatasetSpec spec;
  spec.dataset = f.path();
  const std::string e = ErrorOf(spec);
  EXPECT_NE(e.find(f.path() + ":3: invalid JSON"), std::string::npos) << e;
}

TEST(Dataset, MissingFieldNamesFieldAndFlag) {
  TempFile f("{\"turns\": \"ok\"}\n{\"text\": \"no turns here\"}\n");
  DatasetSpec spec;
  spec.dataset = f.path();
  std::string e = ErrorOf(spec);
  EXPECT_NE(e.find(f.path() + ":2: missing field \"turns\""), std::string::npos) << e;
  EXPECT_NE(e.find("--prompt-field"), std::string::npos) << e;

  spec.prompt_field = "text";
  spec.category_field = "cat";
  e = ErrorOf(spec);
  EXPECT_NE(e.find(f.path() + ":1: missing field \"text\""), std::string::npos) << e;
}

TEST(Dataset, WrongTypesAndEmptyPrompts) {
  DatasetSpec spec;
  {
    TempFile f("{\"turns\": 5}\n");
    spec.dataset = f.path();
    EXPECT_NE(ErrorOf(spec).find(":1: field \"turns\" must be a string or a list of strings"), std::string::npos);
  }
  {
    TempFile f("{\"turns\": [\"a\", 3]}\n");
    spec.dataset = f.path();
    EXPECT_NE(ErrorOf(spec).find(":1: field \"turns\" must be a string or a list of strings"), std::string::npos);
  }
  {
    TempFile f("{\"turns\": []}\n");
    spec.dataset = f.path();
    EXPECT_NE(ErrorOf(spec).find(":1: field \"turns\" is an empty list"), std::string::npos);
  }
  {
    TempFile f("{\"turns\": [\"\"]}\n");
    spec.dataset = f.path();
    EXPECT_NE(ErrorOf(spec).find(":1: field \"turns\" has an empty prompt"), std::string::npos);
  }
  {
    TempFile f("[1, 2]\n");
    spec.dataset = f.path();
    EXPECT_NE(ErrorOf(spec).find(":1: expected a JSON object"), std::string::npos);
  }
  {
    TempFile f("\n\n");
    spec.dataset = f.path();
    EXPECT_NE(ErrorOf(spec).find("holds no prompts"), std::string::npos);
  }
  {
    TempFile f("{\"turns\": \"a\", \"id\": 1}\n{\"turns\": \"b\", \"id\": 1}\n");
    spec.dataset = f.path();
    EXPECT_NE(ErrorOf(spec).find("appears twice"), std::string::npos);
  }
}

TEST(Dataset, MissingFilesAndDirectories) {
  DatasetSpec spec;
  spec.dataset = "/nonexistent/prompts.jsonl";
  EXPECT_NE(ErrorOf(spec).find("neither a built-in dataset"), std::string::npos);
  spec.dataset = "spec_bench";
  spec.data_dir = "/nonexistent/data";
  const std::string e = ErrorOf(spec);
  EXPECT_NE(e.find("data directory /nonexistent/data not found"), std::string::npos) << e;
  EXPECT_NE(e.find("--data-dir"), std::string::npos) << e;
}

TEST(Dataset, BuiltinMalformedLineNamesFile) {
  TempFile f("{\"question_id\": 1, \"category\": \"qa\", \"turns\": [\"x\"]}\n{\"question_id\": \"x\"}\n",
             "question.jsonl");
  const fs::path dir = fs::path(f.path()).parent_path();
  fs::create_directories(dir / "d" / "spec_bench");
  fs::copy_file(f.path(), dir / "d" / "spec_bench" / "question.jsonl");
  DatasetSpec spec;
  spec.data_dir = (dir / "d").string();
  const std::string e = ErrorOf(spec);
  EXPECT_NE(e.find("spec_bench/question.jsonl:2: field \"question_id\" must be an integer"), std::string::npos) << e;
}

}  // namespace
}  // namespace graft::bench
