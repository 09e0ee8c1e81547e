"""Approvals by voice (issue 30, item 2): with ``approve="ask"`` the real Claude Code CLI's
``can_use_tool`` callback puts each call its permission mode does not allow to the user
through ``ctx.ask``, and the answer decides. The voice agent is ``AnthropicLLM`` and the
CLI's model a script, both on the fake Anthropic server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import Harness, requires_cli

pytestmark = [requires_cli, pytest.mark.timeout(120)]


def writes(name: str, text: str = "ran") -> str:
    """A command that appends ``text`` to ``name`` (one the CLI asks about even in
    acceptEdits mode: it cannot tell what a Python one-liner does)."""
    return f"python3 -c \"open('{name}', 'a').write('{text}')\""


def script(*steps: Any) -> Callable[[fa.AnthropicRequest], Any]:
    """The CLI's model: each request takes the next step (then "Done.")."""
    queue = list(steps)

    def coder(request: fa.AnthropicRequest) -> Any:
        return queue.pop(0) if queue else fa.text("Done.")

    return coder


def bash(command: str) -> Any:
    return fa.tool_calls(("Bash", {"command": command}))


def questions(h: Harness) -> list[str]:
    return [
        e.content
        for e in h.of("background_message")
        if not e.silent and e.content.startswith("Claude Code wants to")
    ]


def shown(h: Harness) -> Any:
    """The state as front ends and the voice agent see it (the last event's)."""
    return h.of("background_state")[-1].state


async def answer(h: Harness, count: int, said: str) -> None:
    """Wait until the ``count``-th question is asked, then the user says ``said``."""
    await h.wait_for(lambda: len(questions(h)) >= count, f"question {count}")
    await h.wait_for(lambda: "asking" in shown(h), "the question in the state")
    await h.session.run(user_input=f"cc: {said}", timeout=60)


async def until_done(h: Harness, task: str) -> None:
    await h.wait_for_state(lambda s: s["last_task"] == task, f"the task {task!r} to end")


def tool_results(h: Harness) -> list[str]:
    return [str(r["content"]) for req in h.world.coder_requests for r in req.tool_results]


@pytest.mark.parametrize("said", ["yes", "Allow it once."])
async def test_a_bash_call_is_put_to_the_user_and_yes_runs_it(
    harness_factory: Callable[..., Any], said: str
) -> None:
    command = writes("ran.txt")
    h: Harness = await harness_factory(script(bash(command)), allow_bash=True, approve="ask")

    await h.session.run(user_input="cc: make ran.txt", timeout=60)
    await answer(h, 1, said)
    await until_done(h, "make ran.txt")

    assert (h.cwd / "ran.txt").read_text() == "ran"
    question = f"Claude Code wants to run `{command}`. Allow once, always for this command, or no?"
    assert questions(h) == [question]
    # Spoken: the voice agent relayed it (the scripted voice model reads updates out).
    assert any(question in reply for reply in h.spoken_replies())
    assert "asking" not in shown(h)
    assert h.state["recent_activity"] == [f"ran `{command}`"]


async def test_no_does_not_run_it_and_claude_code_reads_why(
    harness_factory: Callable[..., Any],
) -> None:
    command = writes("ran.txt")
    h: Harness = await harness_factory(script(bash(command)), allow_bash=True, approve="ask")

    await h.session.run(user_input="cc: make ran.txt", timeout=60)
    await answer(h, 1, "no, don't")
    await until_done(h, "make ran.txt")

    assert not (h.cwd / "ran.txt").exists()
    (result,) = tool_results(h)
    assert 'The user said no ("no, don\'t"): this was not run.' in result
    assert h.state["recent_activity"] == [f"did not run `{command}` (you said no)"]


async def test_always_skips_the_next_identical_question_only(
    harness_factory: Callable[..., Any],
) -> None:
    command, other = writes("ran.txt"), writes("other.txt")
    h: Harness = await harness_factory(
        script(bash(command), bash(command), bash(other)), allow_bash=True, approve="ask"
    )

    await h.session.run(user_input="cc: make ran.txt twice", timeout=60)
    await answer(h, 1, "always for this command")
    await answer(h, 2, "no")  # the same command ran without a question; this one is new
    await until_done(h, "make ran.txt twice")

    assert (h.cwd / "ran.txt").read_text() == "ranran"
    assert not (h.cwd / "other.txt").exists()
    assert [q.split("`")[1] for q in questions(h)] == [command, other]


async def test_silence_denies_after_the_bound(harness_factory: Callable[..., Any]) -> None:
    command = writes("ran.txt")
    h: Harness = await harness_factory(
        script(bash(command)), allow_bash=True, approve="ask", approve_timeout=1.0
    )

    await h.session.run(user_input="cc: make ran.txt", timeout=60)
    await until_done(h, "make ran.txt")  # nobody answers

    assert len(questions(h)) == 1
    assert not (h.cwd / "ran.txt").exists()
    (result,) = tool_results(h)
    assert "The user did not answer within 1 seconds, so this was not run." in result
    assert h.state["recent_activity"] == [f"did not run `{command}` (no answer)"]
    assert "asking" not in shown(h)
    # A late answer is a message like any other: the next task.
    await h.session.run(user_input="cc: yes", timeout=60)
    await until_done(h, "yes")
    assert not (h.cwd / "ran.txt").exists()


async def test_nothing_outside_the_folder_is_put_to_the_user_or_allowed(
    harness_factory: Callable[..., Any], tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    inside = tmp_path / "repo" / "inside.txt"
    h: Harness = await harness_factory(
        script(
            fa.tool_calls(
                ("Write", {"file_path": str(outside), "content": "x"}),
                ("Write", {"file_path": "../escaped.txt", "content": "x"}),
            ),
            fa.tool_calls(("Write", {"file_path": str(inside), "content": "in\n"})),
        ),
        approve="ask",
        permission_mode="default",  # writes are asked about too
    )

    await h.session.run(user_input="cc: write files", timeout=60)
    await answer(h, 1, "once")
    await until_done(h, "write files")

    assert questions(h) == [
        "Claude Code wants to create inside.txt (the whole file). Allow once, always for "
        "this file, or no?"
    ]
    assert inside.read_text() == "in\n"
    assert not outside.exists() and not (tmp_path / "escaped.txt").exists()
    refused = [r for r in tool_results(h) if "outside the working directory" in r]
    assert len(refused) == 2
