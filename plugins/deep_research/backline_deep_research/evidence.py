"""Evidence: sources, claims with their verbatim passages, votes and verdicts.

The rules that make citations hold live here: a claim is kept only when its
passage is found in the text that was actually read (``passage_in``) and when it
names its subject (``unnamed_subject``: a claim is read without its source), and a
claim's verdict follows from its votes (``tally``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

Verdict: TypeAlias = Literal["confirmed", "refuted", "inconclusive"]
Vote: TypeAlias = Literal["supports", "refutes", "unsure"]

MIN_PASSAGE_WORDS = 4
"""A cited passage shorter than this cannot show support (it matches too easily)."""

_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"}
)
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…|\[\.\.\.\])\s*")


_PRONOUN = re.compile(
    r"^[\W_]*(it|its|it's|they|them|their|theirs|they're|this|these|that|those|"
    r"he|she|him|his|her|hers|we|our|us|such)\b",
    re.IGNORECASE,
)
_DUMMY_IT = re.compile(
    r"^[\W_]*it\s+(?:is|was|has been|had been|will be|would be|remains|seems|appears)\s+"
    r"(?:\w+\s+)?(?:estimated|believed|reported|thought|known|expected|likely|unlikely|"
    r"possible|unclear|clear|true|said|argued|claimed|feared|assumed|suggested)\s+"
    r"(?:that|whether)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Source:
    """A document that was read: its citation number, where it is, and its text."""

    number: int
    url: str
    title: str
    text: str


@dataclass
class Claim:
    """A claim from one source, the passage that states it, and its votes."""

    text: str
    passage: str
    source: Source
    votes: list[Vote] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        return tally(self.votes)


def tally(votes: list[Vote]) -> Verdict:
    """A claim is refuted by 2 or more refuting votes; it is confirmed by 2 or more
    supporting votes with fewer than 2 refuting; anything else is inconclusive.
    Only valid votes count (a failed or unreadable review is no vote)."""
    refuting = votes.count("refutes")
    if refuting >= 2:
        return "refuted"
    if votes.count("supports") >= 2:
        return "confirmed"
    return "inconclusive"


def parse_vote(value: object) -> Vote | None:
    """``"supports"``, ``"refutes"`` or ``"unsure"`` from a reviewer's verdict, else None."""
    if not isinstance(value, str):
        return None
    word = value.strip().lower()
    for vote, forms in (
        ("supports", ("supports", "support", "supported", "true", "confirmed")),
        ("refutes", ("refutes", "refute", "refuted", "false", "contradicts")),
        ("unsure", ("unsure", "uncertain", "unknown", "inconclusive")),
    ):
        if word in forms:
            return vote  # type: ignore[return-value]
    return None


def unnamed_subject(claim: str) -> str | None:
    """The pronoun a claim starts with instead of naming its subject ("It runs three
    times a week ..." -> ``"It"``), or ``None`` when it names it. "It is estimated
    that ..." names its subject after the "it" and passes."""
    found = _PRONOUN.match(claim)
    if found is None or _DUMMY_IT.match(claim):
        return None
    return found.group(1)


def normalize_text(text: str) -> str:
    """Case, quotes, dashes and whitespace folded, for comparing a passage to a page."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return " ".join(text.split())


def passage_in(passage: str, text: str) -> bool:
    """Whether ``passage`` appears in ``text`` (quote-level support).

    Case, curly quotes, dashes and whitespace do not matter; an ellipsis may join
    pieces that appear in order. Each piece needs at least ``MIN_PASSAGE_WORDS`` words.
    """
    haystack = normalize_text(text)
    pieces = [normalize_text(p).strip(" .,;:'\"") for p in _ELLIPSIS.split(passage)]
    pieces = [p for p in pieces if p]
    if not pieces or any(len(p.split()) < MIN_PASSAGE_WORDS for p in pieces):
        return False
    at = 0
    for piece in pieces:
        found = haystack.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def counts(claims: list[Claim]) -> dict[Verdict, int]:
    """How many claims ended confirmed, refuted and inconclusive."""
    result: dict[Verdict, int] = {"confirmed": 0, "refuted": 0, "inconclusive": 0}
    for claim in claims:
        result[claim.verdict] += 1
    return result
