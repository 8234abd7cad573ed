#include "state_buffer.h"

#include <sys/mman.h>

#include <utility>

namespace prefixd::llama {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

StateBuffer::StateBuffer(StateBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

StateBuffer& StateBuffer::operator=(StateBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

StateBuffer::~StateBuffer() { Release(); }

void StateBuffer::Release() {
  if (data_ != nullptr) ::munmap(data_, capacity_);
  data_ = nullptr;
  capacity_ = 0;
}

std::span<uint8_t> StateBuffer::Take(size_t size) {
  if (size > capacity_) {
    Release();
    // Whole huge pages, with room to grow by half before the next remap.
    const size_t want = (size + size / 2 + kHugePage - 1) / kHugePage * kHugePage;
    void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return {};
    // Huge pages, faulted in now in one call: on a virtual machine a 4 KiB page fault can cost
    // microseconds, and first touches of 40 MB measured 45-110 ms against 4-8 ms this way.
    ::madvise(p, want, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
    ::madvise(p, want, MADV_POPULATE_WRITE);
#endif
    data_ = static_cast<uint8_t*>(p);
    capacity_ = want;
  }
  return {data_, size};
}

}  // namespace prefixd::llama
