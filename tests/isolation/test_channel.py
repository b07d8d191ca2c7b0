"""The channel: frames round-trip every dtype, bad byte counts are refused, nothing is unpickled."""

from __future__ import annotations

import os

import pytest
import torch

from cuda_agent.isolation.channel import ChannelError, Reader, encode, send


def _roundtrip(message: dict) -> dict:
    r, w = os.pipe()
    try:
        send(w, message)
        return Reader(r).receive(deadline=1e18)
    finally:
        os.close(r)
        os.close(w)


def test_channel_roundtrips_nested_outputs_of_every_dtype():
    out = (torch.randn(3, 4), {"a": torch.arange(5), "b": [torch.ones(2, dtype=torch.bfloat16), 3]},
           torch.zeros(0), torch.tensor([True, False]), 1.5, None)
    got = _roundtrip({"type": "x", "output": out})["output"]
    assert isinstance(got, tuple) and len(got) == len(out)
    assert torch.equal(got[0], out[0]) and got[1]["b"][0].dtype == torch.bfloat16
    assert torch.equal(got[1]["a"], out[1]["a"]) and got[1]["b"][1] == 3
    assert got[2].shape == (0,) and got[3].dtype == torch.bool and got[4] == 1.5 and got[5] is None


def test_channel_rejects_a_tensor_whose_bytes_do_not_match_its_shape():
    parts = encode({"type": "x", "output": torch.ones(4)})
    frame = b"".join(bytes(p) for p in parts).replace(b'"shape": [4]', b'"shape": [5]')
    r, w = os.pipe()
    os.write(w, frame)
    with pytest.raises(ChannelError):
        Reader(r).receive(deadline=1e18)
    os.close(r)
    os.close(w)


def test_channel_never_unpickles_objects():
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    got = _roundtrip({"type": "x", "output": Evil()})["output"]
    assert isinstance(got, str) and "Evil" in got
