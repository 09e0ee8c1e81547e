"""Brave Search API (``GET /res/v1/web/search``), with the key from ``BRAVE_API_KEY``."""

from __future__ import annotations

import os
from typing import Any

from ..search import SearchResult
from ._http import SearchError, request_json, text_of

ENV_KEY = "BRAVE_API_KEY"
ENDPOINT = "https://api.search.brave.com"
MAX_COUNT = 20  # the API's own bound on ``count``


class BraveSearch:
    """Searches with the Brave Search API. ``api_key`` defaults to ``$BRAVE_API_KEY``."""

    def __init__(
        self, api_key: str | None = None, *, endpoint: str = ENDPOINT, timeout: float = 20.0
    ) -> None:
        api_key = api_key or os.environ.get(ENV_KEY, "").strip()
        if not api_key:
            raise ValueError(f"the brave search provider needs an API key: set {ENV_KEY}")
        self.api_key = api_key
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        data: Any = await request_json(
            "GET",
            f"{self.endpoint}/res/v1/web/search",
            params={"q": query, "count": min(max_results, MAX_COUNT)},
            headers={"X-Subscription-Token": self.api_key, "Accept": "application/json"},
            timeout=self.timeout,
        )
        web = data.get("web") if isinstance(data, dict) else None
        if not isinstance(web, dict) or not isinstance(web.get("results"), list):
            raise SearchError("the Brave answer has no web results list")
        return [
            SearchResult(
                title=text_of(item.get("title")) or text_of(item.get("url")),
                url=text_of(item.get("url")),
                snippet=text_of(item.get("description")),
            )
            for item in web["results"]
            if isinstance(item, dict) and text_of(item.get("url"))
        ][:max_results]

    async def aclose(self) -> None:
        return None
