"""SearXNG: a self-hosted metasearch engine's JSON API (``/search?format=json``).

The instance must allow the JSON format (``search: formats: [html, json]`` in
its ``settings.yml``).
"""

from __future__ import annotations

import os
from typing import Any

from ..config import ENV_SEARXNG_URL
from ..search import SearchResult
from ._http import SearchError, request_json, text_of


class SearxNGSearch:
    """Searches the SearXNG instance at ``url`` (default: ``$BACKLINE_SEARXNG_URL``)."""

    def __init__(self, url: str | None = None, *, timeout: float = 20.0) -> None:
        url = url or os.environ.get(ENV_SEARXNG_URL, "").strip()
        if not url:
            raise ValueError(
                "the searxng search provider needs an instance URL: pass --searxng-url "
                f"or set {ENV_SEARXNG_URL} (e.g. http://127.0.0.1:8888)"
            )
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"the SearXNG URL must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        data: Any = await request_json(
            "GET",
            f"{self.url}/search",
            params={"q": query, "format": "json"},
            timeout=self.timeout,
        )
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise SearchError("the SearXNG answer has no results list")
        results = []
        for item in data["results"]:
            if isinstance(item, dict) and text_of(item.get("url")):
                results.append(
                    SearchResult(
                        title=text_of(item.get("title")) or text_of(item.get("url")),
                        url=text_of(item.get("url")),
                        snippet=text_of(item.get("content")),
                    )
                )
        return results[:max_results]

    async def aclose(self) -> None:
        return None
