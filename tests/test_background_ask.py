"""``ctx.ask``: a background puts a question to the user through the voice agent and
gets the answer back (issue 30, item 1). A real ``Session`` with the scripted voice
agent of the plugin kit (it reads spoken updates out and forwards the user's words with
``backline_send``), on the virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from backline import UNSET, Answer, BackgroundContext, ChatMessage, background
from backline.background import ASKING
from backline.background._asking import match_choice
from backline.testing import BackgroundDriver, VirtualClock

pytestmark = pytest.mark.usefixtures("virtual_clock")

Asker = Callable[[BackgroundContext], Awaitable[Any]]


def asking(script: Asker, *, grace: float = 2.0) -> tuple[Any, list[str]]:
    """A background that runs ``script(ctx)`` once, then reads its inbox; and the list
    of what reached ``messages()``."""

    @background("coder", description="Writes code.", interrupt_grace=grace)
    async def coder(ctx: BackgroundContext) -> None:
        await script(ctx)
        async for message in ctx.messages():
            seen.append(message)

    seen: list[str] = []
    return coder, seen


async def test_the_question_is_spoken_and_the_answer_comes_back_matched_to_a_choice() -> None:
    answers: list[Answer] = []

    async def script(ctx: BackgroundContext) -> None:
        answers.append(await ctx.ask("Run the tests now?", choices=["yes", "no"], timeout=30))

    coder, seen = asking(script)
    async with BackgroundDriver(coder) as driver:
        assert await driver.wait_for_spoken(1) == ["Run the tests now?"]
        await driver.wait_for(lambda: "Run the tests now?" in driver.output.transcript)
        # The voice agent read the question with a note on what to do with it.
        item = next(
            it
            for it in driver.session.history.items
            if isinstance(it, ChatMessage) and it.extra.get("question")
        )
        assert "Run the tests now?" in item.content
        assert "Ask the user, with its choices (yes, no)" in item.content
        assert "send their answer to `coder` with backline_send" in item.content

        await driver.say("Yes please.")
        await driver.wait_for(lambda: bool(answers))

    assert answers == [Answer("Yes please.", "yes", timed_out=False)]
    assert seen == []  # the answer is not a message for the inbox


async def test_an_answer_that_names_no_choice_comes_back_as_text() -> None:
    answers: list[Answer] = []

    async def script(ctx: BackgroundContext) -> None:
        answers.append(await ctx.ask("Which branch?", choices=["main", "dev"], timeout=30))
        answers.append(await ctx.ask("Anything else?", timeout=30))

    async with BackgroundDriver(asking(script)[0]) as driver:
        await driver.wait_for_spoken(1)
        await driver.send("the release one")
        await driver.wait_for_spoken(2)
        await driver.send("no, that's all")
        await driver.wait_for(lambda: len(answers) == 2)

    assert answers == [Answer("the release one"), Answer("no, that's all")]


async def test_no_answer_within_the_timeout_is_timed_out_and_a_later_message_is_a_message(
    virtual_clock: VirtualClock,
) -> None:
    answers: list[Answer] = []

    async def script(ctx: BackgroundContext) -> None:
        answers.append(await ctx.ask("Push now?", choices=["yes", "no"], timeout=5))

    coder, seen = asking(script)
    async with BackgroundDriver(coder) as driver:
        await driver.wait_for_spoken(1)
        await asyncio.sleep(5.01)
        assert answers == [Answer("", None, timed_out=True)]
        assert ASKING not in driver.states[-1].state

        await driver.send("yes")  # too late: a message like any other
        await driver.wait_for(lambda: seen == ["yes"])


async def test_questions_are_asked_one_at_a_time_in_order() -> None:
    answers: list[tuple[str, Answer]] = []

    async def ask(ctx: BackgroundContext, question: str) -> None:
        answers.append((question, await ctx.ask(question, choices=["yes", "no"], timeout=30)))

    async def script(ctx: BackgroundContext) -> None:
        await asyncio.gather(ask(ctx, "First?"), ask(ctx, "Second?"), ask(ctx, "Third?"))

    async with BackgroundDriver(asking(script)[0]) as driver:
        assert await driver.wait_for_spoken(1) == ["First?"]
        await driver.send("yes")
        assert await driver.wait_for_spoken(2) == ["First?", "Second?"]
        await driver.send("no")
        assert await driver.wait_for_spoken(3) == ["First?", "Second?", "Third?"]
        await driver.send("no, yes")  # both named: no choice
        await driver.wait_for(lambda: len(answers) == 3)

    assert answers == [
        ("First?", Answer("yes", "yes")),
        ("Second?", Answer("no", "no")),
        ("Third?", Answer("no, yes", None)),
    ]


async def test_the_state_says_what_is_asked_while_it_waits() -> None:
    done = asyncio.Event()

    async def script(ctx: BackgroundContext) -> None:
        ctx.set_state({"status": "about to push", "branch": "main"})
        await ctx.ask("Push to main?", timeout=30)
        done.set()

    async with BackgroundDriver(asking(script)[0]) as driver:
        ctx = driver.session.background.context("coder")
        shown = await driver.wait_for_state(lambda s: ASKING in s)
        assert shown == {"status": "about to push", "branch": "main", ASKING: "Push to main?"}
        ctx.set_state({"status": "waiting to push", "branch": "main"})  # still asking
        assert driver.states[-1].state == {
            "status": "waiting to push",
            "branch": "main",
            ASKING: "Push to main?",
        }
        # The voice agent reads it through backline_state; the background's own is as set.
        tool = next(t for t in driver.session.tools if t.name == "backline_state")
        assert '"asking": "Push to main?"' in str(
            await tool.invoke({"background_session_id": "coder"})
        )
        assert ctx.state == {"status": "waiting to push", "branch": "main"}

        await driver.send("go ahead")
        await driver.wait_for(done.is_set)
        assert driver.states[-1].state == {"status": "waiting to push", "branch": "main"}


async def test_a_question_before_any_state_shows_alone_and_clears_to_empty() -> None:
    async def script(ctx: BackgroundContext) -> None:
        await ctx.ask("Ready?", timeout=30)

    async with BackgroundDriver(asking(script)[0]) as driver:
        assert await driver.wait_for_state(lambda s: True) == {ASKING: "Ready?"}
        await driver.send("yes")
        await driver.wait_for_state(lambda s: s == {})  # what front ends get
        assert driver.session.background.context("coder").state is UNSET
        tool = next(t for t in driver.session.tools if t.name == "backline_state")
        assert "has not reported any state" in str(
            await tool.invoke({"background_session_id": "coder"})
        )


async def test_what_was_said_before_the_question_stays_and_the_answer_interrupts_nothing() -> None:
    answers: list[Answer] = []
    interrupts: list[str] = []
    start = asyncio.Event()

    async def script(ctx: BackgroundContext) -> None:
        async def interrupted() -> None:
            interrupts.append("interrupt")

        ctx.on_interrupt(interrupted)
        await start.wait()
        async with ctx.turn():
            await asyncio.sleep(5)  # past the grace window: a message would interrupt
            answers.append(await ctx.ask("Delete the old branch?", timeout=30))

    coder, seen = asking(script)
    async with BackgroundDriver(coder) as driver:
        await driver.send("earlier remark")  # before the question (and before the turn)
        start.set()
        await driver.wait_for_spoken(1)
        await driver.send("yes, delete it")
        await driver.wait_for(lambda: seen == ["earlier remark"])

    assert answers == [Answer("yes, delete it")]
    assert interrupts == []


async def test_closing_during_a_question_ends_it_with_an_error_and_never_hangs() -> None:
    outcomes: list[str] = []

    async def ask(ctx: BackgroundContext, question: str) -> None:
        try:
            await ctx.ask(question, timeout=3600)
        except RuntimeError as e:
            outcomes.append(f"{question} {e}")

    driver = BackgroundDriver(asking(lambda ctx: asyncio.Event().wait())[0])
    async with driver:
        ctx = driver.session.background.context("coder")
        # Asked from tasks of their own (as an MCP call or a permission callback is).
        tasks = [asyncio.ensure_future(ask(ctx, q)) for q in ("First?", "Second?")]
        await driver.wait_for_spoken(1)
        await driver.session.aclose()
        async with asyncio.timeout(1):
            await asyncio.gather(*tasks)

    assert outcomes == [
        "First? background session 'coder' is closed",
        "Second? background session 'coder' is closed",
    ]
    with pytest.raises(RuntimeError, match="is closed"):
        await ctx.ask("After?")


async def test_a_cancelled_question_is_withdrawn_and_an_answer_it_took_goes_back() -> None:
    async with BackgroundDriver(asking(lambda ctx: asyncio.Event().wait())[0]) as driver:
        ctx = driver.session.background.context("coder")
        rt = driver.session.background.runtime("coder")

        first = asyncio.ensure_future(ctx.ask("Shall I?", timeout=30))
        await driver.wait_for(lambda: rt.asking.question is not None)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert rt.asking.question is None and ASKING not in driver.states[-1].state
        await driver.send("unrelated")  # no question waits: a message
        assert ctx.pending() == ["unrelated"]

        second = asyncio.ensure_future(ctx.ask("Now?", timeout=30))
        await driver.wait_for(lambda: rt.asking.question is not None)
        await driver.send("yes")  # taken by the question ...
        second.cancel()  # ... whose caller is cancelled before it reads it
        with pytest.raises(asyncio.CancelledError):
            await second
        assert ctx.pending() == ["yes"]


@pytest.mark.parametrize(
    ("question", "kwargs", "error"),
    [
        ("", {}, "must not be empty"),
        (42, {}, "must be a string"),
        ("Ok?", {"choices": "yes"}, "list of strings"),
        ("Ok?", {"choices": ["yes", " "]}, "non-blank"),
        ("Ok?", {"choices": ["Yes", "yes"]}, "given twice"),
        ("Ok?", {"timeout": -1}, "0 or more"),
        ("Ok?", {"timeout": float("inf")}, "0 or more"),
        ("x" * 9000, {}, "Limits.max_send_chars"),
    ],
)
async def test_a_bad_question_is_refused_and_nothing_is_said(
    question: Any, kwargs: dict[str, Any], error: str
) -> None:
    async with BackgroundDriver(asking(lambda ctx: asyncio.Event().wait())[0]) as driver:
        ctx = driver.session.background.context("coder")
        with pytest.raises((TypeError, ValueError), match=error):
            await ctx.ask(question, **kwargs)
        assert driver.result().spoken == []


@pytest.mark.parametrize(
    ("said", "choices", "chosen"),
    [
        ("yes please", ["yes", "no"], "yes"),
        ("YES.", ["yes", "no"], "yes"),
        ("allow once", ["once", "always", "no"], "once"),
        ("Always for this command", ["once", "always", "no"], "always"),
        ("once, not always", ["once", "always", "no"], "once"),
        ("no, don't", ["once", "always", "no"], "no"),
        ("Don’t always do that, just once", ["once", "always", "no"], "once"),
        ("once or always", ["once", "always", "no"], None),
        ("maybe later", ["yes", "no"], None),
        ("nope", ["yes", "no"], None),
        ("use the main branch", ["main", "main branch", "dev"], "main branch"),
        ("the dev one", ["main", "main branch", "dev"], "dev"),
    ],
)
def test_choices_match_case_insensitively_word_by_word(
    said: str, choices: list[str], chosen: str | None
) -> None:
    assert match_choice(said, choices) == chosen


def test_the_console_line_leads_with_the_whole_question() -> None:
    from backline.io._view import summarize_state

    question = "Claude Code wants to run `npm test`. Allow once, always for this command, or no?"
    assert summarize_state({"status": "working", ASKING: question}, width=20) == (
        f"asking: {question} · working"
    )
    assert summarize_state({ASKING: "Ready?"}) == "asking: Ready?"
