// Low-level KV-sequence operations for draft trees (src/engine/drafter.cc), which
// manage their own sequence ids instead of going through Context::EvalTree and
// Context::CommitPath. Internal and not installed: users of graft::graft see only
// Context's high-level calls, which keep the cache invariant of include/graft/backend.h.
//
// Sequence ids are lane-relative, as every per-lane call of Context: lane l's id s is
// the cache's sequence l * n_seq_max + s. Between a Decode and the following
// CommitSequence the caller owns every id in [1, n_seq_max) of its lane and must keep
// positions non-decreasing per sequence; the lane's id 0 must keep holding a prefix of
// its committed tokens. Drafters on different lanes of one context may put their rows
// into one Decode (src/engine/drafter.h, DraftTogether).
#pragma once

#include <cstdint>
#include <vector>

#include "graft/backend.h"
#include "graft/types.h"

namespace graft {

// One row of a low-level batch.
struct BatchEntry {
  Token token;
  int32_t pos;                   // KV-cache position; callers advance it
  std::vector<int32_t> seq_ids;  // ids in [0, n_seq_max); the first decides the mask row (docs/design.md §3)
  bool logits;                   // output row for Context::Logits (rows numbered in batch order)
  int32_t lane = 0;              // whose sequence ids these are
};

// Static functions only: a class (not a namespace) so that Context can befriend it.
class SequenceOps {
 public:
  // Decodes `entries` (1 to the context's batch size) in one llama_decode. Does not
  // change n_past. Throws graft::Error when a position is past the context, when
  // no KV slot is free, or on a backend error. Cost: one forward pass of entries.size() rows.
  static void Decode(Context& ctx, const std::vector<BatchEntry>& entries);

  // Makes sequence `dst` of `lane` an exact copy of its sequence `src` (all
  // positions), dropping what `dst` held. O(cells) bookkeeping, no compute.
  static void SeqCopy(Context& ctx, int32_t src, int32_t dst, int32_t lane = 0);

  // Makes sequence `seq`'s cells up to position `n_past + path_len - 1` the lane's new
  // committed prefix (in its sequence 0) and drops the lane's other sequences; n_past
  // grows by path_len. `seq` = 0 with path_len = 0 just drops the scratch sequences;
  // `seq` = 0 with path_len = n commits n rows decoded into sequence 0.
  static void CommitSequence(Context& ctx, int32_t seq, int32_t path_len, int32_t lane = 0);
};

}  // namespace graft
