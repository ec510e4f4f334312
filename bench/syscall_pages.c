/* bench/syscall_pages.c — what a system call costs on this host, and what
 * touching a page costs right after one (docs/server-cpu.md, "What a page
 * costs here"). A server makes a few system calls per message; the pages
 * its own code touches between them would pay their TLB misses again if
 * the kernel entry flushed the TLB, as it may in a virtual machine: the
 * last column says whether it does.
 *
 * For K = 1, 8, 32 and 128 pages (64 pages apart), three loops of 20,000
 * rounds: a system call (getppid) and then one read from each page; the
 * same reads without the call; the call alone. Each loop runs 5 times and
 * the median is printed, in ns per round, with the extra cost per page
 * that the call brings: (call+reads - call - reads) / K.
 *
 *   cc -O2 -o /tmp/syscall_pages bench/syscall_pages.c && /tmp/syscall_pages
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { kRounds = 20000, kRepeats = 5, kStride = 4096 * 64 };

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static volatile long sink;

/* ns per round: with_call adds a system call before the reads of k pages. */
static double loop(char* m, int k, int with_call, int with_reads) {
  double t0 = now_ns();
  for (int r = 0; r < kRounds; r++) {
    if (with_call) syscall(SYS_getppid);
    if (with_reads) {
      for (int i = 0; i < k; i++) sink += m[(size_t)i * kStride + (r & 63) * 64];
    }
  }
  return (now_ns() - t0) / kRounds;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(char* m, int k, int with_call, int with_reads) {
  double v[kRepeats];
  for (int i = 0; i < kRepeats; i++) v[i] = loop(m, k, with_call, with_reads);
  qsort(v, kRepeats, sizeof v[0], cmp);
  return v[kRepeats / 2];
}

int main(void) {
  static const int ks[] = {1, 8, 32, 128};
  char* m = mmap(NULL, (size_t)128 * kStride, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  for (int i = 0; i < 128; i++) m[(size_t)i * kStride] = 1;
  printf("%6s %14s %14s %14s %18s\n", "pages", "call ns", "reads ns", "call+reads ns", "extra ns per page");
  for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
    int k = ks[j];
    double call = median(m, k, 1, 0);
    double reads = median(m, k, 0, 1);
    double both = median(m, k, 1, 1);
    printf("%6d %14.1f %14.1f %14.1f %18.2f\n", k, call, reads, both, (both - call - reads) / k);
  }
  return 0;
}
