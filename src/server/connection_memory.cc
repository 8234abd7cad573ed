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

std::array<iovec, 2> InputBuffer::Room() {
  if (!large_) {
    auto& cache = ThreadCache();
    if (cache.empty()) {
      large_ = std::make_unique_for_overwrite<char[]>(kLarge);
    } else {
      large_ = std::move(cache.back());
      cache.pop_back();
    }
  }
  return {iovec{small_.data(), kSmall}, iovec{large_.get() + kSmall, kLarge - kSmall}};
}

std::string_view InputBuffer::Filled(size_t n) {
  if (n <= kSmall) {
    if (large_) GiveBack();
    return std::string_view(small_.data(), n);
  }
  // One copy of at most 1 KiB joins the two pieces: cheaper than a second read.
  std::memcpy(large_.get(), small_.data(), kSmall);
  return std::string_view(large_.get(), n);
}

void InputBuffer::GiveBack() {
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
