#include "weights.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "prefixd/float16.h"
#include "thread_pool.h"

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr std::string_view kTextPrefix = "model.language_model.";
constexpr std::string_view kTextOnlyPrefix = "model.";
constexpr std::string_view kMambaPrefix = "backbone.";
// The safetensors reference refuses headers over 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string ShapeText(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t Product(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- Synthetic weights ----------------------------------------------------------------------

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from the top 24 bits: exact in fp32.
float Unit(uint64_t bits) { return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f); }

void Synthesise(const TensorSlot& slot, uint64_t seed, int64_t begin, int64_t end) {
  const uint64_t base = XXH3_64bits_withSeed(slot.name.data(), slot.name.size(), seed);
  float* out = slot.dest->data();
  const int64_t fan_in = slot.shape.empty() ? 1 : slot.shape.back();
  const double sqrt3 = std::sqrt(3.0);
  // Uniform(-a, a) has std a / sqrt(3).
  float half_width = 0.0f;
  float center = 0.0f;
  switch (slot.init) {
    case InitKind::kLinear:
      half_width = static_cast<float>(sqrt3 * slot.gain / std::sqrt(static_cast<double>(fan_in)));
      break;
    case InitKind::kEmbedding:
      half_width = static_cast<float>(sqrt3 * 0.02);
      break;
    case InitKind::kZeroCentredNorm:
    case InitKind::kBias:
      half_width = 0.05f;
      break;
    case InitKind::kUnitInterval:
      half_width = 0.5f;
      center = 0.5f;
      break;
    case InitKind::kPlainNorm:
      half_width = 0.05f;
      center = 1.0f;
      break;
    case InitKind::kConv:
      half_width = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
      break;
    case InitKind::kALog:
    case InitKind::kDtBias:
      break;
  }
  for (int64_t i = begin; i < end; ++i) {
    const float u = Unit(SplitMix64(base + static_cast<uint64_t>(i)));
    switch (slot.init) {
      case InitKind::kALog:
        out[i] = std::log(1.0f + 15.0f * u);
        break;
      case InitKind::kDtBias: {
        const double dt = std::exp(std::log(1e-3) + u * (std::log(1e-1) - std::log(1e-3)));
        out[i] = static_cast<float>(dt + std::log(-std::expm1(-dt)));
        break;
      }
      default:
        out[i] = center + half_width * (2.0f * u - 1.0f);
    }
  }
}

// ---- safetensors ----------------------------------------------------------------------------

std::optional<int> DTypeSize(std::string_view dtype) {
  static const std::map<std::string_view, int> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = kSizes.find(dtype);
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

Status PreadAll(int fd, uint64_t offset, void* dst, size_t n, const std::string& path) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const ssize_t got =
        ::pread(fd, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::IoError("reading " + path + ": " + std::strerror(errno));
    }
    if (got == 0) return Status::Corruption(path + ": file shorter than its header says");
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

Status Bad(const std::string& path, const std::string& what) {
  return Status::Corruption("safetensors " + path + ": " + what);
}

}  // namespace

size_t ModelWeights::bytes() const {
  size_t n = embed.bytes() + final_norm.bytes() + lm_head.bytes() + final_norm_bias.bytes();
  for (const LayerWeights& l : layers) {
    for (const FloatBuffer* b :
         {&l.input_norm,       &l.post_norm,          &l.mlp_gate,         &l.mlp_up,
          &l.mlp_down,         &l.linear.in_proj_qkv, &l.linear.in_proj_z, &l.linear.in_proj_b,
          &l.linear.in_proj_a, &l.linear.conv1d,      &l.linear.a_log,     &l.linear.dt_bias,
          &l.linear.norm,      &l.linear.out_proj,    &l.attn.q_proj,      &l.attn.k_proj,
          &l.attn.v_proj,      &l.attn.o_proj,        &l.attn.q_norm,      &l.attn.k_norm}) {
      n += b->bytes();
    }
    for (const FloatBuffer* b : FamilyLayerBuffers(l)) n += b->bytes();
  }
  return n;
}

std::vector<TensorSlot> TensorSlots(const ModelConfig& c, ModelWeights* w) {
  if (c.family != ModelFamily::kQwen35) return FamilyTensorSlots(c, w);
  std::vector<TensorSlot> slots;
  const int64_t hidden = c.hidden_size;
  auto add = [&](std::string name, std::vector<int64_t> shape, FloatBuffer* dest, InitKind init,
                 float gain = 1.0f) {
    slots.push_back({std::move(name), std::move(shape), dest, init, gain});
  };
  add("embed_tokens.weight", {c.vocab_size, hidden}, &w->embed, InitKind::kEmbedding);
  w->layers.resize(static_cast<size_t>(c.num_layers()));
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    l.kind = c.layers[static_cast<size_t>(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {hidden}, &l.input_norm, InitKind::kZeroCentredNorm);
    if (l.kind == LayerKind::kLinear) {
      const std::string a = p + "linear_attn.";
      const int64_t hv = c.linear_num_value_heads;
      add(a + "in_proj_qkv.weight", {c.conv_dim(), hidden}, &l.linear.in_proj_qkv,
          InitKind::kLinear);
      add(a + "in_proj_z.weight", {c.value_dim(), hidden}, &l.linear.in_proj_z, InitKind::kLinear);
      add(a + "in_proj_b.weight", {hv, hidden}, &l.linear.in_proj_b, InitKind::kLinear);
      add(a + "in_proj_a.weight", {hv, hidden}, &l.linear.in_proj_a, InitKind::kLinear);
      add(a + "conv1d.weight", {c.conv_dim(), 1, c.linear_conv_kernel_dim}, &l.linear.conv1d,
          InitKind::kConv);
      add(a + "A_log", {hv}, &l.linear.a_log, InitKind::kALog);
      add(a + "dt_bias", {hv}, &l.linear.dt_bias, InitKind::kDtBias);
      add(a + "norm.weight", {c.linear_value_head_dim}, &l.linear.norm, InitKind::kPlainNorm);
      add(a + "out_proj.weight", {hidden, c.value_dim()}, &l.linear.out_proj, InitKind::kLinear,
          0.5f);
    } else {
      const std::string a = p + "self_attn.";
      const int64_t hd = c.num_attention_heads * c.head_dim;
      add(a + "q_proj.weight", {c.q_proj_dim(), hidden}, &l.attn.q_proj, InitKind::kLinear);
      add(a + "k_proj.weight", {c.kv_dim(), hidden}, &l.attn.k_proj, InitKind::kLinear);
      add(a + "v_proj.weight", {c.kv_dim(), hidden}, &l.attn.v_proj, InitKind::kLinear);
      add(a + "o_proj.weight", {hidden, hd}, &l.attn.o_proj, InitKind::kLinear, 0.5f);
      add(a + "q_norm.weight", {c.head_dim}, &l.attn.q_norm, InitKind::kZeroCentredNorm);
      add(a + "k_norm.weight", {c.head_dim}, &l.attn.k_norm, InitKind::kZeroCentredNorm);
    }
    add(p + "post_attention_layernorm.weight", {hidden}, &l.post_norm, InitKind::kZeroCentredNorm);
    add(p + "mlp.gate_proj.weight", {c.intermediate_size, hidden}, &l.mlp_gate, InitKind::kLinear);
    add(p + "mlp.up_proj.weight", {c.intermediate_size, hidden}, &l.mlp_up, InitKind::kLinear);
    add(p + "mlp.down_proj.weight", {hidden, c.intermediate_size}, &l.mlp_down, InitKind::kLinear,
        0.5f);
  }
  add("norm.weight", {hidden}, &w->final_norm, InitKind::kZeroCentredNorm);
  if (!c.tie_word_embeddings) {
    add("lm_head.weight", {c.vocab_size, hidden}, &w->lm_head, InitKind::kEmbedding);
  }
  return slots;
}

Result<ModelWeights> SyntheticWeights(const ModelConfig& config, uint64_t seed, int threads) {
  PREFIXD_RETURN_IF_ERROR(config.Validate());
  ModelWeights w;
  std::vector<TensorSlot> slots = TensorSlots(config, &w);
  // Work items of at most 1M elements, so a 1 GB embedding spreads over every thread.
  constexpr int64_t kBlock = int64_t{1} << 20;
  struct Item {
    size_t slot;
    int64_t begin;
    int64_t end;
  };
  std::vector<Item> items;
  for (size_t s = 0; s < slots.size(); ++s) {
    const int64_t n = Product(slots[s].shape);
    slots[s].dest->Resize(static_cast<size_t>(n), /*zero=*/false);
    for (int64_t b = 0; b < n; b += kBlock) items.push_back({s, b, std::min(n, b + kBlock)});
  }
  ThreadPool pool(std::max(threads, 1));
  pool.For(static_cast<int64_t>(items.size()), [&](int64_t i) {
    const Item& item = items[static_cast<size_t>(i)];
    Synthesise(slots[item.slot], seed, item.begin, item.end);
  });
  w.identity = "synthetic:v1:seed=" + std::to_string(seed);
  return w;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    file_size_ = other.file_size_;
    data_start_ = other.data_start_;
    header_ = std::move(other.header_);
    tensors_ = std::move(other.tensors_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) return Status::IoError("opening " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0)
    return Status::IoError("stat " + path + ": " + std::strerror(errno));
  f.file_size_ = static_cast<uint64_t>(st.st_size);
  if (f.file_size_ < 8) return Bad(path, "shorter than the 8-byte header length");
  uint8_t len_bytes[8];
  PREFIXD_RETURN_IF_ERROR(PreadAll(f.fd_, 0, len_bytes, 8, path));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  if (header_len > kMaxHeaderBytes) {
    return Bad(path, "header length " + std::to_string(header_len) + " is over the 100 MB limit");
  }
  if (header_len > f.file_size_ - 8) {
    return Bad(path, "header length " + std::to_string(header_len) + " runs past the end of the " +
                         std::to_string(f.file_size_) + "-byte file");
  }
  f.header_.resize(static_cast<size_t>(header_len));
  PREFIXD_RETURN_IF_ERROR(PreadAll(f.fd_, 8, f.header_.data(), f.header_.size(), path));
  f.data_start_ = 8 + header_len;
  const uint64_t data_size = f.file_size_ - f.data_start_;

  Json header = Json::parse(f.header_, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return Bad(path, "header is not a JSON object");
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "tensor '" + name + "': ";
    if (!entry.is_object()) return Bad(path, where + "entry is not an object");
    auto dtype = entry.find("dtype");
    auto shape = entry.find("shape");
    auto offsets = entry.find("data_offsets");
    if (dtype == entry.end() || !dtype->is_string()) return Bad(path, where + "no string dtype");
    if (shape == entry.end() || !shape->is_array()) return Bad(path, where + "no shape array");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
      return Bad(path, where + "data_offsets is not [begin, end]");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = dtype->get<std::string>();
    const std::optional<int> elem = DTypeSize(t.dtype);
    if (!elem.has_value()) return Bad(path, where + "unknown dtype '" + t.dtype + "'");
    uint64_t bytes = static_cast<uint64_t>(*elem);
    for (const Json& d : *shape) {
      if (!d.is_number_unsigned()) return Bad(path, where + "shape has a non-natural dimension");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && bytes > std::numeric_limits<uint64_t>::max() / dim) {
        return Bad(path, where + "shape overflows 64 bits");
      }
      bytes *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    for (const Json& o : *offsets) {
      if (!o.is_number_unsigned()) return Bad(path, where + "data_offsets are not naturals");
    }
    t.begin = (*offsets)[0].get<uint64_t>();
    t.end = (*offsets)[1].get<uint64_t>();
    if (t.begin > t.end || t.end > data_size) {
      return Bad(path, where + "data_offsets [" + std::to_string(t.begin) + ", " +
                           std::to_string(t.end) + ") outside the " + std::to_string(data_size) +
                           "-byte data section");
    }
    if (t.end - t.begin != bytes) {
      return Bad(path, where + "data_offsets cover " + std::to_string(t.end - t.begin) +
                           " bytes but " + t.dtype + " " + ShapeText(t.shape) + " needs " +
                           std::to_string(bytes));
    }
    f.tensors_.push_back(std::move(t));
  }
  std::vector<const SafetensorsTensor*> by_offset;
  for (const SafetensorsTensor& t : f.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) {
    return a->begin < b->begin || (a->begin == b->begin && a->end < b->end);
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      return Bad(path, "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                           "' overlap");
    }
  }
  return f;
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  for (const SafetensorsTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Status SafetensorsFile::ReadAsFloat32(const SafetensorsTensor& t, std::span<float> out) const {
  const uint64_t n = static_cast<uint64_t>(Product(t.shape));
  if (out.size() != n) {
    return Status::InvalidArgument("tensor '" + t.name + "' has " + std::to_string(n) +
                                   " elements, the buffer " + std::to_string(out.size()));
  }
  const uint64_t offset = data_start_ + t.begin;
  if (t.dtype == "F32") return PreadAll(fd_, offset, out.data(), n * 4, path_);
  if (t.dtype != "F16" && t.dtype != "BF16") {
    return Status::InvalidArgument("tensor '" + t.name + "' is " + t.dtype +
                                   "; only F32, F16 and BF16 load as weights");
  }
  // Converted in 4 MB pieces so a 1 GB embedding needs no second full-size buffer.
  constexpr uint64_t kPiece = uint64_t{1} << 21;
  std::vector<uint16_t> half(static_cast<size_t>(std::min(n, kPiece)));
  const bool bf16 = t.dtype == "BF16";
  for (uint64_t done = 0; done < n;) {
    const uint64_t count = std::min(kPiece, n - done);
    PREFIXD_RETURN_IF_ERROR(PreadAll(fd_, offset + done * 2, half.data(), count * 2, path_));
    for (uint64_t i = 0; i < count; ++i) {
      out[done + i] = bf16 ? Bf16ToFp32(half[i]) : Fp16ToFp32(half[i]);
    }
    done += count;
  }
  return Status::Ok();
}

Result<ModelWeights> LoadSafetensorsWeights(const ModelConfig& config, const std::string& path,
                                            int threads) {
  PREFIXD_RETURN_IF_ERROR(config.Validate());
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) return Status::NotFound("no .safetensors files in " + path);
  } else {
    files.push_back(path);
  }
  std::vector<SafetensorsFile> opened;
  // Which file and entry holds each name; a name in two shards is ambiguous.
  std::map<std::string, std::pair<size_t, const SafetensorsTensor*>> index;
  XXH3_state_t* digest = XXH3_createState();
  XXH3_64bits_reset(digest);
  for (const std::string& file : files) {
    PREFIXD_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(file));
    const uint64_t size = f.file_size();
    XXH3_64bits_update(digest, f.header().data(), f.header().size());
    XXH3_64bits_update(digest, &size, sizeof(size));
    opened.push_back(std::move(f));
  }
  const uint64_t identity = XXH3_64bits_digest(digest);
  XXH3_freeState(digest);
  for (size_t i = 0; i < opened.size(); ++i) {
    for (const SafetensorsTensor& t : opened[i].tensors()) {
      if (!index.emplace(t.name, std::make_pair(i, &t)).second) {
        return Status::Corruption("tensor '" + t.name + "' appears in two checkpoint files");
      }
    }
  }

  ModelWeights w;
  std::vector<TensorSlot> slots = TensorSlots(config, &w);
  std::vector<std::pair<size_t, const SafetensorsTensor*>> sources;
  for (const TensorSlot& slot : slots) {
    std::vector<std::string> candidates;
    if (slot.name == "lm_head.weight") {
      candidates = {"lm_head.weight", std::string(kTextPrefix) + "lm_head.weight"};
    } else {
      candidates = {std::string(kTextPrefix) + slot.name, std::string(kTextOnlyPrefix) + slot.name,
                    std::string(kMambaPrefix) + slot.name};
    }
    auto found = index.end();
    for (const std::string& name : candidates) {
      found = index.find(name);
      if (found != index.end()) break;
    }
    if (found == index.end()) {
      return Status::NotFound("checkpoint " + path + " has no tensor '" + candidates[0] + "'");
    }
    const SafetensorsTensor& t = *found->second.second;
    if (t.shape != slot.shape) {
      return Status::InvalidArgument("tensor '" + t.name + "' has shape " + ShapeText(t.shape) +
                                     ", the config needs " + ShapeText(slot.shape));
    }
    sources.push_back(found->second);
  }
  ThreadPool pool(std::max(threads, 1));
  std::vector<Status> results(slots.size());
  pool.For(static_cast<int64_t>(slots.size()), [&](int64_t i) {
    const TensorSlot& slot = slots[static_cast<size_t>(i)];
    const auto& [file, tensor] = sources[static_cast<size_t>(i)];
    slot.dest->Resize(static_cast<size_t>(Product(slot.shape)), /*zero=*/false);
    results[static_cast<size_t>(i)] = opened[file].ReadAsFloat32(*tensor, slot.dest->span());
  });
  for (Status& st : results) PREFIXD_RETURN_IF_ERROR(std::move(st));
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(identity));
  w.identity = std::string("safetensors:") + hex;
  return w;
}

Result<ModelWeights> LoadWeights(const ModelConfig& config, std::string_view spec, int threads) {
  if (spec == "synthetic") return SyntheticWeights(config, 0, threads);
  if (spec.starts_with("synthetic:")) {
    const std::string seed_text(spec.substr(10));
    char* end = nullptr;
    errno = 0;
    const unsigned long long seed = std::strtoull(seed_text.c_str(), &end, 10);
    if (seed_text.empty() || *end != '\0' || errno != 0) {
      return Status::InvalidArgument("bad synthetic seed '" + seed_text + "'");
    }
    return SyntheticWeights(config, seed, threads);
  }
  return LoadSafetensorsWeights(config, std::string(spec), threads);
}

}  // namespace prefixd::hybrid
