"""End to end: the voice agent, the plugin and the real Claude Code CLI (issue 7)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import GRACE, Harness, requires_cli

pytestmark = [requires_cli, pytest.mark.timeout(120)]


def scripted(*responses: Any) -> Callable[[fa.AnthropicRequest], Any]:
    queue = list(responses)

    def coder(request: fa.AnthropicRequest) -> Any:
        if not queue:
            return fa.text("(nothing more scripted)")
        item = queue.pop(0)
        return item(request) if callable(item) else item

    return coder


async def test_a_task_writes_a_file_speaks_through_the_voice_agent_and_reports_state(
    harness_factory: Callable[..., Any],
) -> None:
    h: Harness = await harness_factory(
        scripted(
            lambda r: fa.tool_calls(
                ("Write", {"file_path": str(h.cwd / "hello.txt"), "content": "hi\n"}),
                text="I'll create hello.txt now.",
            ),
            fa.tool_calls(("mcp__voice__send_to_user", {"message": "I created hello.txt."})),
            fa.text("All done."),
            fa.text("Nothing to do."),
        )
    )
    result = await h.session.run(user_input="cc: create hello.txt saying hi", timeout=60)
    result.expect.contains_function_call(
        name="backline_send",
        arguments={"background_session_id": "claude_code", "content": "create hello.txt saying hi"},
    )
    await h.wait_for(
        lambda: any(e.status == "completed" for e in h.of("background_reply")),
        "the spoken relay of send_to_user",
    )
    assert (h.cwd / "hello.txt").read_text() == "hi\n"
    assert "Claude Code says: I created hello.txt." in h.spoken_replies()
    await h.wait_for_state(lambda s: s["status"].startswith("idle"), "the idle state")
    # Narration is context only: in the history, and no reply was made for it.
    silent = [e.content for e in h.of("background_message") if e.silent]
    assert silent == ["I'll create hello.txt now.", "All done."]
    spoken = [e.content for e in h.of("background_message") if not e.silent]
    assert spoken == ["I created hello.txt."]
    assert len(h.of("background_reply")) == 2  # scheduled + completed, one reply
    notes = [
        it for it in h.session.history.items if it.type == "message" and "All done." in it.content
    ]
    assert len(notes) == 1 and notes[0].role == "user"
    state = h.state
    assert state["files_changed"] == ["hello.txt"]
    assert state["recent_activity"] == ["edited hello.txt"]
    assert state["last_task"] == "create hello.txt saying hi" and state["task"] is None
    # The voice agent answers "what is going on" from backline_state.
    status = await h.session.run(user_input="status?", timeout=60)
    status.expect.contains_function_call(name="backline_state")
    status.expect.contains_message(role="assistant", content="hello.txt")
    # A deleted file leaves files_changed at the next publish.
    (h.cwd / "hello.txt").unlink()
    await h.session.run(user_input="cc: anything else?", timeout=60)
    await h.wait_for_state(
        lambda s: s["last_task"] == "anything else?" and s["task"] is None, "the second task"
    )
    assert h.state["files_changed"] == []
    assert h.state["recent_activity"] == ["edited hello.txt"]


async def test_a_message_during_a_turn_interrupts_after_the_grace_window(
    harness_factory: Callable[..., Any],
) -> None:
    # The first answer takes 30 s: the CLI aborts the request when interrupted.
    slow = fa.text("finished the slow part", delay=30)
    h: Harness = await harness_factory(scripted(slow, fa.text("Working on the correction.")))
    await h.session.run(user_input="cc: a long refactor", timeout=60)
    await h.wait_for_coder_requests(1)
    ctx = h.session.background.context("claude_code")  # type: ignore[union-attr]
    await asyncio.sleep(GRACE + 0.2)  # the rule under test: past the grace window
    # The voice model splits one correction into three sends in one step.
    await h.session.run(user_input="burst: stop, | use tabs | not spaces", timeout=60)
    await h.wait_for_coder_requests(2)
    interrupts = [  # published when the interrupt lands, while the task is still set
        e
        for e in h.of("background_state")
        if e.state["status"].startswith("interrupted") and e.state["task"] is not None
    ]
    assert len(interrupts) == 1, "a burst interrupts once"
    follow_up = h.world.coder_requests[-1].last_user_text
    assert follow_up.endswith("stop,\n\nuse tabs\n\nnot spaces")
    await h.wait_for_state(
        lambda s: s["status"].startswith("idle") and s["last_task"].startswith("stop,"),
        "the correction to finish",
    )
    assert ctx.state["error"] is None
    assert h.world.server.disconnects, "the interrupted request was aborted"
    assert not any("problem" in r for r in h.spoken_replies()), "an interrupt is no fault"


async def test_a_message_within_the_grace_window_does_not_interrupt(
    harness_factory: Callable[..., Any],
) -> None:
    slow = fa.text("first task done", delay=1.0)
    h: Harness = await harness_factory(scripted(slow, fa.text("second task done")))
    await h.session.run(user_input="cc: first", timeout=60)
    await h.session.run(user_input="cc: second", timeout=60)  # well within the window
    await h.wait_for_state(lambda s: s["last_task"] == "second", "both tasks")
    statuses = [e.state["status"] for e in h.of("background_state")]
    assert not any(s.startswith("interrupted") for s in statuses)
    assert h.world.coder_requests[-1].last_user_text == "second"


async def test_a_cli_crash_is_reported_and_the_next_message_restarts_it(
    harness_factory: Callable[..., Any],
) -> None:
    hang = fa.text("too late", delay=30)
    h: Harness = await harness_factory(scripted(hang, fa.text("Back and working.")))
    await h.session.run(user_input="cc: do something", timeout=60)
    await h.wait_for_coder_requests(1)
    h.kill_cli()
    await h.wait_for_state(lambda s: s["status"] == "error", "the error state")
    assert h.state["error"]
    await h.wait_for(
        lambda: any(e.status == "completed" for e in h.of("background_reply")),
        "the spoken failure notice",
    )
    assert any("stopped because of a problem" in r for r in h.spoken_replies())
    assert any(e.silent and "failed" in e.content for e in h.of("background_message"))
    await h.session.run(user_input="cc: try again", timeout=60)
    await h.wait_for_state(
        lambda s: s["status"].startswith("idle") and s["last_task"] == "try again",
        "the restarted client to finish",
    )
    assert h.state["error"] is None
    assert h.world.coder_requests[-1].last_user_text == "try again"


async def test_bash_is_refused_unless_allowed(harness_factory: Callable[..., Any]) -> None:
    h: Harness = await harness_factory(
        scripted(
            lambda r: fa.tool_calls(("Bash", {"command": f"touch {h.cwd / 'bashed.txt'}"})),
            fa.text("I could not run that."),
        )
    )
    await h.session.run(user_input="cc: run touch", timeout=60)
    await h.wait_for_state(lambda s: s["last_task"] == "run touch", "the task to end")
    assert not (h.cwd / "bashed.txt").exists()
    second = h.world.coder_requests[1]
    (result,) = second.tool_results
    assert result.get("is_error") is True
    assert "Bash" not in h.world.coder_requests[0].tool_names


async def test_bash_runs_when_allowed(harness_factory: Callable[..., Any]) -> None:
    h: Harness = await harness_factory(
        scripted(
            lambda r: fa.tool_calls(("Bash", {"command": f"touch {h.cwd / 'bashed.txt'}"})),
            fa.text("Done."),
        ),
        allow_bash=True,
    )
    await h.session.run(user_input="cc: run touch", timeout=60)
    await h.wait_for_state(lambda s: s["last_task"] == "run touch", "the task to end")
    assert (h.cwd / "bashed.txt").exists()
    assert any(a.startswith("ran `touch") for a in h.state["recent_activity"])
