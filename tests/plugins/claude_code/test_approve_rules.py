"""Approvals by voice, the rules themselves: what a question says of each kind of call,
what an "always" remembers, which answers allow, and the configuration."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from backline_claude_code import ClaudeCodeConfig
from backline_claude_code.approvals import Approvals, describe, plain_yes
from backline_claude_code.config import ENV_APPROVE, ENV_APPROVE_TIMEOUT

from backline import Answer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "src").mkdir(parents=True)
    (tmp_path / "repo" / "src" / "app.py").write_text("x = 1\n")
    return (tmp_path / "repo").resolve()


@pytest.mark.parametrize(
    ("tool", "tool_input", "what"),
    [
        ("Bash", {"command": "npm   test"}, "run `npm test`"),
        ("Write", {"file_path": "notes.md", "content": "x"}, "create notes.md (the whole file)"),
        ("Write", {"file_path": "src/app.py"}, "overwrite src/app.py (the whole file)"),
        ("Edit", {"file_path": "src/app.py"}, "edit src/app.py (replace a passage)"),
        (
            "Edit",
            {"file_path": "src/app.py", "replace_all": True},
            "edit src/app.py (replace a passage everywhere in it)",
        ),
        (
            "MultiEdit",
            {"file_path": "src/app.py", "edits": [{}, {}]},
            "edit src/app.py (2 changes)",
        ),
        (
            "NotebookEdit",
            {"notebook_path": "a.ipynb", "edit_mode": "insert"},
            "insert a cell into the notebook a.ipynb",
        ),
        (
            "WebFetch",
            {"url": "https://example.org", "prompt": "the   title"},
            "use WebFetch (url https://example.org, prompt the title)",
        ),
    ],
)
def test_the_question_names_what_will_run(
    root: Path, tool: str, tool_input: dict[str, Any], what: str
) -> None:
    request = describe(tool, tool_input, root)
    assert request.what == what
    scope = {"Bash": "this command", "WebFetch": "these inputs"}.get(tool, "this file")
    assert request.question == (
        f"Claude Code wants to {what}. Allow once, always for {scope}, or no?"
    )


def test_a_long_command_is_cut_in_the_question_and_kept_whole_in_the_rule(root: Path) -> None:
    command = "echo " + "x" * 300
    request = describe("Bash", {"command": command}, root)
    assert len(request.what) < 220 and request.what.endswith("…`")
    assert request.rule == ("Bash", command)


def test_an_always_rule_is_the_same_tool_and_the_same_command_or_file(root: Path) -> None:
    def rule(tool: str, **tool_input: Any) -> Any:
        return describe(tool, tool_input, root).rule

    assert rule("Bash", command="npm test") == rule("Bash", command="npm test ")
    assert rule("Bash", command="npm test") != rule("Bash", command="npm test -- --watch")
    assert rule("Edit", file_path="src/app.py") == rule("Edit", file_path=str(root / "src/app.py"))
    assert rule("Edit", file_path="src/app.py") != rule("Write", file_path="src/app.py")


@pytest.mark.parametrize(
    ("said", "yes"),
    [("yes", True), ("Sure, go ahead", True), ("ok", True), ("yes, but not now", False)],
)
def test_a_plain_yes_allows_once(said: str, yes: bool) -> None:
    assert plain_yes(said) is yes


class Asked:
    """A stand-in context that answers each question from a list (and records it)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.questions: list[str] = []

    async def ask(self, question: str, *, choices: Any, timeout: float) -> Answer:
        self.questions.append(question)
        await asyncio.sleep(0)
        return self.answers.pop(0)


@pytest.mark.parametrize(
    ("answer", "allowed", "outcome"),
    [
        (Answer("once", "once"), True, "allowed once"),
        (Answer("yeah", None), True, "allowed once"),
        (Answer("no", "no"), False, "denied"),
        (Answer("run the linter instead", None), False, "denied"),
        (Answer("", None, timed_out=True), False, "no answer"),
    ],
)
async def test_each_answer_decides(root: Path, answer: Answer, allowed: bool, outcome: str) -> None:
    approvals = Approvals(Asked(answer), root, 5)  # type: ignore[arg-type]
    decision = await approvals.decide("Bash", {"command": "npm test"})
    assert (decision.allowed, decision.outcome) == (allowed, outcome)
    if answer.choice is None and not allowed and not answer.timed_out:
        assert '"run the linter instead"' in decision.message  # the user's own words


async def test_identical_calls_at_once_are_asked_once_after_always(root: Path) -> None:
    asked = Asked(Answer("always", "always"), Answer("no", "no"))
    approvals = Approvals(asked, root, 5)  # type: ignore[arg-type]
    first, second, other = await asyncio.gather(
        approvals.decide("Bash", {"command": "npm test"}),
        approvals.decide("Bash", {"command": "npm test"}),
        approvals.decide("Bash", {"command": "rm -rf build"}),
    )
    assert [d.outcome for d in (first, second, other)] == [
        "allowed always",
        "already allowed",
        "denied",
    ]
    assert len(asked.questions) == 2


def test_the_configuration_takes_approve_from_code_and_the_environment(root: Path) -> None:
    assert ClaudeCodeConfig(cwd=root).approve == "auto"  # today's behaviour stays the default
    config = ClaudeCodeConfig.from_env({ENV_APPROVE: "ask", ENV_APPROVE_TIMEOUT: "20"}, cwd=root)
    assert (config.approve, config.approve_timeout) == ("ask", 20.0)
    with pytest.raises(ValueError, match="approve 'sometimes' is not one of auto, ask"):
        ClaudeCodeConfig(cwd=root, approve="sometimes")
    with pytest.raises(ValueError, match="approve_timeout must be a positive number"):
        ClaudeCodeConfig(cwd=root, approve_timeout=0)
