// Bytes: an immutable, reference-counted, 64-byte-aligned byte buffer shared by the parser, the
// store and reply writers, so a value is never copied after it leaves the socket.
// Any thread may hold or copy a Bytes; the contents are written only before the first copy is made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace prefixd {

class Bytes {
 public:
  Bytes() = default;

  // Uninitialised storage of `size` bytes; fill it through mutable_data() before sharing.
  // Sizes from 32 KiB come from a pool of reused mmap'd regions (huge pages where the kernel
  // allows), so a freed value's memory goes back to the kernel instead of fragmenting the heap;
  // a fresh region commits no memory until it is touched.
  static Bytes Allocate(size_t size);
  // Allocate(n) reserves n rounded up: to 64 bytes below 32 KiB, to a 4 KiB page below 1 MiB
  // (those come from the pool, as mappings of their own), to 64 KiB steps below 32 MiB and 2 MiB
  // steps above. The most it adds to a request below 1 MiB:
  static constexpr size_t kMaxRoundingBelow1MiB = 4095;
  // Like Allocate, for a buffer filled front to back as data arrives (a large argument read
  // from the socket): no huge pages, so each 4 KiB is committed only once data reaches it. A
  // client that declares a large argument and sends little costs little; AdviseHugePages()
  // turns huge pages on for the stretch ahead once data has been flowing.
  static Bytes AllocateForFill(size_t size);
  static Bytes CopyOf(std::string_view data);
  // A copy in one small allocation (counter and bytes together, 16-byte aligned), for the many
  // small values a string keyspace holds (a 28-byte value costs one 64-byte malloc chunk).
  static Bytes CopyCompact(std::string_view data);
  // A handle on bytes it does not own: the caller keeps them alive and unchanged for as long as
  // this handle or any copy of it lives. For a value that is only copied before the call that
  // takes it returns (a small string a write copies into its log record and its key's entry).
  static Bytes Borrow(std::string_view data) {
    Bytes b;
    b.data_ = reinterpret_cast<const uint8_t*>(data.data());
    b.size_ = data.size();
    b.capacity_ = data.size();
    return b;
  }

  // Takes ownership of a read-only mapping made elsewhere (a client's sealed memfd adopted by
  // SHM.SET): the value is [base + offset, base + offset + size), the mapping [base, base +
  // mapped) is unmapped when the last handle goes, and all of it is accounted as capacity. Never
  // Unique(): the pages cannot be written, so in-place edits build a new value instead.
  // `file_fd`, when not -1, is a read-only descriptor of the mapped file, owned from here on
  // (closed with the mapping), and `file_start` the file offset `base` maps: SHM.GET passes a
  // duplicate to a reader so that it maps the same pages (AdoptedFile).
  static Bytes AdoptMapping(void* base, size_t mapped, size_t offset, size_t size, int file_fd = -1,
                            uint64_t file_start = 0);
  // For a view of an adopted mapping that kept its file's descriptor: the descriptor (still
  // owned by the mapping; duplicate it to hand it over), the file's inode number (a reader checks
  // the descriptor it received against it) and the file offset of data(). fd -1 otherwise.
  struct FilePlace {
    int fd = -1;
    uint64_t inode = 0;
    uint64_t offset = 0;
  };
  FilePlace AdoptedFile() const;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

  // Writable only while the caller is the sole owner, i.e. between Allocate() and the first copy.
  uint8_t* mutable_data() { return const_cast<uint8_t*>(data_); }

  // Asks for huge pages over the whole 2 MiB pages inside [offset, offset + length) of a pooled
  // buffer not yet touched there (cuts its first-touch faults 512-fold); a no-op otherwise.
  void AdviseHugePages(size_t offset, size_t length) const;
  // An AllocateForFill buffer is whole: in a shared arena its pages get their new generation now
  // (until then shm::Locate finds generation 0, which is never lent). A no-op otherwise.
  void MarkFilled();

  // A view of [offset, offset + length) sharing this buffer's storage; clamped to the end.
  Bytes Slice(size_t offset, size_t length) const;

  // True when no other handle (copy or slice) refers to this buffer: then its bytes may be
  // rewritten in place (the caller must hold whatever keeps other threads from copying it).
  bool Unique() const;

  // True when both handles are views of one allocation (slices of one buffer).
  bool SharesStorage(const Bytes& other) const { return owner_ == other.owner_; }

  // Bytes attributed to this handle for memory accounting: the whole allocation for a buffer
  // from Allocate(), the slice's own length for a Slice().
  size_t capacity() const { return capacity_; }

  // The allocation this handle shares (the same for every copy and slice of it; null when
  // empty), how many handles share it, and what all of it costs (capacity() of the buffer it
  // was sliced from): what a holder of any slice keeps alive. For leases (engine/shm_leases.h).
  const void* storage() const { return owner_.get(); }
  long holders() const { return owner_.use_count(); }
  size_t allocation_bytes() const;

 private:
  static Bytes AllocateWith(size_t size, bool huge);

  std::shared_ptr<const uint8_t> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// How many adopted mappings keep their file's descriptor, and the most that may (a quarter of
// the open-files limit: past it a value is adopted without one and served as bytes).
size_t AdoptedFileCount();
size_t AdoptedFileCap();

// Bytes held by the large-buffer pool for reuse (counted in INFO memory).
size_t PooledFreeBytes();
// Unmaps pooled regions nobody has reused for `idle_ms`; returns the bytes released.
size_t ReleaseIdlePooled(int64_t idle_ms);
// Caps the free bytes the pool keeps for reuse (default DefaultPooledFreeCap(), 1 GiB); a lower
// cap unmaps the oldest regions past it at once. maxmemory sets it to 1/32 of the budget.
void SetPooledFreeCap(size_t bytes);
size_t DefaultPooledFreeCap();

// Whether values of 2 MiB and more (and shared arenas) ask for transparent huge pages: the
// `huge-pages` setting, set once at start-up before any value is allocated.
void SetHugePages(bool wanted);
bool HugePagesWanted();

}  // namespace prefixd
