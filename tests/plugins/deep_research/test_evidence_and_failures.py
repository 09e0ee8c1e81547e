"""Citations that hold (refuted claims, passages not in the page, uncited sentences),
failed rounds that leave the session alive, report names, and close mid-round."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from backline_deep_research import deep_research_background, passage_in, slugify, tally
from backline_deep_research import state as st
from backline_deep_research.report import Synthesis, report_path
from backline_deep_research.testing import HANG, CorpusServer, ScriptedResearcher

from backline.testing import BackgroundDriver

from .conftest import Shelf, round_end, shelf_config, web_config

ASK = "Research varroa mites. Just start."


def run_with(researcher: ScriptedResearcher, tmp_path: Path) -> BackgroundDriver:
    definition = deep_research_background(
        shelf_config(tmp_path), llm=researcher.llm(), search=lambda _: Shelf()
    )
    return BackgroundDriver(definition, timeout=30)


async def test_a_claim_refuted_by_votes_is_left_out_of_the_findings(tmp_path: Path) -> None:
    researcher = ScriptedResearcher(refute=("1987",))
    async with run_with(researcher, tmp_path) as driver:
        await driver.say(ASK)
        end = await round_end(driver)
        run = driver.result()
    assert end["phase"] == st.DONE and end["refuted"] == 1
    assert any(s.startswith("Verification done:") and "1 refuted" in s for s in run.spoken)
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    findings = report.split("## Findings")[1].split("## Evidence")[0]
    assert "1987" not in findings
    assert "- Refuted (0 for, 3 against, 0 unsure): The varroa mite was first found" in report
    assert "1987" not in researcher.user_texts("write")[0]  # the writer never saw it


async def test_a_claim_whose_passage_is_not_in_the_page_is_dropped(tmp_path: Path) -> None:
    invented = {
        "claims": [
            {
                "claim": "Varroa reached the United States in 1990",
                "quote": "The varroa mite was first found in the United States in 1990.",
            },
            {"claim": "Varroa spreads a virus", "quote": "spreads deformed wing virus"},
        ]
    }
    researcher = ScriptedResearcher(claims={"The varroa mite": invented})
    async with run_with(researcher, tmp_path) as driver:
        await driver.say(ASK)
        end = await round_end(driver)
        run = driver.result()
    assert end["phase"] == st.DONE
    assert "Dropped 1 claims whose quoted passage is not in the source." in run.silent
    verified = "\n".join(researcher.user_texts("verify"))
    assert "1990" not in verified  # never put to the vote ...
    assert "Claim: Varroa spreads a virus" in verified  # ... the supported one was
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    assert "1990" not in report
    assert "claims without passage: 1" in report


def test_passage_matching_is_verbatim_up_to_case_quotes_and_whitespace() -> None:
    page = "He said: \u201cThe mites   spread\nthe virus\u201d in 2019. Then nothing."
    assert passage_in('"the mites spread the virus" in 2019', page)
    assert passage_in("He said: \u201cthe mites spread ... the virus\u201d in 2019", page)
    assert not passage_in("the mites spread the virus in 2020", page)
    assert not passage_in("the virus", page)  # too short to show support
    assert not passage_in("Then nothing ... the mites spread the virus", page)  # out of order


def test_votes_decide_a_claim() -> None:
    assert tally(["supports", "supports", "refutes"]) == "confirmed"
    assert tally(["supports", "supports", "unsure"]) == "confirmed"
    assert tally(["supports", "refutes", "refutes"]) == "refuted"
    assert tally(["supports", "unsure", "unsure"]) == "inconclusive"
    assert tally(["supports"]) == "inconclusive"  # failed votes do not count
    assert tally([]) == "inconclusive"


def test_findings_keep_only_sentences_citing_verified_sources() -> None:
    answer = {
        "summary": "Mites matter.",
        "findings": [
            {
                "text": "Mites spread viruses [2]. Everyone agrees. Losses fell [9].",
                "confidence": "x",
            },
            {"text": "Treatments help [2][7].", "confidence": "high"},
            {"text": "Nothing cited here."},
            42,
        ],
    }
    synthesis = Synthesis.from_answer(answer, allowed={2, 7})
    assert synthesis is not None
    assert [(f.text, f.confidence) for f in synthesis.findings] == [
        ("Mites spread viruses [2].", "medium"),
        ("Treatments help [2][7].", "high"),
    ]
    assert synthesis.dropped == 4
    assert Synthesis.from_answer({"findings": []}, {1}) is None
    assert Synthesis.from_answer({"summary": "x", "findings": "none"}, {1}) is None


async def test_uncited_findings_are_dropped_from_the_report(tmp_path: Path) -> None:
    def write(user: str) -> dict[str, Any]:
        return {
            "summary": "Varroa is the main problem.",
            "findings": [
                {
                    "text": "Varroa spreads deformed wing virus [1]. It is the worst pest.",
                    "confidence": "high",
                },
                {"text": "Bees are doomed [42].", "confidence": "low"},
            ],
        }

    researcher = ScriptedResearcher(write=write)
    async with run_with(researcher, tmp_path) as driver:
        await driver.say(ASK)
        end = await round_end(driver)
        run = driver.result()
    assert "Dropped 2 sentences of the findings that cited no verified source." in run.silent
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    assert "It is the worst pest" not in report and "doomed" not in report
    assert "- Varroa spreads deformed wing virus [1]. *(confidence: high)*" in report


@pytest.mark.parametrize(
    ("stage", "reason"),
    [
        ("plan", "the planner returned no usable search plan"),
        ("write", "the report writer returned no usable report"),
    ],
)
async def test_a_garbage_answer_fails_the_round_and_the_session_lives(
    tmp_path: Path, stage: str, reason: str
) -> None:
    answers = iter(["I would look at bees, mostly.", None])

    def garbage_once(user: str) -> Any:
        value = next(answers, None)
        if value is not None:
            return value
        return (
            ScriptedResearcher()._plan(user)
            if stage == "plan"
            else ScriptedResearcher()._write(user)
        )

    researcher = ScriptedResearcher(**{stage: garbage_once})
    async with run_with(researcher, tmp_path) as driver:
        await driver.say(ASK)
        failed = await round_end(driver)
        assert failed == {"phase": st.FAILED, "last_topic": "varroa mites", "error": reason}
        await driver.say("Research queen bees. Just start.")
        end = await round_end(driver, 2)
        run = driver.result()
    assert f"The research on varroa mites failed: {reason}. I'm still listening" in "\n".join(
        run.spoken
    )
    assert "crashed" not in run.statuses and "ended" not in run.statuses
    assert end["phase"] == st.DONE and end["last_topic"] == "queen bees"


async def test_an_unusable_search_provider_fails_the_round_with_a_clear_reason(
    tmp_path: Path,
) -> None:
    def broken(config: Any) -> Any:
        raise ValueError("the searxng search provider needs an instance URL")

    definition = deep_research_background(
        shelf_config(tmp_path), llm=ScriptedResearcher().llm(), search=broken
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say(ASK)
        end = await round_end(driver)
    assert end["phase"] == st.FAILED
    assert "the search provider 'shelf' is not usable: the searxng search provider" in end["error"]


def test_report_names_are_dated_slugs_that_never_overwrite(tmp_path: Path) -> None:
    assert slugify("Why are Honeybees declining?! (2024 edition)") == (
        "why-are-honeybees-declining-2024-edition"
    )
    assert slugify("Ünïcode — and   symbols ***") == "unicode-and-symbols"
    assert slugify("???") == "research"
    long = slugify("word " * 40)
    assert len(long) <= 60 and not long.endswith("-") and set(long) <= set("word-")
    day = dt.date(2026, 3, 4)
    first = report_path(tmp_path, "Bees?", day)
    assert first.name == "2026-03-04-bees.md"
    first.write_text("x")
    assert report_path(tmp_path, "Bees!", day).name == "2026-03-04-bees-2.md"


@pytest.mark.parametrize("where", ["clarify", "search", "fetch"])
async def test_close_mid_round_leaves_no_task(
    tmp_path: Path, corpus: CorpusServer, no_leaked_tasks: Callable[[], Any], where: str
) -> None:
    reached = asyncio.Event()
    if where == "clarify":
        researcher = ScriptedResearcher(clarify={"ready": False, "questions": ["Why?"]})
        config, search = shelf_config(tmp_path), (lambda _: Shelf())
    elif where == "search":
        researcher = ScriptedResearcher()
        config, search = shelf_config(tmp_path), (lambda _: Shelf(asyncio.Event()))
    else:
        corpus.routes["/bees/varroa"] = HANG
        corpus.search_results = {"varroa": ["/bees/varroa"]}
        researcher = ScriptedResearcher(angles=[("varroa", "varroa")])
        config, search = web_config(corpus, tmp_path, fetch_timeout=60), None
    definition = deep_research_background(config, llm=researcher.llm(), search=search)
    driver = BackgroundDriver(definition, timeout=30)
    async with driver:
        await driver.say("Research varroa mites.")
        if where == "clarify":
            await driver.wait_for_spoken(1)
        elif where == "search":
            await driver.wait_for_state(lambda s: s["phase"] == st.SEARCHING)
        else:
            await corpus.wait_for_request("/bees/varroa")
        reached.set()
    assert reached.is_set()
    assert driver.result().statuses[-1] == "closed"
    await corpus.aclose()  # the server's own handler of the hanging page
    await no_leaked_tasks()
