// llama.cpp adapter. See include/graft/backend.h for the contracts.
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>
#include <llama.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string_view>

#include "backend/ggml_cpu.h"
#include "backend/sequence_ops.h"
#include "graft/backend.h"
#include "graft/error.h"

#ifndef GRAFT_LLAMA_COMMIT
#define GRAFT_LLAMA_COMMIT "unknown"
#endif
#ifndef GRAFT_LLAMA_VERSION
#define GRAFT_LLAMA_VERSION "unknown"
#endif

namespace graft {
namespace {

// Offset of the first byte that does not belong to a well-formed UTF-8 sequence
// (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF); npos if none.
size_t FirstInvalidUtf8(std::string_view s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned c = b[i];
    size_t len = 1;
    unsigned lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned x = b[i + k];
      if (x < (k == 1 ? lo : 0x80u) || x > (k == 1 ? hi : 0xBFu)) return i;
    }
    i += len;
  }
  return std::string::npos;
}

std::atomic<bool> g_verbose{false};
std::mutex g_log_mutex;
std::string g_last_errors;  // recent llama.cpp error lines, folded into load errors

void LogCallback(ggml_log_level level, const char* text, void* /*user*/) {
  if (level == GGML_LOG_LEVEL_ERROR) {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_last_errors += text;
    if (g_last_errors.size() > 4000) g_last_errors.erase(0, g_last_errors.size() - 4000);
  }
  if (g_verbose.load() || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

void EnsureBackend() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(LogCallback, nullptr);
    llama_backend_init();
  });
}

std::string TakeLastErrors() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::string s;
  s.swap(g_last_errors);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string CpuKernelSet() { return CpuBackendFeature("MULTIROW"); }

std::string LlamaBuildInfo() {
  const std::string set = CpuKernelSet();
  return std::string("llama.cpp ") + GRAFT_LLAMA_VERSION + " (commit " + GRAFT_LLAMA_COMMIT + "), " +
         (set.empty() ? "stock CPU kernels" : "graft multi-row kernels " + set);
}

void SetBackendVerbose(bool verbose) {
  g_verbose = verbose;
  EnsureBackend();
}

// ---------------------------------------------------------------- Model

std::unique_ptr<Model> Model::Load(const std::string& path, const ModelOptions& options) {
  EnsureBackend();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("model file not found: " + path);
  if (!fs::is_regular_file(path, ec)) throw Error("model path is not a regular file: " + path);
  {
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {0, 0, 0, 0};
    in.read(magic, 4);
    if (!in || std::memcmp(magic, "GGUF", 4) != 0) {
      throw Error("not a GGUF model file (bad magic): " + path);
    }
  }
  TakeLastErrors();
  llama_model_params params = llama_model_default_params();
  params.n_gpu_layers = options.n_gpu_layers;
  params.vocab_only = options.vocab_only;
  llama_model* raw = llama_model_load_from_file(path.c_str(), params);
  if (raw == nullptr) {
    std::string why = TakeLastErrors();
    throw Error("llama.cpp could not load model " + path +
                " (truncated or unsupported GGUF file?)" + (why.empty() ? "" : ": " + why));
  }
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  m->model_ = raw;
  m->vocab_ = llama_model_get_vocab(raw);
  m->n_vocab_ = llama_vocab_n_tokens(m->vocab_);
  uint64_t h = 14695981039346656037ull;
  h = Fnv1a(h, &m->n_vocab_, sizeof(m->n_vocab_));
  for (Token t = 0; t < m->n_vocab_; ++t) {
    const char* text = llama_vocab_get_text(m->vocab_, t);
    h = Fnv1a(h, text, std::strlen(text) + 1);
  }
  m->fingerprint_ = h;
  return m;
}

Model::~Model() {
  if (model_ != nullptr) llama_model_free(model_);
}

int32_t Model::n_ctx_train() const { return llama_model_n_ctx_train(model_); }
uint64_t Model::n_params() const { return llama_model_n_params(model_); }
uint64_t Model::size_bytes() const { return llama_model_size(model_); }

std::string Model::Description() const {
  char buf[256];
  llama_model_desc(model_, buf, sizeof(buf));
  return buf;
}

std::string Model::Name() const {
  char buf[256];
  if (llama_model_meta_val_str(model_, "general.name", buf, sizeof(buf)) > 0) return buf;
  return std::filesystem::path(path_).filename().string();
}

std::vector<Token> Model::Tokenize(const std::string& text, bool add_special, bool parse_special) const {
  std::vector<Token> out(text.size() + 8);
  // llama.cpp's tokenizer lets C++ exceptions out of its C API: some byte sequences
  // that are not UTF-8 end in std::invalid_argument ("invalid codepoint").
  try {
    int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                               static_cast<int32_t>(out.size()), add_special, parse_special);
    if (n == INT32_MIN) throw Error("text too long to tokenize");
    if (n < 0) {
      out.resize(-n);
      n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                         static_cast<int32_t>(out.size()), add_special, parse_special);
      if (n < 0) throw Error("tokenization failed");
    }
    out.resize(n);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const size_t bad = FirstInvalidUtf8(text);
    throw Error(bad == std::string::npos
                    ? std::string("cannot tokenize the text: ") + e.what()
                    : "cannot tokenize the text: it is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  return out;
}

std::string Model::TokenToPiece(Token t, bool special) const {
  char buf[256];
  int32_t n = llama_token_to_piece(vocab_, t, buf, sizeof(buf), 0, special);
  if (n >= 0) return std::string(buf, n);
  std::string s(-n, '\0');
  n = llama_token_to_piece(vocab_, t, s.data(), static_cast<int32_t>(s.size()), 0, special);
  s.resize(std::max(n, 0));
  return s;
}

std::string Model::Detokenize(TokenSpan tokens, bool special) const {
  std::string s;
  for (Token t : tokens) s += TokenToPiece(t, special);
  return s;
}

bool Model::IsEog(Token t) const { return llama_vocab_is_eog(vocab_, t); }
Token Model::Bos() const { return llama_vocab_bos(vocab_); }
bool Model::AddBos() const { return llama_vocab_get_add_bos(vocab_); }

std::string Model::ApplyChatTemplate(const std::vector<ChatMessage>& messages, bool add_assistant) const {
  const char* tmpl = llama_model_chat_template(model_, nullptr);
  if (tmpl == nullptr) throw Error("model " + Name() + " has no chat template; pass a raw prompt instead");
  std::vector<llama_chat_message> chat;
  size_t total = 0;
  for (const auto& m : messages) {
    chat.push_back({m.role.c_str(), m.content.c_str()});
    total += m.role.size() + m.content.size();
  }
  std::string buf(2 * total + 256, '\0');
  int32_t n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_assistant, buf.data(),
                                        static_cast<int32_t>(buf.size()));
  if (n < 0) throw Error("llama.cpp does not support the chat template of model " + Name());
  if (n > static_cast<int32_t>(buf.size())) {
    buf.resize(n);
    n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_assistant, buf.data(), n);
  }
  buf.resize(n);
  return buf;
}

void CheckDraftCompatible(const Model& target, const Model& draft) {
  if (target.n_vocab() != draft.n_vocab()) {
    throw Error("draft model " + draft.path() + " has a vocabulary of " + std::to_string(draft.n_vocab()) +
                " tokens but the target " + target.path() + " has " + std::to_string(target.n_vocab()) +
                "; a draft model must share the target's tokenizer");
  }
  if (target.VocabFingerprint() != draft.VocabFingerprint()) {
    throw Error("draft model " + draft.path() + " and target " + target.path() +
                " have vocabularies of equal size but different token texts; a draft model must share "
                "the target's tokenizer");
  }
  if (target.Bos() != draft.Bos()) throw Error("draft and target models disagree on the BOS token");
}

// ---------------------------------------------------------------- Context

struct Context::BatchHolder {
  llama_batch batch;
  int32_t capacity;
  explicit BatchHolder(int32_t n, int32_t n_seq) : batch(llama_batch_init(n, 0, n_seq)), capacity(n) {}
  ~BatchHolder() { llama_batch_free(batch); }
};

// ContextOptions::lazy_logits. llama.cpp's graph for a decoder ends in the output
// norm ("result_norm", the hidden states of the output rows) and the output layer
// ("result_output" = mul_mat(weight, result_norm)). Its scheduler asks an eval
// callback which nodes it wants to see, and stops computing when the callback
// returns false after one: so a lazy pass stops after result_norm, keeps the hidden
// states, and Logits computes a row's product with ggml's own mul_mat over one
// column, the very kernel a 1-row pass runs. Passes that run whole (1 output row)
// show the graph's last nodes, which tell whether it is that plain product.
struct Context::LazyHead {
  int32_t n_threads = 2;
  int32_t n_embd = 0, n_vocab = 0;
  // Learnt from passes that ran whole.
  // The output layer's, once result_output was seen to be mul_mat(weight, result_norm).
  const ggml_tensor* weight = nullptr;
  bool other_ops = false;    // a node after result_output, or an output layer of another shape: never lazy
  bool seen_output = false;  // this pass has shown result_output
  bool verified = false;     // a 1-row pass compared bit for bit, and equal
  bool failed = false;       // and different: never lazy
  // This pass.
  bool armed = false;    // stops after result_norm
  bool capture = false;  // copies result_norm and runs whole (a check)
  int32_t n_outputs = 0;
  std::vector<int32_t> out_index;  // batch row -> output row, -1 for none
  std::vector<float> hidden;       // [n_outputs x n_embd]
  std::vector<float> rows;         // computed logits, [n_outputs x n_vocab]
  std::vector<uint8_t> have;       // [n_outputs]
  std::vector<int32_t> hint;       // output rows the caller expects to read, in order (Context::HintReads)
  // Columns through the output layer in one product: out = weight x h, h of k columns.
  struct Product {
    ggml_context* gctx = nullptr;
    ggml_tensor *w = nullptr, *h = nullptr, *out = nullptr;
    ggml_cgraph* graph = nullptr;
    ggml_cplan plan{};
    std::vector<uint8_t> work;
    ~Product() {
      if (gctx != nullptr) ggml_free(gctx);
    }
  };
  std::unique_ptr<Product> products[kMaxReadBlock + 1];  // [k]: k columns, built on first use
  // Blocks of up to this many rows give each row's bits as computed alone (checked
  // once per size, on its first block); below the smallest size that did not.
  int32_t block_limit = kMaxReadBlock;
  bool block_checked[kMaxReadBlock + 1] = {};
  std::vector<float> block_in, block_out;  // a block's gathered hidden states and its logits
  int64_t rows_alone = 0, rows_in_blocks = 0, blocks = 0;
  std::array<int64_t, kMaxReadBlock + 1> blocks_of{};  // [k]: blocks of k rows

  bool Usable() const { return weight != nullptr && !other_ops && !failed; }

  static bool Eval(ggml_tensor* t, bool ask, void* user) {
    auto* L = static_cast<LazyHead*>(user);
    const bool is_norm = std::strcmp(ggml_get_name(t), "result_norm") == 0;
    if (ask) {
      if (!L->armed) L->Learn(t);
      return (L->armed || L->capture) && is_norm;
    }
    if (is_norm) {
      L->Keep(t);
      return !L->armed;  // false: stop before the output layer
    }
    return true;
  }

  // A node of a pass that runs whole, in graph order.
  void Learn(const ggml_tensor* t) {
    if (seen_output) {
      other_ops = true;  // something (a soft cap, a bias) follows the product
      return;
    }
    if (std::strcmp(ggml_get_name(t), "result_output") != 0) return;
    seen_output = true;
    const ggml_tensor* wt = t->src[0];
    const bool shape = t->op == GGML_OP_MUL_MAT && t->src[1] != nullptr &&
                       std::strcmp(ggml_get_name(t->src[1]), "result_norm") == 0 && wt != nullptr &&
                       wt->ne[0] == n_embd && wt->ne[1] == n_vocab && wt->ne[2] == 1 && wt->ne[3] == 1 &&
                       ggml_is_contiguous(wt) && wt->buffer != nullptr && ggml_backend_buffer_is_host(wt->buffer) &&
                       std::strstr(ggml_backend_buffer_name(wt->buffer), "REPACK") == nullptr &&
                       t->src[1]->type == GGML_TYPE_F32;
    if (!shape || (weight != nullptr && weight != wt)) {
      other_ops = true;
      return;
    }
    weight = wt;
  }

  // result_norm was computed: its rows are the output rows' hidden states.
  void Keep(const ggml_tensor* t) {
    if (t->type != GGML_TYPE_F32 || t->ne[0] != n_embd || t->ne[1] != n_outputs || !ggml_is_contiguous(t)) {
      other_ops = true;
      hidden.clear();
      return;
    }
    hidden.resize(static_cast<size_t>(n_outputs) * n_embd);
    if (ggml_backend_buffer_is_host(t->buffer)) {
      std::memcpy(hidden.data(), t->data, hidden.size() * sizeof(float));
    } else {
      ggml_backend_tensor_get(t, hidden.data(), 0, hidden.size() * sizeof(float));
    }
  }

  // Before a pass over `b` (n rows): which rows output, and whether it stops early.
  void Begin(const llama_batch& b, int32_t n) {
    out_index.assign(n, -1);
    n_outputs = 0;
    for (int32_t i = 0; i < n; ++i) {
      if (b.logits[i]) out_index[i] = n_outputs++;
    }
    seen_output = false;
    armed = Usable() && verified && n_outputs >= 2;
    capture = !armed && !verified && !failed && n_outputs == 1;
    hidden.clear();
    hint.clear();
  }

  // After the pass.
  void End(llama_context* ctx) {
    if (armed) {
      GRAFT_CHECK(hidden.size() == static_cast<size_t>(n_outputs) * n_embd,
                  "lazy logits: the pass did not stop at the output norm");
      rows.resize(static_cast<size_t>(n_outputs) * n_vocab);
      have.assign(n_outputs, 0);
      return;
    }
    if (capture && Usable() && hidden.size() == static_cast<size_t>(n_embd)) {
      // The check: this row through the output layer here, against llama.cpp's.
      std::vector<float> mine(n_vocab);
      Compute(hidden.data(), mine.data());
      const float* theirs = llama_get_logits_ith(ctx, -1);
      verified = theirs != nullptr && std::memcmp(mine.data(), theirs, n_vocab * sizeof(float)) == 0;
      failed = !verified;
    }
    capture = false;
  }

  // logits = weight x x for k columns at once (x: k x n_embd, logits: k x n_vocab):
  // ggml's mul_mat, the product a 1-row pass runs when k = 1. Each size's graph is
  // built once; the weight's data is llama.cpp's.
  void Compute(const float* x, float* logits, int32_t k = 1) {
    std::unique_ptr<Product>& p = products[k];
    if (p == nullptr) {
      p = std::make_unique<Product>();
      ggml_init_params ip{};
      ip.mem_size = 3 * ggml_tensor_overhead() + ggml_graph_overhead() + 4096;
      ip.mem_buffer = nullptr;
      ip.no_alloc = true;  // the weight is llama.cpp's; the columns and the rows are ours
      p->gctx = ggml_init(ip);
      GRAFT_CHECK(p->gctx != nullptr, "lazy logits: ggml_init failed");
      p->w = ggml_new_tensor_2d(p->gctx, weight->type, n_embd, n_vocab);
      p->h = ggml_new_tensor_2d(p->gctx, GGML_TYPE_F32, n_embd, k);
      p->out = ggml_mul_mat(p->gctx, p->w, p->h);
      p->graph = ggml_new_graph(p->gctx);
      ggml_build_forward_expand(p->graph, p->out);
      p->plan = ggml_graph_plan(p->graph, n_threads, nullptr);
      p->work.resize(p->plan.work_size);
      p->plan.work_data = p->work.data();
    }
    p->w->data = weight->data;
    p->h->data = const_cast<float*>(x);
    p->out->data = logits;
    const ggml_status st = ggml_graph_compute(p->graph, &p->plan);
    GRAFT_CHECK(st == GGML_STATUS_SUCCESS, "lazy logits: ggml_graph_compute failed");
  }

  float* RowData(int32_t o) { return rows.data() + static_cast<size_t>(o) * n_vocab; }
  const float* Hidden(int32_t o) const { return hidden.data() + static_cast<size_t>(o) * n_embd; }

  // A row read. Computed alone, or, when it is hinted, in one product with the hinted
  // rows after it not yet computed (at most block_limit rows): on CPUs a product over
  // a few columns costs less per column than one over a column (on the 2-core Xeon,
  // 17 ms for the 1.5B Qwen's Q6_K output layer alone, 7 ms more for each further
  // column; on the 2-core EPYC 8 ms alone and 7 ms more), and a column's bits are those
  // of its product alone as long as ggml runs the same per-column dot products (its
  // tiled K-quant kernel, from 8 columns, rounds otherwise): each block size is
  // checked once, on its first block, against its rows computed alone.
  const float* Row(int32_t batch_row) {
    GRAFT_CHECK(batch_row >= 0 && batch_row < static_cast<int32_t>(out_index.size()) && out_index[batch_row] >= 0,
                "no logits for batch row " + std::to_string(batch_row));
    const int32_t o = out_index[batch_row];
    if (have[o]) return RowData(o);
    std::vector<int32_t> block{o};
    const auto at = std::find(hint.begin(), hint.end(), o);
    if (at != hint.end()) {
      for (auto it = at + 1; it != hint.end() && static_cast<int32_t>(block.size()) < block_limit; ++it) {
        if (!have[*it] && std::find(block.begin(), block.end(), *it) == block.end()) block.push_back(*it);
      }
    }
    const int32_t k = static_cast<int32_t>(block.size());
    if (k == 1) {
      Compute(Hidden(o), RowData(o));
      ++rows_alone;
    } else {
      block_in.resize(static_cast<size_t>(k) * n_embd);
      block_out.resize(static_cast<size_t>(k) * n_vocab);
      for (int32_t c = 0; c < k; ++c) std::memcpy(&block_in[static_cast<size_t>(c) * n_embd], Hidden(block[c]), n_embd * sizeof(float));
      Compute(block_in.data(), block_out.data(), k);
      if (!block_checked[k]) {
        // Each row alone (into its own place), against the block's column.
        bool same = true;
        for (int32_t c = 0; c < k; ++c) {
          Compute(Hidden(block[c]), RowData(block[c]));
          same = same && std::memcmp(RowData(block[c]), &block_out[static_cast<size_t>(c) * n_vocab], n_vocab * sizeof(float)) == 0;
        }
        block_checked[k] = true;
        if (!same) block_limit = std::min(block_limit, k - 1);
        rows_alone += k;
      } else {
        for (int32_t c = 0; c < k; ++c) std::memcpy(RowData(block[c]), &block_out[static_cast<size_t>(c) * n_vocab], n_vocab * sizeof(float));
        rows_in_blocks += k;
        ++blocks;
        ++blocks_of[k];
      }
    }
    for (int32_t r : block) have[r] = 1;
    return RowData(o);
  }
};

Context::Context(const Model& model, const ContextOptions& options) : model_(model) {
  EnsureBackend();
  if (options.n_ctx < 16) throw Error("context size must be at least 16 tokens");
  if (options.n_lanes < 1) throw Error("a context needs at least one lane");
  const int32_t seq_limit = static_cast<int32_t>(llama_max_parallel_sequences());
  if (options.n_seq_max < 1 || static_cast<int64_t>(options.n_seq_max) * options.n_lanes > seq_limit) {
    throw Error("n_seq_max x n_lanes must be in [1, " + std::to_string(seq_limit) + "] (n_seq_max " +
                std::to_string(options.n_seq_max) + ", " + std::to_string(options.n_lanes) + " lanes)");
  }
  llama_context_params p = llama_context_default_params();
  n_batch_ = std::max(options.n_batch, options.max_tree * options.n_lanes);
  p.n_ctx = static_cast<uint32_t>(options.n_ctx) * static_cast<uint32_t>(options.n_lanes);
  p.n_batch = static_cast<uint32_t>(n_batch_);
  p.n_ubatch = static_cast<uint32_t>(n_batch_);  // a pass's trees must sit in one ubatch
  p.n_seq_max = static_cast<uint32_t>(options.n_seq_max * options.n_lanes);
  p.n_outputs_max = static_cast<uint32_t>(n_batch_);
  p.n_outputs_max_per_seq = static_cast<uint32_t>(n_batch_);
  p.n_threads = options.n_threads;
  p.n_threads_batch = options.n_threads;
  p.kv_unified = true;  // tokens with several seq ids need one unified stream
  p.no_perf = true;
  if (options.lazy_logits) {
    lazy_ = std::make_unique<LazyHead>();
    lazy_->n_threads = options.n_threads;
    lazy_->n_embd = llama_model_n_embd(model.model_);
    lazy_->n_vocab = model.n_vocab();
    p.cb_eval = &LazyHead::Eval;
    p.cb_eval_user_data = lazy_.get();
  }
  ctx_ = llama_init_from_model(model.model_, p);
  if (ctx_ == nullptr) {
    throw Error("llama.cpp could not create a context of " + std::to_string(p.n_ctx) + " tokens for " +
                model.path() + ": " + TakeLastErrors());
  }
  // llama.cpp may pad the size up, and clamp the batch to it.
  n_ctx_ = static_cast<int32_t>(llama_n_ctx(ctx_)) / options.n_lanes;
  n_batch_ = static_cast<int32_t>(llama_n_batch(ctx_));
  if (options.max_tree * options.n_lanes > n_batch_) throw Error("tree limit exceeds the context's batch size");
  n_seq_max_ = options.n_seq_max;
  max_tree_ = options.max_tree;
  lanes_.resize(options.n_lanes);
  batch_ = std::make_unique<BatchHolder>(n_batch_, n_seq_max_);
}

Context::~Context() {
  batch_.reset();
  if (ctx_ != nullptr) llama_free(ctx_);
}

const Context::LaneState& Context::Lane(int32_t lane) const {
  GRAFT_CHECK(lane >= 0 && lane < n_lanes(), "lane " + std::to_string(lane) + " out of range");
  return lanes_[lane];
}

Context::LaneState& Context::Lane(int32_t lane) {
  GRAFT_CHECK(lane >= 0 && lane < n_lanes(), "lane " + std::to_string(lane) + " out of range");
  return lanes_[lane];
}

void Context::DecodeChecked(int32_t n_tokens, const char* what) {
  batch_->batch.n_tokens = n_tokens;
  if (lazy_) lazy_->Begin(batch_->batch, n_tokens);
  const int32_t rc = llama_decode(ctx_, batch_->batch);
  if (lazy_ && rc == 0) lazy_->End(ctx_);
  if (lazy_ && rc != 0) lazy_->armed = false;
  if (rc == 1) {
    throw Error(std::string(what) + ": no KV-cache slot for " + std::to_string(n_tokens) +
                " tokens (context of " + std::to_string(n_ctx_) + " is full; raise -c)");
  }
  if (rc != 0) throw Error(std::string(what) + ": llama_decode failed with code " + std::to_string(rc));
}

const float* Context::Prefill(TokenSpan tokens, bool want_last_logits, int32_t lane) {
  if (tokens.empty()) return nullptr;
  LaneState& ls = Lane(lane);
  if (ls.n_past + static_cast<int64_t>(tokens.size()) > n_ctx_) {
    throw Error("input of " + std::to_string(tokens.size()) + " tokens does not fit: " +
                std::to_string(ls.n_past) + " already used of a " + std::to_string(n_ctx_) +
                "-token context (raise -c or shorten the prompt)");
  }
  llama_batch& b = batch_->batch;
  size_t i = 0;
  while (i < tokens.size()) {
    const int32_t n = static_cast<int32_t>(std::min<size_t>(n_batch_, tokens.size() - i));
    PutChunk(tokens.subspan(i, n), lane, 0, 1);
    const bool last_chunk = i + n == tokens.size();
    if (last_chunk && want_last_logits) b.logits[n - 1] = 1;
    DecodeChecked(n, "prefill");
    ls.n_past += n;
    i += n;
    if (last_chunk && want_last_logits) return Logits(n - 1);
  }
  return nullptr;
}

void Context::PutChunk(TokenSpan tokens, int32_t lane, int32_t row, int32_t n_leaves) {
  llama_batch& b = batch_->batch;
  const LaneState& ls = Lane(lane);
  for (size_t j = 0; j < tokens.size(); ++j) {
    b.token[row + j] = tokens[j];
    b.pos[row + j] = ls.n_past + static_cast<int32_t>(j);
    b.n_seq_id[row + j] = n_leaves;
    for (int32_t l = 0; l < n_leaves; ++l) b.seq_id[row + j][l] = SeqBase(lane) + l;
    b.logits[row + j] = 0;
  }
}

int32_t Context::PutTree(const TokenTree& tree, int32_t lane, int32_t row, int32_t shift) {
  const int32_t n = tree.size();
  GRAFT_CHECK(n >= 1, "empty tree");
  if (n > max_tree_) {
    throw Error("tree of " + std::to_string(n) + " nodes exceeds the context's limit of " +
                std::to_string(max_tree_));
  }
  LaneState& ls = Lane(lane);
  std::vector<std::vector<int32_t>> seqs = LeafSequenceIds(tree.parent);
  int32_t n_leaves = 0;
  int32_t max_depth = 0;
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t s : seqs[i]) n_leaves = std::max(n_leaves, s + 1);
    max_depth = std::max(max_depth, tree.depth[i]);
  }
  if (n_leaves > n_seq_max_) {
    throw Error("tree has " + std::to_string(n_leaves) + " leaves but the context allows " +
                std::to_string(n_seq_max_) + " sequences");
  }
  if (ls.n_past + shift + max_depth + 1 > n_ctx_) {
    throw Error("context of " + std::to_string(n_ctx_) + " tokens is full (raise -c)");
  }
  if (row + n > n_batch_) throw Error("a pass of more than " + std::to_string(n_batch_) + " rows");
  const int32_t base = SeqBase(lane);
  llama_memory_t mem = llama_get_memory(ctx_);
  for (int32_t l = 1; l < n_leaves; ++l) {
    llama_memory_seq_rm(mem, base + l, -1, -1);
    llama_memory_seq_cp(mem, base, base + l, -1, -1);
  }
  llama_batch& b = batch_->batch;
  for (int32_t i = 0; i < n; ++i) {
    b.token[row + i] = tree.token[i];
    b.pos[row + i] = ls.n_past + shift + tree.depth[i];
    b.n_seq_id[row + i] = static_cast<int32_t>(seqs[i].size());
    for (size_t k = 0; k < seqs[i].size(); ++k) b.seq_id[row + i][k] = base + seqs[i][k];
    b.logits[row + i] = 1;
  }
  ls.tree_seqs = std::move(seqs);
  ls.tree_depth = tree.depth;
  ls.n_leaves = n_leaves;
  return n_leaves;
}

void Context::EvalTree(const TokenTree& tree, int32_t lane) {
  PutTree(tree, lane, 0, 0);
  DecodeChecked(tree.size(), "tree evaluation");
}

std::vector<int32_t> Context::EvalLanes(const std::vector<LaneWork>& work) {
  GRAFT_CHECK(!work.empty(), "a pass needs work");
  std::vector<uint8_t> seen(lanes_.size(), 0);
  std::vector<int32_t> first_row(work.size(), -1);
  int32_t rows = 0;
  for (size_t w = 0; w < work.size(); ++w) {
    const LaneWork& lw = work[w];
    LaneState& ls = Lane(lw.lane);
    GRAFT_CHECK(!seen[lw.lane], "a lane twice in one pass");
    seen[lw.lane] = 1;
    GRAFT_CHECK(!lw.prefill.empty() || lw.tree != nullptr, "a lane's work is a prefill chunk, a tree or both");
    const int32_t n = static_cast<int32_t>(lw.prefill.size());
    if (ls.n_past + static_cast<int64_t>(n) > n_ctx_) {
      throw Error("input of " + std::to_string(n) + " tokens does not fit: " + std::to_string(ls.n_past) +
                  " already used of a " + std::to_string(n_ctx_) + "-token context (raise -c or shorten the prompt)");
    }
    if (rows + n > n_batch_) throw Error("a pass of more than " + std::to_string(n_batch_) + " rows");
    // The tree's rows follow the chunk's. Its scratch sequences copy the lane's prefix
    // before the pass, so the chunk's rows carry every leaf id the tree uses.
    int32_t n_leaves = 1;
    if (lw.tree != nullptr) {
      first_row[w] = rows + n;
      n_leaves = PutTree(*lw.tree, lw.lane, rows + n, n);
    }
    PutChunk(lw.prefill, lw.lane, rows, n_leaves);
    rows += n + (lw.tree != nullptr ? lw.tree->size() : 0);
  }
  DecodeChecked(rows, "batched evaluation");
  for (const LaneWork& lw : work) Lane(lw.lane).n_past += static_cast<int32_t>(lw.prefill.size());
  return first_row;
}

bool Context::lazy_pass() const { return lazy_ != nullptr && lazy_->armed; }

void Context::HintReads(std::span<const int32_t> batch_rows) {
  if (!lazy_pass()) return;
  LazyHead& L = *lazy_;
  L.hint.clear();
  for (int32_t r : batch_rows) {
    GRAFT_CHECK(r >= 0 && r < static_cast<int32_t>(L.out_index.size()) && L.out_index[r] >= 0,
                "no logits for hinted batch row " + std::to_string(r));
    L.hint.push_back(L.out_index[r]);
  }
}

Context::LazyReads Context::lazy_reads() const {
  if (lazy_ == nullptr) return {};
  return {lazy_->rows_alone, lazy_->rows_in_blocks, lazy_->blocks, lazy_->blocks_of};
}

const float* Context::Logits(int32_t i) const {
  if (lazy_ && lazy_->armed) return lazy_->Row(i);
  const float* l = llama_get_logits_ith(ctx_, i);
  GRAFT_CHECK(l != nullptr, "no logits for batch row " + std::to_string(i));
  return l;
}

void Context::CommitPath(const std::vector<int32_t>& path, int32_t lane) {
  LaneState& ls = Lane(lane);
  GRAFT_CHECK(!path.empty() && path[0] == 0, "a committed path starts at the root");
  const int32_t last = path.back();
  GRAFT_CHECK(last < static_cast<int32_t>(ls.tree_seqs.size()), "path node outside the last tree");
  const int32_t d = ls.tree_depth[last];
  GRAFT_CHECK(d + 1 == static_cast<int32_t>(path.size()), "path is not root-to-node");
  const int32_t w = ls.tree_seqs[last][0];  // a leaf below the last accepted node
  CommitSequence(w, d + 1, lane);
  ls.tree_seqs.clear();
  ls.tree_depth.clear();
}

void Context::CommitSequence(int32_t seq, int32_t path_len, int32_t lane) {
  LaneState& ls = Lane(lane);
  llama_memory_t mem = llama_get_memory(ctx_);
  const int32_t base = SeqBase(lane);
  if (n_lanes() == 1) {
    llama_memory_seq_keep(mem, seq);  // every other sequence is this lane's scratch
  } else {
    // Only this lane's scratch: other lanes' sequences are theirs. n_leaves bounds the
    // ids used (PutTree, and SequenceOps's Decode and SeqCopy, raise it).
    for (int32_t l = 1; l < ls.n_leaves; ++l) {
      if (l != seq) llama_memory_seq_rm(mem, base + l, -1, -1);
    }
    if (seq != 0) llama_memory_seq_rm(mem, base, ls.n_past, -1);
  }
  llama_memory_seq_rm(mem, base + seq, ls.n_past + path_len, -1);
  if (seq != 0) {
    llama_memory_seq_cp(mem, base + seq, base, -1, -1);
    if (n_lanes() == 1) {
      llama_memory_seq_keep(mem, 0);
    } else {
      llama_memory_seq_rm(mem, base + seq, -1, -1);
    }
  }
  ls.n_past += path_len;
  ls.n_leaves = 0;
}

void Context::Truncate(int32_t n, int32_t lane) {
  LaneState& ls = Lane(lane);
  GRAFT_CHECK(n >= 0 && n <= ls.n_past, "truncate beyond the committed prefix");
  llama_memory_t mem = llama_get_memory(ctx_);
  if (n_lanes() == 1) {
    llama_memory_seq_rm(mem, -1, n, -1);
  } else {
    for (int32_t s = 0; s < n_seq_max_; ++s) llama_memory_seq_rm(mem, SeqBase(lane) + s, n, -1);
  }
  ls.n_past = n;
}

// ---------------------------------------------------------------- SequenceOps

void SequenceOps::Decode(Context& ctx, const std::vector<BatchEntry>& entries) {
  const int32_t n = static_cast<int32_t>(entries.size());
  GRAFT_CHECK(n >= 1 && n <= ctx.n_batch_, "batch size out of range");
  llama_batch& b = ctx.batch_->batch;
  for (int32_t i = 0; i < n; ++i) {
    const BatchEntry& e = entries[i];
    Context::LaneState& ls = ctx.Lane(e.lane);
    GRAFT_CHECK(!e.seq_ids.empty() && static_cast<int32_t>(e.seq_ids.size()) <= ctx.n_seq_max_,
                "bad sequence id list");
    if (e.pos >= ctx.n_ctx_) {
      throw Error("context of " + std::to_string(ctx.n_ctx_) + " tokens is full (raise -c)");
    }
    b.token[i] = e.token;
    b.pos[i] = e.pos;
    b.n_seq_id[i] = static_cast<int32_t>(e.seq_ids.size());
    for (size_t k = 0; k < e.seq_ids.size(); ++k) {
      const int32_t s = e.seq_ids[k];
      GRAFT_CHECK(s >= 0 && s < ctx.n_seq_max_, "sequence id out of range");
      b.seq_id[i][k] = ctx.SeqBase(e.lane) + s;
      ls.n_leaves = std::max(ls.n_leaves, s + 1);  // scratch ids the next commit drops
    }
    b.logits[i] = e.logits ? 1 : 0;
  }
  ctx.DecodeChecked(n, "decode");
}

void SequenceOps::SeqCopy(Context& ctx, int32_t src, int32_t dst, int32_t lane) {
  Context::LaneState& ls = ctx.Lane(lane);
  GRAFT_CHECK(src >= 0 && src < ctx.n_seq_max_ && dst >= 0 && dst < ctx.n_seq_max_, "sequence id out of range");
  llama_memory_t mem = llama_get_memory(ctx.ctx_);
  llama_memory_seq_rm(mem, ctx.SeqBase(lane) + dst, -1, -1);
  llama_memory_seq_cp(mem, ctx.SeqBase(lane) + src, ctx.SeqBase(lane) + dst, -1, -1);
  ls.n_leaves = std::max(ls.n_leaves, dst + 1);
}

void SequenceOps::CommitSequence(Context& ctx, int32_t seq, int32_t path_len, int32_t lane) {
  ctx.CommitSequence(seq, path_len, lane);
}

}  // namespace graft
