"""Claims that stand alone and speech that agrees with the report (issue 25, item 3):
a report finding read "It runs three times a week and takes about 14 hours." (a claim
without its subject), and the spoken summary said "7 verified points" and listed 5."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from backline_deep_research import deep_research_background, stage_of
from backline_deep_research import state as st
from backline_deep_research.evidence import unnamed_subject
from backline_deep_research.prompts import extract_prompt
from backline_deep_research.report import recount
from backline_deep_research.testing import CorpusServer, ScriptedResearcher

from backline.testing import BackgroundDriver

from .conftest import Shelf, round_end, shelf_config, web_config

ASK = "Research varroa mites. Just start."
_WRITER_CLAIM = re.compile(r"^- (.*) \[(\d+)\] \(passage: ", re.MULTILINE)


@pytest.mark.parametrize(
    ("claim", "pronoun"),
    [
        ("It runs three times a week and takes about 14 hours", "It"),
        ("They were first found in the United States in 1987", "They"),
        ("Its range grew by 40 percent", "Its"),
        ("This study counted 2 million colonies", "This"),
        ("These losses reached 48 percent", "These"),
        ("He founded the society in 1921", "He"),
        ('"It" spreads deformed wing virus', "It"),
        ("It is used by 3 million beekeepers", "It"),
        ("The Paris to Berlin night train runs three times a week", None),
        ("Italy banned three neonicotinoids in 2018", None),
        ("Thereafter 3 colonies died", None),
        ("It is estimated that 40 percent of colonies died in 2023", None),
        ("Beekeepers lost 48 percent of their colonies", None),
    ],
)
def test_a_claim_that_starts_with_a_bare_pronoun_does_not_name_its_subject(
    claim: str, pronoun: str | None
) -> None:
    assert unnamed_subject(claim) == pronoun


def test_the_extraction_prompt_asks_for_claims_that_stand_alone() -> None:
    prompt = extract_prompt(3)
    assert "Write each claim so that it stands alone" in prompt
    assert 'never "It runs' in prompt and "never starts with a pronoun" in prompt
    assert stage_of(prompt) == "extract"


async def test_a_claim_without_its_subject_is_dropped_noted_and_never_verified(
    tmp_path: Path,
) -> None:
    answer = {
        "claims": [
            {
                "claim": "It feeds on the fat body of bees",
                "quote": "It feeds on the fat body of bees and spreads deformed wing virus.",
            },
            {
                "claim": "The varroa mite was first found in the United States in 1987",
                "quote": "The varroa mite was first found in the United States in 1987.",
            },
        ]
    }
    researcher = ScriptedResearcher(claims={"The varroa mite": answer})
    definition = deep_research_background(
        shelf_config(tmp_path), llm=researcher.llm(), search=lambda _: Shelf()
    )
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say(ASK)
        end = await round_end(driver)
        run = driver.result()
    assert end["phase"] == st.DONE
    assert (
        'Dropped 1 claims that do not name their subject: "It feeds on the fat body of bees".'
    ) in run.silent
    verified = "\n".join(researcher.user_texts("verify"))
    assert "Claim: It feeds" not in verified  # never put to the vote ...
    assert "Claim: The varroa mite was first found" in verified  # ... the named one was
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    assert "It feeds" not in report and "claims without subject: 1" in report


def test_the_scripted_extractor_names_the_subject_as_the_prompt_asks() -> None:
    # The demo's page: "It runs three times a week ..." is claimed under its title.
    researcher = ScriptedResearcher()
    user = (
        "Research question: night trains\n\nSource [3]: Paris to Berlin by sleeper\n"
        "URL: http://x.test/p\n\nThe Paris to Berlin night train started running in "
        "December 2023. It runs three times a week and takes about 14 hours."
    )
    claims = json.loads(researcher.answer(extract_prompt(3), user))["claims"]
    assert [c["claim"] for c in claims] == [
        "The Paris to Berlin night train started running in December 2023",
        "Paris to Berlin by sleeper: it runs three times a week and takes about 14 hours",
    ]
    assert all(unnamed_subject(c["claim"]) is None for c in claims)


def test_a_count_of_findings_in_the_summary_is_made_true() -> None:
    assert recount("The sources agree on 7 verified points.", 5) == (
        "The sources agree on 5 verified points."
    )
    assert recount("Seven key findings stand out.", 6) == "Six key findings stand out."
    assert recount("Two main findings.", 1) == "One main finding."
    assert recount("Losses rose 3 percentage points in one of the findings' regions.", 4) == (
        "Losses rose 3 percentage points in one of the findings' regions."
    )


async def test_what_is_spoken_agrees_with_the_report(corpus: CorpusServer, tmp_path: Path) -> None:
    # The writer claims 7 verified points; 2 of its 7 findings cite nothing that was
    # verified and are dropped. Report and speech both say 5, and list those 5.
    def write(user: str) -> dict[str, Any]:
        cited = _WRITER_CLAIM.findall(user)[:5]
        findings = [{"text": f"{text}. [{n}]", "confidence": "high"} for text, n in cited]
        findings += [
            {"text": "Colonies are doomed everywhere.", "confidence": "low"},
            {"text": "Honey prices will triple [42].", "confidence": "low"},
        ]
        return {"summary": "The sources agree on 7 verified points.", "findings": findings}

    researcher = ScriptedResearcher(
        angles=[("losses", "colony losses winter"), ("varroa", "varroa mite virus")],
        write=write,
    )
    definition = deep_research_background(web_config(corpus, tmp_path), llm=researcher.llm())
    async with BackgroundDriver(definition, timeout=30) as driver:
        await driver.say("Research honeybee losses. Just start.")
        end = await round_end(driver)
        run = driver.result()
    assert end["phase"] == st.DONE and end["confirmed"] > 5
    report = Path(end["last_report"]).read_text()  # noqa: ASYNC240
    summary = report.split("## Summary")[1].split("## Findings")[0].strip()
    written = report.split("## Findings")[1].split("## Evidence")[0].strip().splitlines()
    assert summary == "The sources agree on 5 verified points."
    assert len(written) == 5
    spoken = run.spoken[-1]
    assert "The sources agree on 5 verified points." in spoken
    said = re.findall(r"^Finding \((\w+) confidence, sources ([\d, ]+)\): (.*)$", spoken, re.M)
    assert len(said) == len(written) == 5
    for (confidence, _, text), line in zip(said, written, strict=True):
        assert line.startswith(f"- {text}") and f"*(confidence: {confidence})*" in line
