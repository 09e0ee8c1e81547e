"""``register_search_providers``, the hook deep research specifies: named search providers
from any plugin, in any load order, all or nothing, clashes reported."""

from __future__ import annotations

from typing import Any

import backline_deep_research.plugin as deep_research_plugin
import pytest
from backline_deep_research.search import (
    SEARCH_PROVIDERS,
    SearchProvider,
    SearchResult,
    search_provider,
    search_provider_names,
    search_providers,
)

import backline
from backline.plugins import PluginManager, UnknownNameError

FIRST_PARTY = ["brave", "ddgs", "local", "searxng", "tavily"]


class Echo:
    """A provider that answers with the query (and the options it was built with)."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    async def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        return [
            SearchResult(title=query, url=f"https://example.test/{i}") for i in range(max_results)
        ]

    async def aclose(self) -> None:
        return None


def plugin(**hooks: Any) -> object:
    """A plugin object whose hooks are the given functions."""
    return type("Plugin", (), {k: staticmethod(backline.hookimpl(v)) for k, v in hooks.items()})()


def providers(*names: str) -> object:
    def register_search_providers(register: Any) -> None:
        for name in names:
            register(name, Echo, description=f"echo as {name}")

    return plugin(register_search_providers=register_search_providers)


def with_deep_research() -> PluginManager:
    manager = PluginManager(builtins=False, entry_points=False)
    info = manager.register(deep_research_plugin, name="deep_research")
    assert info.status == "loaded", info.error
    return manager


def test_deep_research_registers_its_own_providers_through_its_hook() -> None:
    manager = with_deep_research()
    info = manager.plugin("deep_research")
    assert info.hooks[0] == "register_background_sessions"
    assert "register_hookspecs" in info.hooks and "register_search_providers" in info.hooks
    assert search_provider_names(manager) == FIRST_PARTY
    assert info.to_dict()["search_providers"] == FIRST_PARTY
    assert manager.owner("search_provider", "ddgs") == "deep_research"


async def test_a_registered_provider_is_built_by_name_with_options() -> None:
    manager = with_deep_research()
    info = manager.register(providers("echo", "echo2"), name="echoes")
    assert info.status == "loaded"
    assert info.registered()["search_providers"] == ["echo", "echo2"]
    assert info.to_dict()["search_providers"] == ["echo", "echo2"]
    assert search_provider_names(manager) == sorted([*FIRST_PARTY, "echo", "echo2"])
    echoes = [e for e in search_providers(manager) if e.plugin == "echoes"]
    assert [e.description for e in echoes] == ["echo as echo", "echo as echo2"]
    assert manager.owner("search_provider", "echo") == "echoes"
    provider = search_provider(manager, "echo", region="de")
    assert isinstance(provider, SearchProvider)
    assert isinstance(provider, Echo) and provider.options == {"region": "de"}
    found = await provider.search("tides", max_results=2)
    assert [r.title for r in found] == ["tides", "tides"]


def test_a_provider_registered_before_deep_research_waits_for_its_hook() -> None:
    manager = PluginManager(builtins=False, entry_points=False)
    early = manager.register(providers("echo"), name="early")
    assert early.status == "loaded"
    assert early.waiting == ["register_search_providers"]

    manager.register(deep_research_plugin, name="deep_research")

    assert early.status == "loaded" and early.waiting == []
    assert early.registered()["search_providers"] == ["echo"]
    assert manager.owner("search_provider", "echo") == "early"
    manager.check_pending()  # nothing waits any more
    assert early.status == "loaded"


def test_a_provider_without_deep_research_is_refused_as_an_unknown_hook() -> None:
    manager = PluginManager(builtins=False, entry_points=False)
    early = manager.register(providers("echo"), name="early")
    manager.check_pending()
    assert early.status == "failed"
    assert "implements unknown hook 'register_search_providers'" in str(early.error)
    assert "optionalhook=True" in str(early.error)


def test_an_unknown_provider_names_the_ones_that_exist() -> None:
    manager = PluginManager(builtins=False, entry_points=False)
    manager.register(providers("echo"), name="echoes")
    manager.register(deep_research_plugin, name="deep_research")
    with pytest.raises(
        UnknownNameError, match="unknown search provider 'ddg'; available: brave, ddgs, echo"
    ):
        search_provider(manager, "ddg")


def test_a_clash_fails_the_later_plugin_as_a_whole() -> None:
    manager = with_deep_research()
    manager.register(providers("echo"), name="first")

    def greet() -> str:
        """Say hi."""
        return "hi"

    def register_tools(register: Any) -> None:
        register(greet)

    def register_search_providers(register: Any) -> None:
        register("other", Echo)
        register("echo", Echo)

    second = manager.register(
        plugin(register_tools=register_tools, register_search_providers=register_search_providers),
        name="second",
    )
    assert second.status == "failed"
    assert "search provider 'echo' is registered by both 'first' and 'second'" in str(second.error)
    assert second.registered()["search_providers"] == [] and second.tools == []
    assert "other" not in search_provider_names(manager)  # nothing of 'second' was kept
    assert manager.tool_names() == []
    assert manager.owner("search_provider", "echo") == "first"
    manager.unregister("first")
    assert search_provider_names(manager) == FIRST_PARTY


def test_a_provider_that_takes_a_first_party_name_fails() -> None:
    manager = with_deep_research()
    info = manager.register(providers("ddgs"), name="mine")
    assert info.status == "failed"
    assert "search provider 'ddgs' is registered by both 'deep_research' and 'mine'" in str(
        info.error
    )
    assert manager.item(SEARCH_PROVIDERS, "ddgs").plugin == "deep_research"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("two words", Echo), "must be a non-empty word"),
        (("", Echo), "must be a non-empty word"),
        (("x", "not callable"), "must be callable"),
    ],
)
def test_bad_registrations_fail_the_plugin_with_a_clear_error(args: Any, error: str) -> None:
    manager = with_deep_research()
    info = manager.register(
        plugin(register_search_providers=lambda register: register(*args)), name="bad"
    )
    assert info.status == "failed"
    assert error in str(info.error)
    assert search_provider_names(manager) == FIRST_PARTY


def test_registering_the_same_name_twice_in_one_plugin_fails_it() -> None:
    manager = with_deep_research()
    info = manager.register(providers("echo", "echo"), name="twice")
    assert info.status == "failed"
    assert "search provider 'echo' is registered twice by 'twice'" in str(info.error)
