"""Search providers: the ``register_search_providers`` hook, which this plugin specifies.

A search provider turns a query into a ranked list of ``SearchResult``. Any plugin
may publish one by implementing ``register_search_providers``; deep research (and
any background that searches) looks a provider up by name
(``search_provider(manager, name)``), so a provider published by one plugin serves
every plugin that searches. A provider plugin needs only this module's names for
its type hints, and may load before or after deep research.

Until backline 0.1 these names lived in ``backline.plugins``; they moved here with
the hook.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

from backline.plugins import RegistrationKind, hookspec

if TYPE_CHECKING:
    from backline.plugins import PluginManager

__all__ = [
    "SEARCH_PROVIDERS",
    "RegisterSearchProvider",
    "SearchProvider",
    "SearchProviderEntry",
    "SearchProviderFactory",
    "SearchResult",
    "register_search_providers",
    "search_provider",
    "search_provider_names",
    "search_providers",
]


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


@hookspec
def register_search_providers(register: RegisterSearchProvider) -> None:
    """Register named search providers: call ``register(name, factory, description="")``.

    ``factory(**options)`` returns a ``SearchProvider``: an object with
    ``async search(query, *, max_results) -> list[SearchResult]`` and
    ``async aclose()``. Called with no options, it reads its configuration (an
    instance URL, an API key) from the environment. Import client libraries inside
    the factory or the provider, not at module level.
    """


def _entry(
    plugin: str, name: str, factory: SearchProviderFactory, *, description: str = ""
) -> tuple[str, SearchProviderEntry]:
    """Register a search provider factory under ``name``: ``factory(**options)``."""
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        raise ValueError(
            f"register_search_providers: the name must be a non-empty word, got {name!r}"
        )
    if not callable(factory):
        raise TypeError(f"register_search_providers: the factory for '{name}' must be callable")
    return name, SearchProviderEntry(name, factory, description, plugin)


SEARCH_PROVIDERS: RegistrationKind[SearchProviderEntry] = RegistrationKind(
    "search_provider",
    "register_search_providers",
    _entry,
    label="search provider",
    key="search_providers",
)
"""The registration kind: ``manager.owner("search_provider", name)``, the
``search_providers`` key of ``backline plugins --json``."""


def search_provider_names(manager: PluginManager) -> list[str]:
    """The names of the registered search providers, sorted."""
    return manager.names(SEARCH_PROVIDERS)


def search_providers(manager: PluginManager) -> list[SearchProviderEntry]:
    """Every registered search provider (name, factory, description, plugin), by name."""
    return manager.items(SEARCH_PROVIDERS)


def search_provider(manager: PluginManager, name: str, **options: object) -> SearchProvider:
    """Build the search provider registered as ``name``: ``factory(**options)``.

    Raises ``backline.plugins.UnknownNameError`` listing the registered ones.
    """
    return manager.item(SEARCH_PROVIDERS, name).factory(**options)
