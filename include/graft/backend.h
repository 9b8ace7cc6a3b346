// The llama.cpp backend adapter: the only layer that talks to llama.h.
//
// Model: a loaded GGUF model and its vocabulary (tokenize, detokenize, chat template).
// Context: a KV cache plus decode calls, with the three operations speculative
// decoding needs: chunked prefill of the committed prefix, evaluation of a token
// tree in one pass (tree attention through leaf-set sequence ids, docs/design.md §3),
// and committing an accepted root-to-node path while dropping the rest.
//
// A Context may hold several lanes (ContextOptions::n_lanes): independent token
// streams, e.g. one per server request, that share the KV cache and are evaluated
// together in one pass (EvalLanes), each with its own positions and sequence ids.
// Every per-stream call takes a lane (default 0, the only one of a plain context).
//
// Cache invariant kept by Context, per lane: the lane's first sequence id holds
// exactly its committed tokens at positions [0, n_past(lane)). Its other sequence
// ids are scratch, used only between an evaluation and the following commit.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graft/tree.h"
#include "graft/types.h"

struct llama_model;
struct llama_context;
struct llama_vocab;

namespace graft {

// Version string of the llama.cpp build this binary was compiled against, and the CPU
// kernel set it runs: graft's multi-row kernels (ggml-patch/) or llama.cpp's own.
std::string LlamaBuildInfo();

// The multi-row kernel set llama.cpp's CPU backend runs ("avx512vnni", "avx512", "avx2"),
// or "" when it runs its stock kernels (built without ggml-patch/, no AVX2, or
// GGML_MULTIROW=0 at start).
std::string CpuKernelSet();

// Routes llama.cpp's log: when `verbose` is false only errors reach stderr.
void SetBackendVerbose(bool verbose);

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

struct ModelOptions {
  int32_t n_gpu_layers = 0;  // 0 = CPU only; -1 = all layers when a GPU backend exists
  bool vocab_only = false;   // tokenizer only, no weights (index building)
};

class Model {
 public:
  // Loads a GGUF file. Throws graft::Error with a message naming the file when it
  // is missing, not a GGUF file, truncated or otherwise rejected by llama.cpp.
  static std::unique_ptr<Model> Load(const std::string& path, const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& path() const { return path_; }
  int32_t n_vocab() const { return n_vocab_; }
  int32_t n_ctx_train() const;
  uint64_t n_params() const;
  uint64_t size_bytes() const;
  std::string Description() const;  // e.g. "qwen2 1.5B Q4_K - Medium"
  std::string Name() const;         // general.name, or the file name

  // Tokenizes `text`. `add_special` adds BOS when the model wants it;
  // `parse_special` turns "<|im_start|>"-style text into control tokens.
  std::vector<Token> Tokenize(const std::string& text, bool add_special, bool parse_special) const;
  // The text of one token (special tokens rendered when `special`).
  std::string TokenToPiece(Token t, bool special = false) const;
  std::string Detokenize(TokenSpan tokens, bool special = false) const;
  bool IsEog(Token t) const;
  Token Bos() const;
  bool AddBos() const;

  // Formats a conversation with the model's own chat template
  // (llama_chat_apply_template). Throws if the model has none that llama.cpp knows.
  std::string ApplyChatTemplate(const std::vector<ChatMessage>& messages, bool add_assistant) const;

  // 64-bit FNV-1a over the vocabulary (size and every token's text). Two models
  // with equal fingerprints tokenize identically; used by the datastore too.
  uint64_t VocabFingerprint() const { return fingerprint_; }

 private:
  friend class Context;  // creates its llama_context from model_
  Model() = default;
  std::string path_;
  llama_model* model_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
  int32_t n_vocab_ = 0;
  uint64_t fingerprint_ = 0;
};

// Throws graft::Error unless `draft` can propose tokens for `target`: same
// vocabulary size and token texts (VocabFingerprint) and the same BOS token.
// End-of-generation tokens are not compared: only the target decides where output
// ends, and base / instruct variants of one tokenizer differ there. O(1).
void CheckDraftCompatible(const Model& target, const Model& draft);

struct ContextOptions {
  int32_t n_ctx = 4096;     // KV cache size in tokens per lane (prompt + output + one tree)
  int32_t n_batch = 512;    // prefill chunk size; rows of one pass at most (raised to max_tree x n_lanes)
  int32_t n_threads = 2;    // threads for single-token and batched decode
  int32_t n_seq_max = 64;   // sequence ids per lane available to a tree (its number of leaves)
  int32_t max_tree = 64;    // largest tree EvalTree accepts (outputs per pass)
  int32_t n_lanes = 1;      // token streams sharing the cache (n_lanes x n_seq_max <= 256)
  // The output layer (hidden state -> n_vocab logits) of a pass with several output
  // rows runs only for the rows whose Logits are read, one row at a time, as a 1-row
  // pass runs it; llama.cpp stops the pass before it. A verified tree reads only the
  // rows of its accepted path, so a rejected row costs its transformer layers alone.
  // Used only where it gives llama.cpp's logits bit for bit: the context checks its
  // first 1-row pass, and falls back to llama.cpp's own output layer for good when
  // the graph does not end in one plain matrix product or the two differ.
  bool lazy_logits = false;
};

// One lane's share of a pass (Context::EvalLanes): a chunk of its prompt, decoded
// into its committed prefix without logits as Prefill does; and/or a tree, as
// EvalTree, rooted right after the chunk (so a prompt's last chunk and its first
// tree, whose root is the prompt's last token, take one pass, not two).
struct LaneWork {
  int32_t lane = 0;
  TokenSpan prefill;                // may be empty
  const TokenTree* tree = nullptr;  // may be null (not both)
};

class Context {
 public:
  Context(const Model& model, const ContextOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Model& model() const { return model_; }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_seq_max() const { return n_seq_max_; }
  int32_t max_tree() const { return max_tree_; }
  int32_t n_batch() const { return n_batch_; }  // rows per decode (prefill chunk size)
  int32_t n_lanes() const { return static_cast<int32_t>(lanes_.size()); }
  // Committed tokens of `lane`: positions [0, n_past).
  int32_t n_past(int32_t lane = 0) const { return Lane(lane).n_past; }

  // Decodes `tokens` at positions [n_past, n_past + size) into the lane's committed
  // prefix, in chunks of n_batch, and advances n_past. Returns the logits of the last
  // token ([n_vocab], valid until the next decode) when `want_last_logits`, else
  // nullptr. Throws if the tokens do not fit in the lane.
  const float* Prefill(TokenSpan tokens, bool want_last_logits = true, int32_t lane = 0);

  // Evaluates a tree in one llama_decode: node i at position n_past + depth[i],
  // tagged with LeafSequenceIds(parent) (offset to the lane's ids). Logits for every
  // node via Logits(i). Does not change n_past; the caller must CommitPath next.
  void EvalTree(const TokenTree& tree, int32_t lane = 0);

  // One llama_decode over several lanes (each at most once): their prefill chunks and
  // trees, as Prefill (no logits) and EvalTree would do them one by one, at the cost
  // of one pass over all their rows (at most n_batch). Returns, per work item, the
  // Logits row of its tree's root (node i is row root + i), -1 without a tree. A
  // prefill chunk advances its lane's n_past; a lane with a tree must CommitPath next.
  std::vector<int32_t> EvalLanes(const std::vector<LaneWork>& work);

  // Logits of batch row i of the last decode ([n_vocab], valid until the next decode).
  // With lazy_logits, the first read of a row computes it.
  const float* Logits(int32_t i) const;
  // Whether the last pass left its output layer to Logits (ContextOptions::lazy_logits).
  bool lazy_pass() const;

  // After a lazy pass: the batch rows the caller expects to read, in the order it will
  // read them (a verification's likeliest path, root first). The first read of a
  // hinted row computes it in one product with the later hinted rows not yet read, at
  // most kMaxReadBlock rows (a longer hint is read in successive products): on CPUs a
  // product over k rows costs much less than k products over one (docs/design.md
  // section 3), and gives each row the same bits (the context checks each block size
  // once, and keeps to the sizes that do). A hinted row that is then not read was
  // computed for nothing. Rows not hinted are computed alone. Does nothing after a pass
  // that computed every row. Until the next decode.
  void HintReads(std::span<const int32_t> batch_rows);
  static constexpr int32_t kMaxReadBlock = 7;
  // Rows of lazy passes computed alone and in blocks, and the blocks (products over
  // several rows), since the context was made (a block size's first block, checked
  // against its rows alone, counts as alone). A block costs about one row alone plus
  // a read-ahead price for each further row; `products[k]`: the blocks of k rows.
  struct LazyReads {
    int64_t alone = 0, in_blocks = 0, blocks = 0;
    std::array<int64_t, kMaxReadBlock + 1> products{};
  };
  LazyReads lazy_reads() const;

  // After EvalTree: keeps the lane's prefix plus the nodes `path` (root first, a
  // root-to-node path of the evaluated tree) and drops every other tree node.
  // n_past grows by path.size().
  void CommitPath(const std::vector<int32_t>& path, int32_t lane = 0);

  // Drops the lane's tokens at positions >= n and sets its n_past = n.
  void Truncate(int32_t n, int32_t lane = 0);

 private:
  // Draft trees manage their own sequence ids through this internal, uninstalled
  // interface (src/backend/sequence_ops.h); users of the library cannot.
  friend class SequenceOps;

  struct LaneState {
    int32_t n_past = 0;
    int32_t n_leaves = 0;                         // scratch sequences the last tree used
    std::vector<std::vector<int32_t>> tree_seqs;  // [n] leaf ids (lane-relative) per node of the last tree
    std::vector<int32_t> tree_depth;              // [n]
  };
  const LaneState& Lane(int32_t lane) const;
  LaneState& Lane(int32_t lane);
  int32_t SeqBase(int32_t lane) const { return lane * n_seq_max_; }

  void DecodeChecked(int32_t n_tokens, const char* what);
  // Writes `tokens` into the batch from row `row` at the lane's next positions, without
  // logits, each tagged with the lane's first `n_leaves` sequence ids (its prefix and
  // the leaves of a tree that follows in the same pass).
  void PutChunk(TokenSpan tokens, int32_t lane, int32_t row, int32_t n_leaves);
  // Checks `tree` against the lane's limits, tags its cache sequences and writes its
  // rows into the batch from row `row`, its root at position n_past + `shift`.
  // Returns the leaf sequence ids (lane-relative) it uses: [0, n_leaves).
  int32_t PutTree(const TokenTree& tree, int32_t lane, int32_t row, int32_t shift);
  // Makes lane-relative sequence `seq`'s cells up to position `n_past + path_len - 1`
  // the lane's new committed prefix and drops its other scratch sequences; n_past
  // grows by path_len.
  void CommitSequence(int32_t seq, int32_t path_len, int32_t lane = 0);

  const Model& model_;
  llama_context* ctx_ = nullptr;
  struct LazyHead;  // ContextOptions::lazy_logits; null when off
  std::unique_ptr<LazyHead> lazy_;
  struct BatchHolder;
  std::unique_ptr<BatchHolder> batch_;
  int32_t n_ctx_ = 0;
  int32_t n_batch_ = 0;
  int32_t n_seq_max_ = 0;  // per lane
  int32_t max_tree_ = 0;
  std::vector<LaneState> lanes_;
};

}  // namespace graft
