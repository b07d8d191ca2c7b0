"""A real CPU run for the viewer's screenshots: the scripted policy works on the bundled `swish`
example through `cuda-agent optimize` (writes a kernel with a compile error, verifies (-1), fixes
it, verifies (+1), profiles, stops), and `cuda-agent bench run` runs the same agent on two
examples, so one folder holds optimize and bench trajectories.

    python bench/viewer_demo_run.py runs/viewer-demo && cuda-agent view runs/viewer-demo
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cuda_agent.examples import get_example


def script() -> list[dict]:
    sol = get_example("swish").solution_dir("cpu")
    kernels = {f"kernels/{p.name}": p.read_text() for p in sorted((sol / "kernels").iterdir())}
    model_new = (sol / "model_new.py").read_text()
    kernel_path = next(k for k in kernels if not k.endswith("_binding.cpp"))
    broken = kernels[kernel_path].replace(";", "", 1)  # a missing semicolon: the compiler says where

    def call(name: str, **args: object) -> dict:
        return {"name": name, "arguments": args}

    return [
        {"content": "Read the task and the workspace first.",
         "tool_calls": [call("read_file", path="model.py"), call("glob", pattern="**/*")]},
        {"content": "Swish is elementwise: one fused pass, x / (1 + exp(-x)), vectorised with OpenMP.",
         "tool_calls": [call("write_file", path="model_new.py", content=model_new),
                        *[call("write_file", path=k, content=broken if k == kernel_path else v)
                          for k, v in kernels.items()]]},
        {"content": "Build and check.", "tool_calls": [call("bash", command="./compile.sh && ./verify.sh")]},
        {"content": "A syntax error; fix the kernel.", "tool_calls": [call("write_file", path=kernel_path,
                                                                          content=kernels[kernel_path])]},
        {"content": "Check again.", "tool_calls": [call("bash", command="./verify.sh")]},
        {"content": "Correct. Now time it.", "tool_calls": [call("bash", command="./profile.sh")]},
        {"content": "Done: the fused kernel is in kernels/."},
    ]


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/viewer-demo")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "script.json"
    path.write_text(json.dumps(script(), indent=1))
    cli = [sys.executable, "-m", "cuda_agent"]
    subprocess.run([*cli, "optimize", "swish", "--backend", "cpu", "--script", str(path), "--out", str(out / "optimize"),
                    "--no-compile-baseline", "--max-turns", "10"], check=False)
    subprocess.run([*cli, "bench", "run", "examples", "--only", "swish", "--only", "softmax", "--policy",
                    f"agent:scripted:{path}", "--backend", "cpu", "--no-compile-baseline", "--out",
                    str(out / "bench"), "--build-workers", "1"], check=False)


if __name__ == "__main__":
    main()
