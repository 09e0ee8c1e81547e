"""The live state by phase (catalog items 173-174): each value replaces the last wholesale.

The keys the catalog names come first; counts and ``links`` are added for front
ends (backline's state convention: ``phase`` is the headline, whole numbers are
counts, ``links`` maps a label to a URL or file path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WAITING = "waiting for a research question"
CLARIFYING = "clarifying scope"
SEARCHING = "searching the web"
VERIFYING = "adversarially verifying claims"
WRITING = "writing the report"
DONE = "done, listening for follow-ups"
NO_SOURCES = "waiting — last research found no usable sources"
INCONCLUSIVE = "waiting — last research was inconclusive"
FAILED = "waiting — last research failed"

IDLE_PHASES = (WAITING, DONE, NO_SOURCES, INCONCLUSIVE, FAILED)
"""Phases that persist between rounds, until the next question arrives."""


def waiting() -> dict[str, Any]:
    return {"phase": WAITING}


def clarifying(topic: str) -> dict[str, Any]:
    return {"phase": CLARIFYING, "topic": topic}


def searching(topic: str, angles: list[str]) -> dict[str, Any]:
    return {"phase": SEARCHING, "topic": topic, "angles": list(angles)}


def verifying(topic: str, sources_read: int, claims_under_review: int) -> dict[str, Any]:
    return {
        "phase": VERIFYING,
        "topic": topic,
        "sources_read": sources_read,
        "claims_under_review": claims_under_review,
    }


def writing(topic: str, sources_read: int, confirmed: int, refuted: int) -> dict[str, Any]:
    return {
        "phase": WRITING,
        "topic": topic,
        "sources_read": sources_read,
        "confirmed": confirmed,
        "refuted": refuted,
    }


def done(
    topic: str, report: Path, sources_read: int, confirmed: int, refuted: int
) -> dict[str, Any]:
    return {
        "phase": DONE,
        "last_topic": topic,
        "last_report": str(report),
        "sources_read": sources_read,
        "confirmed": confirmed,
        "refuted": refuted,
        "links": {"report": str(report)},
    }


def no_sources(topic: str) -> dict[str, Any]:
    return {"phase": NO_SOURCES, "last_topic": topic}


def inconclusive(topic: str, sources_read: int, refuted: int) -> dict[str, Any]:
    return {
        "phase": INCONCLUSIVE,
        "last_topic": topic,
        "sources_read": sources_read,
        "confirmed": 0,
        "refuted": refuted,
    }


def failed(topic: str, error: str) -> dict[str, Any]:
    return {"phase": FAILED, "last_topic": topic, "error": error}
