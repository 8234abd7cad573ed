// copy_source: how fast one thread copies a value out of each kind of memory a same-host client
// may read it from, in one process and one run: anonymous memory with and without transparent
// huge pages (the memcpy reference of prefixd-blob-bench), and a memfd mapped shared, as a
// client maps a server's arena (docs/shm-transport.md), with and without MADV_HUGEPAGE on both
// the writer's and the reader's mapping. Whether a shmem source gets huge pages depends on
// /sys/kernel/mm/transparent_hugepage/shmem_enabled ("advise" lets MADV_HUGEPAGE ask); the
// program prints the huge bytes each source got (smaps), so a row says what it measured.
// By default the sources take turns copy by copy, so the machine's load falls on all of them
// alike and no source stays in the CPU's last-level cache between its copies (a copy through
// memory). "warm" copies each source `copies` times in a row instead, as prefixd-blob-bench's
// memcpy mode and a client that reads one value again do: at sizes that fit the cache, the
// page walks then weigh more.
//
//   gcc -O2 -o /tmp/copy_source benchmarks/copy_source.c
//   /tmp/copy_source [MiB] [copies] [warm]   (defaults: 16 MiB, 200 copies per source)
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { kSources = 4 };
static const char* const kNames[kSources] = {
    "anonymous, huge pages advised", "anonymous, huge pages refused",
    "memfd shared, huge pages advised", "memfd shared, huge pages refused"};

static double Seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int Compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

// The bytes of [p, p + size) that smaps reports on huge pages (anonymous or shmem PMD-mapped).
static uint64_t HugeBytes(const void* p, size_t size) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return 0;
  char line[256];
  int inside = 0;
  uint64_t kib = 0, total = 0;
  const uintptr_t begin = (uintptr_t)p, end = begin + size;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = lo < end && hi > begin;
    } else if (inside && (sscanf(line, "AnonHugePages: %lu kB", &kib) == 1 ||
                          sscanf(line, "ShmemPmdMapped: %lu kB", &kib) == 1 ||
                          sscanf(line, "FilePmdMapped: %lu kB", &kib) == 1)) {
      total += kib * 1024;
    }
  }
  fclose(f);
  return total;
}

// A mapping of `size` bytes aligned to 2 MiB (huge pages need it), written once.
static char* Source(int shared, int huge, size_t size) {
  const size_t align = (size_t)2 << 20;
  char* p;
  if (shared) {
    const int fd = memfd_create("copy-source", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return perror("memfd"), NULL;
    // The writer's mapping (as the server's), then a separate reader's mapping (as a client's).
    char* writer = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (writer == MAP_FAILED) return perror("mmap"), NULL;
    munmap(writer, size + align);
    writer = mmap((void*)(((uintptr_t)writer + align - 1) & ~(align - 1)), size,
                  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    madvise(writer, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(writer, 7, size);
    char* room = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p = mmap((void*)(((uintptr_t)room + align - 1) & ~(align - 1)), size, PROT_READ,
             MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) return perror("mmap"), NULL;
    madvise(p, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    close(fd);
  } else {
    char* room =
        mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (room == MAP_FAILED) return perror("mmap"), NULL;
    p = (char*)(((uintptr_t)room + align - 1) & ~(align - 1));
    madvise(p, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(p, 7, size);
  }
  return p;
}

int main(int argc, char** argv) {
  const size_t size = (size_t)(argc > 1 ? atoi(argv[1]) : 16) << 20;
  const int copies = argc > 2 ? atoi(argv[2]) : 200;
  const int warm = argc > 3 && strcmp(argv[3], "warm") == 0;
  char* sources[kSources];
  for (int s = 0; s < kSources; ++s) {
    sources[s] = Source(s >= 2, s % 2 == 0, size);
    if (sources[s] == NULL) return 1;
  }
  // The destination, as prefixd-blob-bench's: anonymous, huge pages advised, pre-faulted.
  char* target = Source(0, 1, size);
  double* took[kSources];
  for (int s = 0; s < kSources; ++s) took[s] = calloc((size_t)copies, sizeof(double));
  volatile char sink = 0;
  for (int round = 0; round < (warm ? kSources : 1); ++round) {
    for (int i = -5; i < copies; ++i) {  // five untimed copies first
      for (int s = warm ? round : 0; s < (warm ? round + 1 : kSources); ++s) {
        const double start = Seconds();
        memcpy(target, sources[s], size);
        const double t = Seconds() - start;
        sink ^= target[size - 1];
        if (i >= 0) took[s][i] = t;
      }
    }
  }
  printf("%zu MiB, %d copies per source, %s (median GB/s, p10-p90 GB/s, huge MiB)\n", size >> 20,
         copies, warm ? "each source's in a row" : "taking turns");
  double reference = 0;
  for (int s = 0; s < kSources; ++s) {
    qsort(took[s], (size_t)copies, sizeof(double), Compare);
    const double median = (double)size / took[s][copies / 2] / 1e9;
    if (s == 0) reference = median;
    printf("%-34s %6.2f GB/s (%5.2f-%5.2f)  %.2fx the first  huge %4lu MiB\n", kNames[s], median,
           (double)size / took[s][copies * 9 / 10] / 1e9, (double)size / took[s][copies / 10] / 1e9,
           median / reference, (unsigned long)(HugeBytes(sources[s], size) >> 20));
  }
  return 0;
}
