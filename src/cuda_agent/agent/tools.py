"""The agent's tools (SPEC §2: `bash`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`),
each defined once: a pydantic argument model is the single source of its JSON schema (sent to
every policy and RL adapter) and of its validation. `ToolExecutor.execute` never raises for a
model's mistake: a bad call is a `ToolResult` with `ok=False` and an error the model can act on.
Paths must resolve inside the workspace; its protected files and record cannot be written;
`bash` is confined by `shell.py`.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .shell import ShellConfig, ShellRunner, cap_text

META_DIR = ".cuda_agent"  # the workspace record; never writable through the tools


# ---- argument models: the one definition of each tool's schema ---------------------------------
class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BashArgs(_Args):
    command: str = Field(description="shell command, run with bash in the workspace directory")
    timeout_s: float | None = Field(default=None, gt=0, description="seconds before the command (and everything it "
                                    "started) is killed; default and upper bound are set by the environment")


class ReadFileArgs(_Args):
    path: str = Field(description="file path, relative to the workspace")
    start_line: int = Field(default=1, ge=1, description="first line to show (1-based)")
    num_lines: int | None = Field(default=None, ge=1, description="how many lines to show; default: to the end "
                                  "(capped)")


class WriteFileArgs(_Args):
    path: str = Field(description="file path, relative to the workspace; parent folders are created")
    content: str = Field(description="the whole new content of the file")


class Edit(_Args):
    old_string: str = Field(description="exact text to replace; must occur exactly once unless replace_all")
    new_string: str = Field(description="replacement text")
    replace_all: bool = Field(default=False, description="replace every occurrence instead of exactly one")


class EditFileArgs(_Args):
    path: str = Field(description="file path, relative to the workspace")
    edits: list[Edit] = Field(min_length=1, description="applied in order; if any fails, none is applied")


class GlobArgs(_Args):
    pattern: str = Field(description="glob pattern such as 'kernels/*.cu' or '**/*.py'")
    path: str = Field(default=".", description="folder to search from, relative to the workspace")


class GrepArgs(_Args):
    pattern: str = Field(description="Python regular expression")
    path: str = Field(default=".", description="file or folder to search, relative to the workspace")
    include: str | None = Field(default=None, description="only files whose name matches this glob, e.g. '*.cu'")
    ignore_case: bool = False
    context_lines: int = Field(default=0, ge=0, le=10, description="lines of context around each match")


@dataclass(frozen=True)
class ToolSpec:
    """One tool: name, description for the model, and its argument model (the schema's source)."""

    name: str
    description: str
    args: type[_Args]

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments: self-contained (no `$ref`), without pydantic's titles."""
        schema = self.args.model_json_schema()
        return _clean_schema(schema, schema.pop("$defs", {}))

    def openai_schema(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

    def anthropic_schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("bash", "Run a shell command in the workspace (e.g. ./compile.sh, ./verify.sh, ./profile.sh). "
             "Output (stdout and stderr together) is capped; the middle of long output is cut with a note.",
             BashArgs),
    ToolSpec("read_file", "Read a text file with line numbers, optionally a range of lines.", ReadFileArgs),
    ToolSpec("write_file", "Create or overwrite a file with the given content.", WriteFileArgs),
    ToolSpec("edit_file", "Replace exact strings in a file. Several edits at once, applied in order, all or none; "
             "each old_string must occur exactly once unless replace_all is true.", EditFileArgs),
    ToolSpec("glob", "List files matching a glob pattern.", GlobArgs),
    ToolSpec("grep", "Search file contents with a regular expression; prints path:line: text.", GrepArgs),
)
TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in TOOLS)
_BY_NAME = {t.name: t for t in TOOLS}


def tool_schemas(style: Literal["openai", "anthropic"] = "openai") -> list[dict[str, Any]]:
    """Every tool's schema in a provider's format (the list a policy sends with each request)."""
    return [t.openai_schema() if style == "openai" else t.anthropic_schema() for t in TOOLS]


# ---- results ----------------------------------------------------------------------------------
class ToolResult(BaseModel):
    """What one call did. `output` is exactly what the model is shown (see `text`)."""

    name: str
    ok: bool
    output: str = ""
    error: str | None = None
    seconds: float = 0.0
    exit_code: int | None = Field(default=None, description="bash only")
    timed_out: bool = False
    truncated: bool = Field(default=False, description="output was cut to fit the cap")

    @property
    def text(self) -> str:
        """The message content the model receives for this call (never empty: an empty string
        reads to many models as a missing result)."""
        if self.ok:
            return self.output or "(no output)"
        return f"Error: {self.error}" + (f"\n{self.output}" if self.output else "")


class ToolError(Exception):
    """A call the tool refuses or cannot complete; the message is shown to the model."""


# ---- the executor -----------------------------------------------------------------------------
@dataclass(kw_only=True)
class ToolConfig:
    """Limits of the tools (defaults suit a 131K-token context)."""

    bash_timeout_s: float = 300.0
    bash_max_timeout_s: float = 900.0
    max_output_chars: int = 30_000
    read_max_lines: int = 2_000
    read_max_line_chars: int = 2_000
    max_file_bytes: int = 2_000_000
    glob_max_results: int = 500
    grep_max_matches: int = 300
    shell: ShellConfig = field(default_factory=ShellConfig)

    def __post_init__(self) -> None:
        if self.bash_timeout_s <= 0 or self.bash_max_timeout_s < self.bash_timeout_s:
            raise ValueError("need 0 < bash_timeout_s <= bash_max_timeout_s")
        if self.max_output_chars < 200:
            raise ValueError("max_output_chars must be at least 200")


class ToolExecutor:
    """Runs tool calls inside one workspace. Usable without the loop (RL adapters, tests):

        ex = ToolExecutor(ws_root, protected=ws.fixed_files)
        result = ex.execute("bash", {"command": "./verify.sh"})
    """

    def __init__(self, workspace: str | Path, *, protected: list[str] | tuple[str, ...] = (),
                 config: ToolConfig | None = None, extra_env: dict[str, str] | None = None):
        self.root = Path(workspace).resolve()
        if not self.root.is_dir():
            raise ValueError(f"workspace {self.root} is not a directory")
        self.config = config or ToolConfig()
        self.protected = frozenset(protected)
        self.shell = ShellRunner(self.root, self.config.shell, extra_env=extra_env or {})

    @classmethod
    def for_workspace(cls, ws: Any, config: ToolConfig | None = None, **kw: Any) -> "ToolExecutor":
        """Executor for a `cuda_agent.workspace.Workspace`, its fixed files protected."""
        return cls(ws.root, protected=ws.fixed_files, config=config, **kw)

    def execute(self, name: str, arguments: dict[str, Any] | str | None) -> ToolResult:
        """Run one call. `arguments` may be a dict or the raw JSON string a model produced."""
        t0 = time.monotonic()
        if name not in _BY_NAME:
            return ToolResult(name=name, ok=False, error=f"unknown tool {name!r}; tools are: {', '.join(TOOL_NAMES)}")
        try:
            args = _BY_NAME[name].args.model_validate(_as_dict(arguments))
            output, extra = getattr(self, f"_{name}")(args)
        except ValidationError as exc:
            return ToolResult(name=name, ok=False, error=f"invalid arguments for {name}: {_explain(exc)}",
                              seconds=time.monotonic() - t0)
        except ToolError as exc:
            return ToolResult(name=name, ok=False, error=str(exc), seconds=time.monotonic() - t0)
        output, cut = cap_text(output, self.config.max_output_chars)
        ok = extra.pop("ok", True)
        error = extra.pop("error", None)
        return ToolResult(name=name, ok=ok, output=output, error=error, seconds=time.monotonic() - t0,
                          truncated=cut or extra.pop("truncated", False), **extra)

    def close(self) -> None:
        self.shell.close()

    # ---- paths ------------------------------------------------------------------------------
    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """`path` (relative to the workspace, or absolute) as a real path inside the workspace."""
        if not path or "\x00" in path:
            raise ToolError("empty or invalid path")
        raw = Path(path)
        full = (raw if raw.is_absolute() else self.root / raw).resolve()
        if full != self.root and not full.is_relative_to(self.root):
            raise ToolError(f"{path}: outside the workspace (tools only reach files under {self.root})")
        if for_write:
            rel = full.relative_to(self.root).as_posix()
            if rel in self.protected:
                raise ToolError(f"{rel} is a protected file of the environment; changing it fails the evaluation "
                                "as 'tampered'. Edit model_new.py and kernels/ instead")
            if rel == META_DIR or rel.startswith(META_DIR + "/"):
                raise ToolError(f"{rel}: the workspace record is not writable")
        return full

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    # ---- tools ------------------------------------------------------------------------------
    def _bash(self, a: BashArgs) -> tuple[str, dict[str, Any]]:
        timeout = min(a.timeout_s or self.config.bash_timeout_s, self.config.bash_max_timeout_s)
        run = self.shell.run(a.command, timeout_s=timeout, max_chars=self.config.max_output_chars)
        out = run.output
        extra: dict[str, Any] = {"exit_code": run.exit_code, "timed_out": run.timed_out, "truncated": run.truncated}
        if run.timed_out:
            extra.update(ok=False, error=f"command timed out after {timeout:.0f}s; it and everything it started "
                                         "were killed")
        elif run.exit_code != 0:
            out = f"{out}\n[exit code {run.exit_code}]" if out else f"[exit code {run.exit_code}]"
        return out, extra

    def _read_file(self, a: ReadFileArgs) -> tuple[str, dict[str, Any]]:
        path = self.resolve(a.path)
        text = self._read_text(path, a.path)
        lines = text.splitlines()
        if not lines:
            return f"{a.path} is empty", {}
        if a.start_line > len(lines):
            raise ToolError(f"{a.path} has {len(lines)} lines; start_line {a.start_line} is past the end")
        want = a.num_lines or len(lines)
        count = min(want, self.config.read_max_lines, len(lines) - a.start_line + 1)
        width = len(str(a.start_line + count - 1))
        shown = []
        for i in range(a.start_line - 1, a.start_line - 1 + count):
            line = lines[i]
            if len(line) > self.config.read_max_line_chars:
                line = line[: self.config.read_max_line_chars] + " [... line cut]"
            shown.append(f"{i + 1:>{width}}\t{line}")
        end = a.start_line + count - 1
        if end < len(lines) and (a.num_lines is None or count < want):
            shown.append(f"[lines {a.start_line}-{end} of {len(lines)}; read on with start_line={end + 1}]")
        return "\n".join(shown), {}

    def _write_file(self, a: WriteFileArgs) -> tuple[str, dict[str, Any]]:
        path = self.resolve(a.path, for_write=True)
        if path.is_dir():
            raise ToolError(f"{a.path} is a folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.resolve(self.rel(path.parent))  # the created parents must still be inside
        existed = path.exists()
        _write_no_follow(path, a.content)
        verb = "overwrote" if existed else "created"
        return f"{verb} {self.rel(path)} ({len(a.content.splitlines())} lines, {len(a.content)} chars)", {}

    def _edit_file(self, a: EditFileArgs) -> tuple[str, dict[str, Any]]:
        path = self.resolve(a.path, for_write=True)
        text = self._read_text(path, a.path)
        replaced = 0
        for i, edit in enumerate(a.edits, start=1):
            label = f"edit {i} of {len(a.edits)}" if len(a.edits) > 1 else "edit"
            if edit.old_string == "":
                raise ToolError(f"{label}: old_string is empty; use write_file to create or overwrite a file")
            if edit.old_string == edit.new_string:
                raise ToolError(f"{label}: old_string and new_string are the same")
            n = text.count(edit.old_string)
            if n == 0:
                hint = _closest_line_hint(text, edit.old_string)
                raise ToolError(f"{label}: old_string not found in {a.path} (no edit was applied){hint}")
            if n > 1 and not edit.replace_all:
                lines = _occurrence_lines(text, edit.old_string)
                raise ToolError(f"{label}: old_string occurs {n} times in {a.path} (lines {', '.join(map(str, lines))});"
                                " add surrounding text to make it unique, or set replace_all (no edit was applied)")
            text = text.replace(edit.old_string, edit.new_string)
            replaced += n
        _write_no_follow(path, text)
        return f"edited {self.rel(path)}: {len(a.edits)} edit(s), {replaced} replacement(s)", {}

    def _glob(self, a: GlobArgs) -> tuple[str, dict[str, Any]]:
        base = self.resolve(a.path)
        if not base.is_dir():
            raise ToolError(f"{a.path} is not a folder")
        if a.pattern.startswith("/") or ".." in Path(a.pattern).parts:
            raise ToolError("pattern must be relative and must not contain '..'")
        found = []
        for p in sorted(base.glob(a.pattern)):
            real = p.resolve()
            if real.is_relative_to(self.root) and not self.rel(p).startswith(META_DIR):
                found.append(self.rel(p) + ("/" if p.is_dir() else ""))
        if not found:
            return f"no files match {a.pattern!r} under {a.path}", {}
        cap = self.config.glob_max_results
        more = f"\n[{len(found) - cap} more not shown]" if len(found) > cap else ""
        return "\n".join(found[:cap]) + more, {"truncated": len(found) > cap}

    def _grep(self, a: GrepArgs) -> tuple[str, dict[str, Any]]:
        try:
            rx = re.compile(a.pattern, re.IGNORECASE if a.ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"bad regular expression {a.pattern!r}: {exc}") from None
        base = self.resolve(a.path)
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        out: list[str] = []
        matches = 0
        cap = self.config.grep_max_matches
        for f in files:
            real = f.resolve()
            rel = self.rel(f)
            if not real.is_relative_to(self.root) or rel.startswith(META_DIR) or rel.startswith("build/"):
                continue
            if a.include and not fnmatch.fnmatch(f.name, a.include):
                continue
            try:
                text = self._read_text(real, rel)
            except ToolError:
                continue  # binary or too large: not searched
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if not rx.search(line):
                    continue
                matches += 1
                if matches > cap:
                    break
                lo, hi = max(0, i - a.context_lines), min(len(lines), i + a.context_lines + 1)
                for j in range(lo, hi):
                    sep = ":" if j == i else "-"
                    out.append(f"{rel}{sep}{j + 1}{sep} {lines[j][:self.config.read_max_line_chars]}")
                if a.context_lines:
                    out.append("--")
            if matches > cap:
                break
        if not out:
            return f"no matches for {a.pattern!r}", {}
        more = f"\n[stopped after {cap} matches]" if matches > cap else ""
        return "\n".join(out) + more, {"truncated": matches > cap}

    def _read_text(self, path: Path, shown: str) -> str:
        if not path.exists():
            raise ToolError(f"{shown}: no such file")
        if path.is_dir():
            raise ToolError(f"{shown} is a folder (use glob to list it)")
        size = path.stat().st_size
        if size > self.config.max_file_bytes:
            raise ToolError(f"{shown} is {size} bytes; files over {self.config.max_file_bytes} bytes are not read "
                            "(use bash with head/tail/grep)")
        data = path.read_bytes()
        if b"\x00" in data[:8192]:
            raise ToolError(f"{shown} is a binary file")
        return data.decode("utf-8", errors="replace")


# ---- helpers ----------------------------------------------------------------------------------
def _as_dict(arguments: dict[str, Any] | str | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON ({exc.msg} at char {exc.pos}); send one JSON object") \
                from None
        if not isinstance(value, dict):
            raise ToolError("arguments must be a JSON object")
        return value
    raise ToolError(f"arguments must be a JSON object, not {type(arguments).__name__}")


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "arguments"
        msg = "unexpected argument" if err["type"] == "extra_forbidden" else err["msg"]
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


def _clean_schema(schema: Any, defs: dict[str, Any]) -> Any:
    """Inline `$ref`s (some servers reject them) and drop titles (noise in every prompt)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _clean_schema(defs[ref.split("/")[-1]], defs)
        return {k: _clean_schema(v, defs) for k, v in schema.items() if k != "title" or not isinstance(v, str)}
    if isinstance(schema, list):
        return [_clean_schema(v, defs) for v in schema]
    return schema


def _write_no_follow(path: Path, content: str) -> None:
    """Write without following a symlink at the final component (resolve() already checked it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise ToolError(f"cannot write {path.name}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(content)


def _occurrence_lines(text: str, needle: str) -> list[int]:
    lines, start = [], 0
    while (i := text.find(needle, start)) != -1 and len(lines) < 10:
        lines.append(text.count("\n", 0, i) + 1)
        start = i + 1
    return lines


def _closest_line_hint(text: str, needle: str) -> str:
    """Point at the line that looks most like the first line of old_string (whitespace slips)."""
    first = needle.strip().splitlines()[0].strip() if needle.strip() else ""
    if not first:
        return ""
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip() == first:
            return f"; its first line matches line {n} when whitespace is ignored: check indentation and line breaks"
    return "; read the file again and copy the text exactly"


__all__ = ["TOOLS", "TOOL_NAMES", "ToolSpec", "ToolResult", "ToolError", "ToolConfig", "ToolExecutor",
           "tool_schemas", "cap_text", "BashArgs", "ReadFileArgs", "WriteFileArgs", "EditFileArgs",
           "Edit", "GlobArgs", "GrepArgs"]
