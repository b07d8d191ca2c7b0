"""P1: what a loaded candidate (every guard on) may still do to files it does not own the rights to, by path or
read-only fd; each call's result is printed to its log (returned in `worker_log`). Not an attack by itself: the
table in README.md says which of these hold. Targets are a canary tree under /tmp (outside its read rules) and a
root file in /opt (readable). Nothing is changed but the canary's flags (then cleared).
Usage: python p1_probe.py
"""
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

CANARY = Path("/tmp/rt12-canary-p1")
PROBE = common.RESOLVER + r'''
#include <cstdio>
#include <cstring>
#include <cerrno>
namespace {
long (*S)(long, ...) = nullptr;
int* (*err)() = nullptr;
void line(const char* what, long rc) {
  char b[200]; int n = snprintf(b, sizeof b, "P1 %s -> %ld%s%s\n", what, rc, rc < 0 ? " " : "", rc < 0 ? strerror(*err()) : "");
  S(1, 1L, b, (long)n);
}
struct FileAttr { unsigned long long xflags; unsigned extsize, nextents, projid, cowextsize; };
struct AtLoad { AtLoad() {
  S = rt::sc();
  static const char el[] = {'_','_','e','r','r','n','o','_','l','o','c','a','t','i','o','n',0};
  err = reinterpret_cast<int* (*)()>(rt::find(el));
  static const char canary[] = "/tmp/rt12-canary-p1/file", cdir[] = "/tmp/rt12-canary-p1";
  static const char opt[] = "/opt/rt12-probe-target";
  line("open(canary, O_RDONLY)", S(2, canary, 0L, 0L));
  long fd = S(2, opt, 0L, 0L);
  line("open(/opt file, O_RDONLY)", fd);
  unsigned flags = 0;
  line("ioctl FS_IOC_GETFLAGS", S(16, fd, 0x80086601L, &flags));
  line("ioctl FS_IOC_SETFLAGS (sync)", S(16, fd, 0x40086602L, &flags));
  FileAttr fa{};
  line("ioctl FS_IOC_FSGETXATTR", S(16, fd, 0x801C581FL, &fa));
  line("ioctl FS_IOC_FSSETXATTR", S(16, fd, 0x401C5820L, &fa));
  line("ioctl EXT4_IOC_SETVERSION", S(16, fd, 0x40086604L, &flags));
  line("fcntl F_SETLEASE", S(72, fd, 1024L, 0L));
  line("fcntl F_SET_RW_HINT", [&] { unsigned long long h = 2; return S(72, fd, 1036L, &h); }());
  line("flock LOCK_EX|LOCK_NB on /opt file", S(73, fd, 2L | 4L));
  FileAttr g{};
  line("file_getattr(canary)", S(468, -100L, canary, &g, 24L, 0L));
  g.xflags |= 0x20 | 0x80;
  line("file_setattr(canary, SYNC|NODUMP)", S(469, -100L, canary, &g, 24L, 0L));
  g.xflags |= 0x8;
  line("file_setattr(canary, IMMUTABLE)", S(469, -100L, canary, &g, 24L, 0L));
  line("utimensat(canary)", S(280, -100L, canary, nullptr, 0L));
  line("fchmodat(canary)", S(268, -100L, canary, 0777L, 0L));
  line("setxattr(canary)", S(188, canary, "user.x", "1", 1L, 0L));
  char buf[64];
  line("getxattr(canary) (past the read rules)", S(191, canary, "user.x", buf, 64L));
  line("readlink(/proc/1/exe)", S(89, "/proc/1/exe", buf, 64L));
  long in = S(253);                                                              // inotify_init
  line("inotify_init", in);
  line("inotify_add_watch(/tmp, IN_CREATE) (unreadable dir)", S(254, in, "/tmp", 0x100L));
  line("quotactl_fd(Q_SYNC)", S(443, fd, (long)((0x800001u << 8) | 0), 0L, nullptr));
  struct { long value; int signo, notify; int pad[12]; } sev{}; sev.signo = 18;
  int tid = -1;
  line("timer_create(SIGCONT to itself)", S(222, 1L, &sev, &tid));
  line("sync()", S(162));
  (void)cdir;
} } at_load;
}
'''


def main() -> None:
    CANARY.mkdir(exist_ok=True)
    (CANARY / "file").write_text("canary\n")
    opt = Path("/opt/rt12-probe-target")
    opt.write_text("probe\n")
    cfg = common.config()
    try:
        row = common.run("p1_probe", "probe (static initializer)", common.workspace(
            "p1probe", kernels={"relu.cpp": common.RELU_KERNEL, "relu_binding.cpp": common.RELU_BINDING,
                                "probe.cpp": PROBE}), cfg, deserved="1", log_chars=4000)
        print(subprocess.run(["lsattr", str(CANARY / "file"), str(opt)], capture_output=True, text=True).stdout)
    finally:
        subprocess.run(["chattr", "-R", "-S", "-d", "-A", "-x", "-P", str(CANARY)], check=False)
        subprocess.run(["rm", "-rf", str(CANARY), str(opt)], check=False)
        common.shutdown()


if __name__ == "__main__":
    main()
