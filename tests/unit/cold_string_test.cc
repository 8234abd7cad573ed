// The keyspace's disk tier for strings: a large value goes cold only once the log placed it and
// its bytes are durable; a small one never (it is deleted instead); a write after the place
// was taken, or a new value, drops the place; a cold value reads back bit-exact, whole or in
// part, and is promoted only while still at the place it was read from; the figures follow.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "store/keyspace.h"

namespace prefixd::store {
namespace {

// A file in memory whose durable end the test moves.
class MemoryFile : public ColdFile {
 public:
  bool Read(uint64_t offset, uint64_t length, Bytes& out, std::string& error) const override {
    if (offset + length > bytes.size()) {
      error = "past the end";
      return false;
    }
    out = Bytes::CopyOf(std::string_view(bytes).substr(offset, length));
    return true;
  }
  std::string bytes;
};

constexpr size_t kLarge = KeyEntry::kInlineValueBelow;

std::string Pattern(size_t size, char seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

class StringDiskTier : public ::testing::Test {
 protected:
  // Puts `value` under `key` and "logs" it: its bytes appended to the file at a 100-byte
  // header's distance; returns where the value sits. The buffer is held, as the log's record
  // holds it until it is placed (so its address is not reused meanwhile).
  uint64_t PutAndLog(const std::string& key, const std::string& value) {
    Bytes b = Bytes::CopyOf(value);
    data_ = b.data();
    logged_.push_back(b);
    keys_.PutString(key, b, StringEncoding::kRaw, KeepTtl::kNo, 0, {});
    file_->bytes.append(100, 'h');
    const uint64_t at = file_->bytes.size();
    file_->bytes.append(value);
    return at;
  }
  std::string Read(const StringPlace& place, uint64_t offset, uint64_t length) {
    Bytes out;
    std::string error;
    EXPECT_TRUE(keys_.ReadColdString(place, offset, length, out, error)) << error;
    return std::string(out.view());
  }

  Keyspace keys_;
  std::shared_ptr<MemoryFile> file_ = std::make_shared<MemoryFile>();
  const uint8_t* data_ = nullptr;
  std::vector<Bytes> logged_;
};

TEST_F(StringDiskTier, OnlyAPlacedDurableLargeValueGoesCold) {
  const std::string value = Pattern(kLarge, 'a');
  const uint64_t at = PutAndLog("k", value);
  EXPECT_EQ(keys_.MakeStringCold("k"), StringCold::kNotPlaced);
  keys_.PlaceString("k", data_, file_, at);
  EXPECT_EQ(keys_.MakeStringCold("k"), StringCold::kNotDurable);
  file_->MarkDurable(at + value.size() - 1);  // one byte short
  EXPECT_EQ(keys_.MakeStringCold("k"), StringCold::kNotDurable);
  EXPECT_FALSE(keys_.Find("k")->cold);
  const uint64_t memory = keys_.MemoryBytes();
  file_->MarkDurable(at + value.size());
  EXPECT_EQ(keys_.MakeStringCold("k"), StringCold::kCold);
  EXPECT_EQ(keys_.MakeStringCold("k"), StringCold::kNotEligible);  // already cold
  EXPECT_LE(keys_.MemoryBytes() + kLarge, memory) << "the value left memory";
  auto info = keys_.Find("k");
  ASSERT_TRUE(info && info->cold);
  EXPECT_TRUE(info->value.empty());
  EXPECT_EQ(info->place.length, value.size());
  EXPECT_EQ(keys_.ColdStringBytes(), value.size());
  EXPECT_EQ(keys_.Stats(0).string_bytes, 0u);
  EXPECT_EQ(keys_.Stats(0).cold_keys, 1u);
  // Bit-exact, whole or any part; a range past the value is refused.
  EXPECT_EQ(Read(info->place, 0, value.size()), value);
  EXPECT_EQ(Read(info->place, 5, 100), value.substr(5, 100));
  EXPECT_EQ(Read(info->place, value.size(), 0), "");
  Bytes out;
  std::string error;
  EXPECT_FALSE(keys_.ReadColdString(info->place, 1, value.size(), out, error));
  EXPECT_EQ(keys_.Stats(0).cold_string_bytes_read, value.size() + 100);
}

TEST_F(StringDiskTier, ASmallValueIsNeverPlacedNorCold) {
  const uint64_t at = PutAndLog("small", Pattern(kLarge - 1, 'b'));
  keys_.PlaceString("small", data_, file_, at);
  file_->MarkDurable(ColdFile::kAllDurable);
  EXPECT_EQ(keys_.MakeStringCold("small"), StringCold::kNotEligible);
  EXPECT_EQ(keys_.MakeStringCold("missing"), StringCold::kNotEligible);
}

TEST_F(StringDiskTier, ANewValueDropsThePlaceAndAStalePlaceIsNotTaken) {
  const uint64_t first = PutAndLog("k", Pattern(kLarge, 'c'));
  const uint8_t* first_data = data_;
  PutAndLog("k", Pattern(kLarge + 1, 'd'));          // its record is not placed yet
  keys_.PlaceString("k", first_data, file_, first);  // the old value's place arrives late
  file_->MarkDurable(ColdFile::kAllDurable);
  EXPECT_EQ(keys_.MakeStringCold("k"), StringCold::kNotPlaced);
}

TEST_F(StringDiskTier, PromotionTakesBackOnlyTheValueAtThePlaceItWasReadFrom) {
  const std::string value = Pattern(kLarge * 2, 'e');
  const uint64_t at = PutAndLog("k", value);
  keys_.PlaceString("k", data_, file_, at);
  file_->MarkDurable(ColdFile::kAllDurable);
  ASSERT_EQ(keys_.MakeStringCold("k"), StringCold::kCold);
  const StringPlace place = keys_.Find("k")->place;
  // Moved meanwhile (a snapshot's copy): the read from the old place is not taken back.
  auto snapshot = std::make_shared<MemoryFile>();
  snapshot->bytes = value;
  snapshot->MarkDurable(ColdFile::kAllDurable);  // as a snapshot is once renamed into place
  keys_.RepointString("k", file_.get(), at, snapshot, 0);
  EXPECT_FALSE(keys_.PromoteString("k", place, Bytes::CopyOf(value)));
  const StringPlace moved = keys_.Find("k")->place;
  EXPECT_EQ(moved.file, snapshot);
  EXPECT_EQ(Read(moved, 0, value.size()), value);
  EXPECT_TRUE(keys_.PromoteString("k", moved, Bytes::CopyOf(value)));
  auto info = keys_.Find("k");
  EXPECT_FALSE(info->cold);
  EXPECT_EQ(std::string(info->value.view()), value);
  EXPECT_EQ(keys_.ColdStringBytes(), 0u);
  EXPECT_EQ(keys_.Stats(0).string_promotions, 1u);
  // Its place stays: it may go cold again without a new record.
  EXPECT_EQ(keys_.MakeStringCold("k"), StringCold::kCold);
}

TEST_F(StringDiskTier, ColdKeysAreRemovedOverwrittenAndRecoveredWithTheirFigures) {
  const std::string value = Pattern(kLarge, 'f');
  const uint64_t at = PutAndLog("k", value);
  keys_.PlaceString("k", data_, file_, at);
  file_->MarkDurable(ColdFile::kAllDurable);
  ASSERT_EQ(keys_.MakeStringCold("k"), StringCold::kCold);
  keys_.PutString("k", Bytes::CopyOf("tiny"), StringEncoding::kEmbstr, KeepTtl::kYes, 0, {});
  EXPECT_FALSE(keys_.Find("k")->cold);
  EXPECT_EQ(keys_.ColdStringBytes(), 0u);
  // A snapshot's cold record: the key exists cold with its expiry, nothing read.
  keys_.PutColdString("r", StringEncoding::kRaw, 123456789, StringPlace{file_, at, value.size()});
  auto info = keys_.Find("r");
  ASSERT_TRUE(info && info->cold);
  EXPECT_EQ(info->expire_at_ms, 123456789);
  EXPECT_EQ(Read(info->place, 0, value.size()), value);
  EXPECT_EQ(keys_.ColdStringBytes(), value.size());
  EXPECT_TRUE(keys_.RemoveString("r", {}));
  EXPECT_EQ(keys_.ColdStringBytes(), 0u);
  EXPECT_EQ(keys_.Stats(0).cold_keys, 0u);
  keys_.PutColdString("r", StringEncoding::kRaw, 0, StringPlace{file_, at, value.size()});
  keys_.Clear();
  EXPECT_EQ(keys_.ColdStringBytes(), 0u);
  EXPECT_EQ(keys_.MemoryBytes(), 0u);
}

TEST_F(StringDiskTier, AParkedSmallStringKeepsItsValueInTheColdIndex) {
  keys_.PutString("meta", Bytes::CopyOf(Pattern(28, 'g')), StringEncoding::kEmbstr, KeepTtl::kNo, 0,
                  {});
  const uint64_t memory = keys_.MemoryBytes();
  constexpr uint64_t kNoCap = uint64_t{1} << 40;
  EXPECT_FALSE(keys_.ParkString("meta", 64)) << "past the cap on parked memory";
  EXPECT_EQ(keys_.ParkedBytes(), 0u);
  EXPECT_TRUE(keys_.ParkString("meta", kNoCap));
  const uint64_t parked = keys_.ParkedBytes();
  EXPECT_GT(parked, 28u);
  EXPECT_FALSE(keys_.ParkString("meta", kNoCap)) << "already parked";
  EXPECT_FALSE(keys_.ParkString("missing", kNoCap));
  auto info = keys_.Find("meta");
  ASSERT_TRUE(info && info->cold);
  EXPECT_EQ(std::string(info->value.view()), Pattern(28, 'g'));
  EXPECT_EQ(info->place.file, nullptr);
  EXPECT_EQ(keys_.MemoryBytes(), memory) << "parking frees nothing and costs nothing";
  EXPECT_EQ(keys_.ColdStringBytes(), 0u);
  EXPECT_FALSE(keys_.PickVictim(EvictionPolicy::kAllKeysLru)) << "memory eviction passes it by";
  EXPECT_EQ(keys_.PickColdVictim(EvictionPolicy::kAllKeysLru)->first, "meta");
  // A write brings it back to the hot index.
  keys_.PutString("meta", Bytes::CopyOf("new"), StringEncoding::kEmbstr, KeepTtl::kNo, 0, {});
  EXPECT_FALSE(keys_.Find("meta")->cold);
  EXPECT_EQ(keys_.ParkedBytes(), 0u);
  // Parked again, then deleted: nothing stays counted.
  EXPECT_TRUE(keys_.ParkString("meta", kNoCap));
  EXPECT_GT(keys_.ParkedBytes(), 0u);
  EXPECT_TRUE(keys_.RemoveString("meta", {}));
  EXPECT_EQ(keys_.ParkedBytes(), 0u);
  // A parked key that becomes another type leaves the count too.
  keys_.PutString("meta", Bytes::CopyOf(Pattern(28, 'g')), StringEncoding::kEmbstr, KeepTtl::kNo, 0,
                  {});
  EXPECT_TRUE(keys_.ParkString("meta", kNoCap));
  keys_.Set("meta", KeyType::kSsmPrefix);
  EXPECT_EQ(keys_.ParkedBytes(), 0u);
  keys_.Remove("meta");
  // A large value is not parked (it goes cold instead).
  PutAndLog("large", Pattern(kLarge, 'h'));
  EXPECT_FALSE(keys_.ParkString("large", kNoCap));
  EXPECT_EQ(keys_.LargeStringBytes(), keys_.Stats(0).string_bytes) << "the only string left";
}

}  // namespace
}  // namespace prefixd::store
