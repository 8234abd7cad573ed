#include "server/connection_memory.h"

#include <cstring>
#include <vector>

#include "common/client_memory.h"
#include "common/memory_reclaimer.h"

namespace prefixd::server {
namespace {

// Large input buffers handed back by this thread's connections, for its next bursts.
std::vector<std::unique_ptr<char[]>>& ThreadCache() {
  thread_local std::vector<std::unique_ptr<char[]>> cache;
  return cache;
}

}  // namespace

InputBuffer::~InputBuffer() {
  if (large_) GiveBack();
}

std::span<char> InputBuffer::Room() {
  if (!large_) {
    auto& cache = ThreadCache();
    if (cache.empty()) {
      large_ = std::make_unique_for_overwrite<char[]>(kLarge);
    } else {
      large_ = std::move(cache.back());
      cache.pop_back();
    }
  }
  return {large_.get(), kLarge};
}

std::string_view InputBuffer::Filled(size_t n) {
  if (n > kSmall) return std::string_view(large_.get(), n);
  // A copy of at most 1 KiB frees the large buffer for the other connections while this one's
  // requests run (a write may wait for the log's fsync).
  if (n > 0) std::memcpy(small_.data(), large_.get(), n);
  GiveBack();
  return std::string_view(small_.data(), n);
}

void InputBuffer::GiveBack() {
  if (!large_) return;
  auto& cache = ThreadCache();
  if (cache.size() < kCachedPerThread) {
    cache.push_back(std::move(large_));
    return;
  }
  large_.reset();
  memory::NoteFreed(kLarge);
}

void ReleaseRequest(protocol::Request& done, protocol::RequestParser& parser) {
  done.Clear();
  memory::NoteFreed(done.ReleaseIdleMemory() + parser.ReleaseIdleMemory());
}

void PublishMemory(ClientState& client, const InputBuffer& input,
                   const protocol::RequestParser& parser, const protocol::ReplyWriter& reply,
                   size_t connection_bytes, size_t pushed_bytes) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  const size_t argv = parser.buffer_bytes();
  const size_t output = reply.held_bytes() + pushed_bytes;
  client.query_buffer_bytes.store(parser.pending_bytes(), kRelaxed);
  client.query_buffer_free.store(input.capacity(), kRelaxed);
  client.argv_bytes.store(argv, kRelaxed);
  client.output_bytes.store(output, kRelaxed);
  // The requests a MULTI queued count as the client's, as Redis's multi-mem does.
  const uint64_t total = connection_bytes + sizeof(ClientState) + input.capacity() + argv + output +
                         client.multi_bytes.load(kRelaxed);
  client.total_bytes.store(total, kRelaxed);
  const uint64_t budget = total - reply.referenced_bytes() - pushed_bytes;
  memory::AddClientBytes(static_cast<int64_t>(budget) -
                         static_cast<int64_t>(client.budget_bytes.exchange(budget, kRelaxed)));
}

void ReleaseReplies(protocol::ReplyWriter& reply) { memory::NoteFreed(reply.Clear()); }

void NoteConnectionClosed(ClientState& client) {
  memory::NoteFreed(client.total_bytes.load(std::memory_order_relaxed));
  memory::AddClientBytes(
      -static_cast<int64_t>(client.budget_bytes.exchange(0, std::memory_order_relaxed)));
}

}  // namespace prefixd::server
