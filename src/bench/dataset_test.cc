// Dataset loading: the built-in sets under shared/data and custom JSONL files, and the
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

bool HaveData() { return fs::is_regular_file(DefaultDataDir() + "/spec_bench/question.jsonl"); }

TEST(Dataset, SpecBenchCategoriesAndTurns) {
  if (!HaveData()) GTEST_SKIP() << "no data in " << DefaultDataDir();
  DatasetSpec spec;
  const auto all = LoadDataset(spec);
  EXPECT_EQ(all.size(), 480u);
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
  if (!HaveData()) GTEST_SKIP() << "no data in " << DefaultDataDir();
  DatasetSpec spec;
  spec.dataset = "long";
  const auto lng = LoadDataset(spec);
  ASSERT_EQ(lng.size(), 14u);
  EXPECT_EQ(lng[0].category, "long");
  EXPECT_NE(lng[0].turns[0].find("Please help me summarize this government report."), std::string::npos);
  spec.dataset = "code_edit";
  spec.max_prompts = 3;
  const auto ce = LoadDataset(spec);
  ASSERT_EQ(ce.size(), 3u);
  EXPECT_EQ(ce[0].id, "EditEval/0");
  EXPECT_EQ(ce[0].category, "code_edit");
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
