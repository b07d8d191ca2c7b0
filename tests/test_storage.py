"""The one JSONL store: torn last lines, damage, atomic writes, one writer per file."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cuda_agent.storage import JsonlWriter, StoreBusy, StoreError, atomic_write, cut_torn_tail, read_jsonl


def test_a_torn_last_line_is_ignored_by_readers_and_cut_by_the_next_writer(tmp_path: Path):
    path = tmp_path / "r.jsonl"
    with JsonlWriter(path) as w:
        w.append({"i": 1})
    with path.open("a") as fh:
        fh.write('{"i": 2, "unfinis')  # a kill in the middle of a write
    assert read_jsonl(path) == [{"i": 1}]
    with JsonlWriter(path) as w:
        w.append({"i": 3})
    assert path.read_text().splitlines() == ['{"i": 1}', '{"i": 3}']
    assert read_jsonl(path) == [{"i": 1}, {"i": 3}]


def test_a_damaged_complete_line_raises_with_its_location(tmp_path: Path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"i": 1}\nnot json\n{"i": 3}\n')
    with pytest.raises(StoreError, match=r"r.jsonl:2"):
        read_jsonl(path)
    path.write_text('{"i": 1}\n[1, 2]\n')
    with pytest.raises(StoreError, match="not a record"):
        read_jsonl(path)


def test_missing_file_reads_empty_and_cut_reports_bytes(tmp_path: Path):
    assert read_jsonl(tmp_path / "none.jsonl") == []
    path = tmp_path / "r.jsonl"
    path.write_text('{"i": 1}\n{"i"')
    assert cut_torn_tail(path) == 4
    assert cut_torn_tail(path) == 0
    path.write_text("x" * 100)  # no newline at all: everything is unfinished
    assert cut_torn_tail(path) == 100 and path.read_bytes() == b""


def test_a_second_live_writer_is_refused_even_in_another_process(tmp_path: Path):
    path = tmp_path / "r.jsonl"
    w = JsonlWriter(path)
    w.append({"i": 1})
    with pytest.raises(StoreBusy):
        JsonlWriter(path).append({"i": 2})
    other = subprocess.run([sys.executable, "-c", "import sys; from cuda_agent.storage import JsonlWriter, StoreBusy\n"
                            f"try:\n    JsonlWriter({str(path)!r}).append({{'i': 9}})\nexcept StoreBusy:\n    sys.exit(3)"],
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 3, other.stderr
    w.close()
    JsonlWriter(path).append({"i": 2})  # the lock went with the first writer
    assert [r["i"] for r in read_jsonl(path)] == [1, 2]


def test_appends_from_threads_are_whole_lines(tmp_path: Path):
    path = tmp_path / "r.jsonl"
    w = JsonlWriter(path)
    blob = "x" * 5000

    def work(k: int) -> None:
        for i in range(50):
            w.append({"k": k, "i": i, "blob": blob})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = read_jsonl(path)
    assert len(rows) == 200 and all(r["blob"] == blob for r in rows)


def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path: Path):
    path = tmp_path / "sub" / "run.json"
    atomic_write(path, json.dumps({"a": 1}))
    atomic_write(path, json.dumps({"a": 2}))
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["run.json"]
