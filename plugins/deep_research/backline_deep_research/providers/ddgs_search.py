"""ddgs: metasearch over public engines, no key (the default provider).

ddgs is synchronous; each search runs in a worker thread with ddgs's own
timeout, so the event loop never waits on it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..search import SearchResult
from ._http import text_of


class DDGSSearch:
    """Searches with ``ddgs.DDGS().text``. ``timeout`` bounds each engine request."""

    def __init__(self, *, timeout: int = 10, region: str = "us-en", backend: str = "auto") -> None:
        self.timeout = timeout
        self.region = region
        self.backend = backend

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        rows = await asyncio.to_thread(self._search, query, max_results)
        return [
            SearchResult(
                title=text_of(row.get("title")) or text_of(row.get("href")),
                url=text_of(row.get("href")),
                snippet=text_of(row.get("body")),
            )
            for row in rows
            if isinstance(row, dict) and text_of(row.get("href"))
        ][:max_results]

    def _search(self, query: str, max_results: int) -> list[Any]:
        from ddgs import DDGS

        found: list[Any] = DDGS(timeout=self.timeout).text(
            query, max_results=max_results, region=self.region, backend=self.backend
        )
        return found

    async def aclose(self) -> None:
        return None
