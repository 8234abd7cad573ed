// The DUMP payload without a server: every key type's records (persist/key_records.h) framed,
// decoded under another name and applied to other stores give back the same records byte for
// byte; the decoder refuses a bad footer and every payload that does not recreate exactly one
// key in the order KeyRecords writes it.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <string>
#include <vector>

#include "persist/dump_payload.h"
#include "persist/key_records.h"
#include "persist/log_format.h"
#include "persist/mutation.h"

namespace prefixd::persist {
namespace {

struct Db {
  store::StateStore state;
  store::VectorStore vectors;
  store::PrefixStore prefixes;
  store::Keyspace keys;
  Stores stores() { return Stores{state, &vectors, 0, &keys, &prefixes}; }
  KeyStores key_stores() const { return KeyStores{state, vectors, prefixes}; }
  void Apply(const Mutation& m) {
    ASSERT_TRUE(Check(m, Limits::Hard()).ok) << Describe(m);
    persist::Apply(m, stores(), {});
  }
  std::vector<Mutation> Records(const std::string& key) const {
    std::vector<Mutation> out;
    auto info = keys.Find(key);
    EXPECT_TRUE(info.has_value()) << key;
    if (info) EXPECT_TRUE(KeyRecords(key_stores(), key, *info, out)) << key;
    return out;
  }
};

std::string Flat(const std::vector<Bytes>& pieces) {
  std::string out;
  for (const Bytes& p : pieces) out.append(p.view());
  return out;
}

Bytes Rows(size_t bytes, char fill) { return Bytes::CopyOf(std::string(bytes, fill)); }

void MakeEveryType(Db& db) {
  db.Apply(StringSet{"str", 0, 0, Blob{{Bytes::CopyOf("value")}}});
  db.Apply(SsmPut{"ssm", {{0, Bytes::CopyOf("a")}, {5, Bytes()}, {9, Rows(40000, 'z')}}});
  db.Apply(VCreate{"vec", 7, 2, 8});
  db.Apply(VStore{"vec", 0, 0, 2, 2, 8, Blob{{Rows(16, 'v')}}});
  db.Apply(VStore{"vec", 3, 1000, 1, 2, 8, Blob{{Rows(8, 'w')}}});
  KvRegister reg;
  reg.ns = "kv", reg.key_index = 8, reg.value_index = 9, reg.kv_dim = 2, reg.tier = 8;
  db.Apply(reg);
  db.Apply(VStore{"kv_pk", 0, 0, 1, 2, 8, Blob{{Rows(8, 'k')}}});
  db.Apply(SsmPut{"kv", {{1, Bytes::CopyOf("state")}}});
  db.Apply(PrefixNamespace{"idx", 2, 1, 2, 1, 8, 0});
  PrefixBlocks blocks{"idx",
                      std::string(16, '\0'),
                      Blob{{Bytes::CopyOf(std::string(16, 'h'))}},
                      {{0, Rows(32, 'b')}}};
  db.Apply(blocks);
}

TEST(DumpPayloadTest, EveryTypeRoundTripsUnderANewName) {
  Db source, target;
  MakeEveryType(source);
  // registration, its SSM state, `kv_pk` created with its rows, `kv_pv` created
  EXPECT_EQ(source.Records("kv").size(), 5u);
  EXPECT_EQ(source.Records("vec").size(), 3u);  // one record per stored run
  EXPECT_EQ(source.Records("idx").size(), 2u);
  for (const std::string key : {"str", "ssm", "vec", "kv", "idx"}) {
    SCOPED_TRACE(key);
    const std::string payload = Flat(EncodeDump(source.Records(key)));
    DecodedDump dump;
    ASSERT_EQ(DecodeDump(Bytes::CopyOf(payload), "new:" + key, dump), DumpStatus::kOk) << dump.why;
    EXPECT_EQ(dump.original_key, key);
    EXPECT_EQ(dump.type, source.keys.Find(key)->type);
    for (const Mutation& m : dump.records) target.Apply(m);
    // What the target now holds under the new name is what the payload said, byte for byte.
    EXPECT_EQ(Flat(EncodeDump(target.Records("new:" + key))), Flat(EncodeDump(dump.records)));
    EXPECT_EQ(target.keys.Find("new:" + key)->type, dump.type);
  }
  DecodedDump kv;
  ASSERT_EQ(DecodeDump(Bytes::CopyOf(Flat(EncodeDump(source.Records("kv")))), "n", kv),
            DumpStatus::kOk);
  EXPECT_EQ(kv.keys, (std::vector<std::string>{"n", "n_pk", "n_pv"}));
  EXPECT_EQ(target.keys.Find("new:kv_pk")->type, store::KeyType::kVstore);
}

// Records framed as DUMP frames them, with a valid footer.
std::string Sealed(const std::vector<Mutation>& records) { return Flat(EncodeDump(records)); }

TEST(DumpPayloadTest, RefusesWhatIsNotOneKey) {
  const auto bad = [](const std::vector<Mutation>& records) {
    DecodedDump dump;
    return DecodeDump(Bytes::CopyOf(Sealed(records)), "x", dump) == DumpStatus::kBadFormat;
  };
  const VCreate create{"v", 1, 2, 8};
  const VStore rows{"v", 0, 0, 1, 2, 8, Blob{{Rows(8, 'r')}}};
  KvPrefix reg;
  reg.ns = "ns", reg.kv_dim = 2, reg.tier = 8;
  EXPECT_TRUE(bad({}));
  EXPECT_TRUE(bad({rows}));                              // rows without their session
  EXPECT_TRUE(bad({SsmPut{"a", {}}, SsmPut{"a", {}}}));  // two records for one session
  EXPECT_TRUE(bad({SsmDropSession{"a"}}));               // not a key's record
  EXPECT_TRUE(bad({StringSet{"s", StringSet::kKeepTtl, 0, {}}}));
  EXPECT_TRUE(bad({create, VStore{"v", 0, 0, 1, 4, 8, Blob{{Rows(16, 'r')}}}}));  // other dim
  EXPECT_TRUE(bad({create, VStore{"w", 0, 0, 1, 2, 8, Blob{{Rows(8, 'r')}}}}));   // other sid
  EXPECT_TRUE(bad({reg, VCreate{"other_pk", 1, 2, 8}}));
  EXPECT_TRUE(bad({reg, VCreate{"ns_pk", 1, 2, 8}, VCreate{"ns_pk", 2, 2, 8}}));
  EXPECT_TRUE(bad({reg, SsmPut{"ns", {}}, SsmPut{"ns", {}}}));
  EXPECT_TRUE(bad({PrefixNamespace{"p", 2, 1, 2, 1, 8, 0}, PrefixNamespaceDrop{"p"}}));
  EXPECT_TRUE(bad(
      {PrefixNamespace{"p", 2, 1, 2, 1, 8, 0}, PrefixBlocks{"q", std::string(16, '\0'), {}, {}}}));
  EXPECT_FALSE(bad({reg, SsmPut{"ns", {}}, VCreate{"ns_pv", 1, 2, 8},
                    VStore{"ns_pv", 0, 0, 1, 2, 8, Blob{{Rows(8, 'r')}}}}));

  // A header that a log record would have (an lsn, a database) is not a dump's.
  std::string payload = Sealed({SsmPut{"a", {}}});
  std::string body = payload.substr(0, payload.size() - kDumpFooterSize);
  body[16] = 1;  // lsn
  body += std::string("\x01\x00", 2);
  const uint64_t sum = XXH3_64bits(body.data(), body.size());
  for (int i = 0; i < 8; ++i) body += static_cast<char>(sum >> (8 * i));
  DecodedDump dump;
  EXPECT_EQ(DecodeDump(Bytes::CopyOf(body), "x", dump), DumpStatus::kBadFormat);
}

TEST(DumpPayloadTest, RefusesAWrongVersionOrChecksum) {
  const std::string payload = Sealed({StringSet{"s", 0, 0, Blob{{Bytes::CopyOf("v")}}}});
  DecodedDump dump;
  for (size_t i = 0; i < payload.size(); ++i) {
    std::string flipped = payload;
    flipped[i] = static_cast<char>(flipped[i] ^ 1);
    EXPECT_EQ(DecodeDump(Bytes::CopyOf(flipped), "x", dump), DumpStatus::kBadFooter) << i;
  }
  for (size_t n = 0; n < payload.size(); ++n) {
    EXPECT_EQ(DecodeDump(Bytes::CopyOf(payload.substr(0, n)), "x", dump), DumpStatus::kBadFooter)
        << n;
  }
  EXPECT_EQ(DecodeDump(Bytes::CopyOf(payload), "x", dump), DumpStatus::kOk);
}

}  // namespace
}  // namespace prefixd::persist
