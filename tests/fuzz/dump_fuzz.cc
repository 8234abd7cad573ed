// libFuzzer target for the DUMP payload decoder (RESTORE's parser). Byte 0 picks the mode: odd,
// the rest gets a valid footer (version and checksum) appended first, so mutations reach the
// record decoder and the shape check; even, the rest is the payload as is. A payload that
// decodes must encode back (under the key it was renamed to) to a payload that decodes to the
// same number of records, and every record must pass Check without crashing.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <xxhash.h>

#include "persist/dump_payload.h"
#include "persist/log_format.h"

namespace {

using namespace prefixd;
using namespace prefixd::persist;

std::string WithFooter(std::string body) {
  uint8_t footer[kDumpFooterSize];
  PutU16(footer, kDumpVersion);
  body.append(reinterpret_cast<const char*>(footer), 2);
  PutU64(footer + 2, XXH3_64bits(body.data(), body.size()));
  body.append(reinterpret_cast<const char*>(footer + 2), 8);
  return body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string payload(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) payload = WithFooter(std::move(payload));
  DecodedDump dump;
  if (DecodeDump(Bytes::CopyOf(payload), "renamed", dump) != DumpStatus::kOk) return 0;
  Limits limits = Limits::Hard();
  limits.memory_budget = uint64_t{256} << 20;
  for (const Mutation& m : dump.records) (void)Check(m, limits);
  std::string again;
  for (const Bytes& piece : EncodeDump(dump.records)) again.append(piece.view());
  DecodedDump second;
  if (DecodeDump(Bytes::CopyOf(again), "renamed", second) != DumpStatus::kOk ||
      second.records.size() != dump.records.size() || second.type != dump.type) {
    std::fprintf(stderr, "a decoded payload does not decode again once encoded\n");
    std::abort();
  }
  return 0;
}
