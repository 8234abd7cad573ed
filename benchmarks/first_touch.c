// first_touch: how long this machine takes to touch fresh anonymous memory for the first time,
// with and without transparent huge pages. Eight 64 MiB mappings, each written once and timed;
// prints the total and the worst mapping. Explains the first large stores into a fresh server
// (docs/benchmarks.md, "The 64 MiB stores from four clients").
//
//   gcc -O2 -o /tmp/first_touch benchmarks/first_touch.c
//   /tmp/first_touch huge; /tmp/first_touch
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double Seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const size_t size = (size_t)64 << 20;
  const int huge = argc > 1 && strcmp(argv[1], "huge") == 0;
  double total = 0, worst = 0;
  for (int i = 0; i < 8; ++i) {
    char* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return perror("mmap"), 1;
    // Huge pages as prefixd asks for them on values of 32 KiB and more (common/bytes.cc).
    if (huge) madvise(p, size, MADV_HUGEPAGE);
    const double start = Seconds();
    memset(p, 1, size);
    const double took = Seconds() - start;
    total += took;
    if (took > worst) worst = took;
  }
  printf("huge pages %s: 512 MiB first touched in %.1f ms, worst 64 MiB %.1f ms\n",
         huge ? "advised" : "not advised", total * 1e3, worst * 1e3);
  return 0;
}
