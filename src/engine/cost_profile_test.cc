// The cost profile cache on the tiny model: measured once, then reloaded exactly;
// a corrupt, foreign or short file is measured again; an unwritable folder still
// yields a profile. And the measurement's order, on a simulated clock: a slow spell
// of the machine does not bend the curves.
#include "graft/cost_profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_models.h"
#include "graft/error.h"

namespace graft {
namespace {

namespace fs = std::filesystem;
using graft::testing::ModelPath;

class CostProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = Model::Load(ModelPath("tiny-target.gguf"));
    draft_ = Model::Load(ModelPath("tiny-draft.gguf"));
    dir_ = fs::temp_directory_path() / ("graft_profile_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    o_.dir = dir_.string();
    o_.max_rows = 8;
    o_.max_draft_rows = 4;
    o_.prefix = 32;
    o_.long_prefix = 96;
    o_.repeats = 1;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Model> target_, draft_;
  fs::path dir_;
  CostProfileOptions o_;
};

TEST_F(CostProfileTest, MeasuredOnceThenReloadedExactly) {
  double ms = -1;
  // A front end is told before a measurement (it waits a minute or more on a small
  // CPU), with the file it goes to; not when the cached profile is read.
  std::vector<std::string> told;
  o_.on_measure = [&](const std::string& path) { told.push_back(path); };
  const CostProfile a = LoadOrMeasureCostProfile(*target_, draft_.get(), o_, &ms);
  EXPECT_GT(ms, 0.0);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0], CostProfilePath(a.key, o_));
  ASSERT_EQ(a.verify_ms.size(), 9u);
  ASSERT_EQ(a.draft_ms.size(), 5u);
  for (size_t n = 1; n < a.verify_ms.size(); ++n) EXPECT_GT(a.verify_ms[n], 0.0) << n;
  EXPECT_TRUE(fs::exists(CostProfilePath(a.key, o_)));
  const CostProfile b = LoadOrMeasureCostProfile(*target_, draft_.get(), o_, &ms);
  EXPECT_EQ(ms, 0.0);  // loaded, not measured
  EXPECT_EQ(told.size(), 1u);
  EXPECT_EQ(a.verify_ms, b.verify_ms);  // bit for bit: decisions depend on them
  EXPECT_EQ(a.draft_ms, b.draft_ms);
  EXPECT_EQ(a.key, b.key);
  // The long prefix's sizes: powers of two and a few between, up to the largest.
  EXPECT_EQ(a.prefix, 32);
  EXPECT_EQ(a.long_prefix, 96);
  ASSERT_EQ(a.verify_ms_long.size(), 9u);
  ASSERT_EQ(a.draft_ms_long.size(), 5u);
  for (int32_t n : {1, 2, 3, 4, 6, 8}) EXPECT_GT(a.verify_ms_long[n], 0.0) << n;
  for (int32_t n : {0, 5, 7}) EXPECT_EQ(a.verify_ms_long[n], 0.0) << n;
  for (int32_t n : {1, 2, 3, 4}) EXPECT_GT(a.draft_ms_long[n], 0.0) << n;
  EXPECT_EQ(a.verify_ms_long, b.verify_ms_long);
  EXPECT_EQ(a.draft_ms_long, b.draft_ms_long);
  // Lazy logits (the default): a row read after the root.
  ASSERT_TRUE(o_.lazy_logits);
  EXPECT_GT(a.read_row_ms, 0.0);
  EXPECT_EQ(a.read_row_ms, b.read_row_ms);
  // Rows read ahead: cheaper than alone, or not at all (0).
  EXPECT_GE(a.read_ahead_ms, 0.0);
  EXPECT_LT(a.read_ahead_ms, a.read_row_ms);
  EXPECT_EQ(a.read_ahead_ms, b.read_ahead_ms);
  // A product over each number of rows up to Context::kMaxReadBlock (the largest pass
  // holds 7 after its root); just the one row when none is read ahead.
  ASSERT_EQ(a.read_product_ms.size(), a.read_ahead_ms > 0 ? 8u : 2u);
  EXPECT_EQ(a.read_product_ms[0], 0.0);
  EXPECT_EQ(a.read_product_ms[1], a.read_row_ms);
  for (size_t c = 1; c < a.read_product_ms.size(); ++c) EXPECT_GT(a.read_product_ms[c], 0.0) << c;
  EXPECT_EQ(a.read_product_ms, b.read_product_ms);
  // The JSON checks them: a negative price or more rows than a product holds.
  nlohmann::json j = CostProfileJson(a);
  j["read_product_ms"] = std::vector<double>{0, 1, -2};
  EXPECT_THROW(CostProfileFromJson(j), Error);
  j["read_product_ms"] = std::vector<double>(Context::kMaxReadBlock + 2, 1.0);
  EXPECT_THROW(CostProfileFromJson(j), Error);
  j["read_product_ms"] = std::vector<double>{0, 1, 2};
  EXPECT_EQ(CostProfileFromJson(j).read_product_ms, (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(b.prefix, 32);
  EXPECT_EQ(b.long_prefix, 96);
  // No temporaries are left beside it.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(CostProfileTest, KeyNamesWhatTheCurvesDependOn) {
  const std::string k = CostProfileKey(*target_, draft_.get(), o_);
  EXPECT_NE(k.find("threads 2"), std::string::npos) << k;
  CostProfileOptions one = o_;
  one.n_threads = 1;
  EXPECT_NE(CostProfilePath(k, o_), CostProfilePath(CostProfileKey(*target_, draft_.get(), one), o_));
  EXPECT_NE(k, CostProfileKey(*target_, nullptr, o_));
  CostProfileOptions longer = o_;
  longer.long_prefix = 128;
  EXPECT_NE(k, CostProfileKey(*target_, draft_.get(), longer));
  CostProfileOptions full = o_;  // every row through the output layer: other costs
  full.lazy_logits = !o_.lazy_logits;
  EXPECT_NE(k, CostProfileKey(*target_, draft_.get(), full));
}

TEST_F(CostProfileTest, WithTheWholeOutputLayerNoReadsAreTimed) {
  CostProfileOptions o = o_;
  o.lazy_logits = false;
  const CostProfile p = LoadOrMeasureCostProfile(*target_, draft_.get(), o);
  EXPECT_EQ(p.read_row_ms, 0.0);
  EXPECT_EQ(p.read_ahead_ms, 0.0);
  EXPECT_TRUE(p.read_product_ms.empty());
  EXPECT_EQ(p.verify_ms.size(), 9u);
}

TEST_F(CostProfileTest, WithoutALongPrefixNothingIsTimedThere) {
  CostProfileOptions o = o_;
  o.long_prefix = 0;
  const CostProfile p = LoadOrMeasureCostProfile(*target_, draft_.get(), o);
  EXPECT_EQ(p.long_prefix, 0);
  EXPECT_TRUE(p.verify_ms_long.empty());
  EXPECT_TRUE(p.draft_ms_long.empty());
  o.long_prefix = o.prefix;
  EXPECT_THROW(MeasureCostProfile(*target_, draft_.get(), o), Error);
}

TEST_F(CostProfileTest, BadOrShortFilesAreMeasuredAgain) {
  double ms = 0;
  const CostProfile a = LoadOrMeasureCostProfile(*target_, draft_.get(), o_, &ms);
  const std::string path = CostProfilePath(a.key, o_);
  for (const std::string& junk : {std::string("{not json"), std::string("{\"version\": 1}"), std::string("")}) {
    std::ofstream(path, std::ios::trunc) << junk;
    LoadOrMeasureCostProfile(*target_, draft_.get(), o_, &ms);
    EXPECT_GT(ms, 0.0) << "accepted a broken profile: " << junk;
  }
  // A profile with fewer sizes than asked for is measured again too.
  CostProfileOptions more = o_;
  more.max_rows = 12;
  const CostProfile c = LoadOrMeasureCostProfile(*target_, draft_.get(), more, &ms);
  EXPECT_GT(ms, 0.0);
  EXPECT_EQ(c.verify_ms.size(), 13u);
}

TEST_F(CostProfileTest, UnwritableFolderStillGivesAProfile) {
  CostProfileOptions o = o_;
  o.dir = "/proc/graft-cannot-write-here";
  double ms = 0;
  const CostProfile p = LoadOrMeasureCostProfile(*target_, nullptr, o, &ms);
  EXPECT_EQ(p.verify_ms.size(), 9u);
  EXPECT_TRUE(p.draft_ms.empty());
  EXPECT_THROW(SaveCostProfile(p, o), Error);
}

// A simulated machine: a pass over n rows costs 10 + 3n ms (draft: 4 + n), except
// during one slow spell, where every pass takes 2.5x as long. The spell is as long as
// three sizes' worth of samples in a row (what a size-by-size measurement with three
// repeats spends on one size): measured in rounds, every size still has two good
// samples of three, so each median is exact and the curves are not bent.
TEST(MedianCurvesTest, ASlowSpellDoesNotBendTheCurves) {
  for (int spell_start : {0, 5, 17, 30, 41}) {
    int calls = 0;
    auto clock = [&](double ms) {
      const bool slow = calls >= spell_start && calls < spell_start + 3;
      ++calls;
      return slow ? 2.5 * ms : ms;
    };
    const std::vector<CurveSampler> curves = {
        {12, [&](int32_t n) { return clock(10.0 + 3.0 * n); }},
        {4, [&](int32_t n) { return clock(4.0 + n); }},
    };
    const auto got = MedianCurves(curves, 3);
    // Each curve's sizes after a settling pass, its first four sizes three times (after
    // each half of the others, behind an untimed 1-row pass).
    EXPECT_EQ(calls, 3 * ((1 + 12 + 2 * 4 + 2) + (1 + 3 * 4)));
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(got[0].size(), 13u);
    ASSERT_EQ(got[1].size(), 5u);
    EXPECT_EQ(got[0][0], 0.0);
    for (int32_t n = 1; n <= 12; ++n) EXPECT_DOUBLE_EQ(got[0][n], 10.0 + 3.0 * n) << "spell at " << spell_start << ", n " << n;
    for (int32_t n = 1; n <= 4; ++n) EXPECT_DOUBLE_EQ(got[1][n], 4.0 + n) << "spell at " << spell_start << ", n " << n;
  }
}

// The first pass of a model after the other model's passes is slow (its threads still
// spin); that pass is not one of the samples, so no curve's first size comes out dear.
TEST(MedianCurvesTest, TheFirstPassAfterTheOtherCurvesIsNotTimed) {
  int last = -1;  // the curve of the last pass
  const auto pass = [&](int curve, double ms) {
    const bool after_other = last != curve;
    last = curve;
    return after_other ? ms + 20.0 : ms;
  };
  const std::vector<CurveSampler> curves = {
      {4, [&](int32_t n) { return pass(0, 40.0 + 30.0 * (n - 1)); }},
      {2, [&](int32_t n) { return pass(1, 25.0 + 5.0 * (n - 1)); }},
  };
  const auto got = MedianCurves(curves, 5);
  for (int32_t n = 1; n <= 4; ++n) EXPECT_DOUBLE_EQ(got[0][n], 40.0 + 30.0 * (n - 1)) << n;
  for (int32_t n = 1; n <= 2; ++n) EXPECT_DOUBLE_EQ(got[1][n], 25.0 + 5.0 * (n - 1)) << n;
  // One curve alone has no other model's threads to wait out: no extra pass.
  int calls = 0;
  MedianCurves({{3, [&](int32_t) { return ++calls, 1.0; }}}, 2);
  EXPECT_EQ(calls, 2 * 3 * 3);  // every size is one of the first four: three times a round
}

// A curve may be timed at some of its sizes only: the others are never run and read 0.
// The first four are timed before, between and after the halves of the others, the
// last two times behind an untimed 1-row pass.
TEST(MedianCurvesTest, TimesOnlyTheSizesAskedForTheFirstFourThreeTimes) {
  std::vector<int32_t> ran;
  const auto got =
      MedianCurves({{12, [&](int32_t n) { return ran.push_back(n), 2.0 * n; }, {1, 2, 4, 6, 8, 10, 12}}}, 1);
  EXPECT_EQ(ran, (std::vector<int32_t>{1, 2, 4, 6, 8, 1, 1, 2, 4, 6, 10, 12, 1, 1, 2, 4, 6}));
  EXPECT_EQ(got[0], (std::vector<double>{0, 2, 4, 0, 8, 0, 12, 0, 16, 0, 20, 0, 24}));
  EXPECT_THROW(MedianCurves({{4, [](int32_t) { return 1.0; }, {5}}}, 1), Error);
}

// A slow spell over the first half of every round (the first four sizes' first
// samples and the next sizes): the 1-row median is still a quiet sample.
TEST(MedianCurvesTest, ASpellOverPartOfEveryRoundMissesTheSmallSizesMedian) {
  int in_round = 0;
  const auto got = MedianCurves({{8, [&](int32_t n) {
                                    const bool slow = in_round++ % 18 < 6;  // 18 passes a round
                                    return (slow ? 1.5 : 1.0) * (40.0 + 10.0 * n);
                                  }}},
                                3);
  EXPECT_EQ(in_round, 3 * 18);
  for (int32_t n = 1; n <= 4; ++n) EXPECT_DOUBLE_EQ(got[0][n], 40.0 + 10.0 * n) << n;
}

// A 1-row pass right after a larger one is dearer (llama.cpp rebuilds its graph);
// decoding's are not, so the profile's 1-row price is that of one after a 1-row pass.
TEST(MedianCurvesTest, PricesTheOneRowPassAsDecodingRunsIt) {
  int32_t last = 0;
  const auto got = MedianCurves({{8, [&](int32_t n) {
                                    const double ms = 10.0 * n + (n == 1 && last > 1 ? 3.0 : 0.0);
                                    last = n;
                                    return ms;
                                  }}},
                                3);
  for (int32_t n = 1; n <= 8; ++n) EXPECT_DOUBLE_EQ(got[0][n], 10.0 * n) << n;
}

TEST(MedianCurvesTest, RoundsToAMicrosecondAndNeverZero) {
  const auto got = MedianCurves({{3, [](int32_t n) { return n == 1 ? 0.0 : 1.23456 * n; }}}, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_DOUBLE_EQ(got[0][1], 0.001);
  EXPECT_DOUBLE_EQ(got[0][2], 2.469);
  EXPECT_DOUBLE_EQ(got[0][3], 3.704);
}

}  // namespace
}  // namespace graft
