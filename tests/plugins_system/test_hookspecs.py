"""``register_hookspecs``: a plugin adds hooks (and registration kinds) for other plugins.

The "widgets" plugin here specifies ``register_widgets`` with the kind ``widget``;
other plugins register widgets through it, loaded before or after it.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import pytest

import backline
from backline.plugins import (
    PluginError,
    PluginManager,
    RegistrationKind,
    UnknownNameError,
    hookspec,
)

from .conftest import FakeSite, plugins_json, run_backline, unique


class WidgetSpecs:
    @staticmethod
    @hookspec
    def register_widgets(register: Any) -> None:
        """Register widgets: ``register(name, size=1)``."""

    @staticmethod
    @hookspec
    def widget_turned(widget: str) -> None:
        """A plain hook: the widgets plugin calls it, other plugins observe."""


def make_widget(plugin: str, name: str, size: int = 1) -> tuple[str, tuple[str, int]]:
    """Register a widget under ``name``."""
    if not isinstance(size, int):
        raise TypeError(f"register_widgets: size must be a number, got {size!r}")
    return name, (plugin, size)


WIDGETS: RegistrationKind[tuple[str, int]] = RegistrationKind(
    "widget", "register_widgets", make_widget
)


def plugin(**hooks: Any) -> object:
    """A plugin object whose hooks are the given functions."""
    return type("Plugin", (), {k: staticmethod(backline.hookimpl(v)) for k, v in hooks.items()})()


def spec_plugin(*kinds: RegistrationKind[Any], specs: object = WidgetSpecs) -> object:
    return plugin(register_hookspecs=lambda register: register(specs, kinds=list(kinds)))


def widgets(*names: str, **extra: Any) -> object:
    def register_widgets(register: Any) -> None:
        for name in names:
            register(name, size=len(name))

    return plugin(register_widgets=register_widgets, **extra)


def manager() -> PluginManager:
    return PluginManager(builtins=False, entry_points=False)


# -- by hand ------------------------------------------------------------------------------------
def test_a_plugin_registers_through_a_kind_another_plugin_added() -> None:
    m = manager()
    m.register(spec_plugin(WIDGETS), name="widgets")
    info = m.register(widgets("cog", "gear"), name="maker")

    assert info.status == "loaded"
    assert m.names(WIDGETS) == ["cog", "gear"]
    assert m.items(WIDGETS) == [("maker", 3), ("maker", 4)]
    assert m.item(WIDGETS, "gear") == ("maker", 4)
    assert m.owner("widget", "cog") == "maker"
    assert info.registered()["widgets"] == ["cog", "gear"]
    assert info.to_dict()["widgets"] == ["cog", "gear"]
    assert m.plugin("widgets").to_dict()["widgets"] == []  # every record has the key
    assert m.kinds()[-1] is WIDGETS
    with pytest.raises(UnknownNameError, match="unknown widget 'sprocket'; available: cog, gear"):
        m.item(WIDGETS, "sprocket")


def test_a_plugin_registered_before_the_hook_is_specified_waits_for_it() -> None:
    m = manager()
    early = m.register(widgets("cog", register_tools=lambda register: None), name="early")
    assert early.status == "loaded" and early.waiting == ["register_widgets"]

    m.register(spec_plugin(WIDGETS), name="widgets")

    assert early.waiting == [] and early.status == "loaded"
    assert m.item(WIDGETS, "cog") == ("early", 3)
    m.check_pending()
    assert early.status == "loaded"


def test_a_waiting_plugin_whose_registration_clashes_fails_as_a_whole() -> None:
    def greet() -> str:
        """Say hi."""
        return "hi"

    m = manager()
    m.register(widgets("cog"), name="first")
    late = m.register(widgets("cog", register_tools=lambda register: register(greet)), name="late")
    assert m.tool_names() == ["greet"]

    m.register(spec_plugin(WIDGETS), name="widgets")

    assert late.status == "failed"
    assert "widget 'cog' is registered by both 'first' and 'late'" in str(late.error)
    assert m.tool_names() == []  # what it had registered before is undone
    assert m.pluggy_manager.get_plugin("late") is None


def test_check_pending_fails_a_plugin_whose_hook_nobody_specifies() -> None:
    m = manager()
    info = m.register(widgets("cog", register_tools=lambda register: None), name="lonely")
    m.check_pending()
    assert info.status == "failed"
    assert "implements unknown hook 'register_widgets'" in str(info.error)
    assert m.pluggy_manager.get_plugin("lonely") is None


def test_check_pending_raises_in_strict_mode() -> None:
    m = PluginManager(builtins=False, entry_points=False, strict=True)
    m.register(widgets("cog"), name="lonely")
    with pytest.raises(PluginError, match=r"plugin 'lonely' failed: .*unknown hook"):
        m.check_pending()


def test_an_optional_hook_nobody_specifies_is_no_error_and_runs_once_specified() -> None:
    def register_widgets(register: Any) -> None:
        register("cog")

    optional = type(
        "Plugin",
        (),
        {"register_widgets": staticmethod(backline.hookimpl(optionalhook=True)(register_widgets))},
    )()
    m = manager()
    info = m.register(optional, name="optional")
    m.check_pending()
    assert info.status == "loaded" and info.waiting == []

    m.register(spec_plugin(WIDGETS), name="widgets")

    assert m.item(WIDGETS, "cog") == ("optional", 1)


def test_a_plain_hook_a_plugin_specifies_is_called_through_the_relay() -> None:
    seen: list[str] = []
    m = manager()
    m.register(spec_plugin(), name="widgets")
    m.register(plugin(widget_turned=lambda widget: seen.append(widget)), name="watcher")
    m.hook.widget_turned(widget="cog")
    assert seen == ["cog"]


def test_an_implementation_that_does_not_fit_the_spec_fails_its_own_plugin() -> None:
    m = manager()
    bad = m.register(plugin(register_widgets=lambda registr: None), name="bad")
    spec = m.register(spec_plugin(WIDGETS), name="widgets")
    assert spec.status == "loaded"
    assert bad.status == "failed"
    assert "Argument(s) {'registr'} are declared in the hookimpl" in str(bad.error)
    later = m.register(plugin(register_widgets=lambda registr: None), name="later")
    assert later.status == "failed" and "registr" in str(later.error)


def test_a_registration_the_kind_refuses_fails_the_plugin() -> None:
    m = manager()
    m.register(spec_plugin(WIDGETS), name="widgets")
    info = m.register(
        plugin(register_widgets=lambda register: register("cog", size="big")), name="bad"
    )
    assert info.status == "failed"
    assert (
        info.error
        == "register_widgets raised TypeError: register_widgets: size must be a number, got 'big'"
    )
    assert m.names(WIDGETS) == []


def test_a_register_kept_after_the_hook_returned_is_refused() -> None:
    saved: list[Any] = []
    m = manager()
    m.register(plugin(register_hookspecs=lambda register: saved.append(register)), name="keeper")
    with pytest.raises(RuntimeError, match="called after the hook returned"):
        saved[0](WidgetSpecs, kinds=[WIDGETS])


# -- the hookspecs themselves ---------------------------------------------------------------------
def test_two_plugins_specifying_one_hook_fail_the_second() -> None:
    m = manager()
    m.register(spec_plugin(WIDGETS), name="widgets")
    second = m.register(spec_plugin(), name="copycat")
    assert second.status == "failed"
    assert "hook 'register_widgets' is registered by both 'widgets' and 'copycat'" in str(
        second.error
    )
    assert [c.second for c in m.clashes] == ["copycat"]


def test_a_plugin_cannot_specify_backline_s_own_hooks() -> None:
    class Tools:
        @staticmethod
        @hookspec
        def register_tools(register: Any) -> None:
            """Mine."""

    info = manager().register(spec_plugin(specs=Tools), name="greedy")
    assert info.status == "failed"
    assert "hook 'register_tools' is reserved by backline; 'greedy' cannot register it" in str(
        info.error
    )


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (RegistrationKind("tool", "register_widgets", make_widget), "'tool' is reserved"),
        (
            RegistrationKind("widget", "register_widgets", make_widget, key="tools"),
            "'tools' is reserved",
        ),
        (
            RegistrationKind("widget", "register_widgets", make_widget, key="status"),
            "'status' is reserved",
        ),
        (RegistrationKind("widget", "widget_turned", make_widget), "takes one argument"),
        (RegistrationKind("widget", "register_gadgets", make_widget), "does not specify"),
    ],
    ids=["core-kind-name", "core-key", "json-field", "not-register", "unknown-hook"],
)
def test_a_kind_that_cannot_be_added_fails_the_plugin_and_adds_no_hook(
    kind: RegistrationKind[Any], error: str
) -> None:
    m = manager()
    info = m.register(spec_plugin(kind), name="widgets")
    assert info.status == "failed"
    assert error in str(info.error)
    assert getattr(m.hook, "register_widgets", None) is None  # nothing half-added


def test_hookspecs_without_a_marked_function_are_refused() -> None:
    class Empty:
        pass

    info = manager().register(spec_plugin(specs=Empty), name="empty")
    assert info.status == "failed"
    assert "has no function marked @backline.plugins.hookspec" in str(info.error)


# -- installed plugins: load order --------------------------------------------------------------
SPEC_MODULE = """
import backline
from backline.plugins import RegistrationKind, hookspec

class Specs:
    @staticmethod
    @hookspec
    def register_widgets(register):
        "Register widgets: register(name)."

def make_widget(plugin, name):
    "Register a widget."
    return name, plugin

WIDGETS = RegistrationKind("widget", "register_widgets", make_widget)

@backline.hookimpl
def register_hookspecs(register):
    register(Specs, kinds=[WIDGETS])

@backline.hookimpl
def register_widgets(register):
    register("spec-own")
"""

MAKER_MODULE = """
import backline

@backline.hookimpl
def register_widgets(register):
    register({widget!r})
"""


def install(site: FakeSite, prefix: str, source: str) -> str:
    name = unique(prefix)
    module = unique(f"mod_{prefix}")
    site.add(f"backline-{name}", {module: source}, {name: module})
    return name


def spec_module(m: PluginManager, name: str) -> ModuleType:
    return sys.modules[m.plugin(name).module or ""]


@pytest.mark.parametrize("maker_first", [True, False], ids=["maker-first", "spec-first"])
def test_installed_plugins_register_through_a_kind_in_any_load_order(
    site: FakeSite, maker_first: bool
) -> None:
    spec = install(site, "m" if maker_first else "a", SPEC_MODULE)
    maker = install(site, "a" if maker_first else "m", MAKER_MODULE.format(widget="cog"))
    clasher = install(site, "z", MAKER_MODULE.format(widget="cog"))
    assert (maker < spec) == maker_first

    m = PluginManager(builtins=False, allow=[spec, maker, clasher]).load()

    kind = spec_module(m, spec).WIDGETS
    assert m.plugin(maker).status == "loaded", m.plugin(maker).error
    assert m.item(kind, "cog") == maker and m.item(kind, "spec-own") == spec
    clash = m.plugin(clasher)  # last in load order: it fails, whoever specified the hook
    assert clash.status == "failed"
    assert f"widget 'cog' is registered by both '{maker}' and '{clasher}'" in str(clash.error)


def test_an_installed_plugin_implementing_a_hook_nobody_specifies_fails(site: FakeSite) -> None:
    maker = install(site, "a", MAKER_MODULE.format(widget="cog"))
    m = PluginManager(builtins=False, allow=[maker]).load()
    info = m.plugin(maker)
    assert info.status == "failed"
    assert f"plugin '{maker}' implements unknown hook 'register_widgets'" in str(info.error)


def test_strict_mode_raises_for_a_hook_nobody_specifies(site: FakeSite) -> None:
    maker = install(site, "a", MAKER_MODULE.format(widget="cog"))
    with pytest.raises(PluginError, match="unknown hook 'register_widgets'"):
        PluginManager(builtins=False, allow=[maker], strict=True).load()


def test_strict_mode_loads_a_provider_before_the_plugin_that_specifies_its_hook(
    site: FakeSite,
) -> None:
    maker = install(site, "a", MAKER_MODULE.format(widget="cog"))
    spec = install(site, "m", SPEC_MODULE)
    m = PluginManager(builtins=False, allow=[maker, spec], strict=True).load()
    assert m.owner("widget", "cog") == maker


def test_plugins_json_lists_a_plugin_kind_for_every_plugin(site: FakeSite) -> None:
    maker = install(site, "a", MAKER_MODULE.format(widget="cog"))
    spec = install(site, "m", SPEC_MODULE)
    listed = plugins_json(
        run_backline("plugins", "--json", env=site.env(BACKLINE_PLUGINS=f"{maker},{spec}"))
    )
    assert listed[maker]["widgets"] == ["cog"]
    assert listed[spec]["widgets"] == ["spec-own"]
    assert listed[maker]["hooks"] == ["register_widgets"]
    text = run_backline("plugins", env=site.env(BACKLINE_PLUGINS=f"{maker},{spec}")).stdout
    assert "  widgets: cog" in text
