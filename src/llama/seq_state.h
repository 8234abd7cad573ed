// llama.cpp's sequence state (llama_state_seq_get_data of the pinned release, docs/llama.md)
// taken apart into what prefixd stores — per attention layer the K and V rows of each position,
// per recurrent layer the state at the last position — and put back together. Pure functions on
// bytes: no llama.cpp calls, no I/O; any thread.
//
// Only what this code fully understands is accepted: one attention cache (unified or one stream
// per sequence) with f32, f16 or bf16 K and V of one width in every layer, and/or one recurrent
// memory; cells at positions 0..n-1, one sequence, text tokens. Anything else is refused with a
// reason, so that a state is never stored that could not be assembled back bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "prefixd/status.h"

namespace prefixd::llama {

// Which memory modules a context's state holds, in the order llama.cpp writes them.
enum class MemoryKind : uint8_t {
  kAttention,  // llama_kv_cache: transformers
  kRecurrent,  // llama_memory_recurrent: Mamba, Mamba-2, RWKV
  kHybrid,     // llama_memory_hybrid: the K/V cache, then the recurrent memory
};

// How a cell's extension (M-RoPE's 2-D position and the token) is derived from the position and
// the token, for models whose cells carry one. Text tokens give one of these.
enum class CellExt : uint8_t {
  kNone,          // the cache keeps no extension
  kZeroPosition,  // x = y = 0, tok = the token
  kPosition,      // x = y = the position, tok = the token
};

struct AttentionLayout {
  uint32_t streams = 1;  // n_stream: 1 for a unified cache, else one per sequence
  CellExt ext = CellExt::kNone;
  bool v_trans = false;  // V stored transposed (without flash attention)
  uint32_t layers = 0;   // attention layers
  int32_t type = 0;      // ggml_type of K and V (f32 0, f16 1, bf16 30)
  uint32_t element_bytes = 0;
  uint32_t width = 0;  // values per K row and per V row (n_embd_k_gqa = n_embd_v_gqa)

  uint64_t row_bytes() const { return uint64_t{width} * element_bytes; }
  friend bool operator==(const AttentionLayout&, const AttentionLayout&) = default;
};

// One recurrent layer, in the order llama.cpp writes them (its layers that have a recurrent state;
// the state does not name their indices).
struct RecurrentLayer {
  int32_t r_type = 0;
  uint64_t r_bytes = 0;
  int32_t s_type = 0;
  uint64_t s_bytes = 0;
  friend bool operator==(const RecurrentLayer&, const RecurrentLayer&) = default;
};

struct RecurrentLayout {
  uint32_t n_layer = 0;  // every layer of the model, as llama.cpp writes it
  std::vector<RecurrentLayer> layers;
  friend bool operator==(const RecurrentLayout&, const RecurrentLayout&) = default;
};

// Everything needed to assemble a state from the stored parts. The same for every state of one
// context (it depends on the model and the context's parameters only).
struct StateLayout {
  MemoryKind kind = MemoryKind::kAttention;
  AttentionLayout attention;  // when kind != kRecurrent
  RecurrentLayout recurrent;  // when kind != kAttention

  bool has_attention() const { return kind != MemoryKind::kRecurrent; }
  bool has_recurrent() const { return kind != MemoryKind::kAttention; }
  uint32_t attention_layers() const { return has_attention() ? attention.layers : 0; }
  uint32_t recurrent_layers() const {
    return has_recurrent() ? static_cast<uint32_t>(recurrent.layers.size()) : 0;
  }
  // One recurrent layer's blob as stored: its R row then its S row.
  uint64_t recurrent_blob_bytes(size_t i) const {
    return recurrent.layers[i].r_bytes + recurrent.layers[i].s_bytes;
  }

  // A self-checking binary form (magic, version, fields, XXH3-64), stored beside a namespace.
  std::string Encode() const;
  static Result<StateLayout> Decode(std::string_view bytes);

  friend bool operator==(const StateLayout&, const StateLayout&) = default;
};

// A parsed sequence state: views into the bytes it was parsed from (which must outlive it).
class SequenceState {
 public:
  // Parses a whole sequence state of `kind` (flags 0) whose cells must hold exactly `tokens` at
  // positions 0..tokens.size()-1.
  static Result<SequenceState> Parse(std::span<const uint8_t> bytes, MemoryKind kind,
                                     std::span<const int32_t> tokens);
  // Parses the recurrent memory's part alone (LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY of a hybrid, or
  // a recurrent model's whole state): `last_position` is the position its one cell must hold.
  static Result<SequenceState> ParseRecurrent(std::span<const uint8_t> bytes,
                                              int32_t last_position);

  const StateLayout& layout() const { return layout_; }
  uint64_t tokens() const { return n_tokens_; }

  // Appends attention layer `layer`'s K rows for positions [begin, end), then its V rows, each
  // row `width` values (V untransposed whatever the cache's layout).
  void AppendRows(uint32_t layer, uint64_t begin, uint64_t end, std::vector<uint8_t>& out) const;
  // The same rows written into `out`, which holds RowsBytes(begin, end) bytes (a caller's own
  // buffer: a memfd it sends, say).
  void CopyRows(uint32_t layer, uint64_t begin, uint64_t end, std::span<uint8_t> out) const;
  uint64_t RowsBytes(uint64_t begin, uint64_t end) const {
    return 2 * (end - begin) * layout_.attention.row_bytes();
  }
  // Recurrent layer i's blob: its R row then its S row.
  std::vector<uint8_t> RecurrentBlob(size_t i) const;
  // The same written into `out`, which holds RecurrentBlobBytes(i) bytes.
  void CopyRecurrentBlob(size_t i, std::span<uint8_t> out) const;
  uint64_t RecurrentBlobBytes(size_t i) const {
    return layout_.recurrent.layers[i].r_bytes + layout_.recurrent.layers[i].s_bytes;
  }

 private:
  StateLayout layout_;
  uint64_t n_tokens_ = 0;
  // Attention: cell index of each position, and per layer where its K and V start.
  std::vector<uint32_t> cell_of_position_;
  uint32_t cells_ = 0;
  std::vector<const uint8_t*> k_, v_;
  // Recurrent: per stored layer, where its R and S rows are.
  std::vector<const uint8_t*> r_, s_;
};

// A sequence state for `length` tokens laid out as llama_state_seq_set_data expects, as if taken
// from sequence `seq` (llama.cpp reads the id and ignores it): every header and cell written
// (positions 0..length-1 and, where the cache has extensions, `ext` of their token), the data
// regions left for the caller to fill, straight from the network:
//   k[l], v[l]  attention layer l's K rows for [0, length), its V rows (when the layout's V is
//               transposed, v[l] wants TransposeV of the rows);
//   r[i], s[i]  recurrent layer i's R row and S row at position length - 1.
struct StatePlan {
  std::span<uint8_t> bytes;
  std::vector<std::span<uint8_t>> k, v, r, s;
};
// The plan's bytes are the first PlannedStateSize() bytes of `memory` (kResourceExhausted when it
// is shorter).
uint64_t PlannedStateSize(const StateLayout& layout, uint64_t length);
Result<StatePlan> PlanState(const StateLayout& layout, int32_t seq, uint64_t length,
                            std::span<const int32_t> tokens, std::span<uint8_t> memory);

// Writes V rows (one per position, `width` values each) into a transposed V region.
void TransposeV(const AttentionLayout& layout, uint64_t length, std::span<const uint8_t> rows,
                std::span<uint8_t> region);

// PlanState filled from parts in memory (tests, and callers without a network read):
//   attention_rows[l]: layer l's K rows for [0, length) then its V rows (as AppendRows gives);
//   recurrent_blobs[i]: recurrent layer i's blob (RecurrentBlob).
// kInvalidArgument when a part has the wrong size.
Result<std::vector<uint8_t>> AssembleState(
    const StateLayout& layout, int32_t seq, uint64_t length, std::span<const int32_t> tokens,
    std::span<const std::span<const uint8_t>> attention_rows,
    std::span<const std::span<const uint8_t>> recurrent_blobs);

}  // namespace prefixd::llama
