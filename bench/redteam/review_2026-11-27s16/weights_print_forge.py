"""A targeted change that keeps the weights print for every key up to the int32 wraps (the print's
only key-dependent randomness), made without knowing the key.

Zero one weight w_t. Each set bit b of w_t is a -1 flip in bit plane b; per plane add three flips at
a, c, d (bit b 0->1 at a and c, 1->0 at d) with d = a + c - t. Per plane the flips sum to 0 (plain
sum unchanged exactly) and their positions' moment sum_p p*e_p = 0, so the keyed sum's part
sum_b (-1)^flip_b 2^(b+1) sum_p p*e_p + s*sum_p e_p is 0 mod 2^32 whatever flip and step are; only
whether each product crosses the int32 range (a carry into the int64 sum) is left to chance.

  new print: compensation put in ANOTHER tensor (one the output hardly depends on), vs
  old print: the same compensation in another tensor is always seen (its per-tensor plain sums);
             inside the target's own tensor it fares as the new one does (pre-existing).
Run: /work/main/.venv/bin/python bench/redteam/review_2026-11-27s16/weights_print_forge.py"""
import os
import random
import struct

import torch

from _load import old
import cuda_agent.evaluation.judge as new_j

old_j = old("judge", "cuda_agent.evaluation")
rng = random.Random(4)
g = torch.Generator().manual_seed(4)
TRIES = 600


def forge(words, t, region):
    """Flips (index -> xor mask) that zero words[t] and keep count and moment per bit plane, within region."""
    masks = {t: int(words[t]) & 0xFFFFFFFF}
    for b in range(32):
        if not (masks[t] >> b) & 1:
            continue
        bit = lambda p: (int(words[p]) >> b) & 1  # noqa: E731
        for _ in range(200000):
            a, c = rng.sample(region, 2)
            d = a + c - t
            if d in region and len({a, c, d, t}) == 4 and not bit(a) and not bit(c) and bit(d) \
                    and not any((masks.get(p, 0) >> b) & 1 for p in (a, c, d)):
                for p in (a, c, d):
                    masks[p] = masks.get(p, 0) | (1 << b)
                break
        else:
            raise RuntimeError(f"no compensation for bit {b}")
    return masks


def apply(params, order, masks):
    flat = torch.cat([params[n].reshape(-1) for n in order]).view(torch.int32).clone()
    for p, m in masks.items():
        flat[p] ^= torch.tensor(m, dtype=torch.int64).to(torch.int32) if m < 2**31 else torch.tensor(m - 2**32, dtype=torch.int32)
    out, at = {}, 0
    for n in order:
        k = params[n].numel()
        out[n] = flat[at:at + k].view(torch.float32).view(params[n].shape)
        at += k
    return out


def unseen(mod, before, after):
    hits = 0
    for _ in range(TRIES):
        k = struct.unpack("<ii", os.urandom(8))
        hits += mod._weights_print(before, k) == mod._weights_print(after, k)
    return hits / TRIES


params = {"a.unused": torch.randn(4096, generator=g), "b.weight": torch.randn(64, 10, generator=g)}
order = sorted(params)
words = torch.cat([params[n].reshape(-1) for n in order]).view(torch.int32)
n_a = params["a.unused"].numel()
t = n_a + 123  # b.weight[12, 3]
# cross-tensor: all compensation inside a.unused (global positions, as the new print counts them)
cross = forge(words, t, list(range(0, n_a)))
after = apply(params, order, cross)
assert float(after["b.weight"].view(-1)[123]) == 0.0 and torch.equal(
    after["b.weight"].view(-1)[torch.arange(640) != 123], params["b.weight"].view(-1)[torch.arange(640) != 123])
print(f"zero b.weight[12,3] = {float(params['b.weight'].view(-1)[123]):.4f}, {len(cross) - 1} words of a.unused flipped, "
      f"b.weight otherwise untouched")
print(f"  cross-tensor  unseen: old {unseen(old_j, params, after):.2f}  new {unseen(new_j, params, after):.2f}")
# same tensor (what the old print allowed): positions local to b.weight for the old print
local = params["b.weight"].reshape(-1).view(torch.int32)
inside = forge(local, 123, list(range(640)))
after2 = {**params, "b.weight": apply({"b": params["b.weight"]}, ["b"], inside)["b"]}
print(f"  same-tensor   unseen: old {unseen(old_j, params, after2):.2f}  (new print, positions shifted by the "
      f"tensor's offset: {unseen(new_j, params, after2):.2f})")
