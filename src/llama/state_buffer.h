// StateBuffer: the memory a restored sequence state is assembled in, kept from one restore to the
// next. Large states are tens to hundreds of megabytes: fresh memory for each would cost a page
// fault per 4 KiB page on first touch (tens of milliseconds per restore on a virtual machine), so
// the buffer is mapped once, in transparent huge pages faulted in up front, and only grows. One
// owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace prefixd::llama {

class StateBuffer {
 public:
  StateBuffer() = default;
  StateBuffer(const StateBuffer&) = delete;
  StateBuffer& operator=(const StateBuffer&) = delete;
  StateBuffer(StateBuffer&& other) noexcept;
  StateBuffer& operator=(StateBuffer&& other) noexcept;
  ~StateBuffer();

  // `size` bytes of it, contents unspecified; empty when the memory cannot be had.
  std::span<uint8_t> Take(size_t size);

 private:
  void Release();

  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace prefixd::llama
