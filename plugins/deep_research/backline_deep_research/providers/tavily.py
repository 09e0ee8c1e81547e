"""Tavily's search API (``POST /search``), with the key from ``TAVILY_API_KEY``."""

from __future__ import annotations

import os
from typing import Any

from ..search import SearchResult
from ._http import SearchError, request_json, text_of

ENV_KEY = "TAVILY_API_KEY"
ENDPOINT = "https://api.tavily.com"


class TavilySearch:
    """Searches with Tavily. ``api_key`` defaults to ``$TAVILY_API_KEY``."""

    def __init__(
        self, api_key: str | None = None, *, endpoint: str = ENDPOINT, timeout: float = 20.0
    ) -> None:
        api_key = api_key or os.environ.get(ENV_KEY, "").strip()
        if not api_key:
            raise ValueError(
                f"the tavily search provider needs an API key: set {ENV_KEY} (tvly-...)"
            )
        self.api_key = api_key
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        data: Any = await request_json(
            "POST",
            f"{self.endpoint}/search",
            json={"query": query, "max_results": max_results, "search_depth": "basic"},
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=self.timeout,
        )
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise SearchError("the Tavily answer has no results list")
        return [
            SearchResult(
                title=text_of(item.get("title")) or text_of(item.get("url")),
                url=text_of(item.get("url")),
                snippet=text_of(item.get("content")),
            )
            for item in data["results"]
            if isinstance(item, dict) and text_of(item.get("url"))
        ][:max_results]

    async def aclose(self) -> None:
        return None
