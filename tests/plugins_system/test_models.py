"""``backline models``: each registered LLM and the models it knows or was configured with,
the one used without ``-m`` first (issue 26, "Beyond")."""

from __future__ import annotations

import json
from typing import Any

import pytest

import backline
from backline.plugins import PluginError, PluginManager
from backline.testing import ScriptedLLM

from .conftest import FakeSite, run_backline, unique

LOCAL = """
import os
import backline
from backline.testing import ScriptedLLM

def listed():
    if os.environ.get("LOCAL_BROKEN"):
        raise RuntimeError("the model server is down")
    return ["small", "large"]

@backline.hookimpl
def register_llms(register):
    register(
        "{llm}",
        lambda **options: ScriptedLLM(["hi"]),
        description="Local models.",
        models=listed,
        default_model=lambda: os.environ.get("LOCAL_MODEL") or "small",
    )
    register("{llm}-bare", lambda **options: ScriptedLLM(["hi"]))
"""


@pytest.fixture
def local(site: FakeSite) -> dict[str, str]:
    names = {"plugin": unique("local"), "llm": unique("loc")}
    module = unique("mod_local_")
    site.add(
        f"backline-{names['plugin']}",
        {module: LOCAL.format(**names)},
        {names["plugin"]: module},
        version="2.3.0",
    )
    return names


def test_models_lists_each_llm_with_its_models_default_first(
    site: FakeSite, local: dict[str, str]
) -> None:
    env = site.env(BACKLINE_PLUGINS=f"anthropic,{local['plugin']}")
    result = run_backline("models", env=env)
    assert result.returncode == 0, result.stderr
    llm = local["llm"]
    assert (
        f"{llm} (backline-{local['plugin']} 2.3.0): Local models.\n  small (default)\n  large\n"
        in (result.stdout)
    )
    assert (
        f"{llm}-bare (backline-{local['plugin']} 2.3.0)\n"
        "  (no models listed: name one with -m MODEL)" in (result.stdout)
    )
    # The built-in adapter: the installed anthropic package's models, its default first.
    assert "anthropic (built-in, used without --llm): Claude" in result.stdout
    assert "\n  claude-haiku-5-5 (default)\n  " in result.stdout
    assert "\n  claude-opus-5-5\n" in result.stdout


def test_the_configured_model_is_the_default_and_one_llm_can_be_asked_for(
    site: FakeSite, local: dict[str, str]
) -> None:
    env = site.env(BACKLINE_PLUGINS=f"anthropic,{local['plugin']}", LOCAL_MODEL="tiny")
    result = run_backline("models", local["llm"], "--json", env=env)
    assert result.returncode == 0, result.stderr
    [listed] = json.loads(result.stdout)
    assert listed["name"] == local["llm"]
    assert listed["default_model"] == "tiny"
    assert listed["models"] == ["tiny", "small", "large"]  # configured: listed, first

    anthropic = run_backline("models", "anthropic", "--json", env={**env, "BACKLINE_MODEL": "x"})
    assert json.loads(anthropic.stdout)[0]["models"][0] == "x"


def test_a_listing_that_fails_is_reported_and_the_others_listed(
    site: FakeSite, local: dict[str, str]
) -> None:
    env = site.env(BACKLINE_PLUGINS=f"anthropic,{local['plugin']}", LOCAL_BROKEN="1")
    result = run_backline("models", env=env)
    assert result.returncode == 0, result.stderr
    assert "(its models could not be listed: RuntimeError: the model server is down)" in (
        result.stdout
    )
    assert "claude-haiku-5-5 (default)" in result.stdout


def test_an_unknown_llm_is_a_usage_error_with_did_you_mean() -> None:
    result = run_backline("models", "antropic", env={"BACKLINE_PLUGINS": "anthropic"})
    assert result.returncode == 2
    assert "unknown LLM 'antropic'; available: anthropic. Did you mean 'anthropic'?" in (
        result.stderr
    )


def test_models_must_be_names_or_a_function(plugin_manager: PluginManager) -> None:
    class Wrong:
        @backline.hookimpl
        def register_llms(self, register: Any) -> None:
            register("wrong", lambda **o: ScriptedLLM([]), models="gpt-4")

    with pytest.raises(PluginError, match="models for 'wrong' must be names, or a function"):
        plugin_manager.register(Wrong(), name="wrong")
