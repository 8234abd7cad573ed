#include "seq_state.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

namespace prefixd::llama {
namespace {

// ggml's type ids for the element types whose rows are plain values (ggml.h).
constexpr int32_t kGgmlF32 = 0;
constexpr int32_t kGgmlF16 = 1;
constexpr int32_t kGgmlBf16 = 30;
// The largest ggml type id a recurrent row may have (opaque there; only its size matters).
constexpr int32_t kGgmlTypeLimit = 64;
// Every sequence state opens with this u32 (llama-context.cpp's io_magic), then the i32 id of the
// sequence it was taken from.
constexpr uint32_t kSequenceMagic = 0xaf143cd8;

std::optional<uint32_t> ElementBytes(int32_t type) {
  switch (type) {
    case kGgmlF32:
      return 4;
    case kGgmlF16:
    case kGgmlBf16:
      return 2;
    default:
      return std::nullopt;
  }
}

// A bounds-checked little-endian reader over the state's bytes.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  bool Read(T& value) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  // Skips `n` bytes and returns where they start, or nullptr past the end.
  const uint8_t* Take(uint64_t n) {
    if (bytes_.size() - at_ < n) return nullptr;
    const uint8_t* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  size_t left() const { return bytes_.size() - at_; }
  size_t at() const { return at_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void Put(T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void Put(std::span<const uint8_t> bytes) { out_.insert(out_.end(), bytes.begin(), bytes.end()); }

 private:
  std::vector<uint8_t>& out_;
};

// Malformed or unexpected bytes: kCorruption. A well-formed state this code does not store (a
// quantized cache, uneven layers) is kInvalidArgument (Unsupported).
Status Bad(std::string_view what) {
  return Status::Corruption("llama.cpp sequence state not understood: " + std::string(what));
}
Status Unsupported(std::string_view what) {
  return Status::InvalidArgument("llama.cpp sequence state not stored: " + std::string(what));
}

// llama_kv_cell_ext: x, y, tok (three i32).
struct CellExtBytes {
  int32_t x = 0, y = 0, tok = 0;
};

// The recurrent memory's section: one cell at `last_position`, then R rows of every recurrent
// layer, then their S rows. Fills layout.recurrent and the row pointers.
Status ParseRecurrentSection(Reader& in, int32_t last_position, RecurrentLayout& layout,
                             std::vector<const uint8_t*>& r, std::vector<const uint8_t*>& s) {
  uint32_t cells = 0;
  if (!in.Read(cells)) return Bad("recurrent cell count cut short");
  if (cells != 1)
    return Bad("the recurrent memory holds " + std::to_string(cells) + " cells, not 1");
  int32_t pos = 0;
  uint32_t n_seq_id = 0;
  if (!in.Read(pos) || !in.Read(n_seq_id)) return Bad("recurrent cell cut short");
  if (n_seq_id != 0) return Bad("the recurrent cell names sequences (a whole-context state?)");
  if (pos != last_position) {
    return Bad("the recurrent state is at position " + std::to_string(pos) +
               ", the tokens end at " + std::to_string(last_position));
  }
  uint32_t s_trans = 0;
  if (!in.Read(s_trans) || !in.Read(layout.n_layer)) return Bad("recurrent header cut short");
  if (s_trans != 0) return Bad("transposed recurrent state");
  // R rows of each recurrent layer, then S rows: 2k entries of (type, row bytes, row) that run to
  // the end of the state. The layers are not named; R and S entries pair up by order.
  struct Entry {
    int32_t type;
    uint64_t bytes;
    const uint8_t* row;
  };
  std::vector<Entry> entries;
  while (in.left() > 0) {
    Entry e{};
    if (!in.Read(e.type) || !in.Read(e.bytes)) return Bad("recurrent row header cut short");
    if (e.type < 0 || e.type >= kGgmlTypeLimit || e.bytes == 0) return Bad("recurrent row type");
    e.row = in.Take(e.bytes);
    if (e.row == nullptr) return Bad("recurrent row cut short");
    entries.push_back(e);
  }
  if (entries.empty() || entries.size() % 2 != 0 || entries.size() / 2 > layout.n_layer) {
    return Bad(std::to_string(entries.size()) + " recurrent rows for " +
               std::to_string(layout.n_layer) + " layers");
  }
  const size_t k = entries.size() / 2;
  layout.layers.clear();
  for (size_t i = 0; i < k; ++i) {
    layout.layers.push_back(
        {entries[i].type, entries[i].bytes, entries[k + i].type, entries[k + i].bytes});
    r.push_back(entries[i].row);
    s.push_back(entries[k + i].row);
  }
  return Status::Ok();
}

Status ReadHeader(Reader& in) {
  uint32_t magic = 0;
  int32_t seq = 0;
  if (!in.Read(magic) || !in.Read(seq)) return Bad("header cut short");
  if (magic != kSequenceMagic) return Bad("not a sequence state (magic)");
  return Status::Ok();
}

}  // namespace

// --- StateLayout's stored form ---

namespace {
constexpr std::string_view kLayoutMagic = "PXLLAYT1";
}

std::string StateLayout::Encode() const {
  std::vector<uint8_t> out(kLayoutMagic.begin(), kLayoutMagic.end());
  Writer w(out);
  w.Put(static_cast<uint8_t>(kind));
  w.Put(attention.streams);
  w.Put(static_cast<uint8_t>(attention.ext));
  w.Put(static_cast<uint8_t>(attention.v_trans));
  w.Put(attention.layers);
  w.Put(attention.type);
  w.Put(attention.element_bytes);
  w.Put(attention.width);
  w.Put(recurrent.n_layer);
  w.Put(static_cast<uint32_t>(recurrent.layers.size()));
  for (const RecurrentLayer& l : recurrent.layers) {
    w.Put(l.r_type);
    w.Put(l.r_bytes);
    w.Put(l.s_type);
    w.Put(l.s_bytes);
  }
  w.Put(static_cast<uint64_t>(XXH3_64bits(out.data(), out.size())));
  return std::string(out.begin(), out.end());
}

Result<StateLayout> StateLayout::Decode(std::string_view bytes) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < kLayoutMagic.size() + 8 ||
      bytes.substr(0, kLayoutMagic.size()) != kLayoutMagic) {
    return Status::InvalidArgument("not a stored llama.cpp state layout");
  }
  uint64_t sum = 0;
  std::memcpy(&sum, data + bytes.size() - 8, 8);
  if (sum != XXH3_64bits(data, bytes.size() - 8)) {
    return Status::InvalidArgument("stored llama.cpp state layout: checksum mismatch");
  }
  Reader in({data + kLayoutMagic.size(), bytes.size() - kLayoutMagic.size() - 8});
  StateLayout layout;
  uint8_t kind = 0, ext = 0, v_trans = 0;
  uint32_t n_recurrent = 0;
  bool ok = in.Read(kind) && in.Read(layout.attention.streams) && in.Read(ext) &&
            in.Read(v_trans) && in.Read(layout.attention.layers) &&
            in.Read(layout.attention.type) && in.Read(layout.attention.element_bytes) &&
            in.Read(layout.attention.width) && in.Read(layout.recurrent.n_layer) &&
            in.Read(n_recurrent);
  if (!ok || kind > 2 || ext > 2 || v_trans > 1 || n_recurrent > 65536) {
    return Status::InvalidArgument("stored llama.cpp state layout: bad fields");
  }
  layout.kind = static_cast<MemoryKind>(kind);
  layout.attention.ext = static_cast<CellExt>(ext);
  layout.attention.v_trans = v_trans != 0;
  for (uint32_t i = 0; i < n_recurrent; ++i) {
    RecurrentLayer l;
    if (!in.Read(l.r_type) || !in.Read(l.r_bytes) || !in.Read(l.s_type) || !in.Read(l.s_bytes)) {
      return Status::InvalidArgument("stored llama.cpp state layout: cut short");
    }
    layout.recurrent.layers.push_back(l);
  }
  if (in.left() != 0)
    return Status::InvalidArgument("stored llama.cpp state layout: trailing bytes");
  return layout;
}

// --- Parsing ---

namespace {

// The attention cache's section, with or without cell extensions (the state does not say which:
// the caller tries both, and only one parses to the end).
Status ParseAttentionSection(Reader& in, bool with_ext, std::span<const int32_t> tokens,
                             AttentionLayout& layout, std::vector<uint32_t>& cell_of_position,
                             uint32_t& cells_out, std::vector<const uint8_t*>& k,
                             std::vector<const uint8_t*>& v) {
  const uint64_t n = tokens.size();
  if (!in.Read(layout.streams) || layout.streams == 0 || layout.streams > 4096) {
    return Bad("stream count");
  }
  uint32_t cells = 0;
  bool found = false;
  for (uint32_t s = 0; s < layout.streams; ++s) {
    uint32_t count = 0;
    if (!in.Read(count)) return Bad("cell count cut short");
    if (count == 0) continue;
    if (found) return Bad("the sequence's cells are in two streams");
    found = true;
    cells = count;
    if (cells != n) {
      return Bad("the cache holds " + std::to_string(cells) +
                 " cells of the sequence, the tokens are " + std::to_string(n));
    }
    cell_of_position.assign(n, UINT32_MAX);
    // Which of the two text rules every cell's extension fits so far (at position 0 both do).
    bool fits_zero = true, fits_position = true;
    for (uint32_t c = 0; c < cells; ++c) {
      int32_t pos = 0;
      uint32_t n_seq_id = 0;
      if (!in.Read(pos) || !in.Read(n_seq_id)) return Bad("cell cut short");
      if (pos < 0 || static_cast<uint64_t>(pos) >= n || cell_of_position[pos] != UINT32_MAX) {
        return Bad("cell positions are not 0..n-1 once each (a shifted or pruned sequence?)");
      }
      cell_of_position[pos] = c;
      if (n_seq_id != 1) return Bad("a cell of one sequence names " + std::to_string(n_seq_id));
      if (with_ext) {
        CellExtBytes ext;
        if (!in.Read(ext)) return Bad("cell extension cut short");
        if (ext.tok != tokens[pos]) return Bad("a cell holds another token than the prompt's");
        fits_zero = fits_zero && ext.x == 0 && ext.y == 0;
        fits_position = fits_position && ext.x == pos && ext.y == pos;
        if (!fits_zero && !fits_position) {
          return Bad("a cell's 2-D position is not its text position (image input?)");
        }
      }
      int32_t seq = 0;
      if (!in.Read(seq)) return Bad("cell sequence id cut short");
    }
    layout.ext = !with_ext       ? CellExt::kNone
                 : fits_position ? CellExt::kPosition
                                 : CellExt::kZeroPosition;

    uint32_t v_trans = 0;
    if (!in.Read(v_trans) || v_trans > 1 || !in.Read(layout.layers) || layout.layers == 0 ||
        layout.layers > 65536) {
      return Bad("K/V header");
    }
    layout.v_trans = v_trans != 0;
    for (uint32_t l = 0; l < layout.layers; ++l) {
      int32_t type = 0;
      uint64_t row = 0;
      if (!in.Read(type) || !in.Read(row)) return Bad("K header cut short");
      auto element = ElementBytes(type);
      if (!element) {
        return Unsupported("K/V cache type " + std::to_string(type) +
                           " (only f32, f16 and bf16 are stored)");
      }
      if (row == 0 || row % *element != 0) return Bad("K row size");
      if (l == 0) {
        layout.type = type;
        layout.element_bytes = *element;
        layout.width = static_cast<uint32_t>(row / *element);
      } else if (type != layout.type || row != layout.row_bytes()) {
        return Unsupported("attention layers with different K types or widths");
      }
      const uint8_t* rows = in.Take(row * cells);
      if (rows == nullptr) return Bad("K rows cut short");
      k.push_back(rows);
    }
    for (uint32_t l = 0; l < layout.layers; ++l) {
      int32_t type = 0;
      if (!in.Read(type)) return Bad("V header cut short");
      if (type != layout.type) return Unsupported("V's type differs from K's");
      if (!layout.v_trans) {
        uint64_t row = 0;
        if (!in.Read(row)) return Bad("V header cut short");
        if (row != layout.row_bytes()) return Unsupported("V rows wider or narrower than K's");
      } else {
        uint32_t element = 0, width = 0;
        if (!in.Read(element) || !in.Read(width)) return Bad("V header cut short");
        if (element != layout.element_bytes || width != layout.width) {
          return Unsupported("V rows wider or narrower than K's");
        }
      }
      const uint8_t* rows = in.Take(layout.row_bytes() * cells);
      if (rows == nullptr) return Bad("V rows cut short");
      v.push_back(rows);
    }
  }
  if (!found) return Bad("the sequence has no cells in the K/V cache");
  cells_out = cells;
  return Status::Ok();
}

}  // namespace

Result<SequenceState> SequenceState::Parse(std::span<const uint8_t> bytes, MemoryKind kind,
                                           std::span<const int32_t> tokens) {
  if (tokens.empty()) return Bad("no tokens");
  if (tokens.size() > INT32_MAX) return Bad("too many tokens");
  const auto last = static_cast<int32_t>(tokens.size() - 1);
  // The attention section's cells may or may not carry extensions; exactly one reading may parse
  // through to the end of the state.
  std::optional<SequenceState> parsed;
  Status first_error = Status::Ok();
  for (bool with_ext : {false, true}) {
    if (kind == MemoryKind::kRecurrent && with_ext) break;
    SequenceState state;
    state.layout_.kind = kind;
    state.n_tokens_ = tokens.size();
    Reader in(bytes);
    Status st = ReadHeader(in);
    if (st.ok() && kind != MemoryKind::kRecurrent) {
      st = ParseAttentionSection(in, with_ext, tokens, state.layout_.attention,
                                 state.cell_of_position_, state.cells_, state.k_, state.v_);
    }
    if (st.ok() && kind != MemoryKind::kAttention) {
      st = ParseRecurrentSection(in, last, state.layout_.recurrent, state.r_, state.s_);
    }
    if (st.ok() && in.left() != 0) st = Bad(std::to_string(in.left()) + " bytes past the end");
    if (!st.ok()) {
      // A K/V type this code does not store is the answer whichever way the cells read.
      if (st.code() == StatusCode::kInvalidArgument) return st;
      if (first_error.ok()) first_error = st;
      continue;
    }
    if (parsed) return Bad("the state reads two ways (with and without cell extensions)");
    parsed = std::move(state);
  }
  if (!parsed) return first_error;
  return std::move(*parsed);
}

Result<SequenceState> SequenceState::ParseRecurrent(std::span<const uint8_t> bytes,
                                                    int32_t last_position) {
  SequenceState state;
  state.layout_.kind = MemoryKind::kRecurrent;
  state.n_tokens_ = static_cast<uint64_t>(last_position) + 1;
  Reader in(bytes);
  PREFIXD_RETURN_IF_ERROR(ReadHeader(in));
  PREFIXD_RETURN_IF_ERROR(
      ParseRecurrentSection(in, last_position, state.layout_.recurrent, state.r_, state.s_));
  if (in.left() != 0) return Bad(std::to_string(in.left()) + " bytes past the end");
  return state;
}

void SequenceState::AppendRows(uint32_t layer, uint64_t begin, uint64_t end,
                               std::vector<uint8_t>& out) const {
  const size_t at = out.size();
  out.resize(at + RowsBytes(begin, end));
  CopyRows(layer, begin, end, std::span(out).subspan(at));
}

void SequenceState::CopyRows(uint32_t layer, uint64_t begin, uint64_t end,
                             std::span<uint8_t> out) const {
  const AttentionLayout& a = layout_.attention;
  const uint64_t row = a.row_bytes();
  uint8_t* dst = out.data();
  for (uint64_t p = begin; p < end; ++p, dst += row) {
    std::memcpy(dst, k_[layer] + uint64_t{cell_of_position_[p]} * row, row);
  }
  if (!a.v_trans) {
    for (uint64_t p = begin; p < end; ++p, dst += row) {
      std::memcpy(dst, v_[layer] + uint64_t{cell_of_position_[p]} * row, row);
    }
    return;
  }
  // Transposed V: element j of cell c is at (j * cells + c).
  const uint32_t el = a.element_bytes;
  for (uint64_t p = begin; p < end; ++p, dst += row) {
    const uint64_t c = cell_of_position_[p];
    for (uint32_t j = 0; j < a.width; ++j) {
      std::memcpy(dst + uint64_t{j} * el, v_[layer] + (uint64_t{j} * cells_ + c) * el, el);
    }
  }
}

std::vector<uint8_t> SequenceState::RecurrentBlob(size_t i) const {
  std::vector<uint8_t> blob(RecurrentBlobBytes(i));
  CopyRecurrentBlob(i, blob);
  return blob;
}

void SequenceState::CopyRecurrentBlob(size_t i, std::span<uint8_t> out) const {
  const RecurrentLayer& l = layout_.recurrent.layers[i];
  std::memcpy(out.data(), r_[i], l.r_bytes);
  std::memcpy(out.data() + l.r_bytes, s_[i], l.s_bytes);
}

// --- Assembly ---

namespace {

// Writes fields one after another into a buffer of a size computed beforehand.
class Filler {
 public:
  explicit Filler(uint8_t* at) : at_(at) {}
  template <typename T>
  void Put(T value) {
    std::memcpy(at_, &value, sizeof(T));
    at_ += sizeof(T);
  }
  // Leaves `n` bytes for the caller and returns them.
  std::span<uint8_t> Reserve(uint64_t n) {
    std::span<uint8_t> region(at_, n);
    at_ += n;
    return region;
  }
  uint8_t* at() const { return at_; }

 private:
  uint8_t* at_;
};

}  // namespace

uint64_t PlannedStateSize(const StateLayout& layout, uint64_t length) {
  uint64_t size = 8;  // magic, sequence id
  if (layout.has_attention()) {
    const AttentionLayout& a = layout.attention;
    const uint64_t meta = a.ext == CellExt::kNone ? 12 : 24;
    // Each V layer's header is 12 bytes either way: type + row bytes, or type + element + width.
    const uint64_t v_header = 12;
    size += 4 + 4 * uint64_t{a.streams} + length * meta + 8;
    size += uint64_t{a.layers} * (12 + length * a.row_bytes());
    size += uint64_t{a.layers} * (v_header + length * a.row_bytes());
  }
  if (layout.has_recurrent()) {
    size += 4 + 8 + 8;  // cell count, the cell (position, no sequences), s_trans, n_layer
    for (const RecurrentLayer& l : layout.recurrent.layers) size += 24 + l.r_bytes + l.s_bytes;
  }
  return size;
}

Result<StatePlan> PlanState(const StateLayout& layout, int32_t seq, uint64_t length,
                            std::span<const int32_t> tokens, std::span<uint8_t> memory) {
  if (length == 0 || length > tokens.size() || length > INT32_MAX) {
    return Status::InvalidArgument("a state of " + std::to_string(length) +
                                   " tokens from a prompt of " + std::to_string(tokens.size()));
  }
  const uint64_t size = PlannedStateSize(layout, length);
  if (memory.size() < size) {
    return Status::ResourceExhausted("a llama.cpp state of " + std::to_string(size) +
                                     " bytes does not fit in " + std::to_string(memory.size()));
  }
  StatePlan plan;
  plan.bytes = memory.first(size);  // every byte is written here or filled by the caller
  Filler f(plan.bytes.data());
  f.Put(kSequenceMagic);
  f.Put(seq);
  if (layout.has_attention()) {
    const AttentionLayout& a = layout.attention;
    const uint64_t row = a.row_bytes();
    f.Put(a.streams);
    f.Put(static_cast<uint32_t>(length));
    for (uint32_t s = 1; s < a.streams; ++s) f.Put(uint32_t{0});
    for (uint64_t p = 0; p < length; ++p) {
      f.Put(static_cast<int32_t>(p));
      f.Put(uint32_t{1});
      if (a.ext != CellExt::kNone) {
        const int32_t xy = a.ext == CellExt::kPosition ? static_cast<int32_t>(p) : 0;
        f.Put(CellExtBytes{xy, xy, tokens[p]});
      }
      f.Put(int32_t{0});  // the sequence id, which llama.cpp replaces with the destination's
    }
    f.Put(static_cast<uint32_t>(a.v_trans));
    f.Put(a.layers);
    for (uint32_t l = 0; l < a.layers; ++l) {
      f.Put(a.type);
      f.Put(row);
      plan.k.push_back(f.Reserve(length * row));
    }
    for (uint32_t l = 0; l < a.layers; ++l) {
      f.Put(a.type);
      if (a.v_trans) {
        f.Put(a.element_bytes);
        f.Put(a.width);
      } else {
        f.Put(row);
      }
      plan.v.push_back(f.Reserve(length * row));
    }
  }
  if (layout.has_recurrent()) {
    f.Put(uint32_t{1});
    f.Put(static_cast<int32_t>(length - 1));
    f.Put(uint32_t{0});
    f.Put(uint32_t{0});  // not transposed
    f.Put(layout.recurrent.n_layer);
    for (const RecurrentLayer& l : layout.recurrent.layers) {
      f.Put(l.r_type);
      f.Put(l.r_bytes);
      plan.r.push_back(f.Reserve(l.r_bytes));
    }
    for (const RecurrentLayer& l : layout.recurrent.layers) {
      f.Put(l.s_type);
      f.Put(l.s_bytes);
      plan.s.push_back(f.Reserve(l.s_bytes));
    }
  }
  if (f.at() != plan.bytes.data() + plan.bytes.size()) {
    return Status::Internal("a planned llama.cpp state came out at another size than planned");
  }
  return plan;
}

void TransposeV(const AttentionLayout& layout, uint64_t length, std::span<const uint8_t> rows,
                std::span<uint8_t> region) {
  const uint64_t row = layout.row_bytes();
  const uint32_t el = layout.element_bytes;
  for (uint64_t p = 0; p < length; ++p) {
    const uint8_t* src = rows.data() + p * row;
    for (uint32_t j = 0; j < layout.width; ++j) {
      std::memcpy(region.data() + (uint64_t{j} * length + p) * el, src + uint64_t{j} * el, el);
    }
  }
}

Result<std::vector<uint8_t>> AssembleState(
    const StateLayout& layout, int32_t seq, uint64_t length, std::span<const int32_t> tokens,
    std::span<const std::span<const uint8_t>> attention_rows,
    std::span<const std::span<const uint8_t>> recurrent_blobs) {
  if (attention_rows.size() != layout.attention_layers() ||
      recurrent_blobs.size() != layout.recurrent_layers()) {
    return Status::InvalidArgument("assembling a state: wrong number of layers");
  }
  std::vector<uint8_t> out(length <= tokens.size() ? PlannedStateSize(layout, length) : 0);
  PREFIXD_ASSIGN_OR_RETURN(StatePlan plan, PlanState(layout, seq, length, tokens, out));
  for (size_t l = 0; l < attention_rows.size(); ++l) {
    const std::span<const uint8_t> rows = attention_rows[l];
    const uint64_t half = plan.k[l].size();
    if (rows.size() != 2 * half) {
      return Status::InvalidArgument("assembling a state: an attention layer has " +
                                     std::to_string(rows.size()) + " bytes, expected " +
                                     std::to_string(2 * half));
    }
    std::memcpy(plan.k[l].data(), rows.data(), half);
    if (layout.attention.v_trans) {
      TransposeV(layout.attention, length, rows.subspan(half), plan.v[l]);
    } else {
      std::memcpy(plan.v[l].data(), rows.data() + half, half);
    }
  }
  for (size_t i = 0; i < recurrent_blobs.size(); ++i) {
    const std::span<const uint8_t> blob = recurrent_blobs[i];
    if (blob.size() != plan.r[i].size() + plan.s[i].size()) {
      return Status::InvalidArgument("assembling a state: recurrent layer " + std::to_string(i) +
                                     " has " + std::to_string(blob.size()) + " bytes, expected " +
                                     std::to_string(plan.r[i].size() + plan.s[i].size()));
    }
    std::memcpy(plan.r[i].data(), blob.data(), plan.r[i].size());
    std::memcpy(plan.s[i].data(), blob.data() + plan.r[i].size(), plan.s[i].size());
  }
  return out;
}

}  // namespace prefixd::llama
