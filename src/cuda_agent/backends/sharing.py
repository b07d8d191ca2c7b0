"""Memory shared between the judge and the candidate process, per device family.

The judge owns an *arena* (one allocation) that holds the inputs it gives the candidate; the
candidate maps it. The candidate's outputs stay in the candidate's own memory: it says where
they are (a claim), and the judge reads them itself, from outside that process, after the
timed interval is over: CUDA IPC handles on the GPU, `process_vm_readv` on the CPU. Every
claim is bounds-checked against the allocation it names before a byte is read, so a hostile
description can make the judge read the wrong bytes (and fail the candidate), never read
outside what the candidate owns.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
from pathlib import Path
from typing import Any

ALIGN = 256
OWN_PAGE = 2 << 20  # a device allocation of its own is made in whole pages of this size


class SharingError(RuntimeError):
    """A description the other side sent cannot be honoured (malformed, out of bounds)."""


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def describe_tensor(t: Any) -> dict[str, Any]:
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "strides": list(t.stride())}


def layout_extent(desc: dict[str, Any]) -> tuple[Any, list[int], list[int], int, int]:
    """(dtype, shape, strides, element size, extent): the extent is the bytes from the first
    element to one past the last one the strided view can touch."""
    import torch

    dt = getattr(torch, str(desc.get("dtype")), None)
    if not isinstance(dt, torch.dtype):
        raise SharingError(f"unknown dtype {desc.get('dtype')!r}")
    elsize = dt.itemsize
    shape, strides = [int(s) for s in desc["shape"]], [int(s) for s in desc["strides"]]
    if len(shape) != len(strides) or any(d < 0 for d in shape):
        raise SharingError("malformed layout")
    if any(s == 0 for s in shape):
        return dt, shape, strides, elsize, 0
    if any(st < 0 for st in strides):
        raise SharingError("negative strides")
    return dt, shape, strides, elsize, (sum((d - 1) * st for d, st in zip(shape, strides)) + 1) * elsize


def overlaps_itself(shape: list[int], strides: list[int]) -> bool:
    """Whether two elements of the strided layout may share memory (a stride of 0, an expand,
    rows that interleave). False for every permutation of a contiguous layout and every slice
    of one: dimensions sorted by stride, each must step past everything the smaller ones reach."""
    reach = 0
    for size, stride in sorted(((d, st) for d, st in zip(shape, strides) if d > 1), key=lambda p: p[1]):
        if stride <= reach:
            return True
        reach += (size - 1) * stride
    return False


def element_bytes(desc: dict[str, Any]) -> int:
    dt, shape, _, elsize, _ = layout_extent(desc)
    n = 1
    for d in shape:
        n *= d
    return n * elsize


def view_bytes(raw: Any, desc: dict[str, Any], offset: int) -> Any:
    """A strided tensor of `desc`'s dtype/shape over the uint8 tensor `raw` at `offset`."""
    import torch

    dt, shape, strides, elsize, extent = layout_extent(desc)
    if offset < 0 or offset % elsize or offset + extent > raw.numel():
        raise SharingError(f"tensor of {extent} bytes at offset {offset} is outside its {raw.numel()}-byte allocation")
    if extent == 0:
        return torch.empty(shape, dtype=dt, device=raw.device)
    flat = raw[offset:offset + extent].view(dt)  # extent is a whole number of elements
    return flat.as_strided(shape, strides)


# ---- CUDA: IPC handles through the runtime the process already loaded ----------------------
class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class _CudaArray:
    """Wraps a raw device pointer for torch.as_tensor (it does not own the memory)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}


class _OwnedCudaMemory(_CudaArray):
    """A device allocation made with cudaMalloc, freed when the last tensor over it goes
    (`torch.as_tensor` keeps the object it wraps alive as long as any tensor made from it)."""

    def __init__(self, free: Any, ptr: int, nbytes: int) -> None:
        super().__init__(ptr, nbytes)
        self._free, self._ptr = free, ptr

    def __del__(self) -> None:
        self._free(ctypes.c_void_p(self._ptr))


def _loaded_library(fragment: str) -> str:
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if fragment in Path(path).name:
            return path
    raise SharingError(f"{fragment} is not loaded in this process (CUDA not initialised?)")


class CudaIpc:
    """cudaIpc* and cuMemGetAddressRange through ctypes on the libraries torch loaded."""

    def __init__(self) -> None:
        import torch

        torch.cuda.init()
        self.rt = ctypes.CDLL(_loaded_library("libcudart"))
        self.drv = ctypes.CDLL("libcuda.so.1")
        self.rt.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), _IpcHandle, ctypes.c_uint]
        self.rt.cudaIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcHandle), ctypes.c_void_p]
        self.rt.cudaIpcCloseMemHandle.argtypes = [ctypes.c_void_p]
        self.drv.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                     ctypes.c_uint64]
        self.rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        self.rt.cudaFree.argtypes = [ctypes.c_void_p]
        self._exported: dict[int, tuple[str, int]] = {}  # base -> (handle hex, size)
        self._opened: dict[str, tuple[int, int]] = {}  # handle hex -> (base, size)
        self._owner: dict[str, Any] = {}  # handle hex -> the client whose output first named it (`open`)
        self._claims: dict[str, Any] = {}  # an exported arena's handle hex -> the client it was laid out for

    def allocation_of(self, ptr: int) -> tuple[int, int]:
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        if self.drv.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)) != 0:
            raise SharingError(f"pointer {ptr:#x} is not device memory")
        return int(base.value), int(size.value)

    def allocate(self, nbytes: int) -> Any:
        """A zeroed uint8 tensor of `nbytes` over a device allocation of its own (cudaMalloc, in
        whole 2 MiB pages), not a block of torch's caching allocator: an IPC handle maps the
        whole allocation its block lies in, and a block carved from a shared segment would show
        the importer every other tensor of this process in that segment (issue 24)."""
        import torch

        size = max(1, -(-nbytes // OWN_PAGE)) * OWN_PAGE
        ptr = ctypes.c_void_p()
        err = self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))
        if err != 0:  # the caching allocator may hold what is free: give it back and try once more
            self.rt.cudaGetLastError()  # (not left for torch's next launch check to find)
            torch.cuda.empty_cache()
            err = self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))
        if err != 0 or not ptr.value:
            self.rt.cudaGetLastError()
            raise torch.cuda.OutOfMemoryError(f"cudaMalloc of {size} bytes for the input arena failed ({err})")
        raw = torch.as_tensor(_OwnedCudaMemory(self.rt.cudaFree, int(ptr.value), size), device="cuda")
        raw.zero_()  # the pages may hold what an earlier allocation of this process left
        return raw[:nbytes]

    def export(self, ptr: int) -> dict[str, Any]:
        """Where `ptr` lives: the IPC handle of its allocation and the offset inside it."""
        base, size = self.allocation_of(ptr)
        # asked anew every time (a few microseconds): an allocation freed and made again at the
        # same address (the allocator emptied its cache) has a new handle, and a remembered old
        # one would name memory that no longer exists
        handle = _IpcHandle()
        err = self.rt.cudaIpcGetMemHandle(ctypes.byref(handle), ctypes.c_void_p(base))
        if err != 0:
            raise SharingError(f"cudaIpcGetMemHandle failed ({err})")
        known = self._exported[base] = (ctypes.string_at(ctypes.addressof(handle), 64).hex(), size)
        return {"handle": known[0], "offset": ptr - base}

    def forget_exports(self) -> None:
        """Drop the record of this process's own exports (its memory was given back): a client
        naming one of them later must not be read as this process's current memory."""
        self._exported.clear()
        self._claims.clear()

    def claim(self, handle_hex: str, owner: Any) -> None:
        """An arena this process exported is `owner`'s: another client's output naming it is refused."""
        self._claims[handle_hex] = owner

    def open(self, handle_hex: str, owner: Any = None) -> tuple[int, int]:
        """Map another process's allocation once; (base pointer, size). `owner`: the client whose
        output names it. One client's outputs never name memory another client's did: the mapping
        is shared by every reader of this process, and a candidate that named the baseline
        client's output memory would be read as computing eager's outputs (red team round 23, F1)."""
        if handle_hex in self._opened:
            if owner is not None and self._owner.get(handle_hex, owner) != owner:
                raise SharingError("the output names memory another client process shared with the judge")
            return self._opened[handle_hex]
        for base, (mine, size) in self._exported.items():  # our own memory (an output that is a view of an input)
            if mine == handle_hex:
                if owner is not None and self._claims.get(handle_hex, owner) != owner:
                    raise SharingError("the output names another client process's input arena")
                return base, size
        try:
            raw = bytes.fromhex(handle_hex)
        except ValueError:
            raise SharingError("malformed IPC handle") from None
        if len(raw) != 64:
            raise SharingError("malformed IPC handle")
        handle = _IpcHandle()
        ctypes.memmove(ctypes.addressof(handle), raw, 64)  # (handle.reserved would be a copy)
        ptr = ctypes.c_void_p()
        err = self.rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), handle, ctypes.c_uint(1))
        if err != 0 or not ptr.value:
            raise SharingError(f"cannot open the IPC handle (cudaIpcOpenMemHandle error {err})")
        base, size = self.allocation_of(int(ptr.value))
        self._opened[handle_hex] = (int(ptr.value), size - (int(ptr.value) - base))
        if owner is not None:
            self._owner[handle_hex] = owner
        return self._opened[handle_hex]

    def tensor_at(self, handle_hex: str, owner: Any = None) -> Any:
        import torch

        base, size = self.open(handle_hex, owner)
        return torch.as_tensor(_CudaArray(base, size), device="cuda")

    def close_all(self) -> None:
        for base, _ in self._opened.values():
            self.rt.cudaIpcCloseMemHandle(ctypes.c_void_p(base))
        self._opened.clear()
        self._owner.clear()


# ---- CPU: a memfd for the arena, process_vm_readv for outputs ------------------------------
class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def memfd_arena(nbytes: int) -> tuple[int, Any, Any]:
    """(fd, mmap, uint8 tensor over it): memory the candidate maps from the fd it is sent."""
    fd = os.memfd_create("cuda-agent-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, max(nbytes, 1))
    # sealed at its size: a candidate that truncated its mapping would crash the judge (SIGBUS)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd, *map_fd(fd, nbytes)


def map_fd(fd: int, nbytes: int) -> tuple[Any, Any]:
    import torch

    mm = mmap.mmap(fd, max(nbytes, 1))
    return mm, torch.frombuffer(mm, dtype=torch.uint8, count=nbytes) if nbytes else torch.empty(0, dtype=torch.uint8)


def read_process_memory(pid: int, address: int, nbytes: int) -> Any:
    """Copy `nbytes` at `address` of process `pid` into a new uint8 tensor (judge side)."""
    import torch

    out = torch.empty(nbytes, dtype=torch.uint8)
    if nbytes == 0:
        return out
    libc = ctypes.CDLL(None, use_errno=True)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    local = _IoVec(ctypes.c_void_p(out.data_ptr()), nbytes)
    remote = _IoVec(ctypes.c_void_p(address), nbytes)
    got = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if got != nbytes:
        err = os.strerror(ctypes.get_errno()) if got < 0 else f"short read ({got} of {nbytes} bytes)"
        raise SharingError(f"cannot read the candidate's output at {address:#x}: {err}")
    return out
