"""Search providers: what ``register_search_providers`` registers.

A search provider turns a query into a ranked list of ``SearchResult``. backline
itself runs no searches; background plugins (deep research, your own) look a
provider up by name (``PluginManager.search_provider(name)``), so a provider
published by one plugin serves every plugin that searches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable


@dataclass(frozen=True)
class SearchResult:
    """One search hit.

    ``url`` is where the document lives (``http(s)://`` for the web, ``file://``
    for a local document); ``snippet`` is the provider's excerpt. ``content`` is
    the document's full text when the provider already has it (a local folder,
    an API that returns page text): a consumer may then skip fetching ``url``.
    """

    title: str
    url: str
    snippet: str = ""
    content: str | None = None


@runtime_checkable
class SearchProvider(Protocol):
    """What a search provider factory returns.

    ``search`` returns at most ``max_results`` results, best first, and raises an
    exception (any) when the search failed: consumers skip a failed search and
    count it. ``aclose`` releases what the provider holds (connections).
    """

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]: ...

    async def aclose(self) -> None: ...


SearchProviderFactory: TypeAlias = Callable[..., SearchProvider]
"""``factory(**options) -> SearchProvider``; with no options it reads its configuration
(instance URL, API key) from the environment and raises ``ValueError`` saying what
is missing."""


@dataclass(frozen=True)
class SearchProviderEntry:
    """A named search provider factory and the plugin that registered it."""

    name: str
    factory: SearchProviderFactory
    description: str
    plugin: str


class RegisterSearchProvider(Protocol):
    """The ``register`` argument of ``register_search_providers``."""

    def __call__(
        self, name: str, factory: SearchProviderFactory, *, description: str = ""
    ) -> None: ...
