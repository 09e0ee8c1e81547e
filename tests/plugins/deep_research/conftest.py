"""Fixtures for the deep-research tests: the corpus on loopback and the scripted models."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from backline_deep_research import ResearchConfig, ResearchLimits
from backline_deep_research import state as st
from backline_deep_research.search import SearchResult
from backline_deep_research.testing import CorpusServer

from backline.testing import BackgroundDriver

from .corpus import PAGES

FAST = ResearchLimits(host_interval=0.001, fetch_timeout=5.0)
"""Test limits: no politeness delay between requests to the one loopback host."""


@pytest.fixture
async def corpus() -> AsyncIterator[CorpusServer]:
    async with CorpusServer(PAGES) as server:
        yield server


def finished(state: Any) -> bool:
    """A state a round ends on (done, a dead end, a failure)."""
    return isinstance(state, dict) and state.get("phase") in st.IDLE_PHASES[1:]


async def round_end(driver: BackgroundDriver, rounds: int = 1) -> dict[str, Any]:
    """Wait until ``rounds`` rounds have ended in all; the last one's state."""

    def ends() -> list[Any]:
        return [s for s in driver.result().states if finished(s)]

    await driver.wait_for(lambda: len(ends()) >= rounds, what=f"{rounds} round(s) to end")
    state: dict[str, Any] = ends()[rounds - 1]
    return state


def web_config(server: CorpusServer, report_dir: Path, **limits: Any) -> ResearchConfig:
    """Search with the real ``searxng`` provider against the corpus server."""
    return ResearchConfig(
        search="searxng",
        searxng_url=server.url,
        report_dir=report_dir,
        limits=FAST.with_(**limits),
        allow_private_hosts=True,  # the corpus is on 127.0.0.1
    )


class Shelf:
    """An in-memory search provider over the corpus (no sockets: safe on the virtual
    clock). ``gate``, when given, holds every search until it is set."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.gate = gate
        self.queries: list[str] = []

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        self.queries.append(query)
        if self.gate is not None:
            await self.gate.wait()
        words = set(query.lower().split())
        hits = [p for p in PAGES if words & set(p.text.lower().split())]
        return [
            SearchResult(title=p.title, url=f"https://bees.test{p.path}", content=p.text)
            for p in hits[:max_results]
        ]

    async def aclose(self) -> None:
        return None


def shelf_config(report_dir: Path, **limits: Any) -> ResearchConfig:
    return ResearchConfig(search="shelf", report_dir=report_dir, limits=FAST.with_(**limits))
