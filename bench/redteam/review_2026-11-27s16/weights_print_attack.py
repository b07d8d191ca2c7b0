"""Weights print (judge._weights_print): changes that keep both sums, new (e6fb808) vs old (5102a97).

The keyed sum is sum_p signed32((w_p ^ flip) * (2p + (step|1)) mod 2^32): the position weights are
linear in p, so their differences are key-free, and a change confined to one bit plane j moves each
product by a multiple of 2^j * k_p mod 2^32. A flip of bit 31 (a float's sign) moves the product by
exactly 2^31 whatever the key: only its direction (the product's old sign) is key-dependent.
  A. two weights in DIFFERENT tensors, one positive and one negative, both negated: the old print's
     per-tensor plain sums always see it; the new per-device sums keep the plain sum exactly and the
     keyed one with probability ~1/2.
  B. the same pair inside ONE tensor: ~1/2 in old and new alike (pre-existing).
  C. 2m sign flips (m each way, e.g. a bias negated whole): ~1/sqrt(pi m), old and new (pre-existing).
  D. a bit-30 flip pattern at positions p, p+1, q, q+1 (+,-,-,+): the key-free linear part is exactly
     0 mod 2^32; only the int32 wraps are random (pre-existing; new: across tensors too).
  E. positions 2^30 words apart on one device get the same weight (`at & 0x3FFFFFFF`): a swap is
     unseen for every key. Old: only inside one tensor of > 4 GiB; new: any device with > 4 GiB of
     parameters. Shown on the formula (no 4 GiB tensor on this box).
Run: /work/main/.venv/bin/python bench/redteam/review_2026-11-27s16/weights_print_attack.py"""
import os
import struct

import torch

from _load import old
import cuda_agent.evaluation.judge as new_j

old_j = old("judge", "cuda_agent.evaluation")
TRIES = 400
g = torch.Generator().manual_seed(11)


def key():
    return struct.unpack("<ii", os.urandom(8))


def unseen_rate(mod, before, after):
    hits = 0
    for _ in range(TRIES):
        k = key()
        hits += mod._weights_print(before, k) == mod._weights_print(after, k)
    return hits / TRIES


def flip_signs(t, idx):
    t = t.clone()
    t.view(-1)[idx] = -t.view(-1)[idx]
    return t


params = {"conv.weight": torch.randn(64, 3, 3, 3, generator=g), "conv.bias": torch.randn(64, generator=g),
          "fc.weight": torch.randn(10, 64, generator=g), "fc.bias": torch.randn(10, generator=g)}

# A: one positive weight of conv.weight and one negative of fc.weight negated
w, f = params["conv.weight"].view(-1), params["fc.weight"].view(-1)
i = int((w > 0).nonzero()[5]); j = int((f < 0).nonzero()[3])
a_after = {**params, "conv.weight": flip_signs(params["conv.weight"], [i]), "fc.weight": flip_signs(params["fc.weight"], [j])}
print(f"A cross-tensor sign pair     unseen: old {unseen_rate(old_j, params, a_after):.2f}  new {unseen_rate(new_j, params, a_after):.2f}")

# B: the pair inside one tensor
i2 = int((w < 0).nonzero()[7])
b_after = {**params, "conv.weight": flip_signs(params["conv.weight"], [i, i2])}
print(f"B same-tensor sign pair      unseen: old {unseen_rate(old_j, params, b_after):.2f}  new {unseen_rate(new_j, params, b_after):.2f}")

# C: a bias negated whole, made to have as many positive as negative entries
bias = torch.randn(64, generator=g).abs()
bias[::2] *= -1
c_before = {**params, "conv.bias": bias}
c_after = {**params, "conv.bias": -bias}
print(f"C 64-entry bias negated      unseen: old {unseen_rate(old_j, c_before, c_after):.2f}  new {unseen_rate(new_j, c_before, c_after):.2f}"
      "   (1/sqrt(pi*32) = 0.10)")

# D: bit 30 flipped at p (0->1), p+1 (1->0), q (1->0), q+1 (0->1), words of one tensor chosen to allow it
words = params["conv.weight"].clone().view(-1).view(torch.int32)
bit = 1 << 30
has = (words & bit) != 0
cands_p = [p for p in range(0, words.numel() - 1) if not has[p] and has[p + 1]]
cands_q = [q for q in range(0, words.numel() - 1) if has[q] and not has[q + 1] and abs(q - cands_p[0]) > 2]
p, q = cands_p[0], cands_q[0]
d = words.clone()
d[p] |= bit; d[p + 1] &= ~bit; d[q] &= ~bit; d[q + 1] |= bit
d_after = {**params, "conv.weight": d.view(torch.float32).view(64, 3, 3, 3)}
print(f"D bit-30 4-word pattern      unseen: old {unseen_rate(old_j, params, d_after):.2f}  new {unseen_rate(new_j, params, d_after):.2f}"
      f"   (values changed: {params['conv.weight'].view(-1)[[p, p+1, q, q+1]].tolist()} -> {d_after['conv.weight'].view(-1)[[p, p+1, q, q+1]].tolist()})")

# control: a random single-word change is always seen
e_after = {**params, "fc.bias": params["fc.bias"] + torch.tensor([0.0] * 9 + [1e-3])}
print(f"control single change        unseen: old {unseen_rate(old_j, params, e_after):.2f}  new {unseen_rate(new_j, params, e_after):.2f}")


# E: the weight of word p as the new fold computes it (the fold's own expressions, per chunk start `at`)
def weight(at, i, step):
    offset = (2 * (at & 0x3FFFFFFF) + (step | 1) + 2**31) % 2**32 - 2**31
    return (2 * i + offset + 2**31) % 2**32 - 2**31


step = key()[1]
CH = new_j.PRINT_CHUNK
same = 0
for p in (5, 123456, CH * 7 + 3, (1 << 30) - 1):
    pa, pb = p, p + (1 << 30)
    wa = weight(pa - pa % CH, pa % CH, step)
    wb = weight(pb - pb % CH, pb % CH, step)
    same += wa == wb
print(f"E words 2^30 apart with the same weight: {same}/4 (a swap of them keeps plain and keyed sums for every key)")
