// ShmArgumentFile (include/prefixd/shm.h): a memfd a caller computes large arguments into, mapped
// writable until ShmClient::Call seals it and sends it with SHM.CALL.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "common/shared_mapping.h"
#include "prefixd/shm.h"

namespace prefixd {
namespace {

std::string Errno(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

constexpr uint64_t kPageBytes = 4096;

uint64_t PageUp(uint64_t n) { return (n + kPageBytes - 1) & ~(kPageBytes - 1); }

}  // namespace

Result<ShmArgumentFile> ShmArgumentFile::Create(uint64_t capacity) {
  ShmArgumentFile file;
  file.fd_ = ::memfd_create("prefixd-arguments", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (file.fd_ < 0) return Status::IoError(Errno("memfd"));
  file.capacity_ = PageUp(std::max<uint64_t>(capacity, 1));
  if (::ftruncate(file.fd_, static_cast<off_t>(file.capacity_)) != 0) {
    return Status::IoError(Errno("ftruncate of an argument file"));
  }
  void* mapped = MapSharedHugeAligned(file.fd_, file.capacity_, PROT_READ | PROT_WRITE, true);
  if (mapped == MAP_FAILED) return Status::IoError(Errno("mmap of an argument file"));
  file.base_ = static_cast<uint8_t*>(mapped);
  return file;
}

uint64_t ShmArgumentFile::CapacityFor(std::span<const uint64_t> sizes) {
  uint64_t total = 0;
  for (uint64_t size : sizes) total = PageUp(total) + size;
  return total;
}

ShmArgumentFile::ShmArgumentFile(ShmArgumentFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      base_(std::exchange(other.base_, nullptr)),
      capacity_(other.capacity_),
      size_(other.size_),
      sealed_(other.sealed_) {}

ShmArgumentFile::~ShmArgumentFile() {
  if (base_ != nullptr) ::munmap(base_, capacity_);
  if (fd_ >= 0) ::close(fd_);
}

std::span<uint8_t> ShmArgumentFile::Take(uint64_t size) {
  const uint64_t at = PageUp(size_);
  if (sealed_ || base_ == nullptr || at > capacity_ || size > capacity_ - at) return {};
  size_ = at + size;
  return {base_ + at, size};
}

bool ShmArgumentFile::OffsetOf(std::string_view bytes, uint64_t& offset) const {
  if (base_ == nullptr) return false;
  const auto begin = reinterpret_cast<uintptr_t>(base_);
  const auto at = reinterpret_cast<uintptr_t>(bytes.data());
  if (at < begin || at - begin > size_ || bytes.size() > size_ - (at - begin)) return false;
  offset = at - begin;
  return true;
}

Status ShmArgumentFile::Seal() {
  if (sealed_) return Status::Ok();
  if (fd_ < 0) return Status::Unavailable("argument file was moved from");
  // F_SEAL_WRITE is refused while a writable shared mapping exists.
  if (base_ != nullptr) ::munmap(base_, capacity_);
  base_ = nullptr;
  if (::ftruncate(fd_, static_cast<off_t>(PageUp(std::max<uint64_t>(size_, 1)))) != 0 ||
      ::fcntl(fd_, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return Status::IoError(Errno("sealing an argument file"));
  }
  sealed_ = true;
  return Status::Ok();
}

}  // namespace prefixd
