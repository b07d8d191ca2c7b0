"""The RFT filter on crafted trajectories: what it keeps, why it drops the rest, and the SFT rows
(messages + tool schema, loss on the assistant's tokens only)."""

from __future__ import annotations

import json

import pytest

from cuda_agent.agent.tools import TOOL_NAMES
from cuda_agent.agent.trajectory import (Message, TaskInfo, ToolCall, ToolCallRecord, Trajectory, TrajectoryWriter,
                                         Turn)
from cuda_agent.evaluation import EvalResult
from cuda_agent.train.rft import RFTFilterConfig, build_rft_dataset, filter_trajectories, load_sft_rows, report_path


def _traj(eid: str, reward: int, calls: list[tuple[str, dict | None]], *, stop: str = "done",
          task: str = "t1") -> Trajectory:
    msgs = [Message(role="system", content="sys"), Message(role="user", content="optimise model.py")]
    records = []
    for i, (name, args) in enumerate(calls):
        tc = ToolCall(id=f"c{i}", name=name, arguments=args,
                      raw_arguments=None if args is not None else "{bad json",
                      parse_error=None if args is not None else "not JSON")
        msgs.append(Message(role="assistant", content=f"step {i}", tool_calls=[tc], turn=i))
        msgs.append(Message(role="tool", content="ok", tool_call_id=f"c{i}", name=name, turn=i))
        records.append(ToolCallRecord(turn=i, call_id=f"c{i}", name=name, arguments=args, ok=args is not None))
    msgs.append(Message(role="assistant", content="done", turn=len(calls)))
    final = EvalResult(task=task, task_hash="h" + task, backend="cpu", reward=reward, compiled=reward > 0,
                       correct=reward > 0, speedup_vs_eager=1.3 if reward >= 2 else None)
    return Trajectory(episode_id=eid, task=TaskInfo(name=task, content_hash="h" + task), backend="cpu",
                      messages=msgs, turns=[Turn(index=i) for i in range(len(calls) + 1)], tool_calls=records,
                      final=final, stop_reason=stop)


GOOD = [("write_file", {"path": "model_new.py", "content": "x"}), ("bash", {"command": "./verify.sh"})]


def test_filter_keeps_rewarded_clean_episodes_and_names_every_drop_reason():
    trajs = [
        _traj("keep", 2, GOOD),
        _traj("fail", -1, GOOD),
        _traj("unknown", 3, [("run_python", {"code": "1"}), *GOOD]),
        _traj("malformed", 1, [("bash", None), *GOOD]),
        _traj("loop", 1, [("bash", {"command": "./verify.sh"})] * 3),
        _traj("crashed", 2, GOOD, stop="policy_error"),
        _traj("notools", 1, []),
    ]
    rows, report = filter_trajectories(trajs)
    assert report.total == 7 and report.kept == 1 and report.dropped == 6
    assert [r["meta"]["episode_id"] for r in rows] == ["keep"]
    why = {d.episode_id: d.reasons for d in report.decisions}
    assert why["keep"] == []
    assert why["fail"] == ["reward_not_above_0"]
    assert why["unknown"] == ["unknown_tool"]
    assert why["malformed"] == ["malformed_call"]
    assert why["loop"] == ["repeated_call_loop"]
    assert why["crashed"] == ["unfinished:policy_error"]
    assert why["notools"] == ["no_tool_use"]
    assert report.reasons["reward_not_above_0"] == 1 and report.reward_counts == {"2": 2, "-1": 1, "3": 1, "1": 3}
    assert "1 of 7 episodes kept" in report.summary()


def test_filter_is_configurable_and_caps_per_task():
    trajs = [_traj("a", 1, GOOD), _traj("b", 3, GOOD), _traj("c", 2, GOOD), _traj("loop", 1, GOOD[:1] * 3)]
    rows, report = filter_trajectories(trajs, RFTFilterConfig(min_reward=1, max_per_task=1, max_repeats=3))
    assert [r["meta"]["episode_id"] for r in rows] == ["b"]  # highest reward of the task
    why = {d.episode_id: d.reasons for d in report.decisions}
    assert why["a"] == ["reward_not_above_1"] and why["c"] == ["over_max_per_task"]
    assert why["loop"] == ["reward_not_above_1"]  # 3 repeats are allowed here


def test_newest_record_of_a_retried_episode_wins():
    rows, report = filter_trajectories([_traj("e", -1, GOOD, stop="error"), _traj("e", 2, GOOD)])
    assert report.total == 1 and report.kept == 1


def test_sft_row_is_openai_chat_with_tool_schema_and_object_arguments(tmp_path):
    path = tmp_path / "traj.jsonl"
    w = TrajectoryWriter(path)
    for t in (_traj("keep", 3, GOOD), _traj("drop", -1, GOOD)):
        w.append(t)
    report = build_rft_dataset([path], tmp_path / "rft.jsonl")
    assert report.kept == 1
    saved = json.loads(report_path(tmp_path / "rft.jsonl").read_text())
    assert saved["dropped"] == 1 and saved["decisions"][1]["reasons"] == ["reward_not_above_0"]
    (row,) = load_sft_rows(tmp_path / "rft.jsonl")
    assert [t["function"]["name"] for t in row["tools"]] == list(TOOL_NAMES)
    roles = [m["role"] for m in row["messages"]]
    assert roles[:4] == ["system", "user", "assistant", "tool"] and roles[-1] == "assistant"
    call = row["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "write_file", "arguments": {"path": "model_new.py", "content": "x"}}
    assert row["messages"][3]["tool_call_id"] == call["id"]
    assert row["meta"]["reward"] == 3


def test_load_sft_rows_names_a_bad_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"messages": [{"role": "user", "content": "x"}]}\n{"nope": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        load_sft_rows(p)


def test_assistant_only_loss_mask_covers_exactly_the_assistant_turns():
    pytest.importorskip("trl")
    from cuda_agent.train.chat import tokenize_conversation
    from cuda_agent.train.rft import to_sft_row
    from cuda_agent.train.tiny import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    row = to_sft_row(_traj("k", 2, GOOD))
    enc = tokenize_conversation(tok, row["messages"], row["tools"])
    ids, mask = enc["input_ids"], enc["assistant_masks"]
    trained = tok.decode([t for t, m in zip(ids, mask) if m])
    untrained = tok.decode([t for t, m in zip(ids, mask) if not m])
    assert '"name": "write_file"' in trained and "step 0" in trained and "done" in trained
    assert "<|im_end|>" in trained  # the model learns to end its turn
    assert "optimise model.py" in untrained and "<tool_response>" in untrained and "# Tools" in untrained
    assert "<tool_response>" not in trained and "optimise model.py" not in trained
