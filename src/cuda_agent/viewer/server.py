"""`cuda-agent view RUN_DIR`: a local web page over a run's trajectories (as Inspect's log
viewer serves its logs): a standard-library HTTP server, one static page, two JSON routes.

    GET /                      the page (static/index.html: plain JS, no build step, no CDN)
    GET /api/run               {"root", "episodes": [EpisodeRow...]}   (rescanned per request, so a
                               running batch shows its new turns on reload)
    GET /api/episode?key=K     the episode: a Trajectory as JSON, or an RFT row {"messages", "meta"}

It binds 127.0.0.1 by default: trajectories hold prompts and code, not for the network.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from ..agent.trajectory import Trajectory
from .sources import scan


class ViewerServer:
    """The viewer over `root`; `start()` serves in a thread (tests), `serve_forever()` blocks (CLI)."""

    def __init__(self, root: str | Path, host: str = "127.0.0.1", port: int = 0):
        self.root = Path(root).resolve()
        if not self.root.exists():
            raise FileNotFoundError(f"no run folder or trajectory file at {self.root}")
        self.page = resources.files(__package__).joinpath("static/index.html").read_bytes()
        self._lock = threading.Lock()
        self._index = scan(self.root)
        viewer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                if url.path in ("/", "/index.html"):
                    return self._send(200, viewer.page, "text/html; charset=utf-8")
                if url.path == "/api/run":
                    return self._json(viewer.run())
                if url.path == "/api/episode":
                    key = parse_qs(url.query).get("key", [""])[0]
                    episode = viewer.episode(key)
                    if episode is None:
                        return self._json({"error": f"no episode {key!r} in {viewer.root}"}, 404)
                    return self._json(episode)
                return self._json({"error": f"no route {url.path}"}, 404)

            def _json(self, payload: Any, code: int = 200) -> None:
                self._send(code, json.dumps(payload).encode(), "application/json")

            def _send(self, code: int, body: bytes, kind: str) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Cache-Control", "no-store")
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}/"
        self._thread: threading.Thread | None = None

    def run(self) -> dict[str, Any]:
        with self._lock:
            self._index = scan(self.root)
            return {"root": str(self.root), "episodes": [r.model_dump(mode="json") for r in self._index.rows]}

    def episode(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            item = self._index.episodes.get(key)
            if item is None:  # a key from a newer scan (the run grew since)
                self._index = scan(self.root)
                item = self._index.episodes.get(key)
            row = next((r for r in self._index.rows if r.key == key), None)
        if item is None or row is None:
            return None
        body = item.model_dump(mode="json") if isinstance(item, Trajectory) else {"sft": True, **item}
        return {"row": row.model_dump(mode="json"), "episode": body}

    def start(self) -> "ViewerServer":
        self._serving = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._serving = True
        self.httpd.serve_forever()

    def close(self) -> None:
        if getattr(self, "_serving", False):  # shutdown() waits for a serve loop: never call it without one
            self.httpd.shutdown()
        self.httpd.server_close()


__all__ = ["ViewerServer"]
