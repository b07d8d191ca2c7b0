// t1 probe target: N idle threads (futex sleepers) + one worker. On each byte from stdin the main thread sets
// deadline = now + DELAY_US, wakes the worker (which goes straight into clock_nanosleep(ABSTIME, deadline)) and
// prints "done". At the deadline the worker enters ONE preadv of BYTES from a memfd (page-cache copy: SIGSTOP
// does not interrupt it), then writes 'w' to stdout. Usage: t1 N DELAY_US BYTES
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/futex.h>
static int idle_word = 0, go = 0, memfd;
static long delay_ns, bytes;
static struct timespec deadline;
static char* buf;
static void* idle(void* a) { for (;;) syscall(SYS_futex, &idle_word, FUTEX_WAIT, 0, 0, 0, 0); return a; }
static void* worker(void* a) {
  for (;;) {
    while (__atomic_load_n(&go, __ATOMIC_ACQUIRE) == 0) syscall(SYS_futex, &go, FUTEX_WAIT, 0, 0, 0, 0);
    __atomic_store_n(&go, 0, __ATOMIC_RELEASE);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, 0) != 0) {}
    struct iovec v = {buf, (size_t)bytes};
    preadv(memfd, &v, 1, 0);
    write(1, "w", 1);
  }
  return a;
}
int main(int argc, char** argv) {
  int n = atoi(argv[1]); delay_ns = atol(argv[2]) * 1000; bytes = atol(argv[3]);
  memfd = memfd_create("src", 0); ftruncate(memfd, bytes);
  char* m = malloc(bytes); memset(m, 1, bytes); pwrite(memfd, m, bytes, 0); free(m);
  buf = malloc(bytes); memset(buf, 0, bytes);
  pthread_attr_t at; pthread_attr_init(&at); pthread_attr_setstacksize(&at, 65536);
  pthread_t t; pthread_create(&t, &at, worker, 0);
  for (int i = 0; i < n; ++i) pthread_create(&t, &at, idle, 0);
  write(1, "ready\n", 6);
  char c;
  while (read(0, &c, 1) == 1) {
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    long ns = deadline.tv_nsec + delay_ns; deadline.tv_sec += ns / 1000000000L; deadline.tv_nsec = ns % 1000000000L;
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE); syscall(SYS_futex, &go, FUTEX_WAKE, 1, 0, 0, 0);
    write(1, "done\n", 5);
  }
  return 0;
}
