"""The command line's exit codes and its one way to report an error (docs/cli.md).

Every verb leaves through these, so a shell chain (`./compile.sh && ./verify.sh`) or a CI job
can tell "the candidate is wrong" from "the command was wrong" from "the machine is broken".
"""

from __future__ import annotations

import enum
import functools
import os
import sys
from typing import Any, Callable

import typer
from typer.core import TyperGroup

try:  # typer >= 0.16 vendors click: its usage errors are these classes, not the `click` package's
    from typer._click import exceptions as _clickx
except ImportError:  # pragma: no cover - older typer on the real click
    from click import exceptions as _clickx  # type: ignore[no-redef]


class ExitCode(enum.IntEnum):
    OK = 0        # success; for a verb that evaluates: every result correct (reward >= 1)
    FAILED = 1    # evaluated, and something failed (reward -1, a compile error, a failing task)
    USAGE = 2     # the command or its input is wrong: bad option, missing file, unloadable task
    INFRA = 3     # the environment could not do its job: no device, no compiler, an internal error
    INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT


def for_rewards(rewards: list[int]) -> ExitCode:
    """OK when every evaluation is correct (reward >= 1), FAILED otherwise (or with none)."""
    return ExitCode.OK if rewards and all(r >= 1 for r in rewards) else ExitCode.FAILED


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> "Any":
    """Print `error: <message>` to stderr, markup-free (rule ids like `[tensor-arithmetic]`
    survive), and return an exception to `raise`: `raise fail("no such file")`."""
    import typer
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(int(code))


def checked_backend(name: str | None, *, need: str = "device") -> str:
    """The backend a verb runs on: `name` (checked), else the local device's. Exits USAGE for
    an unknown name and INFRA, in one line naming the cause, when this machine cannot do what
    the verb needs of it: `need` = "device" (run on it), "build" (a torch built for it, no
    device), "name" (nothing: laying out files). Before any work, not as a compile error later."""
    from .backends import default_backend_name, get_backend, missing_device

    if name is None:
        return default_backend_name()
    try:
        get_backend(name)
    except ValueError as exc:
        raise fail(str(exc))
    why = None if need == "name" else missing_device(name, device=need == "device")
    if why:
        raise fail(f"the {name} backend cannot run here: {why}", ExitCode.INFRA)
    return name


# Errors that mean "your input is wrong"; anything else escaping a verb is an infrastructure fault.
def _input_errors() -> tuple[type[BaseException], ...]:
    from pydantic import ValidationError

    from .isolation.processes import RunBusy
    from .tasks import TaskError
    from .workspace import WorkspaceError

    # RunBusy: the output folder belongs to a live run; choosing another folder is the fix
    return (TaskError, WorkspaceError, ValidationError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
            RunBusy)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a verb so nothing escapes as a traceback: input errors exit USAGE, other
    exceptions INFRA (CUDA_AGENT_TRACEBACK=1 shows the traceback), Ctrl-C INTERRUPTED."""
    @functools.wraps(fn)
    def verb(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _passthrough():  # typer's own exits and usage errors keep their codes
            raise
        except KeyboardInterrupt:
            raise fail("interrupted", ExitCode.INTERRUPTED)
        except _input_errors() as exc:
            _maybe_traceback()
            raise fail(describe(exc), ExitCode.USAGE)
        except Exception as exc:  # the one place a verb's unexpected failure becomes one line
            _maybe_traceback()
            raise fail(f"{describe(exc)} ({type(exc).__name__}; CUDA_AGENT_TRACEBACK=1 shows where)",
                       ExitCode.INFRA)

    verb.__cuda_agent_guarded__ = True  # type: ignore[attr-defined]
    return verb


def _passthrough() -> tuple[type[BaseException], ...]:
    import typer

    kinds: list[type[BaseException]] = [typer.Exit, typer.Abort]
    if hasattr(typer, "TyperException"):  # typer >= 0.16 vendors click; its usage errors derive from this
        kinds.append(typer.TyperException)
    try:
        import click
    except ImportError:
        return tuple(kinds)
    return (*kinds, click.exceptions.Exit, click.ClickException, click.Abort)


def guard_all(app: Any) -> None:
    """Apply `guarded` to every command of a Typer app and of its sub-apps, once."""
    for info in app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "__cuda_agent_guarded__", False):
            info.callback = guarded(info.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            guard_all(group.typer_instance)


def describe(exc: BaseException) -> str:
    """The first line of what went wrong: the line a person reads."""
    from pydantic import ValidationError

    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return (f"this command needs the Python package {exc.name!r}, which is not installed "
                "(install the extra the README names for it, e.g. pip install 'cuda-agent[train]')")
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file: {exc.filename}"
    if isinstance(exc, ValidationError) and exc.errors():
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e.get("loc", ())) or exc.title
        return f"{where}: {e.get('msg', '')}" + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _maybe_traceback() -> None:
    if os.environ.get("CUDA_AGENT_TRACEBACK"):
        import traceback

        traceback.print_exc(file=sys.stderr)


class OneLineErrors(TyperGroup):
    """A command group whose help is never cut (a command's whole first sentence, wrapped, not
    trimmed to `...`) and, at the root, whose usage errors (unknown option, missing argument,
    bad value) are the documented one `error:` line and exit USAGE, not a framed box."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, cmd.get_short_help_str(limit=10_000)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,  # type: ignore[override]
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _clickx.NoArgsIsHelpError as exc:  # `cuda-agent bench`: the group's help
            print(exc.ctx.get_help() if exc.ctx else "")
            sys.exit(int(ExitCode.USAGE))
        except _clickx.UsageError as exc:
            where = f" (see {exc.ctx.command_path} --help)" if exc.ctx else ""
            message = " ".join(exc.format_message().split())
            raise SystemExit(_print_error(f"{message}{where}", ExitCode.USAGE))
        except _clickx.ClickException as exc:
            raise SystemExit(_print_error(" ".join(exc.format_message().split()), exc.exit_code))
        except typer.Abort:
            raise SystemExit(_print_error("aborted", ExitCode.INTERRUPTED))
        sys.exit(code if isinstance(code, int) else int(ExitCode.OK))


def _print_error(message: str, code: int) -> int:
    fail(message)
    return int(code)


class _ReaderGone:
    """stdout that outlives its reader: once a pipe's reader has gone (`cuda-agent ... | head`),
    further output is dropped instead of raising, so the verb finishes its work and exits by
    its result. Everything else is the real stream's."""

    def __init__(self, stream: Any):
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self._gone = True
        try:  # the interpreter's own flush at exit must not fail on the dead pipe either
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def tolerate_closed_stdout() -> None:
    """Install `_ReaderGone` around sys.stdout (the CLI's entry point calls this once)."""
    if not isinstance(sys.stdout, _ReaderGone) and sys.stdout is not None:
        sys.stdout = _ReaderGone(sys.stdout)  # type: ignore[assignment]
