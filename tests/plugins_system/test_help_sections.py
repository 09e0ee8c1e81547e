"""Help pages are not walls (issue 26, item 8): a front end's options are grouped by where
they come from (the session, then each plugin, then the command's own), with the same
metavars everywhere."""

from __future__ import annotations

import importlib.util
import re

import pytest

from .conftest import run_backline

_TITLE = re.compile(r"^  (?P<title>[^\s-][^:]*):(?:\s+(?P<help>.*))?$")
_GROUPED = re.compile(r"^    (?P<flags>-[^ ,]+(?:, -[^ ,]+)*)(?: (?P<metavar>\S+))?")
_OWN = re.compile(r"^  (?P<flags>-[^ ,]+(?:, -[^ ,]+)*)")


def sections(help_text: str) -> dict[str, list[str]]:
    """Each section's title (``""`` for the command's own) -> the flags under it, in order."""
    found: dict[str, list[str]] = {}
    current = ""
    for line in help_text.partition("Options:\n")[2].splitlines():
        if title := _TITLE.match(line):
            current = title["title"]
            found.setdefault(current, [])
        elif grouped := _GROUPED.match(line):
            found[current].extend(grouped["flags"].split(", "))
        elif own := _OWN.match(line):
            found.setdefault("", []).extend(own["flags"].split(", "))
    return found


def help_of(*command: str) -> str:
    result = run_backline(*command, "--help")
    assert result.returncode == 0, result.stderr
    return result.stdout


FRONT_ENDS = [("console",), ("web",)]
if importlib.util.find_spec("backline_livekit") is not None:
    FRONT_ENDS += [("livekit", "console"), ("livekit", "dev"), ("livekit", "start")]


@pytest.mark.parametrize("command", FRONT_ENDS, ids=" ".join)
def test_options_are_grouped_by_source_session_first(command: tuple[str, ...]) -> None:
    text = help_of(*command)
    found = sections(text)
    titles = list(found)
    assert titles[0] == "Session", titles
    assert found["Session"][:4] == ["-b", "--background", "--llm", "-m"]
    assert {"--instructions", "--agent", "--no-log", "--mcp-config"} <= set(found["Session"])
    # Each first-party plugin's options under its own title, and nowhere else.
    assert "--claude-allow-bash" in found["Plugin claude_code"]
    assert found["Plugin cli_agent"] == ["--agent-cmd", "--agent-env", "--agent-require-clean"]
    assert {"--search", "--research-llm"} <= set(found["Plugin deep_research"])
    assert found["Plugin openai"] == ["--base-url", "--realtime-voice"]
    # The command's own options come last, above --help.
    assert found[""][-1] == "--help"
    assert "--claude-allow-bash" not in found[""]
    assert "--background" not in found[""]


@pytest.mark.parametrize("command", FRONT_ENDS, ids=" ".join)
def test_metavars_are_the_same_everywhere(command: tuple[str, ...]) -> None:
    text = help_of(*command)
    assert re.search(r"^    --llm NAME\s", text, re.M), text
    assert re.search(r"^    -m, --model MODEL\s", text, re.M), text
    assert re.search(r"^    -b, --background ID\[:NAME\]\[=VALUE\]\s", text, re.M), text


def test_a_plugin_section_says_which_background_its_options_need() -> None:
    text = help_of("console")
    assert re.search(r"^  Plugin claude_code:\s+with --background claude_code$", text, re.M)
    assert re.search(r"^  Plugin deep_research:\s+with --background deep_research$", text, re.M)
    assert re.search(r"^  Plugin openai:$", text, re.M)  # an LLM's option: no background
