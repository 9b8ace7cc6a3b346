// Low-level KV-sequence operations for draft trees (src/engine/drafter.cc), which
// manage their own sequence ids instead of going through Context::EvalTree and
// Context::CommitPath. Internal and not installed: users of graft::graft see only
// Context's high-level calls, which keep the cache invariant of include/graft/backend.h.
//
// Between a Decode and the following CommitSequence the caller owns every sequence
// id in [1, n_seq_max) and must keep positions non-decreasing per sequence;
// sequence 0 must keep holding a prefix of the committed tokens.
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
};

// Static functions only: a class (not a namespace) so that Context can befriend it.
class SequenceOps {
 public:
  // Decodes `entries` (1 to the context's batch size) in one llama_decode. Does not
  // change n_past. Throws graft::Error when a position is past the context, when
  // no KV slot is free, or on a backend error. Cost: one forward pass of entries.size() rows.
  static void Decode(Context& ctx, const std::vector<BatchEntry>& entries);

  // Makes sequence `dst` an exact copy of sequence `src` (all positions), dropping
  // what `dst` held. O(cells) bookkeeping, no compute.
  static void SeqCopy(Context& ctx, int32_t src, int32_t dst);

  // Makes sequence `seq`'s cells up to position `n_past + path_len - 1` the new
  // committed prefix (in sequence 0) and drops every other sequence; n_past grows
  // by path_len. `seq` = 0 with path_len = 0 just drops the scratch sequences.
  static void CommitSequence(Context& ctx, int32_t seq, int32_t path_len);
};

}  // namespace graft
