"""``backline_stop`` on a research round (issue 30, item 6): the round finishes with what
is verified so far, as when the user says "stop"; a steering note still steers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backline_deep_research import deep_research_background
from backline_deep_research import state as st
from backline_deep_research.testing import ScriptedResearcher

from backline.background import STOP_TOOL
from backline.testing import BackgroundDriver, LLMRequest, ScriptedLLM

from .conftest import Shelf, round_end, shelf_config


async def test_the_stop_tool_ends_the_round_with_what_is_verified(tmp_path: Path) -> None:
    researcher = ScriptedResearcher()
    held = asyncio.Event()
    release = asyncio.Event()

    async def respond(request: LLMRequest) -> str:
        last = request.last_message
        user = last.content if last is not None else ""
        if "Claim: Varroa" in user or "Claim: The varroa" in user:
            held.set()
            await release.wait()  # this claim's votes never come back before the stop
        return researcher.answer("\n".join(request.instructions), user)

    definition = deep_research_background(
        shelf_config(tmp_path), llm=ScriptedLLM(respond), search=lambda _: Shelf()
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say("Research varroa mites. Just start.")
        await asyncio.wait_for(held.wait(), 30)
        stop = next(t for t in driver.session.tools if t.name == STOP_TOOL)
        said = await stop.invoke({"background_session_id": "deep_research"})
        end = await round_end(driver)
        run = driver.result()
        idle = await stop.invoke({"background_session_id": "deep_research"})
    assert said == "Stopped background session 'deep_research': its current work is interrupted."
    assert "Stopping: I'll finish with what is verified so far." in run.spoken
    assert end["phase"] == st.DONE
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    assert "Stopped early at the user's request" in report
    assert end["confirmed"] >= 1
    assert str(idle).startswith("Nothing to stop")
