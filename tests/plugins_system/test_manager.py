"""Discovery, isolation, selection, strict mode and clashes, in process.

Plugins here are real distributions on ``sys.path`` (dist-info + entry points),
found by ``importlib.metadata`` like installed ones.
"""

from __future__ import annotations

import sys

import pytest

from backline.plugins import (
    RESERVED_OWNER,
    PluginError,
    PluginManager,
    UnknownNameError,
)

from .conftest import FakeSite, unique

GOOD = """
import backline

@backline.background({bg!r}, description="Test background.")
async def bg(ctx):
    async for message in ctx.messages():
        await ctx.send("got " + message)

@backline.function_tool
async def {tool}(city: str) -> str:
    '''Look something up.

    Args:
        city: Where.
    '''
    return city

class FakeLLM:
    def __init__(self, **options):
        self.options = options

@backline.hookimpl
def register_background_sessions(register):
    register(bg)

@backline.hookimpl
def register_tools(register):
    register({tool})

@backline.hookimpl
def register_llms(register):
    register({llm!r}, FakeLLM, description="A fake.")
"""


def good_plugin(site: FakeSite, name: str | None = None, **names: str) -> dict[str, str]:
    """Add a plugin registering one background, tool and LLM; returns their names."""
    name = name or unique("good")
    module = unique("mod_good_")
    values = {
        "name": name,
        "bg": names.get("bg", unique("bg_")),
        "tool": names.get("tool", unique("tool_")),
        "llm": names.get("llm", unique("llm_")),
        "module": module,
        "dist": names.get("dist", f"backline-{name}"),
    }
    source = GOOD.format(bg=values["bg"], tool=values["tool"], llm=values["llm"])
    site.add(values["dist"], {module: source}, {name: module})
    return values


def broken_plugin(site: FakeSite, source: str, name: str | None = None) -> str:
    name = name or unique("broken")
    module = unique("mod_broken_")
    site.add(f"backline-{name}", {module: source}, {name: module})
    return name


def load(*allow: str, **kwargs: object) -> PluginManager:
    return PluginManager(allow=allow, **kwargs).load()  # type: ignore[arg-type]


# -- discovery ---------------------------------------------------------------------------
def test_an_installed_plugin_is_discovered_with_what_it_registered(site: FakeSite) -> None:
    p = good_plugin(site)

    manager = load(p["name"], "anthropic")
    info = manager.plugin(p["name"])

    assert info.status == "loaded"
    assert (info.distribution, info.version, info.module) == (p["dist"], "1.0.0", p["module"])
    assert info.hooks == ["register_background_sessions", "register_llms", "register_tools"]
    assert (info.backgrounds, info.tools, info.llms) == ([p["bg"]], [p["tool"]], [p["llm"]])
    assert manager.background(p["bg"]).id == p["bg"]
    assert [t.name for t in manager.tools()] == [p["tool"]]
    assert manager.llm(p["llm"], model="m").options == {"model": "m"}  # type: ignore[attr-defined]
    assert manager.owner("tool", p["tool"]) == p["name"]


def test_built_in_plugins_are_listed_and_register_like_any_other() -> None:
    manager = PluginManager(entry_points=False).load()
    builtin = manager.plugin("anthropic")

    assert builtin.builtin and builtin.status == "loaded"
    assert builtin.distribution == "backline"
    assert builtin.llms == ["anthropic"]
    assert manager.plugins(include_builtin=False) == []


def test_loading_plugins_does_not_import_the_anthropic_adapter() -> None:
    import subprocess

    code = (
        "import sys; from backline.plugins import PluginManager; "
        "m = PluginManager(entry_points=False).load(); "
        "assert 'anthropic' in m.llm_names(); "
        "print(sorted(n for n in sys.modules if n.split('.')[0] in "
        "('anthropic', 'mcp', 'jsonschema') or n == 'backline.llm.anthropic'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


# -- isolation -------------------------------------------------------------------------------
def test_an_import_error_fails_only_that_plugin(site: FakeSite) -> None:
    ok = good_plugin(site)
    bad = broken_plugin(site, "import backline_no_such_dependency\n")

    manager = load(ok["name"], bad)

    failed = manager.plugin(bad)
    assert failed.status == "failed"
    assert failed.error == "ModuleNotFoundError: No module named 'backline_no_such_dependency'"
    assert failed.status_text.startswith("failed: ModuleNotFoundError")
    assert isinstance(failed.exception, ImportError)
    assert manager.plugin(ok["name"]).status == "loaded"
    assert manager.background_ids() == [ok["bg"]]


def test_a_registration_hook_that_raises_fails_the_plugin_and_undoes_it(site: FakeSite) -> None:
    bg = unique("bg_")
    bad = broken_plugin(
        site,
        f"""
        import backline

        @backline.background({bg!r}, description="d")
        async def bg(ctx):
            pass

        @backline.hookimpl
        def register_background_sessions(register):
            register(bg)

        @backline.hookimpl
        def register_tools(register):
            raise RuntimeError("tool setup exploded")
        """,
    )
    ok = good_plugin(site)

    manager = load(bad, ok["name"])

    info = manager.plugin(bad)
    assert info.status == "failed"
    assert info.error == "register_tools raised RuntimeError: tool setup exploded"
    assert info.backgrounds == []
    assert bg not in manager.background_ids()  # nothing half-applied
    assert manager.background_ids() == [ok["bg"]]
    assert manager.pluggy_manager.get_plugin(bad) is None


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (
            "import backline\n@backline.hookimpl\ndef register_tool(register): pass\n",
            "implements unknown hook 'register_tool' (did you mean 'register_tools'?)",
        ),
        (
            "import backline\n@backline.hookimpl\ndef register_tools(registr): pass\n",
            "Argument(s) {'registr'} are declared in the hookimpl",
        ),
        (
            "import backline\n@backline.hookimpl\nasync def register_tools(register): pass\n",
            "TypeError: register_tools must be a plain function (def), not async def",
        ),
        (
            "import backline\n@backline.hookimpl\n"
            "def register_background_sessions(register): register('not a definition')\n",
            "expected a BackgroundDefinition (use @backline.background), got str",
        ),
        ("raise SystemExit(3)\n", "SystemExit: 3"),
    ],
    ids=["unknown-hook", "bad-argument", "async-hook", "bad-item", "system-exit"],
)
def test_a_malformed_plugin_fails_with_a_clear_error(
    site: FakeSite, source: str, error: str
) -> None:
    name = broken_plugin(site, source)

    info = load(name).plugin(name)

    assert info.status == "failed"
    assert info.error is not None and error in info.error


def test_register_after_the_hook_returned_is_refused(site: FakeSite) -> None:
    name = broken_plugin(
        site,
        """
        import backline
        saved = []

        @backline.hookimpl
        def register_tools(register):
            saved.append(register)
        """,
    )
    manager = load(name)
    module = sys.modules[manager.plugin(name).module or ""]

    with pytest.raises(RuntimeError, match="called after the hook returned"):
        module.saved[0](lambda: None)


# -- strict mode ------------------------------------------------------------------------------
def test_strict_mode_turns_failures_into_an_error(site: FakeSite) -> None:
    ok = good_plugin(site)
    bad = broken_plugin(site, "import backline_no_such_dependency\n")

    manager = PluginManager(allow=[ok["name"], bad], strict=True)
    with pytest.raises(PluginError, match=r"1 plugin\(s\) failed to load") as caught:
        manager.load()

    assert f"{bad}: ModuleNotFoundError" in str(caught.value)
    assert isinstance(caught.value.__cause__, ImportError)
    assert manager.plugin(ok["name"]).status == "loaded"  # the others still loaded


def test_strict_mode_comes_from_the_environment() -> None:
    assert PluginManager.from_environment({"BACKLINE_STRICT_PLUGINS": "1"}).strict
    assert PluginManager.from_environment({"BACKLINE_STRICT_PLUGINS": "true"}).strict
    assert not PluginManager.from_environment({"BACKLINE_STRICT_PLUGINS": "0"}).strict
    assert not PluginManager.from_environment({}).strict


# -- allow and deny ---------------------------------------------------------------------------
def test_the_allow_list_loads_only_the_named_plugins(site: FakeSite) -> None:
    a, b = good_plugin(site), good_plugin(site)

    manager = PluginManager.from_environment({"BACKLINE_PLUGINS": f" {a['name']} ,"}).load()

    assert manager.plugin(a["name"]).status == "loaded"
    assert manager.plugin(b["name"]).status == "disabled"
    assert manager.plugin("anthropic").status == "disabled"  # built-ins are plugins too
    assert b["module"] not in sys.modules  # a disabled plugin is never imported


def test_an_empty_allow_list_loads_no_plugin(site: FakeSite) -> None:
    a = good_plugin(site)

    manager = PluginManager.from_environment({"BACKLINE_PLUGINS": ""}).load()

    assert {i.status for i in manager.plugins()} == {"disabled"}
    assert manager.plugin(a["name"]).status == "disabled"
    assert manager.llm_names() == []


def test_the_deny_list_skips_the_named_plugins(site: FakeSite) -> None:
    a, b = good_plugin(site), good_plugin(site)

    manager = PluginManager.from_environment(
        {
            "BACKLINE_PLUGINS": f"{a['name']},{b['name']},anthropic",
            "BACKLINE_DISABLE_PLUGINS": b["name"],
        }
    ).load()

    assert manager.plugin(a["name"]).status == "loaded"
    assert manager.plugin(b["name"]).status == "disabled"
    assert b["module"] not in sys.modules
    assert manager.plugin("anthropic").status == "loaded"


def test_selection_matches_distribution_names_case_and_separators(site: FakeSite) -> None:
    a = good_plugin(site)

    manager = PluginManager(allow=[a["dist"].upper().replace("-", "_")]).load()

    assert manager.plugin(a["name"]).status == "loaded"


def test_naming_a_plugin_that_is_not_installed_warns(site: FakeSite) -> None:
    manager = PluginManager.from_environment({"BACKLINE_DISABLE_PLUGINS": "nope"}).load()

    assert manager.warnings == [
        "BACKLINE_DISABLE_PLUGINS names 'nope', but no plugin of that name is installed"
    ]


# -- clashes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["bg", "tool", "llm"])
def test_a_clash_names_both_plugins_and_fails_the_second(site: FakeSite, kind: str) -> None:
    shared = unique("shared_")
    first = good_plugin(site, name=unique("a"), **{kind: shared})
    second = good_plugin(site, name=unique("b"), **{kind: shared})

    manager = load(first["name"], second["name"])

    label = {"bg": "background session id", "tool": "tool name", "llm": "LLM name"}[kind]
    info = manager.plugin(second["name"])
    assert info.status == "failed"
    assert info.error == (
        f"{label} '{shared}' is registered by both '{first['name']}' and '{second['name']}'; "
        f"'{second['name']}' was not loaded (disable one of them with BACKLINE_DISABLE_PLUGINS)"
    )
    assert manager.plugin(first["name"]).status == "loaded"
    assert [(c.name, c.first, c.second) for c in manager.clashes] == [
        (shared, first["name"], second["name"])
    ]
    # The refused plugin registered nothing at all.
    assert second["bg"] not in manager.background_ids() or kind == "bg"


def test_a_reserved_tool_name_clashes_with_backline(site: FakeSite) -> None:
    name = broken_plugin(
        site,
        """
        import backline

        @backline.hookimpl
        def register_tools(register):
            async def backline_send(content: str) -> str:
                '''Shadow the generated tool.'''
                return content
            register(backline_send)
        """,
    )

    manager = load(name)

    info = manager.plugin(name)
    assert info.status == "failed"
    assert info.error == (
        f"tool name 'backline_send' is reserved by backline; '{name}' cannot register it "
        f"(clash with {RESERVED_OWNER})"
    )
    assert manager.clashes[0].first == RESERVED_OWNER


def test_one_plugin_registering_a_name_twice_fails(site: FakeSite) -> None:
    name = broken_plugin(
        site,
        """
        import backline

        class LLM: ...

        @backline.hookimpl
        def register_llms(register):
            register("twice", LLM)
            register("twice", LLM)
        """,
    )

    info = load(name).plugin(name)

    assert info.error == f"LLM name 'twice' is registered twice by '{name}'"


def test_two_distributions_with_the_same_plugin_name_clash(site: FakeSite) -> None:
    name = unique("same")
    first = good_plugin(site, name=name, dist=f"backline-{name}-one")
    good_plugin(site, name=name, dist=f"backline-{name}-two")

    manager = load(name)

    statuses = [(i.distribution, i.status) for i in manager.plugins() if i.name == name]
    assert statuses == [(first["dist"], "loaded"), (f"backline-{name}-two", "failed")]
    error = next(i.error for i in manager.plugins() if i.status == "failed")
    assert error is not None
    assert f"plugin name '{name}' is registered by both '{name} ({first['dist']})'" in error


# -- look-ups -------------------------------------------------------------------------------
def test_an_unknown_name_lists_the_available_ones_and_the_missing_plugins(site: FakeSite) -> None:
    ok = good_plugin(site)
    bad = broken_plugin(site, "import backline_no_such_dependency\n")
    manager = load(ok["name"], bad, "anthropic")

    with pytest.raises(UnknownNameError) as caught:
        manager.llm("gpt")

    message = str(caught.value)
    assert message.startswith(f"unknown LLM 'gpt'; available: anthropic, {ok['llm']}")
    assert "Plugins not loaded: " in message
    assert f"{bad} (failed)" in message
    with pytest.raises(UnknownNameError, match=f"available: {ok['bg']}"):
        manager.background("nope")
    with pytest.raises(UnknownNameError, match=f"available: {ok['tool']}"):
        manager.tools(["nope"])


def test_an_unknown_name_with_everything_loaded_suggests_installing() -> None:
    manager = PluginManager(entry_points=False).load()

    with pytest.raises(UnknownNameError, match=r"available: none\. Install a plugin"):
        manager.background("research")


# -- plugins registered by hand --------------------------------------------------------------------
def test_register_and_unregister_a_plugin_object_by_hand() -> None:
    import backline

    class Plugin:
        @staticmethod
        @backline.hookimpl
        def register_llms(register: object) -> None:
            register("by-hand", object)  # type: ignore[operator]

    manager = PluginManager(entry_points=False, builtins=False).load()
    info = manager.register(Plugin, name="by-hand")

    assert info.status == "loaded" and manager.llm_names() == ["by-hand"]
    manager.unregister("by-hand")
    assert manager.llm_names() == [] and manager.plugins() == []


def test_register_by_hand_in_strict_mode_raises_with_the_cause() -> None:
    import backline

    class Plugin:
        @staticmethod
        @backline.hookimpl
        def register_tools(register: object) -> None:
            raise ValueError("nope")

    manager = PluginManager(entry_points=False, builtins=False, strict=True).load()
    with pytest.raises(PluginError, match="register_tools raised ValueError: nope") as caught:
        manager.register(Plugin, name="strict")
    assert isinstance(caught.value.__cause__, ValueError)
