// Maps a shared-memory file (a memfd) so that the kernel may back it with huge pages: at an
// address aligned to 2 MiB, with MADV_HUGEPAGE (or MADV_NOHUGEPAGE) on the mapping. Its own small
// library, used by the server's arenas and by the client library's arena mappings; any thread.
#pragma once

#include <cstddef>

namespace prefixd {

// A copy out of 4 KiB shmem pages pays a page walk per 4 KiB (a nested one in a VM): on this
// project's 2-core VM, quiet, 5-16 % slower than out of huge pages (benchmarks/copy_source.c).
// Whether shmem gets huge pages is the kernel's
// /sys/kernel/mm/transparent_hugepage/shmem_enabled ("advise" lets the advice ask); both the
// writer's and every reader's mapping must be aligned and advised for the pages to be mapped
// huge. Where the kernel says "never", the advice is a no-op and the mapping is an ordinary one.
//
// Maps `size` bytes of `fd` from offset 0 with `prot` (MAP_SHARED); MAP_FAILED with errno on
// failure. Unmap it with munmap(address, size), as any mapping.
void* MapSharedHugeAligned(int fd, size_t size, int prot, bool huge_pages);

}  // namespace prefixd
