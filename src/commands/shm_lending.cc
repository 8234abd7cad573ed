#include "commands/shm_lending.h"

#include <fcntl.h>
#include <xxhash.h>

#include <cstdio>
#include <string_view>

#include "common/ascii.h"
#include "common/clock.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/shm_leases.h"

namespace prefixd::commands {

bool ShmServed(Context& ctx) {
  if (!ctx.client.unix_socket) {
    ctx.reply.Error(errors::kShmUnixOnly);
    return false;
  }
  if (!shm::ArenasEnabled()) {
    ctx.reply.Error(errors::kShmArenasOff);
    return false;
  }
  return true;
}

bool ShmGreeted(Context& ctx) {
  if (!ShmServed(ctx)) return false;
  if (!ctx.session.shm_hello) {
    ctx.reply.Error(errors::kShmHelloFirst);
    return false;
  }
  return true;
}

bool ShmLendAll(Context& ctx, std::string_view key, std::span<const Bytes* const> values,
                std::vector<ShmLent>& lent) {
  lent.assign(values.size(), ShmLent{});
  std::vector<const Bytes*> placed;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] == nullptr || values[i]->empty()) continue;
    const Bytes& value = *values[i];
    lent[i].place = shm::Locate(value.data(), value.size());
    // Generation 0: a region whose new generation was never stamped (never the case for a stored
    // value; see Bytes::MarkFilled) could not be told from its next use, so it goes as bytes.
    if (lent[i].place && lent[i].place->generation == 0) lent[i].place.reset();
    if (!lent[i].place) {
      if (const Bytes::FilePlace file = value.AdoptedFile(); file.fd >= 0) {
        // Sealed against writes, the bytes never change: the generation field names the file
        // (its inode), so that a client matches the descriptor it receives to the place.
        lent[i].place = shm::Place{0, file.offset, file.inode};
        lent[i].file_fd = file.fd;
      }
    }
    if (lent[i].place) placed.push_back(&value);
  }
  if (placed.empty()) return true;
  auto& table = ctx.session.shm_leases;
  if (table == nullptr) table = NewShmLeaseTable();
  const int64_t cap = ctx.engine.settings().Int(Setting::kShmMaxLeases);
  const int64_t expires = CoarseNowMs() + ctx.engine.settings().Int(Setting::kShmLeaseTimeout);
  const uint64_t tag = ShmLeaseTag(static_cast<size_t>(ctx.client.db.load()), key);
  const uint64_t lease = table->Add(placed, tag, expires, static_cast<size_t>(cap));
  if (lease == 0) {
    ctx.reply.Error(errors::ShmTooManyLeases(cap));
    return false;
  }
  for (ShmLent& each : lent) {
    if (!each.place) continue;
    each.lease = lease;
    each.alone = placed.size() == 1;
  }
  return true;
}

void ReplyShmLent(Context& ctx, const Bytes& value, const ShmLent& lent, bool checksum) {
  if (!lent.place) return ctx.reply.Bulk(value);
  if (lent.in_file()) {
    const int fd = ::fcntl(lent.file_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      // The lease may hold other pieces of this answer: only a lease of this piece alone ends.
      if (lent.alone) ctx.session.shm_leases->Release(lent.lease);
      return ctx.reply.Bulk(value);
    }
    // The connection closes its copy once sent; it travels with this reply's first byte.
    ctx.client.fds_to_send.push_back(fd);
  }
  ctx.reply.ArrayLen(6);
  ctx.reply.Integer(lent.in_file() ? -1 : static_cast<int64_t>(lent.place->arena));
  ctx.reply.Integer(static_cast<int64_t>(lent.place->offset));
  ctx.reply.Integer(static_cast<int64_t>(value.size()));
  ctx.reply.Integer(static_cast<int64_t>(lent.place->generation));
  if (checksum) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(XXH3_64bits(value.data(), value.size())));
    ctx.reply.Bulk(std::string_view(hex, 16));
  } else {
    ctx.reply.Null();
  }
  ctx.reply.Integer(static_cast<int64_t>(lent.lease));
}

bool TakeChecksumOption(const Context& ctx, size_t first, size_t& end) {
  if (end <= first || !EqualsIgnoreCase(ctx.args[end - 1], "CHECKSUM")) return false;
  --end;
  return true;
}

}  // namespace prefixd::commands
