// libFuzzer target for recovery: a snapshot file and a log segment made of the input go through
// Durability::Open (snapshot reader, log replay with its torn-tail and corruption rules, the
// record checks and Apply into both stores and the key directory, which keeps small SSM sessions)
// on an in-memory Env. It must never crash, abort or hang, whatever the files hold; a refused
// start is a valid outcome. Input:
// byte 0 flags (bit 0: there is a snapshot; 1: fix up the snapshot's checksums; 2: fix up the
// log's; 3: --log-skip-corrupt), bytes 1-2 the snapshot's length, then the snapshot, then the log
// segment.
#include <cstddef>
#include <cstdint>
#include <string>

#include <spdlog/spdlog.h>

#include "fuzz/mem_env.h"
#include "persist/durability.h"
#include "store/keyspace.h"
#include "store/state_store.h"
#include "store/vector_store.h"

// Recovery logs every record it skips; at thousands of inputs a second that is megabytes of
// output and time spent formatting, not fuzzing.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace prefixd;
  using namespace prefixd::persist;
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const size_t snapshot_size = std::min<size_t>(size - 3, data[1] | (size_t{data[2]} << 8));
  std::string snapshot(reinterpret_cast<const char*>(data + 3), snapshot_size);
  std::string log(reinterpret_cast<const char*>(data + 3 + snapshot_size),
                  size - 3 - snapshot_size);
  if (flags & 2) SealRecordsInPlace(snapshot);
  if (flags & 4) SealRecordsInPlace(log);
  MemEnv env;
  if (flags & 1) env.Put("/d/snapshot.pds", snapshot);
  env.Put("/d/log-00000000000000000001.seg", log);
  store::StateStore ssm(4);
  store::VectorStore vectors(4);
  DurabilityOptions options;
  options.dir = "/d";
  options.env = &env;
  options.policy = FsyncPolicy::kNo;
  options.auto_rewrite_percentage = 0;
  options.skip_corrupt = (flags & 8) != 0;
  options.memory_budget = uint64_t{256} << 20;
  store::Keyspace keys;
  ssm.KeepSmallSessionsIn(&keys);  // as a database's store does: small sessions in their entries
  store::PrefixStore prefixes;     // prefix-index records (40-44) replay into it
  Durability durability(options, StoreSet(Stores{ssm, &vectors, 0, &keys, &prefixes}));
  (void)durability.Open();
  return 0;
}
