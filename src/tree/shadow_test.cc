// ShadowTrials: unverified candidates are recorded exactly when the committed output
// tested them (their parent's path was followed), with the outcome the output gives.
#include "graft/shadow.h"

#include <gtest/gtest.h>

#include <vector>

namespace graft {
namespace {

// root 0 (token 100)
//   1: 1 (request, 0.9)  -> 3: 3 (request, 0.8) -> 5: 5 (request, 0.7)
//   2: 2 (pld, 0.5)      -> 4: 4 (pld, 0.6)
TokenTree Sample() {
  TokenTree t;
  t.Reset(100);
  t.Add(0, 1, 0.9f, Source::kRequest);
  t.Add(0, 2, 0.5f, Source::kPld);
  t.Add(1, 3, 0.8f, Source::kRequest);
  t.Add(2, 4, 0.6f, Source::kPld);
  t.Add(3, 5, 0.7f, Source::kRequest);
  return t;
}

TEST(ShadowTrialsTest, RecordsWhatTheOutputTestedAndNothingVerified) {
  Calibration cal;
  ShadowTrials shadow;
  // Nodes 0 and 1 went into the pass; the rest was cut.
  shadow.Add(Sample(), std::vector<int32_t>{0, 1});
  const Token step1[] = {1};  // the pass accepted nothing; its bonus token is 1
  shadow.Commit(step1, &cal);
  // Position 1 tested node 1 (verified: RecordOutcome's) and node 2 (pld, rejected).
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kRequest), 0);
  EXPECT_DOUBLE_EQ(cal.Trials(Source::kPld, 0.5f, 1), 1);
  EXPECT_DOUBLE_EQ(cal.SourceAccepts(Source::kPld), 0);
  EXPECT_EQ(shadow.pending(), 1u);
  // The next step's tokens go on through node 3 (accepted) and leave at node 5.
  const Token step2[] = {3, 9, 5};
  shadow.Commit(step2, &cal);
  EXPECT_DOUBLE_EQ(cal.Trials(Source::kRequest, 0.8f, 2), 1);
  EXPECT_DOUBLE_EQ(cal.Trials(Source::kRequest, 0.7f, 3), 1);
  EXPECT_DOUBLE_EQ(cal.SourceAccepts(Source::kRequest), 1);  // node 3; node 5 was rejected by 9
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kPld), 1);       // node 4's parent was never followed
  EXPECT_EQ(shadow.pending(), 0u);
}

TEST(ShadowTrialsTest, AFullyFollowedTreeEndsAndVerifiedTreesAreNotKept) {
  Calibration cal;
  ShadowTrials shadow;
  shadow.Add(Sample(), std::vector<int32_t>{0, 1, 2, 3, 4, 5});  // all verified: nothing to learn
  EXPECT_EQ(shadow.pending(), 0u);
  shadow.Add(Sample(), std::vector<int32_t>{0});
  const Token out[] = {1, 3, 5, 7};
  shadow.Commit(out, &cal);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kRequest), 3);
  EXPECT_DOUBLE_EQ(cal.SourceAccepts(Source::kRequest), 3);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kPld), 1);
  EXPECT_EQ(shadow.pending(), 0u);  // node 5 is a leaf: nothing more to test
}

TEST(ShadowTrialsTest, OracleIsNeverRecordedAndPendingTreesAreBounded) {
  Calibration cal;
  ShadowTrials shadow;
  TokenTree t;
  t.Reset(100);
  t.Add(0, 1, 0.9f, Source::kOracle);
  t.Add(1, 2, 0.9f, Source::kOracle);
  shadow.Add(t, std::vector<int32_t>{0});
  const Token out[] = {1};
  shadow.Commit(out, &cal);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kOracle), 0);
  for (size_t i = 0; i < 2 * ShadowTrials::kMaxPending; ++i) shadow.Add(Sample(), std::vector<int32_t>{0});
  EXPECT_EQ(shadow.pending(), ShadowTrials::kMaxPending);
  shadow.Clear();
  EXPECT_EQ(shadow.pending(), 0u);
}

// Greedy or sampled, verification accepts the child equal to the target's token at its
// position (VerifyStochastic), so a drafted node holds exactly when the output goes on
// with it, as a retrieved one does; oracle nodes are never learnt from.
TEST(ShadowTrialsTest, DraftNodesAreRecordedOracleNodesAreNot) {
  TokenTree t;
  t.Reset(100);
  t.Add(0, 1, 0.9f, Source::kDraft);
  t.Add(0, 2, 0.5f, Source::kRequest);
  t.Add(0, 3, 1.0f, Source::kOracle);
  const Token out[] = {2};
  Calibration cal;
  ShadowTrials shadow;
  shadow.Add(t, std::vector<int32_t>{0});
  shadow.Commit(out, &cal);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kDraft), 1);
  EXPECT_DOUBLE_EQ(cal.SourceAccepts(Source::kDraft), 0);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kRequest), 1);
  EXPECT_DOUBLE_EQ(cal.SourceAccepts(Source::kRequest), 1);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kOracle), 0);
}

}  // namespace
}  // namespace graft
