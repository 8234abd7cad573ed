// The safetensors loader: checkpoints this test writes byte by byte (Qwen3.5 VLM naming, mixed
// F32/BF16/F16, vision and MTP tensors to skip, text-only naming), and every malformed-file case
// the loader must refuse before reading data.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_backend.h"
#include "model.h"
#include "prefixd/float16.h"
#include "weights.h"

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;

struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

Tensor Encode(std::string name, const std::string& dtype, std::vector<int64_t> shape,
              std::span<const float> values) {
  Tensor t{std::move(name), dtype, std::move(shape), {}};
  for (float v : values) {
    if (dtype == "F32") {
      uint8_t b[4];
      std::memcpy(b, &v, 4);
      t.bytes.insert(t.bytes.end(), b, b + 4);
    } else {
      const uint16_t h = dtype == "BF16" ? Fp32ToBf16(v) : Fp32ToFp16(v);
      t.bytes.push_back(static_cast<uint8_t>(h));
      t.bytes.push_back(static_cast<uint8_t>(h >> 8));
    }
  }
  return t;
}

// Writes the container: u64 LE header length, JSON header, data in the given order.
std::string Container(const std::vector<Tensor>& tensors, Json extra_header = Json::object()) {
  Json header = extra_header;
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const Tensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.append(t.bytes.begin(), t.bytes.end());
  }
  const std::string text = header.dump();
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + text + data;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hybrid-st-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  // The tiny model's tensors under `prefix`, with dtypes rotating F32 / BF16 / F16 unless `dtype`
  // is given.
  std::vector<Tensor> TinyTensors(const ModelWeights& w, const std::string& prefix,
                                  const std::string& dtype = "") {
    ModelWeights copy = w;
    std::vector<Tensor> out;
    int i = 0;
    for (const TensorSlot& s : TensorSlots(config_, &copy)) {
      static const char* kTypes[] = {"F32", "BF16", "F16"};
      out.push_back(Encode(prefix + s.name, dtype.empty() ? kTypes[i++ % 3] : dtype, s.shape,
                           s.dest->span()));
    }
    return out;
  }

  std::filesystem::path dir_;
  ModelConfig config_ = *BuiltinConfig("tiny");
};

TEST_F(SafetensorsTest, LoadsAVlmCheckpointWithMixedDtypes) {
  const ModelWeights source = *SyntheticWeights(config_, 21, 2);
  std::vector<Tensor> tensors = TinyTensors(source, "model.language_model.");
  const std::vector<float> junk = {1, 2, 3, 4};
  tensors.push_back(Encode("model.visual.blocks.0.attn.qkv.weight", "F32", {2, 2}, junk));
  tensors.push_back(Encode("mtp.fc.weight", "BF16", {4}, junk));
  const std::string path = Write("model.safetensors", Container(tensors));

  auto loaded = LoadSafetensorsWeights(config_, path, 2);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ModelWeights got = std::move(*loaded), want = source;
  const auto got_slots = TensorSlots(config_, &got);
  const auto want_slots = TensorSlots(config_, &want);
  for (size_t i = 0; i < got_slots.size(); ++i) {
    const std::string& dtype = tensors[i].dtype;
    for (size_t j = 0; j < want_slots[i].dest->size(); ++j) {
      const float v = (*want_slots[i].dest)[j];
      const float expected = dtype == "F32"    ? v
                             : dtype == "BF16" ? Bf16ToFp32(Fp32ToBf16(v))
                                               : Fp16ToFp32(Fp32ToFp16(v));
      ASSERT_EQ((*got_slots[i].dest)[j], expected) << got_slots[i].name << "[" << j << "]";
    }
  }
  EXPECT_TRUE(got.identity.starts_with("safetensors:"));
}

TEST_F(SafetensorsTest, Fp32CheckpointRunsExactlyLikeTheSyntheticWeights) {
  const ModelWeights source = *SyntheticWeights(config_, 22, 2);
  // Text-only naming ("model.layers..."), one shard per half of the tensors, in a directory.
  std::vector<Tensor> tensors = TinyTensors(source, "model.", "F32");
  const size_t half = tensors.size() / 2;
  Write("model-00001-of-00002.safetensors",
        Container({tensors.begin(), tensors.begin() + static_cast<long>(half)}));
  Write("model-00002-of-00002.safetensors",
        Container({tensors.begin() + static_cast<long>(half), tensors.end()}));
  auto loaded = LoadWeights(config_, dir_.string(), 2);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();

  auto a = std::move(*MakeCpuBackend(config_, std::make_shared<ModelWeights>(source)));
  auto b = std::move(*MakeCpuBackend(config_, std::make_shared<ModelWeights>(std::move(*loaded))));
  const std::vector<int32_t> prompt = PseudoRandomTokens(50, config_.vocab_size, 1);
  std::vector<float> la(config_.vocab_size), lb(config_.vocab_size);
  ASSERT_TRUE(a->Forward(prompt, la).ok());
  ASSERT_TRUE(b->Forward(prompt, lb).ok());
  EXPECT_EQ(la, lb);
}

TEST_F(SafetensorsTest, RefusesMalformedFiles) {
  const std::vector<float> four = {1, 2, 3, 4};
  const Tensor good = Encode("a", "F32", {2, 2}, four);
  const std::string ok = Container({good});
  ASSERT_TRUE(SafetensorsFile::Open(Write("ok.safetensors", ok)).ok());

  auto expect_corrupt = [&](const std::string& name, const std::string& bytes,
                            const std::string& needle) {
    auto f = SafetensorsFile::Open(Write(name, bytes));
    ASSERT_FALSE(f.ok()) << name;
    EXPECT_EQ(f.status().code(), StatusCode::kCorruption) << name;
    EXPECT_NE(f.status().message().find(needle), std::string::npos)
        << name << ": " << f.status().message();
  };
  expect_corrupt("short", std::string(5, '\0'), "8-byte");
  std::string huge = ok;
  huge[7] = 0x10;  // header length ~2^60
  expect_corrupt("huge", huge, "100 MB");
  std::string past = ok;
  past[0] = static_cast<char>(0xff);
  past[1] = 0x7f;  // 32767 > file
  expect_corrupt("past", past, "past the end");
  expect_corrupt("truncated", ok.substr(0, ok.size() - 1), "outside");
  std::string not_json = ok;
  not_json[8] = '[';
  expect_corrupt("notjson", not_json, "JSON");
  expect_corrupt("dtype",
                 Container({Encode("a", "F32", {2, 2}, four)}).replace(ok.find("F32"), 3, "Q32"),
                 "unknown dtype");
  Tensor wrong_size = good;
  wrong_size.shape = {2, 3};
  expect_corrupt("size", Container({wrong_size}), "needs 24");
  // Two tensors claiming the same bytes.
  Json overlap;
  overlap["a"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}};
  overlap["b"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}};
  const std::string text = overlap.dump();
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(text.size());
  expect_corrupt("overlap", bytes + text + std::string(16, '\0'), "overlap");
  Json negative;
  negative["a"] = {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 0}}};
  const std::string neg_text = negative.dump();
  std::string neg(8, '\0');
  neg[0] = static_cast<char>(neg_text.size());
  expect_corrupt("negative", neg + neg_text, "non-natural");
}

TEST_F(SafetensorsTest, RefusesMissingOrMisshapenTensors) {
  const ModelWeights source = *SyntheticWeights(config_, 23, 2);
  std::vector<Tensor> tensors = TinyTensors(source, "model.language_model.");
  std::vector<Tensor> missing(tensors.begin() + 1, tensors.end());
  auto r = LoadSafetensorsWeights(config_, Write("missing.safetensors", Container(missing)), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("embed_tokens"), std::string::npos);

  std::vector<Tensor> misshapen = tensors;
  misshapen[0].shape = {config_.hidden_size, config_.vocab_size};  // transposed
  r = LoadSafetensorsWeights(config_, Write("shape.safetensors", Container(misshapen)), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("shape"), std::string::npos);

  // Integer tensors are valid containers but not weights.
  std::vector<Tensor> ints = TinyTensors(source, "model.language_model.", "F32");
  ints[1].dtype = "I32";
  r = LoadSafetensorsWeights(config_, Write("ints.safetensors", Container(ints)), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("I32"), std::string::npos);
}

}  // namespace
}  // namespace prefixd::hybrid
