"""A scripted world for tests and the demo: one FakeAnthropicServer serving both the
voice LLM (through ``AnthropicLLM``) and Claude Code's own requests."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from backline.testing.fake_anthropic import (
    CLAUDE_CODE_CLEARED_ENV,
    AnthropicRequest,
    FakeAnthropicServer,
)

from .prompts import SYSTEM_PROMPT_APPEND

Responder = Callable[[AnthropicRequest], Any]
_MARKER = SYSTEM_PROMPT_APPEND.splitlines()[0][:60]


def is_claude_code(request: AnthropicRequest) -> bool:
    """A request from the Claude Code CLI running this plugin (its system prompt)."""
    return _MARKER in request.system


def is_side_request(request: AnthropicRequest) -> bool:
    """The CLI's own helpers (titles, quota checks): structured output or one token."""
    if not request.is_messages:
        return True
    if request.output_format is not None:
        return True
    return request.max_tokens is not None and request.max_tokens <= 1


class ScriptedWorld:
    """Routes each request to ``voice`` or ``coder`` (callables ``request -> response``).

    ``voice_requests`` and ``coder_requests`` record what each side was asked.
    """

    def __init__(self, voice: Responder, coder: Responder) -> None:
        self.voice = voice
        self.coder = coder
        self.voice_requests: list[AnthropicRequest] = []
        self.coder_requests: list[AnthropicRequest] = []
        self._arrived = threading.Condition()
        self.server = FakeAnthropicServer(self._route, side=is_side_request)

    def _route(self, request: AnthropicRequest) -> Any:
        if is_claude_code(request):
            with self._arrived:
                self.coder_requests.append(request)
                self._arrived.notify_all()
            return self.coder(request)
        self.voice_requests.append(request)
        return self.voice(request)

    def wait_for_coder_requests(self, count: int, timeout: float = 30.0) -> None:
        """Block until Claude Code has sent ``count`` requests (call it in a thread)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.coder_requests) >= count, timeout):
                raise TimeoutError(
                    f"expected {count} Claude Code requests, got {len(self.coder_requests)}"
                )

    def claude_code_env(self, home: Path) -> dict[str, str]:
        return self.server.claude_code_env(home)

    def __enter__(self) -> ScriptedWorld:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


@contextmanager
def isolated_claude_env() -> Iterator[Path]:
    """A temporary HOME for the CLI, and a parent environment that cannot steer it
    elsewhere (credentials and provider switches removed for the duration)."""
    saved = {
        k: os.environ.pop(k) for k in (*CLAUDE_CODE_CLEARED_ENV, "CLAUDECODE") if k in os.environ
    }
    try:
        # The CLI may still write its session files while it exits: ignore cleanup races.
        with tempfile.TemporaryDirectory(
            prefix="backline-claude-home-", ignore_cleanup_errors=True
        ) as home:
            yield Path(home)
    finally:
        os.environ.update(saved)
