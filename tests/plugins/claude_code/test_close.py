"""Closing stops the Claude Code CLI in every path (issue 13, item 3): after a turn,
during a turn, while connecting, and when the closer itself is cancelled; no CLI
process and no SDK task is left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from backline_claude_code.client import ClaudeClient
from backline_claude_code.testing import ScriptedWorld

from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import (
    WAIT,
    Harness,
    child_pids,
    other_tasks,
    requires_cli,
    voice_responder,
)

pytestmark = [requires_cli, pytest.mark.timeout(120)]


async def close_and_check(h: Harness) -> None:
    assert child_pids(), "a CLI was running before the close"
    await h.session.aclose()
    assert child_pids() == []
    assert other_tasks() == set()


async def test_close_after_a_turn_stops_the_cli(harness_factory: Callable[..., Any]) -> None:
    h: Harness = await harness_factory(lambda r: fa.text("Done."))
    await h.session.run(user_input="cc: hello", timeout=60)
    await h.wait_for_state(lambda s: s["last_task"] == "hello", "the task to end")
    await close_and_check(h)


async def test_close_during_a_turn_stops_the_cli(harness_factory: Callable[..., Any]) -> None:
    h: Harness = await harness_factory(lambda r: fa.text("too late", delay=60))
    await h.session.run(user_input="cc: a long task", timeout=60)
    await h.wait_for_coder_requests(1)
    await close_and_check(h)
    assert h.world.server.disconnects, "the model request in flight was abandoned"


async def test_close_while_connecting_stops_the_cli(
    harness_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

    spawned = asyncio.Event()
    original = SubprocessCLITransport.connect

    async def connect(self: Any) -> None:
        await original(self)
        spawned.set()  # the CLI runs; the client is not initialized yet

    monkeypatch.setattr(SubprocessCLITransport, "connect", connect)
    h: Harness = await harness_factory(lambda r: fa.text("Done."))
    await h.session.run(user_input="cc: hello", timeout=60)
    await asyncio.wait_for(spawned.wait(), WAIT)
    assert not getattr(h.clients[0]._query, "_initialized", False)
    await close_and_check(h)
    assert h.world.coder_requests == []


async def test_close_before_the_cli_starts_leaves_nothing(
    harness_factory: Callable[..., Any],
) -> None:
    h: Harness = await harness_factory(lambda r: fa.text("Done."))
    await h.session.run(user_input="cc: hello", timeout=60)
    await asyncio.wait_for(h.client_made.wait(), WAIT)  # connect() is starting
    await h.session.aclose()
    assert child_pids() == []
    assert other_tasks() == set()


async def test_many_sessions_opened_and_closed_leave_no_cli(
    harness_factory: Callable[..., Any],
) -> None:
    made = [await harness_factory(lambda r: fa.text("slow", delay=60)) for _ in range(3)]
    for h in made:
        await h.session.run(user_input="cc: work", timeout=60)
    for h in made:
        await h.wait_for_coder_requests(1)
    assert len(child_pids()) == 3
    await asyncio.gather(*(h.session.aclose() for h in made))
    assert child_pids() == []
    assert other_tasks() == set()


async def test_a_cancelled_close_still_stops_the_cli(tmp_path: Path) -> None:
    from backline_claude_code.testing import isolated_claude_env
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

    world = ScriptedWorld(voice_responder, lambda r: fa.text("ok"))
    with isolated_claude_env() as home, world:
        options = ClaudeAgentOptions(cwd=str(tmp_path), env=world.claude_code_env(home))
        client = ClaudeClient(ClaudeSDKClient(options))
        await client.connect()
        process = client.process
        assert process is not None and process.returncode is None
        closing = asyncio.create_task(client.close())
        await asyncio.sleep(0)  # the close has started
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        assert process.returncode is not None
        assert child_pids() == []
        assert other_tasks() == set()
        await client.close()  # idempotent
