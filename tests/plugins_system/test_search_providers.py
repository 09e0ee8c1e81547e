"""``register_search_providers``: named search providers, all or nothing, clashes reported."""

from __future__ import annotations

from typing import Any

import pytest

import backline
from backline.plugins import (
    PluginManager,
    SearchProvider,
    SearchResult,
    UnknownNameError,
)


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


async def test_a_registered_provider_is_built_by_name_with_options() -> None:
    manager = PluginManager(entry_points=False)
    info = manager.register(providers("echo", "echo2"), name="echoes")
    assert info.status == "loaded"
    assert info.search_providers == ["echo", "echo2"]
    assert info.to_dict()["search_providers"] == ["echo", "echo2"]
    assert manager.search_provider_names() == ["echo", "echo2"]
    assert [e.description for e in manager.search_providers()] == ["echo as echo", "echo as echo2"]
    assert manager.owner("search_provider", "echo") == "echoes"
    provider = manager.search_provider("echo", region="de")
    assert isinstance(provider, SearchProvider)
    assert isinstance(provider, Echo) and provider.options == {"region": "de"}
    found = await provider.search("tides", max_results=2)
    assert [r.title for r in found] == ["tides", "tides"]


def test_an_unknown_provider_names_the_ones_that_exist() -> None:
    manager = PluginManager(entry_points=False)
    manager.register(providers("echo"), name="echoes")
    with pytest.raises(UnknownNameError, match="unknown search provider 'ddg'; available: echo"):
        manager.search_provider("ddg")


def test_a_clash_fails_the_later_plugin_as_a_whole() -> None:
    manager = PluginManager(entry_points=False)
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
    assert second.search_providers == [] and second.tools == []
    assert manager.search_provider_names() == ["echo"]  # nothing of 'second' was kept
    assert manager.owner("search_provider", "echo") == "first"
    manager.unregister("first")
    assert manager.search_provider_names() == []


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("two words", Echo), "must be a non-empty word"),
        (("", Echo), "must be a non-empty word"),
        (("x", "not callable"), "must be callable"),
    ],
)
def test_bad_registrations_fail_the_plugin_with_a_clear_error(args: Any, error: str) -> None:
    manager = PluginManager(entry_points=False)
    info = manager.register(
        plugin(register_search_providers=lambda register: register(*args)), name="bad"
    )
    assert info.status == "failed"
    assert error in str(info.error)
    assert manager.search_provider_names() == []


def test_registering_the_same_name_twice_in_one_plugin_fails_it() -> None:
    manager = PluginManager(entry_points=False)
    info = manager.register(providers("echo", "echo"), name="twice")
    assert info.status == "failed"
    assert "search provider 'echo' is registered twice by 'twice'" in str(info.error)
