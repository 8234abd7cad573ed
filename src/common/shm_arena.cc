#include "common/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/shared_mapping.h"

namespace prefixd::shm {
namespace {

constexpr uint64_t kHugePage = uint64_t{2} << 20;
// EnableArenas' `huge_pages`, set before the first arena is made.
std::atomic<bool> arenas_want_huge_pages{true};
// An arena's room for regions; a larger region gets an arena of its own size.
constexpr uint64_t kArenaData = uint64_t{1} << 30;
// Arenas are never closed; this many is 4 TiB of regular arenas.
constexpr uint32_t kMaxArenas = 4096;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

struct Arena {
  int fd = -1;            // read-write: the server's own, for punching holes
  int read_only_fd = -1;  // the one handed to clients
  uint8_t* base = nullptr;
  uint64_t size = 0;
  uint64_t next = 0;  // the first byte not yet handed out (under the registry's lock)
};

uint64_t StartGeneration() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

class Registry {
 public:
  bool enabled() const { return enabled_.load(std::memory_order_acquire); }
  void Enable() { enabled_.store(true, std::memory_order_release); }

  uint8_t* Take(size_t size) {
    std::lock_guard lock(mu_);
    auto hole = holes_.find(size);
    if (hole != holes_.end() && !hole->second.empty()) {
      uint8_t* p = hole->second.back();
      hole->second.pop_back();
      return p;
    }
    const uint64_t align = size >= kHugePage ? kHugePage : kPageBytes;
    const bool dedicated = size > kArenaData / 4;
    if (!dedicated && current_ >= 0) {
      Arena& a = arenas_[static_cast<size_t>(current_)];
      const uint64_t at = RoundUp(a.next, align);
      if (at + size <= a.size) {
        a.next = at + size;
        return a.base + at;
      }
    }
    const uint64_t data = dedicated ? RoundUp(size, kHugePage) : kArenaData;
    const int id = Create(data);
    if (id < 0) return nullptr;
    if (!dedicated) current_ = id;
    Arena& a = arenas_[static_cast<size_t>(id)];
    const uint64_t at = RoundUp(a.next, align);
    a.next = at + size;
    return a.base + at;
  }

  void Release(uint8_t* p, size_t size) {
    const Arena* a = Find(p);
    if (a == nullptr) return;
    // The pages go back to the kernel; the range is kept for the next region of its size.
    ::fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(p - a->base),
                static_cast<off_t>(size));
    std::lock_guard lock(mu_);
    holes_[size].push_back(p);
  }

  // Lock-free: arenas are published once filled in and never change after.
  const Arena* Find(const void* p) const {
    const auto* byte = static_cast<const uint8_t*>(p);
    const uint32_t n = count_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < n; ++i) {
      const Arena& a = arenas_[i];
      if (byte >= a.base && byte < a.base + a.size) return &a;
    }
    return nullptr;
  }

  std::optional<Place> Locate(const void* p, size_t length) const {
    const Arena* a = Find(p);
    if (a == nullptr) return std::nullopt;
    const auto offset = static_cast<uint64_t>(static_cast<const uint8_t*>(p) - a->base);
    if (length > a->size - offset) return std::nullopt;
    return Place{static_cast<uint32_t>(a - arenas_.data()), offset, Word(*a, offset).load()};
  }

  void Stamp(uint8_t* p, size_t size, uint64_t generation) {
    const Arena* a = Find(p);
    if (a == nullptr) return;
    const auto first = static_cast<uint64_t>(p - a->base);
    for (uint64_t at = first; at < first + size; at += kPageBytes) {
      Word(*a, at).store(generation, std::memory_order_release);
    }
  }

  bool MakeFirst() {
    std::lock_guard lock(mu_);
    if (current_ >= 0) return true;
    current_ = Create(kArenaData);
    return current_ >= 0;
  }

  uint64_t NextGeneration() { return generation_.fetch_add(1, std::memory_order_relaxed) + 1; }
  uint32_t count() const { return count_.load(std::memory_order_acquire); }
  const Arena& arena(uint32_t id) const { return arenas_[id]; }

  // Makes an arena with `data` bytes of room after its generation table; its id, or -1. Under
  // mu_.
  int Create(uint64_t data) {
    const uint32_t id = count_.load(std::memory_order_relaxed);
    if (id >= kMaxArenas) return -1;
    const uint64_t table = TableBytes(2 * std::max(data, kHugePage));
    const uint64_t size = table + data;
    const int fd = ::memfd_create("prefixd-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    auto fail = [&](void* mapped) {
      if (mapped != nullptr) ::munmap(mapped, size);
      ::close(fd);
      return -1;
    };
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
        ::fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
      return fail(nullptr);
    }
    // Shmem huge pages where the kernel's shmem_enabled is "advise" (a no-op where it is not),
    // unless `huge-pages no` forbids them; clients map the arena the same way.
    void* mapped = MapSharedHugeAligned(fd, size, PROT_READ | PROT_WRITE, arenas_want_huge_pages);
    if (mapped == MAP_FAILED) return fail(nullptr);
    // Read-only for every uid but ours, then a descriptor that can only read: the one clients
    // get (docs/shm-transport.md, "Read-only, and how").
    ::fchmod(fd, S_IRUSR);
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    const int read_only = ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
    if (read_only < 0) return fail(mapped);
    Arena& a = arenas_[id];
    a.fd = fd, a.read_only_fd = read_only, a.base = static_cast<uint8_t*>(mapped);
    a.size = size, a.next = table;
    count_.store(id + 1, std::memory_order_release);
    return static_cast<int>(id);
  }

 private:
  static std::atomic<uint64_t>& Word(const Arena& a, uint64_t offset) {
    return reinterpret_cast<std::atomic<uint64_t>*>(a.base)[offset / kPageBytes];
  }

  std::atomic<bool> enabled_{false};
  std::mutex mu_;
  std::array<Arena, kMaxArenas> arenas_{};
  std::atomic<uint32_t> count_{0};
  int current_ = -1;  // the arena regular regions come from (under mu_)
  std::unordered_map<size_t, std::vector<uint8_t*>> holes_;
  // Counted from the wall clock's nanoseconds at start-up, not from 0: a server started again
  // (or another one) never hands out a generation an earlier process gave, so a client that
  // checks an old place against a new server's arena finds a mismatch, not a replayed match.
  std::atomic<uint64_t> generation_{StartGeneration()};
};

// Never destroyed: regions may be released during static destruction.
Registry& Arenas() {
  static auto* registry = new Registry();
  return *registry;
}

}  // namespace

std::string EnableArenas(bool huge_pages) {
  arenas_want_huge_pages = huge_pages;
  Registry& r = Arenas();
  if (r.enabled()) return {};
  // The first arena now: a kernel without memfd or /proc fails the start, not a later store.
  if (!r.MakeFirst()) {
    return std::string("cannot create a shared arena: ") + std::strerror(errno);
  }
  r.Enable();
  return {};
}

bool ArenasEnabled() { return Arenas().enabled(); }
uint8_t* TakeRegion(size_t size) { return Arenas().Take(size); }
bool InArena(const void* p) { return Arenas().count() != 0 && Arenas().Find(p) != nullptr; }
void ReleaseRegion(uint8_t* p, size_t size) { Arenas().Release(p, size); }
void StampNewGeneration(uint8_t* p, size_t size) {
  Arenas().Stamp(p, size, Arenas().NextGeneration());
}
void ClearGeneration(uint8_t* p, size_t size) { Arenas().Stamp(p, size, 0); }
std::optional<Place> Locate(const void* p, size_t length) { return Arenas().Locate(p, length); }
uint32_t ArenaCount() { return Arenas().count(); }
uint64_t ArenaSize(uint32_t id) { return id < ArenaCount() ? Arenas().arena(id).size : 0; }
int ReadOnlyFd(uint32_t id) { return id < ArenaCount() ? Arenas().arena(id).read_only_fd : -1; }

}  // namespace prefixd::shm
