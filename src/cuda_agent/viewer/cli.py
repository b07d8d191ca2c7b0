"""`cuda-agent view RUN_DIR`: serve the trajectory viewer (only typer is imported here)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command()(view)


def view(
    run_dir: Path = typer.Argument(..., help="a run folder of optimize / bench / train, or one trajectory file"),
    host: str = typer.Option("127.0.0.1", help="address to bind (trajectories hold prompts and code: keep it local)"),
    port: int = typer.Option(7860, help="port (0: any free one)"),
    open_browser: bool = typer.Option(False, "--open/--no-open", help="open the page in a browser"),
) -> None:
    """Browse a run's trajectories in a local web page: episodes, conversations, diffs, evaluations."""
    from .server import ViewerServer

    from ..exit_codes import fail

    server = ViewerServer(run_dir, host, port)
    rows = len(server.run()["episodes"])
    if rows == 0:  # a folder that is not a run: say so, rather than serve an empty page
        server.close()
        raise fail(f"{run_dir} holds no trajectories: give a run folder of optimize / bench / train (or a running "
                   "one's), or a trajectory .jsonl file")
    typer.echo(f"{rows} episode(s) under {server.root}: {server.url}  (Ctrl-C to stop)")
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
