"""A whole research round against the corpus on loopback: states, speech, report."""

from __future__ import annotations

import re
from pathlib import Path

from backline_deep_research import deep_research_background, passage_in
from backline_deep_research import state as st
from backline_deep_research.testing import CorpusServer, ScriptedResearcher

from backline.testing import BackgroundDriver

from .conftest import round_end, web_config

ASK = "Research why honeybee colonies are declining. Just start, no clarifying questions."
TOPIC = "why honeybee colonies are declining"
ANGLES = [
    ("colony losses", "colony losses winter"),
    ("varroa mites", "varroa mite virus"),
    ("pesticides", "neonicotinoid pesticides"),
]


async def test_a_full_round_publishes_each_phase_and_writes_a_cited_report(
    corpus: CorpusServer, tmp_path: Path
) -> None:
    researcher = ScriptedResearcher(angles=ANGLES)
    definition = deep_research_background(web_config(corpus, tmp_path), llm=researcher.llm())
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say(ASK)
        done = await round_end(driver)
        await driver.wait_until_done()
        run = driver.result()

    report = Path(done["last_report"])
    assert report.parent == tmp_path
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-why-honeybee-colonies-are-declining\.md", report.name)
    # The state replaces itself wholesale, phase by phase (catalog 173-174), and the
    # "done" state is the last one: nothing overwrites it while it waits.
    assert run.states == [
        {"phase": st.WAITING},
        {"phase": st.CLARIFYING, "topic": TOPIC},
        {"phase": st.SEARCHING, "topic": TOPIC, "angles": [a for a, _ in ANGLES]},
        {"phase": st.VERIFYING, "topic": TOPIC, "sources_read": 8, "claims_under_review": 9},
        {"phase": st.WRITING, "topic": TOPIC, "sources_read": 8, "confirmed": 9, "refuted": 0},
        {
            "phase": st.DONE,
            "last_topic": TOPIC,
            "last_report": str(report),
            "sources_read": 8,
            "confirmed": 9,
            "refuted": 0,
            "links": {"report": str(report)},
        },
    ]
    # "Just start" skipped clarification: no clarify call, no question asked.
    assert "clarify" not in researcher.calls
    assert researcher.calls == {"plan": 1, "extract": 8, "verify": 27, "write": 1}
    # Spoken only at milestones (catalog 178); the rest are context notes.
    assert run.spoken[:3] == [
        f"Starting research on {TOPIC}. I'll look at: colony losses; varroa mites; pesticides.",
        "I read 8 sources and found 9 claims to check.",
        "Verification done: 9 confirmed, 0 refuted, 0 inconclusive.",
    ]
    final = run.spoken[3]
    assert len(run.spoken) == 4
    assert final.startswith(f"The research on {TOPIC} is done.")
    assert "Finding (high confidence, sources 1): Beekeepers in the United States lost 48" in final
    # It says every finding the report gives, as many as its summary counts (issue 25).
    assert "The sources agree on 9 verified points." in final
    assert len(re.findall(r"^Finding \(", final, re.M)) == 9
    assert f"saved as {report.name} in {tmp_path}" in final
    assert final.endswith("I'm still listening if you want to dig deeper.")
    assert run.silent == ["Searched 3 angles with searxng; 10 unique results."]
    # The voice agent relayed the milestones.
    assert any("Verification done: 9 confirmed" in t for t in run.transcript)

    text = report.read_text()  # noqa: ASYNC240
    sources = dict(re.findall(r"^(\d+)\. \[.*\]\((http://127\.0\.0\.1:\d+/\S+)\)$", text, re.M))
    assert len(sources) == 8
    read = {u for u in sources.values()}
    fetched = {corpus.page_url(r.path) for r in corpus.requests if r.path.startswith("/bees/")}
    assert read == fetched  # every numbered source was actually fetched
    findings = text.split("## Findings")[1].split("## Evidence")[0].strip().splitlines()
    assert len(findings) == 9
    for line in findings:  # every findings sentence cites a numbered source ...
        cited = re.findall(r"\[(\d+)\]", line)
        assert cited and all(n in sources for n in cited), line
    evidence = re.findall(r"\[(\d+)\]\n  > (.*)$", text, re.M)
    assert len(evidence) == 9
    for number, quote in evidence:  # ... and each quoted passage is in that page's text
        page = next(p for p in corpus.pages.values() if corpus.page_url(p.path) == sources[number])
        assert passage_in(quote, page.text)
    assert "model calls: 37" in text


async def test_a_follow_up_round_carries_the_previous_summary(
    corpus: CorpusServer, tmp_path: Path
) -> None:
    researcher = ScriptedResearcher(angles=ANGLES)
    definition = deep_research_background(web_config(corpus, tmp_path), llm=researcher.llm())
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say(ASK)
        first = await round_end(driver)
        await driver.say("Now look at varroa treatments. Just start.")
        second = await round_end(driver, 2)
        run = driver.result()
    assert first["phase"] == second["phase"] == st.DONE
    assert second["last_topic"] == "Now look at varroa treatments"
    assert first["last_report"] != second["last_report"]
    assert Path(first["last_report"]).is_file()  # noqa: ASYNC240
    assert Path(second["last_report"]).is_file()  # noqa: ASYNC240
    # The second plan (and report) is briefed with the first report's summary (catalog 176).
    plans = researcher.user_texts("plan")
    assert "Earlier research" not in plans[0]
    assert f"Earlier research on '{TOPIC}' concluded: The sources agree on 9" in plans[1]
    assert "Earlier research" in researcher.user_texts("write")[1]
    # Between rounds the loop top published nothing: clarifying follows done directly.
    phases = [s["phase"] for s in run.states]
    assert phases.count(st.WAITING) == 1
    assert phases[phases.index(st.DONE) + 1] == st.CLARIFYING
