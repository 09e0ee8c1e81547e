"""The report: findings whose every sentence cites sources that were read, written to
``<YYYY-MM-DD>-<slug>.md``.

``Synthesis.from_answer`` checks the writer model's answer: each findings sentence
must cite at least one source number that backs a confirmed claim; citations of
anything else are removed, and a sentence left without one is dropped. A count of
findings in the summary ("7 verified points") is made to agree with the findings
that are left, and what is spoken (``spoken_report``) gives every one of them.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .evidence import Claim, Source

MAX_SLUG = 60
CONFIDENCES = ("high", "medium", "low")
_CITATION = re.compile(r"\[(\d{1,3})\]")
_SENTENCE = re.compile(r"(?<=[.!?])(?:\s*(?:\[\d{1,3}\])+)?\s+(?=[A-Z0-9\"'(])")
_NUMBERS = (  # noqa: SIM905 (a list of 21 words, one per line, says less)
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_FINDINGS_COUNT = re.compile(
    r"\b(\d+|" + "|".join(_NUMBERS) + r")(\s+(?:(?:verified|confirmed|key|main|major|"
    r"distinct|separate|important|checked|core|central)\s+){0,2})(point|finding)s?\b",
    re.IGNORECASE,
)


def slugify(text: str) -> str:
    """``text`` as a file-name slug: a-z, 0-9 and single hyphens (accents dropped from
    letters), at most 60 characters (cut at a word), ``research`` when nothing is left."""
    ascii_text = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")
    if len(slug) > MAX_SLUG:
        cut = slug[: MAX_SLUG + 1]
        slug = cut[: cut.rfind("-")] if "-" in cut[1:] else slug[:MAX_SLUG]
        slug = slug.strip("-")
    return slug or "research"


def report_path(folder: Path, topic: str, today: dt.date | None = None) -> Path:
    """``folder/<YYYY-MM-DD>-<slug>.md``; ``-2``, ``-3`` ... when that file exists."""
    day = (today or dt.date.today()).isoformat()
    base = f"{day}-{slugify(topic)}"
    path = folder / f"{base}.md"
    n = 2
    while path.exists():
        path = folder / f"{base}-{n}.md"
        n += 1
    return path


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph; a sentence's trailing citations stay with it."""
    text = " ".join(text.split())
    if not text:
        return []
    out: list[str] = []
    start = 0
    for match in _SENTENCE.finditer(text):
        end = match.start()
        piece = text[start:end] + text[end : match.end()].rstrip()
        out.append(piece.strip())
        start = match.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def recount(summary: str, findings: int) -> str:
    """``summary`` with any count of points or findings in it ("7 verified points",
    "five key findings") set to ``findings``, the number the report gives."""

    def fix(match: re.Match[str]) -> str:
        said, between, noun = match.group(1), match.group(2), match.group(3)
        if said.isdigit() or findings > len(_NUMBERS) - 1:
            number = str(findings)
        else:
            number = _NUMBERS[findings]
            number = number.capitalize() if said[0].isupper() else number
        return f"{number}{between}{noun}{'' if findings == 1 else 's'}"

    return _FINDINGS_COUNT.sub(fix, summary)


def cited(text: str) -> list[int]:
    return [int(n) for n in _CITATION.findall(text)]


def keep_cited(text: str, allowed: set[int]) -> tuple[str, int]:
    """``text`` with only sentences that cite an allowed source (other citations
    removed); returns ``(text, sentences dropped)``."""
    kept: list[str] = []
    dropped = 0
    for sentence in split_sentences(text):
        cleaned = _CITATION.sub(
            lambda m: m.group(0) if int(m.group(1)) in allowed else "", sentence
        )
        cleaned = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(cleaned.split()))
        if any(n in allowed for n in cited(cleaned)):
            kept.append(cleaned)
        else:
            dropped += 1
    return " ".join(kept), dropped


@dataclass(frozen=True)
class Finding:
    text: str
    confidence: str

    @property
    def sources(self) -> list[int]:
        return sorted(set(cited(self.text)))


@dataclass
class Synthesis:
    """The writer model's answer, checked: ``dropped`` counts uncited sentences removed."""

    summary: str
    findings: list[Finding]
    caveats: list[str] = field(default_factory=list)
    open_questions: list[str] = field(default_factory=list)
    dropped: int = 0

    @classmethod
    def from_answer(cls, answer: dict[str, Any] | None, allowed: set[int]) -> Synthesis | None:
        """The checked synthesis, or ``None`` when the answer has no summary or findings list."""
        if answer is None:
            return None
        summary = answer.get("summary")
        raw_findings = answer.get("findings")
        if not isinstance(summary, str) or not summary.strip():
            return None
        if not isinstance(raw_findings, list):
            return None
        findings: list[Finding] = []
        dropped = 0
        for item in raw_findings:
            if isinstance(item, str):
                item = {"text": item}
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                dropped += 1
                continue
            text, cut = keep_cited(item["text"], allowed)
            dropped += cut
            if text:
                confidence = str(item.get("confidence", "medium")).strip().lower()
                if confidence not in CONFIDENCES:
                    confidence = "medium"
                findings.append(Finding(text, confidence))
        return cls(
            summary=recount(" ".join(summary.split()), len(findings)),
            findings=findings,
            caveats=_strings(answer.get("caveats")),
            open_questions=_strings(answer.get("open_questions")),
            dropped=dropped,
        )


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [" ".join(v.split()) for v in value if isinstance(v, str) and v.strip()]


@dataclass
class ReportInput:
    """Everything a report shows."""

    topic: str
    question: str
    synthesis: Synthesis
    sources: list[Source]
    claims: list[Claim]
    method: dict[str, int]
    steering: list[str] = field(default_factory=list)
    stopped_early: bool = False


def render_markdown(data: ReportInput, today: dt.date | None = None) -> str:
    """The report as Markdown: summary, findings, evidence, sources, method."""
    s = data.synthesis
    day = (today or dt.date.today()).isoformat()
    lines = [f"# {data.topic}", "", f"*Research report, {day}.*", ""]
    lines += ["**Question:** " + data.question, ""]
    if data.steering:
        lines += ["**Steering:** " + "; ".join(data.steering), ""]
    if data.stopped_early:
        lines += ["*Stopped early at the user's request: this report covers what was verified.*"]
        lines += [""]
    lines += ["## Summary", "", s.summary, "", "## Findings", ""]
    if s.findings:
        for f in s.findings:
            lines.append(f"- {f.text} *(confidence: {f.confidence})*")
    else:
        lines.append("- No finding survived the citation check; see the evidence below.")
    confirmed = [c for c in data.claims if c.verdict == "confirmed"]
    lines += ["", "## Evidence", "", "Each claim was checked by independent reviews against "]
    lines[-1] += "the passage quoted from its source."
    lines.append("")
    for claim in confirmed:
        lines.append(f"- **Confirmed** ({_votes(claim)}): {claim.text} [{claim.source.number}]")
        lines.append(f"  > {claim.passage}")
    for claim in data.claims:
        if claim.verdict != "confirmed":
            verdict = claim.verdict.capitalize()
            lines.append(f"- {verdict} ({_votes(claim)}): {claim.text} [{claim.source.number}]")
    if s.caveats:
        lines += ["", "## Caveats", "", *(f"- {c}" for c in s.caveats)]
    if s.open_questions:
        lines += ["", "## Open questions", "", *(f"- {q}" for q in s.open_questions)]
    lines += ["", "## Sources", ""]
    for source in data.sources:
        lines.append(f"{source.number}. [{_escape(source.title)}]({source.url})")
    lines += ["", "## Method", ""]
    lines.append(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in data.method.items()) + ".")
    return "\n".join(lines) + "\n"


def _votes(claim: Claim) -> str:
    return (
        f"{claim.votes.count('supports')} for, {claim.votes.count('refutes')} against, "
        f"{claim.votes.count('unsure')} unsure"
    )


def _escape(text: str) -> str:
    return text.replace("[", "(").replace("]", ")")


def write_report(folder: Path, data: ReportInput, today: dt.date | None = None) -> Path:
    """Write the report to a new file in ``folder`` (created if missing); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = report_path(folder, data.topic, today)
    path.write_text(render_markdown(data, today), encoding="utf-8")
    return path.resolve()


def spoken_report(data: ReportInput, path: Path) -> str:
    """The final spoken message: summary, every finding of the report with its
    confidence and sources, caveats, open questions, where the report is, and that
    it is still listening (what is said agrees with what is written)."""
    s = data.synthesis
    parts = [f"The research on {data.topic} is done. {s.summary}"]
    for f in s.findings:
        text = " ".join(_CITATION.sub("", f.text).split())
        numbers = ", ".join(str(n) for n in f.sources)
        parts.append(f"Finding ({f.confidence} confidence, sources {numbers}): {text}")
    if s.caveats:
        parts.append("Caveats: " + "; ".join(s.caveats))
    if s.open_questions:
        parts.append("Open questions: " + "; ".join(s.open_questions))
    parts.append(f"The full report is saved as {path.name} in {path.parent}.")
    parts.append("I'm still listening if you want to dig deeper.")
    return "\n".join(parts)
