// MemoryReclaimer: hands memory that departed clients and idle buffers left behind back to the
// kernel. A background thread, started on first use, wakes once a second: it unmaps buffer-pool
// regions nobody reused for a while and, once enough malloc'd memory was freed since its last
// pass, calls malloc_trim (glibc keeps freed heap pages otherwise). Any thread may call these.
#pragma once

#include <cstddef>

namespace prefixd::memory {

// Reports `bytes` of malloc'd memory just freed (a closed connection, a shrunk buffer).
void NoteFreed(size_t bytes);

// Makes sure the reclaimer thread runs (the buffer pool calls it when it keeps a region).
void EnsureReclaimer();

// Pooled regions unused this long go back to the kernel: long enough for a steady stream of
// overwrites to reuse them, short enough that a burst's buffers do not stay resident.
inline constexpr long kPoolIdleMs = 3000;
// malloc_trim runs once at least this much was reported freed since the last trim.
inline constexpr size_t kTrimAfterBytes = size_t{4} << 20;

}  // namespace prefixd::memory
