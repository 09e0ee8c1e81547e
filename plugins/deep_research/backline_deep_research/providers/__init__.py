"""The first-party search providers, registered through ``register_search_providers``.

Each module is imported only when its provider is built, so loading the plugin
stays light. ``PROVIDERS`` maps a name to ``(module, class, description)``.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..search import SearchProvider

PROVIDERS: dict[str, tuple[str, str, str]] = {
    "ddgs": ("ddgs_search", "DDGSSearch", "Web search through ddgs (no key needed)"),
    "searxng": (
        "searxng",
        "SearxNGSearch",
        "A SearXNG instance's JSON API (URL: --searxng-url or BACKLINE_SEARXNG_URL)",
    ),
    "tavily": ("tavily", "TavilySearch", "Tavily's search API (key: TAVILY_API_KEY)"),
    "brave": ("brave", "BraveSearch", "Brave Search API (key: BRAVE_API_KEY)"),
    "local": (
        "local",
        "LocalSearch",
        "A folder of documents: .md, .txt, .html (folder: --research-docs or "
        "BACKLINE_RESEARCH_DOCS)",
    ),
}


def factory(name: str) -> Any:
    """The factory of a first-party provider: imports its module when called."""
    module_name, class_name, _ = PROVIDERS[name]

    def build(**options: Any) -> SearchProvider:
        module = importlib.import_module(f"{__name__}.{module_name}")
        provider: SearchProvider = getattr(module, class_name)(**options)
        return provider

    build.__name__ = f"{name}_search"
    build.__doc__ = PROVIDERS[name][2]
    return build
