#include "common/bytes.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/memory_reclaimer.h"
#include "common/shm_arena.h"

namespace prefixd {
namespace {

constexpr size_t kAlignment = 64;
// Buffers this large come from a pool of mmap'd regions: a fresh mmap costs a page fault per
// 4 KiB on first touch and an munmap on release, which dominated the time of storing large
// blobs; an overwrite usually frees a buffer of the very size the next store needs. From 32 KiB
// (not glibc's 128 KiB mmap threshold, which rises as mappings are freed): values of 32 KiB to
// 1 MiB from malloc left freed heap behind, holding RSS at 1.8x maxmemory in the cache benchmark.
// Under AddressSanitizer they stay malloc'd up to 1 MiB: it checks heap buffers' bounds, not
// those of anonymous mappings.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kPooledFrom = size_t{1} << 20;
#else
constexpr size_t kPooledFrom = size_t{32} << 10;
#endif
constexpr size_t kHugePage = size_t{2} << 20;
// Free pooled memory kept for reuse by default; past the cap, released buffers go back to the
// kernel (SetPooledFreeCap lowers it under a memory budget).
constexpr size_t kDefaultPoolCap = size_t{1} << 30;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// `huge-pages`; written once at start-up, read by every thread that allocates.
std::atomic<bool> huge_pages_wanted{true};

// Size classes: pages below 1 MiB, 64 KiB steps up to 32 MiB (little waste for ~1 MB states),
// 2 MiB steps above.
constexpr size_t kPagedBelow = size_t{1} << 20;
constexpr size_t kMaxSmallMappings = 32768;
size_t PooledSize(size_t n) {
  if (n < kPagedBelow) return RoundUp(n, size_t{4} << 10);
  return n >= (size_t{32} << 20) ? RoundUp(n, kHugePage) : RoundUp(n, size_t{64} << 10);
}

class LargeBufferPool {
 public:
  // `huge`: advise huge pages over the whole region; otherwise forbid them until
  // AdviseHugePages() (a region filled as data arrives commits only what has arrived).
  // Null when the kernel refuses a new mapping (out of memory, or vm.max_map_count reached).
  uint8_t* Take(size_t size, bool huge) {
    uint8_t* p = Reuse(size);
    // Where no arena can be made (an address-space limit, no more arenas), an anonymous mapping
    // still stores the value; it is then served as bytes.
    if (p == nullptr && shm::ArenasEnabled()) p = shm::TakeRegion(size);
    if (p != nullptr && shm::InArena(p)) {
      // An arena region: its huge-page advice is the arena's. Its new generation is stamped by
      // AllocateWith (at once) or MarkFilled (once the data has arrived).
      return p;
    }
    if (p == nullptr) {
      // Each small value is a mapping of its own: past kMaxSmallMappings they come from malloc,
      // leaving the rest of vm.max_map_count (65530 by default) to thread stacks and files.
      const bool small = size < kPagedBelow;
      if (small && small_mappings_.fetch_add(1) >= kMaxSmallMappings) {
        small_mappings_ -= 1;
        return nullptr;
      }
      void* fresh =
          ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (fresh == MAP_FAILED) {
        if (small) small_mappings_ -= 1;
        return nullptr;
      }
      p = static_cast<uint8_t*>(fresh);
    }
    // Transparent huge pages cut the faults of first touch 512-fold where the kernel allows.
    // Where the setting turns them off, forbid them outright: a kernel whose THP mode is
    // "always" would otherwise still give them.
    if (size >= kHugePage) {
      ::madvise(p, size, huge && HugePagesWanted() ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    }
    return p;
  }

  // `stamped`: an arena region whose pages carry a generation, cleared here so that a client's
  // lease on it fails from now on (a region never stamped was never lent).
  void Give(uint8_t* p, size_t size, bool stamped) {
    if (stamped && shm::InArena(p)) shm::ClearGeneration(p, size);
    bool kept = false;
    {
      std::lock_guard lock(mu_);
      if (pooled_ + size <= cap_) {
        free_[size].push_back({p, CoarseNowMs()});
        pooled_ += size;
        kept = true;
      }
    }
    if (!kept) {
      Unmap({{p, size}});
      return;
    }
    memory::EnsureReclaimer();  // it hands the region back if nobody reuses it in time
  }

  size_t ReleaseIdle(int64_t idle_ms) {
    std::vector<std::pair<uint8_t*, size_t>> released;
    const int64_t cutoff = CoarseNowMs() - idle_ms;
    {
      std::lock_guard lock(mu_);
      for (auto& [size, regions] : free_) {
        // Oldest first: regions are pushed in release order and reused from the back.
        size_t idle = 0;
        while (idle < regions.size() && regions[idle].released_ms <= cutoff) ++idle;
        for (size_t i = 0; i < idle; ++i) released.emplace_back(regions[i].data, size);
        regions.erase(regions.begin(), regions.begin() + static_cast<ptrdiff_t>(idle));
        pooled_ -= idle * size;
      }
    }
    return Unmap(released);
  }

  void SetCap(size_t cap) {
    std::vector<std::pair<uint8_t*, size_t>> released;
    {
      std::lock_guard lock(mu_);
      cap_ = cap;
      // Past a lowered cap the oldest regions go first, whatever their size.
      while (pooled_ > cap_) {
        auto oldest = free_.end();
        for (auto it = free_.begin(); it != free_.end(); ++it) {
          if (!it->second.empty() &&
              (oldest == free_.end() ||
               it->second.front().released_ms < oldest->second.front().released_ms)) {
            oldest = it;
          }
        }
        released.emplace_back(oldest->second.front().data, oldest->first);
        oldest->second.erase(oldest->second.begin());
        pooled_ -= oldest->first;
      }
    }
    Unmap(released);
  }

  size_t pooled() {
    std::lock_guard lock(mu_);
    return pooled_;
  }

 private:
  struct FreeRegion {
    uint8_t* data;
    int64_t released_ms;
  };

  uint8_t* Reuse(size_t size) {
    std::lock_guard lock(mu_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    uint8_t* p = it->second.back().data;
    it->second.pop_back();
    pooled_ -= size;
    return p;
  }

  size_t Unmap(const std::vector<std::pair<uint8_t*, size_t>>& regions) {
    size_t bytes = 0;
    for (auto [p, size] : regions) {
      if (shm::InArena(p)) {
        shm::ReleaseRegion(p, size);
        bytes += size;
        continue;
      }
      ::munmap(p, size);
      if (size < kPagedBelow) small_mappings_ -= 1;
      bytes += size;
    }
    return bytes;
  }

  std::mutex mu_;
  std::unordered_map<size_t, std::vector<FreeRegion>> free_;
  size_t pooled_ = 0;
  size_t cap_ = kDefaultPoolCap;
  std::atomic<size_t> small_mappings_{0};  // live mappings below kPagedBelow, in use or free
};

// Never destroyed: buffers may be released during static destruction.
LargeBufferPool& Pool() {
  static auto* pool = new LargeBufferPool();
  return *pool;
}

// Knows its buffer's size, so that a slice can tell what its whole buffer costs.
struct FreeDeleter {
  size_t size;
  void operator()(const uint8_t* p) const { std::free(const_cast<uint8_t*>(p)); }
};

struct PoolDeleter {
  size_t size;
  // An arena region's generation is stamped (Bytes::MarkFilled may do it after the fill).
  bool stamped = true;
  void operator()(const uint8_t* p) const { Pool().Give(const_cast<uint8_t*>(p), size, stamped); }
};

std::atomic<size_t> adopted_files{0};

// An adopted mapping (AdoptMapping): read-only, so Unique() must never offer it for writing.
// It may own a read-only descriptor of the file it maps, for readers on the same machine.
struct AdoptedMappingDeleter {
  size_t mapped;
  int file_fd = -1;
  uint64_t file_start = 0;
  uint64_t file_inode = 0;
  void operator()(const uint8_t* p) const {
    ::munmap(const_cast<uint8_t*>(p), mapped);
    if (file_fd >= 0) {
      ::close(file_fd);
      adopted_files.fetch_sub(1, std::memory_order_relaxed);
    }
  }
};

}  // namespace

size_t PooledFreeBytes() { return Pool().pooled(); }
size_t ReleaseIdlePooled(int64_t idle_ms) { return Pool().ReleaseIdle(idle_ms); }
void SetPooledFreeCap(size_t bytes) { Pool().SetCap(bytes); }
size_t DefaultPooledFreeCap() { return kDefaultPoolCap; }
void SetHugePages(bool wanted) { huge_pages_wanted.store(wanted, std::memory_order_relaxed); }
bool HugePagesWanted() { return huge_pages_wanted.load(std::memory_order_relaxed); }

Bytes Bytes::Allocate(size_t size) { return AllocateWith(size, /*huge=*/true); }
Bytes Bytes::AllocateForFill(size_t size) { return AllocateWith(size, /*huge=*/false); }

void Bytes::MarkFilled() {
  auto* pooled = std::get_deleter<PoolDeleter>(owner_);
  if (pooled == nullptr || pooled->stamped) return;
  shm::StampNewGeneration(const_cast<uint8_t*>(owner_.get()), pooled->size);
  pooled->stamped = true;
}

void Bytes::AdviseHugePages(size_t offset, size_t length) const {
  // Only buffers of this size always lie in mappings of their own (the pool's); an arena's
  // advice is set once for the whole arena.
  if (size_ < kPagedBelow || shm::InArena(data_) || !HugePagesWanted()) return;
  auto begin = reinterpret_cast<uintptr_t>(data_) + std::min(offset, size_);
  auto end = reinterpret_cast<uintptr_t>(data_) + std::min(size_, offset + length);
  begin = RoundUp(begin, kHugePage);
  end = end / kHugePage * kHugePage;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

Bytes Bytes::AllocateWith(size_t size, bool huge) {
  Bytes b;
  const size_t pooled = size >= kPooledFrom ? PooledSize(size) : 0;
  uint8_t* mapped = pooled != 0 ? Pool().Take(pooled, huge) : nullptr;
  // Below 1 MiB a refused mapping (each value is one; vm.max_map_count bounds them) falls back
  // to malloc: the value is stored all the same, only its memory is the heap's.
  if (pooled != 0 && mapped == nullptr && size >= kPagedBelow) throw std::bad_alloc();
  if (mapped != nullptr) {
    // An arena region gets a new generation on every page, so that a client's lease on its last
    // value fails from here on (docs/shm-transport.md, "Generations"). A buffer filled as data
    // arrives waits for MarkFilled: 8 bytes per page written up front would make a declared but
    // unsent argument cost 1/512 of its size.
    const bool in_arena = shm::InArena(mapped);
    if (in_arena && huge) shm::StampNewGeneration(mapped, pooled);
    b.owner_ = std::shared_ptr<const uint8_t>(mapped, PoolDeleter{pooled, !in_arena || huge});
    b.data_ = mapped;
    b.capacity_ = pooled;
  } else {
    // aligned_alloc wants a multiple of the alignment; a zero-size value still gets one block
    // so that data() is never null.
    size_t rounded = std::max(kAlignment, RoundUp(size, kAlignment));
    auto* raw = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
    if (raw == nullptr) throw std::bad_alloc();
    b.owner_ = std::shared_ptr<const uint8_t>(raw, FreeDeleter{rounded});
    b.data_ = raw;
    b.capacity_ = rounded;
  }
  b.size_ = size;
  return b;
}

Bytes Bytes::CopyOf(std::string_view data) {
  Bytes b = Allocate(data.size());
  if (!data.empty()) std::memcpy(b.mutable_data(), data.data(), data.size());
  return b;
}

Bytes Bytes::CopyCompact(std::string_view data) {
  Bytes b;
  auto block = std::make_shared_for_overwrite<uint8_t[]>(std::max<size_t>(data.size(), 1));
  if (!data.empty()) std::memcpy(block.get(), data.data(), data.size());
  b.data_ = block.get();
  b.owner_ = std::shared_ptr<const uint8_t>(std::move(block), b.data_);
  b.size_ = data.size();
  // The control block (16 bytes) and malloc's own header share the chunk.
  b.capacity_ = RoundUp(data.size() + 32, 16);
  return b;
}

size_t AdoptedFileCount() { return adopted_files.load(std::memory_order_relaxed); }

size_t AdoptedFileCap() {
  static const size_t cap = [] {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
      return size_t{0};
    return static_cast<size_t>(limit.rlim_cur / 4);
  }();
  return cap;
}

Bytes Bytes::AdoptMapping(void* base, size_t mapped, size_t offset, size_t size, int file_fd,
                          uint64_t file_start) {
  Bytes b;
  auto* p = static_cast<uint8_t*>(base);
  uint64_t inode = 0;
  if (file_fd >= 0) {
    struct stat st {};
    if (::fstat(file_fd, &st) == 0) {
      inode = static_cast<uint64_t>(st.st_ino);
      adopted_files.fetch_add(1, std::memory_order_relaxed);
    } else {
      ::close(file_fd);
      file_fd = -1;
    }
  }
  b.owner_ =
      std::shared_ptr<const uint8_t>(p, AdoptedMappingDeleter{mapped, file_fd, file_start, inode});
  b.data_ = p + offset;
  b.size_ = size;
  b.capacity_ = mapped;
  return b;
}

Bytes::FilePlace Bytes::AdoptedFile() const {
  const auto* adopted = std::get_deleter<AdoptedMappingDeleter>(owner_);
  if (adopted == nullptr || adopted->file_fd < 0) return {};
  return {adopted->file_fd, adopted->file_inode,
          adopted->file_start + static_cast<uint64_t>(data_ - owner_.get())};
}

bool Bytes::Unique() const {
  if (owner_ == nullptr || owner_.use_count() != 1) return false;
  if (std::get_deleter<AdoptedMappingDeleter>(owner_) != nullptr) return false;
    // The count is read relaxed; the last other holder dropped its reference with a release
    // decrement after its last read, which an acquire orders before the caller's writes.
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer does not model fences. A copy and its release are read-modify-writes of the
  // same count, with acquire-release order, which it does see: so the in-place paths run (and
  // are checked) under it as they run in production, instead of being skipped.
  { const std::shared_ptr<const uint8_t> probe = owner_; }
#else
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
  return true;
}

size_t Bytes::allocation_bytes() const {
  if (const auto* pooled = std::get_deleter<PoolDeleter>(owner_)) return pooled->size;
  if (const auto* adopted = std::get_deleter<AdoptedMappingDeleter>(owner_)) {
    return adopted->mapped;
  }
  if (const auto* heap = std::get_deleter<FreeDeleter>(owner_)) return heap->size;
  // CopyCompact's small block: a slice of it does not know the whole size; a whole handle does.
  return capacity_;
}

Bytes Bytes::Slice(size_t offset, size_t length) const {
  Bytes b = *this;
  offset = std::min(offset, size_);
  b.data_ = data_ + offset;
  b.size_ = std::min(length, size_ - offset);
  // Storage shared with other handles is not attributed to this one.
  b.capacity_ = b.size_;
  return b;
}

}  // namespace prefixd
