#include "common/shared_mapping.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>

namespace prefixd {

void* MapSharedHugeAligned(int fd, size_t size, int prot, bool huge_pages) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  if (size < kHugePage) {
    void* mapped = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
    return mapped;
  }
  // Room for the mapping at an aligned address inside it; the slack around it is given back.
  void* room = ::mmap(nullptr, size + kHugePage, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (room == MAP_FAILED) return MAP_FAILED;
  const auto start = reinterpret_cast<uintptr_t>(room);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  void* mapped =
      ::mmap(reinterpret_cast<void*>(aligned), size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
  if (mapped == MAP_FAILED) {
    const int saved = errno;
    ::munmap(room, size + kHugePage);
    errno = saved;
    return MAP_FAILED;
  }
  if (aligned > start) ::munmap(room, aligned - start);
  const uintptr_t end = start + size + kHugePage;
  if (end > aligned + size) ::munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  ::madvise(mapped, size, huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return mapped;
}

}  // namespace prefixd
