#include "store/small_chunks.h"

#include <sys/mman.h>

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PREFIXD_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PREFIXD_ASAN 1
#endif
#if defined(PREFIXD_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace prefixd::store {

// A page opens with this header; its slots follow. A free slot holds the offset of the next one
// in its first two bytes.
struct SmallChunks::Page {
  SmallChunks* owner;
  Page* prev;  // the owner's open list of this class
  Page* next;
  uint16_t slot_bytes;
  uint16_t live;
  uint16_t free_head;  // offset of the first freed slot; 0 (the header's place) when none
  uint16_t fresh;      // offset of the first slot never handed out
};

namespace {

constexpr size_t kHeader = 32;  // sizeof(SmallChunks::Page)
static_assert(SmallChunks::kLargest % 8 == 0 && SmallChunks::kPageBytes <= 0xffff);

// ASan sees no redzones in these pages: a chunk is unpoisoned while it is handed out (all of its
// slot: an entry may grow in place within it) and poisoned again when freed, so a use after Free
// or past the slot is still reported (as use-after-poison).
void Poison(const void* p, size_t n) {
#if defined(PREFIXD_ASAN)
  ASAN_POISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}
void Unpoison(const void* p, size_t n) {
#if defined(PREFIXD_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}

// The free-slot links live in poisoned slots: read and written unchecked.
#if defined(PREFIXD_ASAN)
__attribute__((no_sanitize("address")))
#endif
uint16_t
LoadLink(const unsigned char* slot) {
  uint16_t v;
  std::memcpy(&v, slot, sizeof v);
  return v;
}
#if defined(PREFIXD_ASAN)
__attribute__((no_sanitize("address")))
#endif
void StoreLink(unsigned char* slot, uint16_t v) {
  std::memcpy(slot, &v, sizeof v);
}

// Pages for every SmallChunks of the process: mapped 64 at a time, never unmapped; a page given
// back is dropped from RSS (MADV_DONTNEED) and handed out again before a new mapping is made.
class PagePool {
 public:
  static PagePool& Get() {
    static PagePool* pool = new PagePool();  // never destroyed: heaps may outlive statics
    return *pool;
  }

  void* Take() {
    std::lock_guard lock(mu_);
    if (free_.empty()) {
      constexpr size_t kPagesPerMap = 64;
      void* map = ::mmap(nullptr, kPagesPerMap * SmallChunks::kPageBytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (map == MAP_FAILED) throw std::bad_alloc();
      for (size_t i = kPagesPerMap; i-- > 0;) {
        free_.push_back(static_cast<unsigned char*>(map) + i * SmallChunks::kPageBytes);
      }
    }
    void* page = free_.back();
    free_.pop_back();
    return page;
  }

  void Give(void* page) {
    ::madvise(page, SmallChunks::kPageBytes, MADV_DONTNEED);
    std::lock_guard lock(mu_);
    free_.push_back(page);
  }

 private:
  std::mutex mu_;
  std::vector<void*> free_;
};

SmallChunks::Page* PageOf(void* chunk) {
  const auto at = reinterpret_cast<uintptr_t>(chunk);
  return reinterpret_cast<SmallChunks::Page*>(at & ~uintptr_t{SmallChunks::kPageBytes - 1});
}

bool Full(const SmallChunks::Page& page) {
  return page.free_head == 0 && page.fresh + page.slot_bytes > SmallChunks::kPageBytes;
}

}  // namespace

static_assert(sizeof(SmallChunks::Page) == kHeader, "a page header is 32 bytes");

SmallChunks::~SmallChunks() {
  Trim();
  // Every chunk was freed, so every page was empty and Trim gave it back.
  assert(pages_ == 0);
}

void* SmallChunks::Allocate(size_t request) {
  assert(request <= kLargest);
  const size_t slot = SlotBytes(request);
  Page*& head = open_[slot / 8];
  if (head == nullptr) {
    auto* page = static_cast<Page*>(PagePool::Get().Take());
    *page = Page{
        this, nullptr, nullptr, static_cast<uint16_t>(slot), 0, 0, static_cast<uint16_t>(kHeader)};
    Poison(reinterpret_cast<unsigned char*>(page) + kHeader, kPageBytes - kHeader);
    pages_ += 1;
    Open(page);
  }
  Page* page = head;
  unsigned char* base = reinterpret_cast<unsigned char*>(page);
  unsigned char* chunk;
  if (page->free_head != 0) {
    chunk = base + page->free_head;
    page->free_head = LoadLink(chunk);
  } else {
    chunk = base + page->fresh;
    page->fresh = static_cast<uint16_t>(page->fresh + slot);
  }
  page->live += 1;
  if (Full(*page)) Close(page);
  Unpoison(chunk, slot);
  return chunk;
}

void SmallChunks::Free(void* chunk) {
  Page* page = PageOf(chunk);
  SmallChunks& owner = *page->owner;
  const bool was_full = Full(*page);
  auto* slot = static_cast<unsigned char*>(chunk);
  Poison(slot, page->slot_bytes);
  StoreLink(slot, page->free_head);
  page->free_head = static_cast<uint16_t>(slot - reinterpret_cast<unsigned char*>(page));
  page->live -= 1;
  if (was_full) {
    owner.Open(page);
  } else if (page->live == 0 && (page->prev != nullptr || page->next != nullptr)) {
    owner.Close(page);
    owner.Release(page);
  }
}

void SmallChunks::Trim() {
  for (Page*& head : open_) {
    for (Page* page = head; page != nullptr;) {
      Page* next = page->next;
      if (page->live == 0) {
        Close(page);
        Release(page);
      }
      page = next;
    }
  }
}

void SmallChunks::Open(Page* page) {
  Page*& head = open_[page->slot_bytes / 8];
  page->prev = nullptr;
  page->next = head;
  if (head != nullptr) head->prev = page;
  head = page;
}

void SmallChunks::Close(Page* page) {
  Page*& head = open_[page->slot_bytes / 8];
  if (page->prev != nullptr) {
    page->prev->next = page->next;
  } else {
    head = page->next;
  }
  if (page->next != nullptr) page->next->prev = page->prev;
  page->prev = page->next = nullptr;
}

void SmallChunks::Release(Page* page) {
  pages_ -= 1;
  Unpoison(page, kPageBytes);  // the next owner poisons what it does not hand out
  PagePool::Get().Give(page);
}

void* AllocateStoreChunk(SmallChunks& chunks, size_t request) {
  if (request <= SmallChunks::kLargest) return chunks.Allocate(request);
  void* chunk = std::malloc(request);
  if (chunk == nullptr) throw std::bad_alloc();
  return chunk;
}

void FreeStoreChunk(void* chunk, size_t request) {
  if (request <= SmallChunks::kLargest) {
    SmallChunks::Free(chunk);
  } else {
    std::free(chunk);
  }
}

}  // namespace prefixd::store
