"""The worker's result channel: length-prefixed frames of JSON plus raw tensor bytes.

Why not pickle: the parent must never run code chosen by the worker, and a pickle is code.
Decoding here only ever builds JSON values and tensors of a whitelisted dtype and a shape
that matches the byte count, so a hostile worker can send wrong data, never run code.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import select
import struct
import time
from typing import Any

import torch

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
    torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128)}
_HEADER = struct.Struct("<II")  # json length, number of tensor blobs
_BLOB = struct.Struct("<Q")
MAX_FRAME_BYTES = 16 << 30


class ChannelError(Exception):
    """The other side closed, timed out or sent something malformed."""


class ChannelTimeout(ChannelError):
    pass


# ---- encoding (worker side) -----------------------------------------------------------
def encode(message: dict[str, Any]) -> list[bytes | memoryview]:
    """Frame parts; tensor bytes are views of CPU copies, not further copied."""
    blobs: list[memoryview] = []

    def walk(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            t = obj.detach().to("cpu").contiguous()
            blobs.append(memoryview(t.reshape(-1).view(torch.uint8).numpy()) if t.numel() else memoryview(b""))  # reshape first: 0-dim outputs (losses)
            return {"__tensor__": len(blobs) - 1, "dtype": str(t.dtype).removeprefix("torch."),
                    "shape": list(t.shape)}
        if isinstance(obj, dict):
            return {"__dict__": [[walk(k), walk(v)] for k, v in obj.items()]}
        if isinstance(obj, tuple):
            return {"__tuple__": [walk(v) for v in obj]}
        if isinstance(obj, list):
            return [walk(v) for v in obj]
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        return {"__repr__": f"{type(obj).__name__}: {str(obj)[:200]}"}

    body = json.dumps(walk(message)).encode()
    parts: list[bytes | memoryview] = [_HEADER.pack(len(body), len(blobs)), body]
    for b in blobs:
        parts += [_BLOB.pack(b.nbytes), b]
    return parts


def send(fd: int, message: dict[str, Any]) -> None:
    for part in encode(message):
        data = memoryview(part).cast("B")
        while data:
            n = os.write(fd, data)
            data = data[n:]


# ---- decoding (parent side) -----------------------------------------------------------
class Reader:
    """Reads frames from a pipe with a deadline, so a silent worker cannot hang the parent."""

    WATCH_INTERVAL_S = 0.1

    def __init__(self, fd: int, on_wait: Any = None) -> None:
        self.fd = fd
        self.on_wait = on_wait  # called about every WATCH_INTERVAL_S while reading (memory watchdog)
        self._last_watch = 0.0
        try:  # large pipe buffers: outputs are megabytes, the default buffer is 64 KiB
            fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ
        except OSError:
            pass

    def _read_exact(self, n: int, deadline: float) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            now = time.monotonic()
            if now >= deadline:
                raise ChannelTimeout("timed out waiting for the worker")
            if self.on_wait is not None and now - self._last_watch >= self.WATCH_INTERVAL_S:
                self._last_watch = now
                self.on_wait()
            ready, _, _ = select.select([self.fd], [], [], min(deadline - now, self.WATCH_INTERVAL_S))
            if not ready:
                continue
            k = os.readv(self.fd, [view[got:]])
            if k == 0:
                raise ChannelError("worker closed the channel")
            got += k
        return buf

    def receive(self, deadline: float) -> dict[str, Any]:
        json_len, n_blobs = _HEADER.unpack(self._read_exact(_HEADER.size, deadline))
        if json_len > 64 << 20 or n_blobs > 100_000:
            raise ChannelError("malformed frame header")
        body = self._read_exact(json_len, deadline)
        blobs = []
        for _ in range(n_blobs):
            (size,) = _BLOB.unpack(self._read_exact(_BLOB.size, deadline))
            if size > MAX_FRAME_BYTES:
                raise ChannelError("frame too large")
            blobs.append(self._read_exact(size, deadline))
        try:
            tree = json.loads(body)
        except ValueError:
            raise ChannelError("malformed frame body") from None
        message = _decode(tree, blobs)
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ChannelError("frame is not a message")
        return message


def _decode(obj: Any, blobs: list[bytearray]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, blobs) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        dtype = _DTYPES.get(obj.get("dtype"))
        idx, shape = obj.get("__tensor__"), obj.get("shape")
        if dtype is None or not isinstance(idx, int) or not 0 <= idx < len(blobs) or not isinstance(shape, list):
            raise ChannelError("malformed tensor in frame")
        if not all(isinstance(s, int) and s >= 0 for s in shape):
            raise ChannelError("malformed tensor shape")
        numel = math.prod(shape)
        elem = torch.empty((), dtype=dtype).element_size()
        if numel * elem != len(blobs[idx]):
            raise ChannelError("tensor size does not match its bytes")
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(blobs[idx], dtype=torch.uint8).view(dtype).reshape(shape)
    if "__tuple__" in obj:
        return tuple(_decode(v, blobs) for v in obj["__tuple__"])
    if "__dict__" in obj:
        return {_hashable(_decode(k, blobs)): _decode(v, blobs) for k, v in obj["__dict__"]}
    if "__repr__" in obj:
        return Opaque(str(obj["__repr__"]))
    return {k: _decode(v, blobs) for k, v in obj.items()}


def _hashable(key: Any) -> Any:
    return key if isinstance(key, (str, int, float, bool, type(None), tuple)) else repr(key)


class Opaque(str):
    """A non-tensor, non-JSON value the worker could only describe (compared by repr)."""
