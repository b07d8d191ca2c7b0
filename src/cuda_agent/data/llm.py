"""LLM composition mode: the agent's policy writes the task code, as the paper's pipeline did.

The plan still comes from the catalogue; the code is then treated like any untrusted task
(similarity screen, every filter in the worker). The model picks sizes; the window judges them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .filters import Reason, TaskCheck
from .plan import Plan

SYSTEM = ("You write PyTorch benchmark tasks in KernelBench format. Reply with one Python code block and "
          "nothing else.")

PROMPT = """Write one self-contained Python file that composes these operators, in this order, on a tensor of rank {rank}:
{ops}

Rules:
- `class Model(nn.Module)` with every parameter created in `__init__`, and `forward` applying the operators in order;
- `get_inputs()` returns a list of fresh random input tensors (torch.randn / torch.rand) of realistic sizes,
  chosen so that one forward pass takes about {target_ms:.0f} ms on {device};
- `get_init_inputs()` returns the constructor arguments as a list;
- sizes as module-level constants; no randomness inside forward (no dropout), no file or network access.
"""


def llm_prompt(plan: Plan, device: str) -> str:
    ops = "\n".join(f"{i + 1}. {op}" for i, op in enumerate(plan.ops))
    return PROMPT.format(rank=plan.rank, ops=ops, target_ms=plan.target_ms, device=device)


def extract_code(reply: str) -> str | None:
    """The (largest) fenced Python block of a reply, or the reply itself if it looks like code."""
    blocks = re.findall(r"```(?:python|py)?\s*\n(.*?)```", reply, flags=re.S)
    if blocks:
        return max(blocks, key=len).strip() + "\n"
    return reply.strip() + "\n" if "class Model" in reply else None


def llm_candidate(plan: Plan, worker: Any, policy: Any, filters: Any,
                  screen: Callable[[str], tuple[tuple[str, str] | None, dict[str, Any]]],
                  timeout_s: float) -> tuple[TaskCheck, str | None, dict[str, Any]]:
    """Ask `policy` for the plan's code, screen it, run the filters on it in `worker`."""
    from ..agent.trajectory import Message

    if policy is None:
        raise ValueError("generator='llm' needs a policy (see cuda_agent.agent.policies)")
    device = "a GPU" if filters.window_ms is None or filters.window_ms[1] >= 100 else "this machine"
    reply = policy.complete([Message(role="system", content=SYSTEM),
                             Message(role="user", content=llm_prompt(plan, device))], [])
    code = extract_code(reply.content)
    meta: dict[str, Any] = {"llm_tokens": reply.usage.model_dump() if hasattr(reply, "usage") else None}
    if code is None:
        return TaskCheck(ok=False, reason=Reason.LOAD_ERROR, detail="the reply holds no code"), None, meta
    rejected, scores = screen(code)
    meta.update(scores)
    if rejected is not None:
        return TaskCheck(ok=False, reason=rejected[0], detail=rejected[1]), code, meta
    result = worker.request({"op": "check", "source": code, "filters": filters.model_dump(mode="json")}, timeout_s)
    return TaskCheck.model_validate(result["check"]), code, meta


def default_policy(kind: str | None = None, model: str | None = None, base_url: str | None = None) -> Any:
    """The agent's policy chosen the agent's way: flags, then environment (OPENAI_API_KEY,
    ANTHROPIC_API_KEY), else its offline smoke-test model (which writes poor code)."""
    from ..agent.policies import PolicyConfig, make_policy

    return make_policy(PolicyConfig.from_options(kind, model, base_url=base_url, max_tokens=4096, timeout_s=600.0,
                                                 max_retries=2))
