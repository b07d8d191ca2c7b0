"""Probe (not an attack): what the sandboxed candidate holds and may do. Inherited fds, shared writable
mappings, its session/parent, and the prctl options beside PR_SET_PDEATHSIG (round 28 denied only that one).
Static checks and the symbol allowlist off (libc called directly): the sandbox alone is what is probed."""
from common import *  # noqa
BINDING = r'''
#include "binding_registry.h"
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static int armed = 0;
static void probe() {
  DIR* d = opendir("/proc/self/fd"); struct dirent* e; char p[512], l[512];
  while (d && (e = readdir(d))) { if (e->d_name[0]=='.') continue; snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(p, l, sizeof l - 1); l[n > 0 ? n : 0] = 0; int fl = fcntl(atoi(e->d_name), F_GETFL);
    fprintf(stderr, "RT29 fd %s -> %s flags %o\n", e->d_name, l, fl); }
  if (d) closedir(d);
  FILE* m = fopen("/proc/self/maps", "r"); char line[1024];
  while (m && fgets(line, sizeof line, m)) if (strstr(line, "rw-s") || strstr(line, "r--s")) fprintf(stderr, "RT29 shared %s", line);
  if (m) fclose(m);
  fprintf(stderr, "RT29 pid %d ppid %d sid %d pgid %d\n", getpid(), getppid(), getsid(0), getpgid(0));
  struct { int opt; unsigned long a2, a3, a4, a5; const char* name; } t[] = {
    {36, 1, 0, 0, 0, "PR_SET_CHILD_SUBREAPER"}, {0x59616d61, (unsigned long)-1, 0, 0, 0, "PR_SET_PTRACER any"},
    {62, 2 /*SHARE_FROM*/, (unsigned long)getppid(), 0 /*PIDTYPE_PID*/, 0, "PR_SCHED_CORE share_from ppid"},
    {62, 1 /*CREATE*/, 0, 1 /*TGID*/, 0, "PR_SCHED_CORE create"},
    {29, 1, 0, 0, 0, "PR_SET_TIMERSLACK 1ns"}, {41, 1, 0, 0, 0, "PR_SET_THP_DISABLE"},
    {35, 8 /*PR_SET_MM_START_BRK*/, 0, 0, 0, "PR_SET_MM"}, {57, 1, 0, 0, 0, "PR_SET_IO_FLUSHER"},
    {48, 0, 0, 0, 0, "PR_SET_TAGGED_ADDR_CTRL"}, {59, 0, 0, 0, 0, "PR_SET_VMA(anon name)"},
    {1, SIGCONT, 0, 0, 0, "PR_SET_PDEATHSIG (denied, control)"},
  };
  for (auto& x : t) { errno = 0; long r = prctl(x.opt, x.a2, x.a3, x.a4, x.a5); fprintf(stderr, "RT29 prctl %s -> %ld errno %d\n", x.name, r, errno); }
  errno = 0; long r = kill(getppid(), 0); fprintf(stderr, "RT29 kill(ppid,0) %ld errno %d\n", r, errno);
  errno = 0; r = syscall(SYS_setsid); fprintf(stderr, "RT29 setsid %ld errno %d\n", r, errno);
  errno = 0; r = syscall(SYS_sync); fprintf(stderr, "RT29 sync %ld errno %d\n", r, errno);
  snprintf(p, sizeof p, "/proc/%d/mem", getppid()); errno = 0; int fd = open(p, O_RDONLY); fprintf(stderr, "RT29 open ppid mem %d errno %d\n", fd, errno);
  snprintf(p, sizeof p, "/proc/%d/environ", getppid()); errno = 0; fd = open(p, O_RDONLY); fprintf(stderr, "RT29 open ppid environ %d errno %d\n", fd, errno);
  fflush(stderr);
}
at::Tensor relu_forward(const at::Tensor& x) {
  if (!armed++) probe();
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''
if __name__ == "__main__":
    run("probe", ws("probe", BINDING), cfg(GuardConfig(static_checks=False, symbols=False), budget_s=0.3), grep="RT29")
