"""Plugins that misbehave while loading (issue 13, items 10-13): a ``BaseException`` at
import, prints to stdout, an import or a hook that hangs, and an allow list that leaves
out the built-in LLM. Each fails (or is reported) alone; the rest load; stdout stays
clean."""

from __future__ import annotations

import json
import sys
import threading
import types
from collections.abc import Iterator

import pytest

from backline.limits import Limits
from backline.plugins import PluginManager

from .conftest import FakeSite, clean_env, plugins_json, run_backline, unique
from .test_manager import broken_plugin, good_plugin

BASE_EXCEPTIONS = {
    "SystemExit": ("raise SystemExit(3)\n", "SystemExit: 3"),
    "KeyboardInterrupt": ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    "custom": (
        "class Boom(BaseException):\n    pass\nraise Boom('out of the blue')\n",
        "Boom: out of the blue",
    ),
}


@pytest.mark.parametrize("kind", sorted(BASE_EXCEPTIONS))
def test_a_base_exception_at_import_fails_only_that_plugin(site: FakeSite, kind: str) -> None:
    source, error = BASE_EXCEPTIONS[kind]
    ok = good_plugin(site)
    bad = broken_plugin(site, source)

    manager = PluginManager(allow=[ok["name"], bad]).load()

    failed = manager.plugin(bad)
    assert failed.status == "failed"
    assert failed.error == error
    assert isinstance(failed.exception, BaseException)
    assert manager.plugin(ok["name"]).status == "loaded"
    assert manager.background_ids() == [ok["bg"]]


def test_a_base_exception_in_a_registration_hook_fails_only_that_plugin(site: FakeSite) -> None:
    ok = good_plugin(site)
    bad = broken_plugin(
        site,
        "import sys, backline\n"
        "@backline.hookimpl\n"
        "def register_tools(register):\n"
        "    sys.exit('no tools today')\n",
    )

    manager = PluginManager(allow=[ok["name"], bad]).load()

    assert manager.plugin(bad).error == "register_tools raised SystemExit: no tools today"
    assert manager.plugin(ok["name"]).status == "loaded"


def test_what_a_plugin_prints_while_loading_is_kept_off_stdout(
    site: FakeSite, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    chatty = broken_plugin(
        site,
        "import sys, backline\n"
        "print('hello from the import')\n"
        "@backline.hookimpl\n"
        "def register_tools(register):\n"
        "    sys.stdout.write('and from the hook\\n')\n"
        "    print('x' * 5000)\n",
    )

    manager = PluginManager(allow=[chatty]).load()
    print("the host's own output")

    info = manager.plugin(chatty)
    assert info.status == "loaded"
    assert capsys.readouterr().out == "the host's own output\n"
    assert info.printed is not None
    assert info.printed.startswith("hello from the import\nand from the hook\nxxx")
    # Cut at Limits.max_plugin_output_chars (2000), with the rest counted.
    assert info.printed.endswith("[... 3041 more characters not kept]")
    assert f"plugin '{chatty}' printed while loading" in caplog.text
    assert info.to_dict()["printed"] == info.printed


@pytest.fixture
def gate() -> Iterator[tuple[str, threading.Event]]:
    """A module holding an event a 'hanging' plugin waits on, released after the test
    (so the abandoned import thread ends and nothing is left running)."""
    name = unique("gate_")
    event = threading.Event()
    module = types.ModuleType(name)
    module.event = event  # type: ignore[attr-defined]
    sys.modules[name] = module
    try:
        yield name, event
    finally:
        event.set()
        for thread in threading.enumerate():
            if thread.name.startswith("backline plugin:"):
                thread.join(10)
                assert not thread.is_alive()
        del sys.modules[name]


def test_an_import_that_hangs_is_abandoned_after_the_bound(
    site: FakeSite, gate: tuple[str, threading.Event]
) -> None:
    name, _ = gate
    ok = good_plugin(site)
    stuck = broken_plugin(site, f"import {name}\n{name}.event.wait(60)\n")
    limits = Limits(plugin_load_timeout=0.2)

    manager = PluginManager(allow=[ok["name"], stuck], limits=limits).load()

    info = manager.plugin(stuck)
    assert info.status == "failed"
    assert info.error is not None
    assert info.error.startswith(f"importing {info.module} did not finish within 0.2 s")
    assert "BACKLINE_PLUGIN_LOAD_TIMEOUT" in info.error
    assert manager.plugin(ok["name"]).status == "loaded"


def test_a_registration_hook_that_hangs_fails_the_plugin_and_registers_nothing(
    site: FakeSite, gate: tuple[str, threading.Event]
) -> None:
    name, event = gate
    stuck = broken_plugin(
        site,
        f"import backline, {name}\n"
        "@backline.hookimpl\n"
        "def register_tools(register):\n"
        f"    {name}.event.wait(60)\n"
        "    register(lambda: None)\n",
    )

    manager = PluginManager(allow=[stuck], limits=Limits(plugin_load_timeout=0.2)).load()

    info = manager.plugin(stuck)
    assert info.status == "failed"
    assert info.error is not None and "its register_tools hook did not finish" in info.error
    event.set()  # the hook wakes up and tries to register: refused, nothing changes
    for thread in threading.enumerate():
        if thread.name.startswith("backline plugin:"):
            thread.join(10)
    assert manager.tool_names() == []


def test_the_load_bound_comes_from_the_environment() -> None:
    manager = PluginManager.from_environment({"BACKLINE_PLUGIN_LOAD_TIMEOUT": "2.5"})
    assert manager._isolation.seconds == 2.5
    bad = PluginManager.from_environment({"BACKLINE_PLUGIN_LOAD_TIMEOUT": "soon"})
    assert bad._isolation.seconds == Limits().plugin_load_timeout
    assert bad.warnings == [
        "BACKLINE_PLUGIN_LOAD_TIMEOUT='soon' is not a positive number of seconds; using 30"
    ]


def test_an_allow_list_without_anthropic_says_the_built_in_llm_is_off(site: FakeSite) -> None:
    ok = good_plugin(site)

    manager = PluginManager(allow=[ok["name"]]).load()

    assert manager.plugin("anthropic").status_text == "disabled: not named in BACKLINE_PLUGINS"
    assert (
        "BACKLINE_PLUGINS does not name 'anthropic', so the built-in Anthropic LLM (the "
        "default --llm) is disabled; add 'anthropic' to BACKLINE_PLUGINS to keep it"
    ) in manager.warnings
    with pytest.raises(LookupError, match=r"anthropic \(disabled: not named in BACKLINE_PLUGINS\)"):
        manager.llm("anthropic")
    assert not PluginManager(allow=[ok["name"], "anthropic"]).load().warnings


# -- through the CLI --------------------------------------------------------------------------
def test_plugins_json_stays_clean_with_misbehaving_plugins(site: FakeSite) -> None:
    ok = good_plugin(site)
    exits = broken_plugin(site, "raise SystemExit(2)\n")
    boom = broken_plugin(site, BASE_EXCEPTIONS["custom"][0])
    chatty = broken_plugin(site, "print('[not json')\n")
    stuck = broken_plugin(site, "import threading\nprint('waiting')\nthreading.Event().wait()\n")
    allow = ",".join([ok["name"], exits, boom, chatty, stuck, "anthropic"])

    result = run_backline(
        "plugins",
        "--json",
        env=site.env(BACKLINE_PLUGINS=allow, BACKLINE_PLUGIN_LOAD_TIMEOUT="1"),
    )

    listed = plugins_json(result)  # stdout is JSON and nothing else
    assert listed[ok["name"]]["status"] == "loaded"
    assert listed[exits]["error"] == "SystemExit: 2"
    assert listed[boom]["error"] == "Boom: out of the blue"
    assert listed[chatty]["status"] == "loaded"
    assert listed[chatty]["printed"] == "[not json\n"
    assert listed[stuck]["status"] == "failed"
    assert "did not finish within 1 s" in listed[stuck]["error"]
    assert listed[stuck]["printed"] == "waiting\n"
    assert f"plugin '{chatty}' printed while loading (kept off stdout): [not json" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_the_console_starts_and_quits_despite_a_plugin_raising_base_exception(
    site: FakeSite,
) -> None:
    import subprocess

    boom = broken_plugin(site, BASE_EXCEPTIONS["custom"][0])
    env = clean_env(
        site.env(
            BACKLINE_PLUGINS=f"{boom},anthropic",
            ANTHROPIC_API_KEY="not-used",
            BACKLINE_CONSOLE_PLAIN="1",
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "backline", "console", "--plain"],
        input="/quit\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "bye" in result.stdout
    assert f"plugin '{boom}' failed to load: Boom: out of the blue" in result.stderr


def test_plugins_text_says_what_a_plugin_printed(site: FakeSite) -> None:
    chatty = broken_plugin(site, "print('Thanks for installing!')\n")

    result = run_backline("plugins", env=site.env(BACKLINE_PLUGINS=chatty))

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith(": loaded")
    assert "  printed while loading: Thanks for installing!" in result.stdout
    assert json.dumps("Thanks") not in result.stdout
