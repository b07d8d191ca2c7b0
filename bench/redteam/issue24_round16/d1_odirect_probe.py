"""d1 (probe, outside the judge): how much of a copy an O_DIRECT write + read-back on the box's disk does with the
calling thread OFF the CPU (state D, its CPU clock still). The stop rule (`FrozenTree.freeze`,
candidate_link.py:277-300) bounds each thread's CPU from the look to its stop (50 us; leaders 100 us + 1.5 us a
thread) and the wall from the signal to "seen stopped" (2 ms + 30 us a thread): a thread that enters a disk I/O
after the look and before the signal spends almost no CPU, so only the wall allowance bounds the device's work.
Usage: d1_odirect_probe.py [DIR] [MiB]
"""
import mmap, os, sys, threading, time
d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/rt16-odirect"
mib = int(sys.argv[2]) if len(sys.argv) > 2 else 4
n = mib << 20
src = mmap.mmap(-1, n); src.write(os.urandom(n))
dst = mmap.mmap(-1, n)
path = os.path.join(d, "f")
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
states = []
def io():
    for _ in range(5):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        os.pwritev(fd, [src], 0)
        os.preadv(fd, [dst], 0)
        states.append(((time.thread_time_ns() - c0) / 1e3, (time.perf_counter_ns() - w0) / 1e3))
tid = []
t = threading.Thread(target=lambda: (tid.append(threading.get_native_id()), io())); t.start()
seen = set()
while t.is_alive():
    try:
        with open(f"/proc/self/task/{tid[0]}/stat") as fh:
            s = fh.read(); seen.add(s[s.rindex(")") + 2])
    except (OSError, IndexError):
        pass
t.join()
print({"MiB": mib, "cpu_us,wall_us per write+read": states, "states seen": sorted(seen), "equal": src[:] == dst[:]})
os.close(fd); os.unlink(path)
