// prefixd-vbatch-bench: a session's layers fetched with V.FETCH BATCH over the unix socket,
// against V.SHMFETCH ... BATCH through the shared arenas (docs/shm-transport.md, "A batch of
// layers"), from a prefixd-server already running on this machine with --shm-arenas yes.
//
//   prefixd-vbatch-bench --socket PATH [--layers 16] [--tokens 2048] [--dim 1024]
//                        [--requests 16] [--warmup 2]
//
// Stores `layers` layers of `tokens` fp32 rows of `dim` values in a session of its own (dropped at
// the end), then times, one request at a time on one connection each:
//   socket:    V.FETCH sid BATCH 0 tokens (prefixd::Client: the layers' bytes in the reply);
//   shm view:  V.SHMFETCH sid BATCH 0 tokens until the client holds a view of every piece;
//   shm copy:  the same, plus a copy of every layer into a private, pre-faulted buffer (what a
//              consumer that keeps the rows needs).
// SHM.RELEASE follows each shared fetch, untimed. Both paths' bytes are checked against the stored
// rows once, before the timed requests. Prints one JSON line per phase, GB/s in 10^9 bytes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "prefixd/client.h"
#include "prefixd/shm.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string socket;
  uint32_t layers = 16;
  uint64_t tokens = 2048;
  uint32_t dim = 1024;
  int requests = 16;
  int warmup = 2;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "prefixd-vbatch-bench: %s\n", message.c_str());
  std::exit(1);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Die("missing value for " + flag);
    const char* value = argv[++i];
    if (flag == "--socket") {
      o.socket = value;
    } else if (flag == "--layers") {
      o.layers = static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
    } else if (flag == "--tokens") {
      o.tokens = std::strtoull(value, nullptr, 10);
    } else if (flag == "--dim") {
      o.dim = static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
    } else if (flag == "--requests") {
      o.requests = std::atoi(value);
    } else if (flag == "--warmup") {
      o.warmup = std::atoi(value);
    } else {
      Die("unknown option " + flag);
    }
  }
  if (o.socket.empty()) Die("--socket PATH is required");
  if (o.layers == 0 || o.tokens == 0 || o.dim == 0 || o.requests < 1) Die("bad sizes");
  return o;
}

// Layer `layer`'s rows: finite floats, different per layer and row.
std::vector<float> Rows(const Options& o, uint32_t layer) {
  std::vector<float> rows(o.tokens * o.dim);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<float>((i * 2654435761u + layer * 97u) % 100003u) * 1e-3f;
  }
  return rows;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void Report(const char* phase, const Options& o, std::vector<double> ms) {
  const double bytes = static_cast<double>(o.layers) * o.tokens * o.dim * 4;
  double total = 0;
  for (double m : ms) total += m;
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))];
  };
  std::printf(
      "{\"phase\":\"%s\",\"layers\":%u,\"tokens\":%llu,\"dim\":%u,\"bytes\":%.0f,"
      "\"requests\":%zu,\"gb_per_s\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f}\n",
      phase, o.layers, static_cast<unsigned long long>(o.tokens), o.dim, bytes, ms.size(),
      bytes * static_cast<double>(ms.size()) / (total * 1e6), at(0.5), at(0.99));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace prefixd;
  const Options o = Parse(argc, argv);
  auto connected = Client::ConnectUnix(o.socket);
  if (!connected.ok()) Die("connect: " + connected.status().ToString());
  Client client = std::move(connected).value();
  ShmClient shm;
  if (Status st = shm.ConnectBeside(client); !st.ok()) Die("SHM.HELLO: " + st.ToString());

  const std::string sid = "vbatch-bench:" + std::to_string(::getpid());
  if (auto made = client.VCreate(sid, o.dim, "fp32"); !made.ok()) {
    Die("V.CREATE: " + made.status().ToString());
  }
  std::string expected;  // every layer's rows, in order: V.FETCH BATCH's bytes joined
  for (uint32_t layer = 0; layer < o.layers; ++layer) {
    const std::vector<float> rows = Rows(o, layer);
    if (Status st = client.VStoreBatch(sid, layer, 0, o.tokens, rows); !st.ok()) {
      Die("V.STOREBATCH: " + st.ToString());
    }
    expected.append(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(float));
  }
  const std::string end = std::to_string(o.tokens);
  const std::vector<std::string_view> socket_fetch{"V.FETCH", sid, "BATCH", "0", end};
  std::vector<uint8_t> copy(expected.size(), 1);  // pre-faulted

  const auto socket_once = [&](bool check) {
    auto reply = client.Command(socket_fetch);
    if (!reply.ok()) Die("V.FETCH BATCH: " + reply.status().ToString());
    if (check) {
      std::string joined;
      for (const Reply& layer : reply.value().elements) joined += layer.str;
      if (joined != expected) Die("V.FETCH BATCH answered other bytes than were stored");
    }
  };
  // Returns the time to the views, and with `copy_out` the time to the copy too.
  const auto shm_once = [&](bool copy_out, bool check) {
    std::vector<std::vector<ShmView>> layers;
    const auto start = Clock::now();
    if (Status st = shm.FetchBatch(sid, 0, o.tokens, layers); !st.ok()) {
      Die("V.SHMFETCH BATCH: " + st.ToString());
    }
    if (copy_out) {
      size_t at = 0;
      for (const auto& pieces : layers) {
        for (const ShmView& p : pieces) {
          std::memcpy(copy.data() + at, p.data, p.size);
          at += p.size;
        }
      }
      if (at != copy.size()) Die("V.SHMFETCH BATCH answered another size");
    }
    const auto took = Clock::now() - start;
    if (check && std::memcmp(copy.data(), expected.data(), copy.size()) != 0) {
      Die("V.SHMFETCH BATCH answered other bytes than were stored");
    }
    std::vector<uint64_t> leases;
    for (const auto& pieces : layers) {
      for (const ShmView& p : pieces) {
        if (p.lease != 0) leases.push_back(p.lease);
      }
    }
    if (Status st = shm.Release(leases); !st.ok()) Die("SHM.RELEASE: " + st.ToString());
    return took;
  };

  socket_once(/*check=*/true);
  shm_once(/*copy_out=*/true, /*check=*/true);
  for (int i = 0; i < o.warmup; ++i) {
    socket_once(false);
    shm_once(true, false);
  }
  // Interleaved, so a change in the machine's load falls on all three alike.
  std::vector<double> socket_ms, view_ms, copy_ms;
  for (int i = 0; i < o.requests; ++i) {
    const auto start = Clock::now();
    socket_once(false);
    socket_ms.push_back(Ms(Clock::now() - start));
    view_ms.push_back(Ms(shm_once(false, false)));
    copy_ms.push_back(Ms(shm_once(true, false)));
  }
  (void)client.VDrop(sid);
  Report("socket", o, socket_ms);
  Report("shm view", o, view_ms);
  Report("shm copy", o, copy_ms);
  return 0;
}
