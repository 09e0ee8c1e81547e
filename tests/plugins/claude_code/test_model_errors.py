"""A failing model never leaves Claude Code "working" forever (issue 13, item 4): the
state says it is retrying, each turn has a deadline, and the failure is spoken."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import Harness, child_pids, other_tasks, requires_cli

pytestmark = [requires_cli, pytest.mark.timeout(120)]


def spoken_failure(h: Harness) -> str:
    (line,) = [r for r in h.spoken_replies() if "stopped because of a problem" in r]
    return line


async def wait_for_failure(h: Harness) -> None:
    await h.wait_for_state(lambda s: s["status"] == "error", "the error state")
    await h.wait_for(
        lambda: any("stopped because of a problem" in r for r in h.spoken_replies()),
        "the spoken failure",
    )


async def test_an_overloaded_model_is_reported_as_retrying_then_as_a_failure(
    harness_factory: Callable[..., Any],
) -> None:
    h: Harness = await harness_factory(lambda r: fa.error(529), retry_timeout=2)
    await h.session.run(user_input="cc: fix the bug", timeout=60)
    await h.wait_for_state(
        lambda s: s["status"].startswith("retrying: the model server is overloaded (attempt"),
        "the retrying state",
    )
    await wait_for_failure(h)
    assert "overloaded, and it did not recover within 2 seconds" in h.state["error"]
    assert h.state["last_task"] == "fix the bug" and h.state["task"] is None
    assert "the model server is overloaded" in spoken_failure(h)
    notes = [e.content for e in h.of("background_message") if e.silent]
    assert any("cannot reach its model" in n for n in notes)
    assert child_pids() == [], "the failed CLI was stopped"


async def test_refused_credentials_fail_after_one_retry(
    harness_factory: Callable[..., Any],
) -> None:
    h: Harness = await harness_factory(lambda r: fa.error(401))
    await h.session.run(user_input="cc: fix the bug", timeout=60)
    await wait_for_failure(h)
    assert "refused its credentials" in h.state["error"]
    assert "ANTHROPIC_API_KEY" in spoken_failure(h)
    assert len(h.world.coder_requests) == 2  # the request and one retry
    assert child_pids() == []


async def test_a_broken_stream_is_retried_and_the_task_recovers(
    harness_factory: Callable[..., Any],
) -> None:
    script = [fa.stream_error(text="Let me "), fa.stream_error(), fa.text("Fixed it.")]
    h: Harness = await harness_factory(lambda r: script.pop(0) if script else fa.text("ok"))
    await h.session.run(user_input="cc: fix the bug", timeout=60)
    await h.wait_for_state(lambda s: s["last_task"] == "fix the bug", "the task to end")
    statuses = [e.state["status"] for e in h.of("background_state")]
    assert any(s.startswith("retrying: the model server is overloaded") for s in statuses)
    assert statuses[-1].startswith("idle") and h.state["error"] is None
    assert "Fixed it." in [e.content for e in h.of("background_message") if e.silent]


async def test_a_turn_past_its_deadline_fails_and_the_next_message_restarts(
    harness_factory: Callable[..., Any],
) -> None:
    script = [fa.text("too late", delay=60), fa.text("Back at work.")]
    h: Harness = await harness_factory(lambda r: script.pop(0), turn_timeout=5)
    await h.session.run(user_input="cc: a huge refactor", timeout=60)
    await wait_for_failure(h)
    assert h.state["error"] == "the task took longer than 5 seconds, its time limit"
    assert child_pids() == []
    await h.session.run(user_input="cc: something small", timeout=60)
    await h.wait_for_state(
        lambda s: s["status"].startswith("idle") and s["last_task"] == "something small",
        "the restarted client to finish",
    )
    assert h.state["error"] is None


async def test_closing_while_it_retries_stops_the_cli(
    harness_factory: Callable[..., Any],
) -> None:
    h: Harness = await harness_factory(lambda r: fa.error(529))
    await h.session.run(user_input="cc: fix the bug", timeout=60)
    await h.wait_for_state(lambda s: s["status"].startswith("retrying"), "the retrying state")
    assert child_pids()
    await h.session.aclose()
    assert child_pids() == []
    assert other_tasks() == set()
