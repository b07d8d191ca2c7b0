"""Decoding speed of the RL policy under each generation engine TRL can use (issue 26: a GRPO step's
time is generation), one engine per subprocess so a hang costs its timeout, not the run.

    python bench/generation_speed.py MODEL --out DIR [--engines generate,fast,fast_check,static,cb,cb_noflash,cb_nograph]
                                     [--batch 16] [--prompt-tokens 3365] [--new-tokens 512] [--timeout-s 120]

Prompts are `--batch` copies of one prompt as long as the RL prompt (the system prompt and tool
schemas), sampled at temperature 1 with EOS suppressed, so every engine decodes exactly
`--new-tokens` per sequence. Each engine's line in `generation_speed.jsonl`: seconds, generated
tokens per second, decoding steps per second; a stuck engine's Python stacks are dumped every 30 s
into its log (`faulthandler`), which says where it waits; a crash (inductor's SIGSEGV) is its exit
status, and the next engine still runs.

`fast` is the rollouts' static-cache sampler (`cuda_agent.train.fastgen`: bf16 copy of the weights,
each decoding step a CUDA-graph replay); its first call, which captures the graph, is not timed, as a
run pays it once per bucket. `fast_check` is its correctness on this device: greedy tokens of the
same sampler in fp32 (graphs on) against plain `generate`'s, 4 prompts of different lengths cut
from the RL-sized one, `--check-tokens` each; `prefix_mean` is the mean length of the common
prefix (rounding can part two fp32 paths late; a wrong cache or mask parts them at once)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ENGINES = ("generate", "fast", "fast_check", "static", "cb", "cb_noflash", "cb_nograph")


def run_engine(model_path: str, engine: str, batch: int, prompt_tokens: int, new_tokens: int) -> dict:
    import faulthandler

    import torch

    faulthandler.dump_traceback_later(30, repeat=True)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from transformers import GenerationConfig

    from cuda_agent.train.config import ModelConfig
    from cuda_agent.train.models import load_model_and_tokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.perf_counter()
    model, tok = load_model_and_tokenizer(ModelConfig(path=model_path, dtype="float32"), device)
    model = model.to(device).eval()
    text = "Write a fast CUDA kernel for the model below, then bind it. " * 400
    ids = tok(text)["input_ids"][:prompt_tokens]
    gen = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True, temperature=1.0,
                           eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    load_s = time.perf_counter() - t0
    if engine == "fast_check":
        return {"engine": engine, "load_s": round(load_s, 2), **fast_check(model, tok, ids, device)}
    if engine == "fast":
        from cuda_agent.train.fastgen import FastGenerator

        fast = FastGenerator(model, dtype=torch.bfloat16 if device == "cuda" else None)
        kw = dict(max_new_tokens=new_tokens, eos_token_ids=[-1], pad_token_id=tok.pad_token_id, temperature=1.0)
        t0 = time.perf_counter()
        fast.generate([list(ids)] * batch, **kw)  # captures the step's graph (once per bucket in a run)
        capture_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.no_grad():
        if engine == "fast":
            out = fast.generate([list(ids)] * batch, **kw)
            generated = sum(len(o) for o in out)
        elif engine.startswith("cb"):
            from transformers.generation import ContinuousBatchingConfig

            kw: dict = {"num_blocks": 512, "max_memory_percent": 0.5}
            if engine == "cb_noflash":
                kw["auto_switch_to_flash"] = False
            if engine == "cb_nograph":
                kw.update(auto_switch_to_flash=False, use_cuda_graph=False)
            out = model.generate_batch([list(ids)] * batch, generation_config=gen,
                                       continuous_batching_config=ContinuousBatchingConfig(**kw), progress_bar=False)
            generated = sum(len(o.generated_tokens) for o in out.values())
        else:
            if engine == "static":
                gen.cache_implementation = "static"
            x = torch.tensor([ids] * batch, device=device)
            out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=gen)
            generated = int((out.shape[1] - x.shape[1]) * batch)
    if device == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    return {"engine": engine, "batch": batch, "prompt_tokens": len(ids), "new_tokens": new_tokens, "load_s": round(load_s, 2),
            "seconds": round(secs, 2), "tokens_per_s": round(generated / secs, 1),
            "steps_per_s": round(new_tokens / secs, 2), "attn": getattr(model.config, "_attn_implementation", None),
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None,
            **({"first_call_s": round(capture_s, 2), "graphs": fast.graphs} if engine == "fast" else {})}


def fast_check(model, tok, ids: list[int], device: str, check_tokens: int = 32) -> dict:
    """Greedy tokens of the static-cache sampler (fp32, graphs where CUDA) against `generate`'s."""
    import torch

    from cuda_agent.train.fastgen import FastGenerator

    prompts = [list(ids[: len(ids) - k]) for k in (0, 7, 31, 400)]
    p = max(len(x) for x in prompts)
    pad = tok.pad_token_id
    x = torch.tensor([[pad] * (p - len(q)) + q for q in prompts], device=device)
    mask = torch.tensor([[0] * (p - len(q)) + [1] * len(q) for q in prompts], device=device)
    eos = tok.eos_token_id
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=mask, max_new_tokens=check_tokens, do_sample=False,
                             eos_token_id=eos, pad_token_id=pad)[:, p:].tolist()
    plain = [row[: row.index(eos) + 1] if eos in row else row for row in out]  # cut as TRL cuts
    fast = FastGenerator(model, dtype=torch.float32).generate(prompts, max_new_tokens=check_tokens, eos_token_ids=[eos],
                                                             pad_token_id=pad, do_sample=False)
    prefix = [next((i for i, (a, b) in enumerate(zip(f, g)) if a != b), min(len(f), len(g))) for f, g in zip(fast, plain)]
    return {"check_tokens": check_tokens, "prefix": prefix, "prefix_mean": sum(prefix) / len(prefix),
            "equal_rows": sum(f == g for f, g in zip(fast, plain)), "rows": len(prompts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=3365)
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--timeout-s", type=float, default=120)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(run_engine(a.model, a.one, a.batch, a.prompt_tokens, a.new_tokens)), flush=True)
        return
    a.out.mkdir(parents=True, exist_ok=True)
    for engine in a.engines.split(","):
        log = a.out / f"gen_{engine}.log"
        cmd = [sys.executable, __file__, a.model, "--out", str(a.out), "--one", engine, "--batch", str(a.batch),
               "--prompt-tokens", str(a.prompt_tokens), "--new-tokens", str(a.new_tokens)]
        with open(log, "w") as f:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=f, text=True, start_new_session=True)
            try:
                stdout, _ = p.communicate(timeout=a.timeout_s)
                row = json.loads(stdout.strip().splitlines()[-1]) if p.returncode == 0 else \
                    {"engine": engine, "error": f"exit {p.returncode}: see {log.name}"}
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()
                row = {"engine": engine, "error": f"timed out after {a.timeout_s:.0f} s: stacks in {log.name}"}
        print(json.dumps(row), flush=True)
        with open(a.out / "generation_speed.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
