"""Trajectory schema, writer and loader: versioned, append-only, torn lines tolerated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.agent.trajectory import (SCHEMA_VERSION, Message, TaskInfo, ToolCall, Trajectory, TrajectoryError,
                                         TrajectoryWriter, latest_by_episode, load_trajectories)
from cuda_agent.evaluation import EvalResult


def _traj(eid: str, reward: int = 1, stop: str = "done") -> Trajectory:
    return Trajectory(
        episode_id=eid, task=TaskInfo(name="t", content_hash="h"), backend="cpu", stop_reason=stop,
        messages=[Message(role="system", content="s"), Message(role="user", content="u"),
                  Message(role="assistant", content="", turn=0,
                          tool_calls=[ToolCall(id="c1", name="bash", arguments={"command": "ls"}),
                                      ToolCall(id="c2", name="bash", raw_arguments="{bad", parse_error="x")]),
                  Message(role="tool", content="out", tool_call_id="c1", name="bash", turn=0)],
        final=EvalResult(task="t", task_hash="h", backend="cpu", reward=reward, correct=reward > 0))


def test_round_trip_and_openai_format(tmp_path: Path):
    w = TrajectoryWriter(tmp_path / "t.jsonl")
    w.append(_traj("a"))
    w.append(_traj("b", reward=3))
    got = load_trajectories(tmp_path / "t.jsonl")
    assert [t.episode_id for t in got] == ["a", "b"]
    assert got[1].final_reward == 3 and got[0].schema_version == SCHEMA_VERSION
    msgs = got[0].openai_messages()
    assert msgs[2]["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    assert msgs[2]["tool_calls"][1]["function"]["arguments"] == "{bad"
    assert msgs[3] == {"role": "tool", "content": "out", "tool_call_id": "c1", "name": "bash"}


def test_torn_last_line_is_skipped_and_repaired(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    TrajectoryWriter(path).append(_traj("a"))
    with path.open("a") as fh:
        fh.write(_traj("b").model_dump_json()[:50])  # crash mid-write
    assert [t.episode_id for t in load_trajectories(path)] == ["a"]
    TrajectoryWriter(path).append(_traj("c"))  # the writer cuts the torn line first
    assert [t.episode_id for t in load_trajectories(path)] == ["a", "c"]
    with path.open("a") as fh:
        fh.write("{not json\n")  # a complete line that is damage, not a crash mid-write
    with pytest.raises(TrajectoryError, match=r"t.jsonl:3"):
        load_trajectories(path)


def test_newer_schema_is_refused_with_location(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    raw = json.loads(_traj("a").model_dump_json())
    raw["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(raw) + "\n")
    with pytest.raises(TrajectoryError, match=r"t.jsonl:1: schema_version"):
        load_trajectories(path)
    with pytest.raises(FileNotFoundError):
        load_trajectories(tmp_path / "missing.jsonl")


def test_finished_and_latest():
    assert _traj("a").finished
    assert not _traj("a", stop="policy_error").finished
    latest = latest_by_episode([_traj("a", reward=-1), _traj("a", reward=2)])
    assert latest["a"].final_reward == 2
