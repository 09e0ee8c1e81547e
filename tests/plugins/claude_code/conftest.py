"""A harness: the voice agent (AnthropicLLM) and the real Claude Code CLI, both talking
to one FakeAnthropicServer, with the real plugin in between."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from backline_claude_code import VOICE_INSTRUCTIONS, ClaudeCodeConfig, claude_code_background
from backline_claude_code.testing import ScriptedWorld, isolated_claude_env

from backline import Agent, Session
from backline.llm.anthropic import AnthropicLLM
from backline.testing import fake_anthropic as fa

claude_agent_sdk = pytest.importorskip("claude_agent_sdk")
CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"

requires_cli = pytest.mark.skipif(
    not CLI.is_file(),
    reason=f"the Claude Code CLI bundled with claude-agent-sdk is missing ({CLI})",
)

WAIT = 45.0  # a whole CLI turn takes 1-3 s; this only bounds a hang
GRACE = 0.5  # the interrupt grace window in these tests (the default is 2 s)


def voice_responder(request: fa.AnthropicRequest) -> Any:
    """A rule-based voice model: "cc: X" forwards X; "status?" reads the state."""
    results = request.tool_results
    if results:
        content = results[0].get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if "delivered" in text:
            return fa.text("I passed that to Claude Code.")
        return fa.text("Claude Code reports: " + text[:300])
    last = request.last_user_text
    if not request.tools:  # a scheduled background reply: tools are disabled
        updates = request.background_updates(after="Claude Code says:")
        return fa.text("Claude Code says: " + (updates or [""])[-1])
    line = last.rsplit("\n", 1)[-1]  # silent notes may precede the user's words
    if line.startswith("burst: "):  # one correction split into several sends at once
        return fa.tool_calls(
            *[
                ("backline_send", {"background_session_id": "claude_code", "content": piece})
                for piece in line[7:].split(" | ")
            ]
        )
    if line.startswith("cc: "):
        return fa.tool_calls(
            ("backline_send", {"background_session_id": "claude_code", "content": line[4:]})
        )
    if line == "status?":
        return fa.tool_calls(("backline_state", {"background_session_id": "claude_code"}))
    return fa.text("Okay.")


class Harness:
    def __init__(self, world: ScriptedWorld, cwd: Path, home: Path, **config: Any) -> None:
        self.world = world
        self.cwd = cwd
        self.config = ClaudeCodeConfig(cwd=cwd, env=world.claude_code_env(home), **config)
        llm = AnthropicLLM(
            base_url=world.server.url, api_key="sk-ant-fake-key", retry_base_delay=0.01
        )
        self.clients: list[Any] = []
        self.client_made = asyncio.Event()

        def client_factory(options: Any) -> Any:
            from claude_agent_sdk import ClaudeSDKClient

            client = ClaudeSDKClient(options)
            self.clients.append(client)
            self.client_made.set()
            return client

        definition = claude_code_background(
            self.config, interrupt_grace=GRACE, client_factory=client_factory
        )
        self.session: Session[Any] = Session(llm, background=[definition], user_away_timeout=None)
        self.events: list[Any] = []
        self._changed = asyncio.Event()
        for name in (
            "background_message",
            "background_reply",
            "background_state",
            "background_status",
            "agent_state_changed",
            "conversation_item_added",
        ):
            self.session.on(name, self._record)  # type: ignore[arg-type]

    def _record(self, event: Any) -> None:
        self.events.append(event)
        self._changed.set()

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    @property
    def state(self) -> Any:
        return self.session.background.context("claude_code").state  # type: ignore[union-attr]

    async def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        try:
            async with asyncio.timeout(WAIT):
                while not predicate():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"timed out waiting for {what}; state={self.state!r}; "
                f"coder requests={len(self.world.coder_requests)}"
            ) from None

    async def wait_for_coder_requests(self, count: int) -> None:
        """Claude Code's requests arrive on the server's threads: wait in a thread."""
        await asyncio.to_thread(self.world.wait_for_coder_requests, count, WAIT)

    async def wait_for_state(self, predicate: Callable[[dict[str, Any]], bool], what: str) -> None:
        await self.wait_for(lambda: isinstance(self.state, dict) and predicate(self.state), what)

    def kill_cli(self) -> None:
        """Kill the running Claude Code CLI process (a crash)."""
        import signal

        self.clients[-1]._transport._process.send_signal(signal.SIGKILL)

    def spoken_replies(self) -> list[str]:
        return [
            it.content
            for it in self.session.history.items
            if it.type == "message" and it.role == "assistant"
        ]


def init_repository(folder: Path) -> Path:
    """A new, clean git repository (Claude Code then has nothing to warn about at start)."""
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True, timeout=30)
    return folder


def child_pids() -> list[int]:
    """This process's child processes (zombies included), from /proc."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # it exited meanwhile
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            found.append(int(entry))
    return found


def other_tasks() -> set[asyncio.Task[Any]]:
    """Every task of the loop except the caller (the test)."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


@pytest.fixture
async def harness_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    made: list[Harness] = []

    with isolated_claude_env() as home:

        async def make(coder: Any, **config: Any) -> Harness:
            world = ScriptedWorld(voice_responder, coder)
            world.__enter__()
            cwd = tmp_path / "repo"
            if not cwd.is_dir():  # a test may have made it, with files of its own
                init_repository(cwd)
            harness = Harness(world, cwd, home, **config)
            made.append(harness)
            await harness.session.start(Agent(VOICE_INSTRUCTIONS))
            return harness

        try:
            yield make
        finally:
            for h in made:
                await h.session.aclose()
                llm = h.session.llm  # the session does not own its LLM: close it here
                assert isinstance(llm, AnthropicLLM)
                await llm.aclose()
                h.world.__exit__()
