"""Two Claude Code agents, one voice (issue 30, items 5-6), with the real Claude Code
CLI against the fake Anthropic server: ``claude_code.instance("api", folder)`` and
``instance("web", folder)`` work each in its own folder, are addressed by name, their
updates are voiced one at a time, most urgent first, each introduced by its name; and
``backline_stop`` interrupts Claude Code's running turn."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from backline_claude_code import ClaudeCodeConfig, claude_code_background
from backline_claude_code.testing import ScriptedWorld, isolated_claude_env

from backline import Agent, ChatMessage, Session
from backline.llm.anthropic import AnthropicLLM
from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import WAIT, init_repository, requires_cli

pytestmark = [requires_cli, pytest.mark.timeout(180)]

NAMED = re.compile(r"by its name \(`([\w.-]+): \.\.\.`\)")
UPDATE = re.compile(r"Background session `([\w.-]+)` sent an update:\n(.*)", re.S)


def _texts(request: fa.AnthropicRequest) -> list[str]:
    out = []
    for message in request.messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks if isinstance(blocks, list) else []:
            if isinstance(block, dict) and block.get("type") == "text":
                out.append(str(block.get("text", "")))
    return out


def voice(request: fa.AnthropicRequest) -> Any:
    """The voice model: "both: A | B" sends A to api and B to web; "NAME: X" sends X to
    NAME; "stop NAME" stops it; a scheduled reply names whose update it relays (its
    latest, narration marked "~" aside: narration reaches the context as updates do)."""
    if request.tool_results:
        content = request.tool_results[0].get("content")
        said = content if isinstance(content, str) else json.dumps(content)
        return fa.text(f"Tool says: {said[:300]}")
    if not request.tools:  # a background update's reply (tools off): as instructed
        named = NAMED.findall(request.system)
        updates = [m.groups() for t in _texts(request) if (m := UPDATE.match(t))]
        mine = [t for bid, t in updates if named and bid == named[-1] and not t.startswith("~")]
        return fa.text(f"{named[-1]}: {mine[-1]}" if mine else "Okay.")
    line = request.last_user_text.rsplit("\n", 1)[-1]
    if line.startswith("both: "):
        api, web = line[6:].split(" | ")
        return fa.tool_calls(
            ("backline_send", {"background_session_id": "api", "content": api}),
            ("backline_send", {"background_session_id": "web", "content": web}),
        )
    if line.startswith("stop "):
        return fa.tool_calls(("backline_stop", {"background_session_id": line[5:]}))
    name, _, task = line.partition(": ")
    if task:
        return fa.tool_calls(("backline_send", {"background_session_id": name, "content": task}))
    return fa.text("Okay.")


class Coders:
    """Claude Code's side: a script per instance, told apart by the task's marker."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Any]] = {"[api]": [], "[web]": []}
        self.requests: dict[str, int] = {"[api]": 0, "[web]": 0}

    def __call__(self, request: fa.AnthropicRequest) -> Any:
        seen = "\n".join(_texts(request))
        marker = max(self.scripts, key=lambda m: seen.rfind(m))  # the latest task's
        self.requests[marker] += 1
        script = self.scripts[marker]
        item = script.pop(0) if script else fa.text("(nothing more scripted)")
        return item() if callable(item) else item


class Two:
    def __init__(self, tmp_path: Path, home: Path) -> None:
        self.coders = Coders()
        self.world = ScriptedWorld(voice, self.coders)
        self.world.__enter__()
        self.api = init_repository(tmp_path / "api")
        self.web = init_repository(tmp_path / "web")
        config = ClaudeCodeConfig(cwd=self.api, env=self.world.claude_code_env(home))
        claude_code = claude_code_background(config)  # the plugin's one definition
        self.llm = AnthropicLLM(
            base_url=self.world.server.url, api_key="sk-ant-fake-key", retry_base_delay=0.01
        )
        self.session: Session[Any] = Session(
            self.llm,
            background=[
                claude_code.instance("api", str(self.api)),
                claude_code.instance("web", str(self.web)),
            ],
            user_away_timeout=None,
        )
        self.events: list[Any] = []
        self.changed = asyncio.Event()
        for name in ("background_message", "background_reply", "background_state"):
            self.session.on(name, self._record)  # type: ignore[arg-type]

    def _record(self, event: Any) -> None:
        self.events.append(event)
        self.changed.set()

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    def state(self, name: str) -> Any:
        assert self.session.background is not None
        return self.session.background.context(name).state

    async def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        try:
            async with asyncio.timeout(WAIT):
                while not predicate():
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}: {self.events[-5:]}") from None

    def spoken(self) -> list[str]:
        return [
            it.content
            for it in self.session.history.items
            if isinstance(it, ChatMessage) and it.role == "assistant"
        ]

    async def aclose(self) -> None:
        await self.session.aclose()
        await self.llm.aclose()
        self.world.__exit__()


@pytest.fixture
async def two(tmp_path: Path) -> AsyncIterator[Two]:
    with isolated_claude_env() as home:
        made = Two(tmp_path, home)
        try:
            await made.session.start(Agent("You relay two coding agents, api and web."))
            yield made
        finally:
            await made.aclose()


async def test_two_instances_in_two_folders_are_addressed_by_name_and_voiced_in_turn(
    two: Two,
) -> None:
    api, web = two.api, two.web
    two.coders.scripts["[api]"] += [
        fa.tool_calls(
            ("Write", {"file_path": str(api / "api.txt"), "content": "api\n"}),
            ("Write", {"file_path": str(web / "sneaky.txt"), "content": "no\n"}),  # not its own
        ),
        fa.text("~ Wrote it."),
        # Its second task, given once web has spoken: a question, voiced first all the same.
        fa.tool_calls(("mcp__voice__send_to_user", {"message": "Should I also update the docs?"})),
        fa.text("~ Waiting for the answer."),
    ]
    two.coders.scripts["[web]"] += [
        fa.tool_calls(("Write", {"file_path": str(web / "web.txt"), "content": "web\n"})),
        fa.tool_calls(("mcp__voice__send_to_user", {"message": "The page builds again."})),
        fa.text("~ Done."),
    ]
    result = await two.session.run(
        user_input="both: [api] write api.txt | [web] write web.txt", timeout=60
    )
    result.expect.contains_function_call(
        name="backline_send",
        arguments={"background_session_id": "api", "content": "[api] write api.txt"},
    )
    result.expect.contains_function_call(
        name="backline_send",
        arguments={"background_session_id": "web", "content": "[web] write web.txt"},
    )
    two.session.user_started_speaking()  # the user talks while both agents report
    await two.wait_for(
        lambda: any(
            e.background_id == "web" and not e.silent for e in two.of("background_message")
        ),
        "web's spoken update",
    )
    await two.wait_for(
        lambda: isinstance(two.state("api"), dict) and two.state("api")["last_task"] is not None,
        "api's first task to end",
    )
    assert two.session.background is not None
    two.session.background.deliver("api", "[api] anything else?")  # (as a front end can)
    await two.wait_for(
        lambda: len([e for e in two.of("background_message") if not e.silent]) == 2,
        "both spoken updates",
    )
    arrived = [(e.background_id, e.content) for e in two.of("background_message") if not e.silent]
    assert arrived == [("web", "The page builds again."), ("api", "Should I also update the docs?")]
    assert not two.of("background_reply")  # nothing is voiced over the user
    two.session.user_stopped_speaking()
    assert await two.session.wait_for_idle(timeout=WAIT)
    # Most urgent first (a question before progress), each introduced by its name.
    assert two.spoken()[-2:] == [
        "api: Should I also update the docs?",
        "web: The page builds again.",
    ]
    replies = [(e.background_id, e.status) for e in two.of("background_reply")]
    assert replies == [
        ("api", "scheduled"),
        ("api", "completed"),
        ("web", "scheduled"),
        ("web", "completed"),
    ]
    # Each wrote in its own folder only.
    assert (api / "api.txt").read_text() == "api\n"
    assert (web / "web.txt").read_text() == "web\n"
    assert not (web / "sneaky.txt").exists() and not (api / "web.txt").exists()
    await two.wait_for(
        lambda: (
            isinstance(two.state("api"), dict) and two.state("api")["status"].startswith("idle")
        ),
        "api idle",
    )
    assert two.state("api")["files_changed"] == ["api.txt"]
    assert any(a.startswith("refused a Write call") for a in two.state("api")["recent_activity"])
    assert two.state("api")["last_task"] == "[api] anything else?"
    assert two.state("web")["files_changed"] == ["web.txt"]


async def test_stop_interrupts_claude_codes_running_turn(two: Two) -> None:
    two.coders.scripts["[api]"] += [fa.text("finished the slow part", delay=30)]
    await two.session.run(user_input="api: [api] a long refactor", timeout=60)
    await asyncio.to_thread(two.world.wait_for_coder_requests, 1, WAIT)
    # At once (well within the 2 s grace window): an explicit stop is never held back.
    result = await two.session.run(user_input="stop api", timeout=60)
    result.expect.contains_function_call(
        name="backline_stop", arguments={"background_session_id": "api"}
    )
    result.expect.contains_message(
        role="assistant",
        content="Tool says: Stopped background session 'api': its current work is interrupted.",
    )
    await asyncio.to_thread(two.world.server.wait_for_disconnect, WAIT)
    await two.wait_for(
        lambda: (
            two.state("api")["task"] is None
            and two.state("api")["last_task"] == "[api] a long refactor"
        ),
        "the interrupted turn to end",
    )
    assert two.state("api")["status"].startswith("interrupted")
    assert two.state("api")["error"] is None
    assert two.coders.requests == {"[api]": 1, "[web]": 0}  # nothing new was started
    assert not any("problem" in s for s in two.spoken())  # a stop is no fault
    # And with nothing running, it says so.
    again = await two.session.run(user_input="stop web", timeout=60)
    again.expect.contains_message(
        role="assistant",
        content="Tool says: Nothing to stop: background session 'web' is not working on anything.",
    )
