"""An ASGI app served by uvicorn in a thread of this process: the stand-in engine in benchmarks, and the scripted
stand-ins of tests (a policy server, an LLM judge)."""

from __future__ import annotations

import threading
import time
from typing import Any


class ThreadedServer:
    def __init__(self, app: Any, port: int, host: str = "127.0.0.1"):
        import uvicorn

        self.port = port
        # A stand-in stops at once: a request it holds (a scripted hang) is cut off after 1 s, not waited for.
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 10.0) -> None:
        """Returns once the server listens (or `timeout_s` has passed: the first request then says why)."""
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
