// The learned-state file (graft/learned_state.h): what is saved is what loads, and a
// file that is not a usable state for these models is refused with its name, never
// half-read. No model needed: the key is a string here.
#include "graft/learned_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "graft/error.h"

namespace graft {
namespace {

namespace fs = std::filesystem;

struct LearnedStateFile : ::testing::Test {
  void SetUp() override {
    dir = fs::temp_directory_path() / ("graft_learned_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    path = (dir / "sub" / "learned.json").string();
  }
  void TearDown() override { fs::remove_all(dir); }

  static CalibrationCounts SomeCounts() {
    Calibration c;
    for (int i = 0; i < 300; ++i) c.Record(Source::kRequest, 0.1f + (i % 9) * 0.1f, 1 + i % 5, i % 3 == 0);
    for (int i = 0; i < 40; ++i) c.Record(Source::kDraft, 0.7f, 1 + i % 3, i % 5 != 0);
    c.Record(Source::kOracle, 0.9f, 1, true);  // a benchmark's answer: not kept
    return c.Counts();
  }

  void WriteText(const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }

  nlohmann::json Saved() {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }

  fs::path dir;
  std::string path;
  const std::string key = "target t (q4, 1 bytes, vocab 01); draft none";
};

TEST_F(LearnedStateFile, WhatIsSavedLoads) {
  const CalibrationCounts c = SomeCounts();
  SaveLearnedState(path, {key, c, ""});
  const std::optional<LearnedState> st = LoadLearnedState(path, key);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->key, key);
  EXPECT_FALSE(st->saved_at.empty());
  CalibrationCounts want = c;
  const int per_source = Calibration::kConfBuckets * Calibration::kDepthBuckets;
  const int oracle = static_cast<int>(Source::kOracle);
  std::fill(want.trials.begin() + oracle * per_source, want.trials.begin() + (oracle + 1) * per_source, 0.0);
  std::fill(want.accepts.begin() + oracle * per_source, want.accepts.begin() + (oracle + 1) * per_source, 0.0);
  want.confidence[oracle] = want.source_accepts[oracle] = 0;
  EXPECT_EQ(st->calibration.trials, want.trials);
  EXPECT_EQ(st->calibration.accepts, want.accepts);
  EXPECT_EQ(st->calibration.confidence, want.confidence);
  EXPECT_EQ(st->calibration.source_accepts, want.source_accepts);
  // Sources by name, untried ones left out, no temporary file left behind.
  const nlohmann::json j = Saved();
  EXPECT_TRUE(j["calibration"].contains("suffix"));
  EXPECT_TRUE(j["calibration"].contains("draft"));
  EXPECT_FALSE(j["calibration"].contains("oracle"));
  EXPECT_FALSE(j["calibration"].contains("pld"));
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path())) {
    EXPECT_EQ(e.path().filename(), "learned.json");
  }
}

TEST_F(LearnedStateFile, NoFileIsAColdStart) { EXPECT_FALSE(LoadLearnedState(path, key).has_value()); }

TEST_F(LearnedStateFile, OtherModelsAreRefused) {
  SaveLearnedState(path, {key, SomeCounts(), ""});
  try {
    LoadLearnedState(path, "target other; draft none");
    FAIL() << "a state for other models loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("other models"), std::string::npos) << e.what();
  }
}

TEST_F(LearnedStateFile, MalformedFilesAreRefusedWithTheirName) {
  SaveLearnedState(path, {key, SomeCounts(), ""});
  const nlohmann::json good = Saved();
  std::vector<std::pair<std::string, std::string>> bad = {{"not json", "{\"version\": 1, \"key\""},
                                                          {"empty", ""}};
  auto edited = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    bad.emplace_back(name, j.dump());
  };
  edited("version 2", [](nlohmann::json& j) { j["version"] = 2; });
  edited("no key", [](nlohmann::json& j) { j.erase("key"); });
  edited("other buckets", [](nlohmann::json& j) { j["buckets"]["depth"] = 9; });
  edited("unknown source", [](nlohmann::json& j) { j["calibration"]["telepathy"] = j["calibration"]["suffix"]; });
  edited("the oracle", [](nlohmann::json& j) { j["calibration"]["oracle"] = j["calibration"]["suffix"]; });
  edited("short cells", [](nlohmann::json& j) { j["calibration"]["suffix"]["trials"].erase(0); });
  edited("negative", [](nlohmann::json& j) { j["calibration"]["suffix"]["trials"][0] = -3; });
  edited("accepts over trials", [](nlohmann::json& j) {
    j["calibration"]["suffix"]["accepts"][0] = j["calibration"]["suffix"]["trials"][0].get<double>() + 5;
  });
  edited("a string count", [](nlohmann::json& j) { j["calibration"]["draft"]["confidence"] = "lots"; });
  for (const auto& [name, text] : bad) {
    WriteText(text);
    try {
      LoadLearnedState(path, key);
      ADD_FAILURE() << name << ": loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << name << ": " << e.what();
    }
  }
}

TEST_F(LearnedStateFile, AnUnwritableFolderIsAnError) {
  WriteText("");  // `path`'s folder exists; make a file where a folder should be
  const std::string under_a_file = path + "/learned.json";
  EXPECT_THROW(SaveLearnedState(under_a_file, {key, SomeCounts(), ""}), Error);
}

TEST(LearnedStatePath, FollowsTheKeyAndTheFolder) {
  const std::string a = LearnedStatePath("key a", "/tmp/p");
  EXPECT_EQ(fs::path(a).parent_path(), "/tmp/p");
  EXPECT_EQ(fs::path(a).filename().string().rfind("learned-", 0), 0u);
  EXPECT_NE(a, LearnedStatePath("key b", "/tmp/p"));
  EXPECT_EQ(a, LearnedStatePath("key a", "/tmp/p"));
}

}  // namespace
}  // namespace graft
