"""Clarifying questions (answered, skipped, timed out, at most 3), steering and stop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from backline_deep_research import deep_research_background
from backline_deep_research import state as st
from backline_deep_research.testing import ScriptedResearcher

from backline.testing import BackgroundDriver, LLMRequest, ScriptedLLM, VirtualClock

from .conftest import Shelf, round_end, shelf_config

QUESTIONS = ["Which region matters to you?", "Managed or wild bees?"]
ASK = "Research honeybee colony losses."


def asks_until_answered(user: str) -> dict[str, Any]:
    if "Clarifications from the user" in user:
        return {"ready": True, "question": "Why do managed honeybee colonies die in winter?"}
    return {"ready": False, "questions": QUESTIONS}


async def test_answered_questions_refine_the_question(tmp_path: Path) -> None:
    researcher = ScriptedResearcher(clarify=asks_until_answered)
    definition = deep_research_background(
        shelf_config(tmp_path), llm=researcher.llm(), search=lambda _: Shelf()
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say(ASK)
        spoken = await driver.wait_for_spoken(1)
        assert spoken == [
            "Before I start, a few questions:\n- Which region matters to you?\n"
            "- Managed or wild bees?"
        ]
        assert driver.result().state == {"phase": st.CLARIFYING, "topic": "honeybee colony losses"}
        await driver.say("The United States, managed bees.")
        end = await round_end(driver)
    assert end["phase"] == st.DONE
    assert researcher.calls["clarify"] == 2
    plan = researcher.user_texts("plan")[0]
    # The refined question replaces the original; the answers travel as a transcript.
    assert plan.startswith("Research question: Why do managed honeybee colonies die in winter?")
    assert (
        "Q: Which region matters to you? Managed or wild bees?\nA: The United States, managed bees."
    ) in plan


async def test_just_start_as_the_answer_ends_clarification(tmp_path: Path) -> None:
    researcher = ScriptedResearcher(clarify=asks_until_answered)
    definition = deep_research_background(
        shelf_config(tmp_path), llm=researcher.llm(), search=lambda _: Shelf()
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say(ASK)
        await driver.wait_for_spoken(1)
        await driver.say("Just start, no more questions.")
        end = await round_end(driver)
    assert end["phase"] == st.DONE
    assert researcher.calls["clarify"] == 1  # not asked again
    assert researcher.user_texts("plan")[0].startswith("Research question: Research honeybee")


async def test_clarification_stops_after_three_rounds(tmp_path: Path) -> None:
    researcher = ScriptedResearcher(clarify={"ready": False, "questions": ["Why?"]})
    definition = deep_research_background(
        shelf_config(tmp_path), llm=researcher.llm(), search=lambda _: Shelf()
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say(ASK)
        for n, answer in enumerate(["Because.", "Still because.", "Really."], start=1):
            await driver.wait_for_spoken(n)
            await driver.say(answer)
        end = await round_end(driver)
        run = driver.result()
    assert end["phase"] == st.DONE
    assert researcher.calls["clarify"] == 3
    assert [s for s in run.spoken if s.startswith("Before I start")] == [
        "Before I start, a few questions:\n- Why?"
    ] * 3
    assert researcher.user_texts("plan")[0].count("A: ") == 3


async def test_an_unanswered_question_times_out_and_research_goes_ahead(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    researcher = ScriptedResearcher(clarify=asks_until_answered)
    definition = deep_research_background(
        shelf_config(tmp_path), llm=researcher.llm(), search=lambda _: Shelf()
    )
    async with BackgroundDriver(definition, timeout=600) as driver:
        await driver.say(ASK)
        await driver.wait_for_spoken(1)
        asked_at = virtual_clock.now()
        await driver.wait_for_state(lambda s: s["phase"] == st.SEARCHING)
        waited = virtual_clock.now() - asked_at
        end = await round_end(driver)
        run = driver.result()
    assert 180 <= waited < 181  # the 180 s bound, on the virtual clock
    assert end["phase"] == st.DONE
    assert "No answer within 180 s; starting without it." in run.silent
    assert "A: (no answer)" in researcher.user_texts("plan")[0]
    assert researcher.calls["clarify"] == 1


async def test_steering_mid_search_is_acknowledged_and_folded_into_later_stages(
    tmp_path: Path,
) -> None:
    gate = asyncio.Event()
    researcher = ScriptedResearcher()
    definition = deep_research_background(
        shelf_config(tmp_path), llm=researcher.llm(), search=lambda _: Shelf(gate)
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say("Research honeybee colony losses. Just start.")
        await driver.wait_for_state(lambda s: s["phase"] == st.SEARCHING)
        await driver.say("Focus on Europe.")  # the search is still running
        spoken = await driver.wait_for_spoken(2)
        assert spoken[1] == ("Noted — I'll fold this into the remaining research: Focus on Europe.")
        gate.set()
        end = await round_end(driver)
    assert end["phase"] == st.DONE
    steering = "Steering from the user (overrides the earlier scope):\n- Focus on Europe."
    assert steering not in researcher.user_texts("plan")[0]  # planned before the note
    assert all(steering in text for text in researcher.user_texts("extract"))
    assert steering in researcher.user_texts("write")[0]
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    assert "**Steering:** Focus on Europe." in report


async def test_stop_ends_the_round_with_what_is_verified_so_far(tmp_path: Path) -> None:
    researcher = ScriptedResearcher()
    held = asyncio.Event()
    release = asyncio.Event()

    async def respond(request: LLMRequest) -> str:
        last = request.last_message
        user = last.content if last is not None else ""
        if "Claim: Varroa" in user or "Claim: The varroa" in user:
            held.set()
            await release.wait()  # this claim's votes never come back before "stop"
        return researcher.answer("\n".join(request.instructions), user)

    definition = deep_research_background(
        shelf_config(tmp_path), llm=ScriptedLLM(respond), search=lambda _: Shelf()
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say("Research varroa mites. Just start.")
        await asyncio.wait_for(held.wait(), 30)
        await driver.say("stop")
        end = await round_end(driver)
        run = driver.result()
    assert "Stopping: I'll finish with what is verified so far." in run.spoken
    assert end["phase"] == st.DONE
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    assert "Stopped early at the user's request" in report
    assert "Inconclusive (0 for, 0 against, 0 unsure)" in report  # the cut-off claims
    assert end["confirmed"] >= 1
