"""Fit SmolLM2-135M-Instruct into one device call (64 MiB with wheels and sources): the GGUF's
weights, de-quantised, re-quantised to 3 bits (Gaussian Lloyd-Max levels times one fp16 RMS per 128
weights), codes bit-packed 8 to 3 bytes: ~53 MB, plus the tokenizer (gzipped).
`pack OUT_DIR` here; `unpack IN_DIR HF_DIR` on the device writes a Hugging Face folder (fp32) that
training then fine-tunes in full. Lossy: the run trains this 3-bit-rounded model, as the docs say."""
import json, sys, zlib
from pathlib import Path

import numpy as np
import torch

G, LEVELS = 128, 8
# Lloyd-Max levels of a unit Gaussian (3 bits): per group, weights / RMS are rounded to these
LM = np.array([-2.1520, -1.3439, -0.7560, -0.2451, 0.2451, 0.7560, 1.3439, 2.1520], dtype=np.float32)


def _pack3(q: np.ndarray) -> bytes:
    v = (q.reshape(-1, 8).astype(np.uint32) << (3 * np.arange(8, dtype=np.uint32))).sum(1, dtype=np.uint32)
    return np.stack([(v >> (8 * i)) & 0xFF for i in range(3)], 1).astype(np.uint8).tobytes()


def _unpack3(raw: bytes) -> np.ndarray:
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.uint32)
    v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
    return ((v[:, None] >> (3 * np.arange(8, dtype=np.uint32))) & 7).astype(np.uint8).ravel()


def pack(out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from cuda_agent.agent.policies.local import smollm2_gguf_path
    p = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(p.parent, gguf_file=p.name)
    model = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, dtype=torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(out / "hf")
    import gzip
    tj = out / "hf" / "tokenizer.json"
    tj.with_suffix(".json.gz").write_bytes(gzip.compress(tj.read_bytes(), 9)); tj.unlink()
    model.config.save_pretrained(out / "hf")
    model.generation_config.save_pretrained(out / "hf")
    index, codes, scales, small = {}, [], [], {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue  # the embedding, tied
        w = t.detach().float().numpy()
        if w.ndim < 2 or w.size % G:
            small[name] = w.astype(np.float16)
            continue
        g = w.reshape(-1, G)
        s = np.sqrt((g * g).mean(1, keepdims=True)) + 1e-12
        q = np.searchsorted((LM[1:] + LM[:-1]) / 2, g / s).astype(np.uint8)
        index[name] = list(w.shape)
        codes.append(q.ravel()); scales.append(s.astype(np.float16).ravel())
    (out / "codes.bin").write_bytes(_pack3(np.concatenate(codes)))
    np.save(out / "scales.npy", np.concatenate(scales))
    np.savez(out / "small.npz", **small)
    (out / "index.json").write_text(json.dumps(index))


def unpack(src: Path, dst: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoConfig
    codes = _unpack3((src / "codes.bin").read_bytes())
    scales = np.load(src / "scales.npy").astype(np.float32)
    small = np.load(src / "small.npz")
    state, c, s = {}, 0, 0
    for name, shape in json.loads((src / "index.json").read_text()).items():
        n = int(np.prod(shape))
        q = LM[codes[c:c + n].reshape(-1, G)]
        state[name] = torch.from_numpy((q * scales[s:s + n // G, None]).reshape(shape))
        c, s = c + n, s + n // G
    for name in small.files:
        state[name] = torch.from_numpy(small[name].astype(np.float32))
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(src / "hf"), dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or any("embed" not in m and "lm_head" not in m for m in missing):
        raise SystemExit(f"weights do not match: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model.save_pretrained(dst)
    import gzip
    for f in (src / "hf").iterdir():
        name, data = (f.name[:-3], gzip.decompress(f.read_bytes())) if f.suffix == ".gz" else (f.name, f.read_bytes())
        if not (dst / name).exists():
            (dst / name).write_bytes(data)


if __name__ == "__main__":
    {"pack": lambda a: pack(Path(a[0])), "unpack": lambda a: unpack(Path(a[0]), Path(a[1]))}[sys.argv[1]](sys.argv[2:])
