"""The plugin as a user installs it: its entry point, search providers through the new
hook, options on the front ends, and `backline console --background deep_research`
with the voice and research models on the fake Anthropic server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from backline_deep_research import ResearchConfig, stage_of
from backline_deep_research.providers.brave import BraveSearch
from backline_deep_research.providers.local import LocalSearch
from backline_deep_research.providers.searxng import SearxNGSearch
from backline_deep_research.providers.tavily import TavilySearch
from backline_deep_research.testing import (
    CorpusServer,
    ScriptedResearcher,
    anthropic_voice_agent,
)
from backline_deep_research.worker import registry_search

from backline.plugins import PluginManager
from backline.testing import fake_anthropic as fa

from .corpus import PAGES

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def test_the_plugin_registers_its_background_providers_and_options() -> None:
    manager = PluginManager.from_environment({"BACKLINE_PLUGINS": "deep_research"}).load()
    info = manager.plugin("deep_research")
    assert info.status == "loaded", info.error
    assert info.distribution == "backline-deep-research"
    assert info.backgrounds == ["deep_research"]
    assert info.registered()["search_providers"] == ["brave", "ddgs", "local", "searxng", "tavily"]
    assert "--search" in info.options and "--research-model" in info.options
    assert "--research-allow-private-hosts" in info.options
    assert "-m" not in info.options and "--model" not in info.options


def test_front_ends_show_the_options() -> None:
    out = subprocess.run(
        [BACKLINE, "console", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BACKLINE_PLUGINS": "deep_research,anthropic"},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    for flag in (
        "--search NAME",
        "--searxng-url URL",
        "--research-model MODEL",
        "--research-limits",
        "--research-allow-private-hosts",
    ):
        assert flag in out.stdout


async def test_local_provider_ranks_documents_and_returns_their_text(tmp_path: Path) -> None:
    (tmp_path / "mites.md").write_text("# Varroa mites\n\nVarroa mites spread viruses in hives.")
    (tmp_path / "honey.txt").write_text("Honey is made from nectar.")
    (tmp_path / "queen.html").write_text(PAGES[9].html())
    (tmp_path / "skip.bin").write_bytes(b"\x00varroa")
    provider = registry_search(ResearchConfig(search="local", docs=tmp_path))
    assert isinstance(provider, LocalSearch)
    hits = await provider.search("varroa mites and queen eggs", max_results=5)
    assert [Path(h.url[len("file://") :]).name for h in hits] == ["mites.md", "queen.html"]
    assert hits[0].title == "Varroa mites" and "spread viruses" in (hits[0].content or "")
    assert "2000 eggs a day" in (hits[1].content or "") and "Copyright" not in (
        hits[1].content or ""
    )
    await provider.aclose()
    with pytest.raises(ValueError, match="needs a folder: pass --research-docs"):
        LocalSearch()
    with pytest.raises(ValueError, match="does not exist"):
        LocalSearch(tmp_path / "nope")


async def test_searxng_tavily_and_brave_speak_their_wire_formats(corpus: CorpusServer) -> None:
    searx = await SearxNGSearch(corpus.url).search("varroa mite", max_results=2)
    assert searx[0].url == corpus.page_url("/bees/varroa")
    assert corpus.requests[-1].query == {"q": ["varroa mite"], "format": ["json"]}

    tavily_body = {"results": [{"title": "T", "url": "https://t.test/a", "content": "tc"}]}
    brave_body = {
        "web": {"results": [{"title": "B", "url": "https://b.test/a", "description": "bd"}]}
    }
    routes = {
        "/search": (200, "application/json", json.dumps(tavily_body)),
        "/res/v1/web/search": (200, "application/json", json.dumps(brave_body)),
    }
    async with CorpusServer([], routes=routes) as api:
        tavily = TavilySearch("tvly-key", endpoint=api.url)
        [t] = await tavily.search("q", max_results=3)
        assert (t.title, t.url, t.snippet) == ("T", "https://t.test/a", "tc")
        assert api.requests[-1].method == "POST"
        assert api.requests[-1].headers["authorization"] == "Bearer tvly-key"
        brave = BraveSearch("brave-key", endpoint=api.url)
        [b] = await brave.search("bees", max_results=50)
        assert (b.title, b.url, b.snippet) == ("B", "https://b.test/a", "bd")
        assert api.requests[-1].headers["x-subscription-token"] == "brave-key"
        assert api.requests[-1].query == {"q": ["bees"], "count": ["20"]}


def test_providers_without_configuration_say_what_is_missing(monkeypatch: Any) -> None:
    for var in ("TAVILY_API_KEY", "BRAVE_API_KEY", "BACKLINE_SEARXNG_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="set TAVILY_API_KEY"):
        TavilySearch()
    with pytest.raises(ValueError, match="set BRAVE_API_KEY"):
        BraveSearch()
    with pytest.raises(ValueError, match="pass --searxng-url or set BACKLINE_SEARXNG_URL"):
        SearxNGSearch()


async def test_ddgs_results_map_to_search_results(monkeypatch: Any) -> None:
    import ddgs

    seen: dict[str, Any] = {}

    class FakeDDGS:
        def __init__(self, timeout: int) -> None:
            seen["timeout"] = timeout

        def text(self, query: str, **options: Any) -> list[dict[str, str]]:
            seen.update(query=query, **options)
            return [{"title": "A", "href": "https://a.test/", "body": "about a"}, {"title": "x"}]

    monkeypatch.setattr(ddgs, "DDGS", FakeDDGS)
    provider = registry_search(ResearchConfig(search="ddgs"))
    [hit] = await provider.search("bees", max_results=4)
    assert (hit.title, hit.url, hit.snippet) == ("A", "https://a.test/", "about a")
    assert seen["query"] == "bees" and seen["max_results"] == 4


def models_of_voice(models: set[tuple[str | None, str | None]]) -> str | None:
    [voice_model] = {m for stage, m in models if stage is None}
    assert voice_model not in ("claude-sonnet-5-5", "claude-haiku-4-5")
    return voice_model


@pytest.mark.timeout(120)
def test_backline_console_runs_a_round_on_the_registry_llm(tmp_path: Path) -> None:
    docs, reports = tmp_path / "docs", tmp_path / "reports"
    docs.mkdir()
    for page in PAGES:
        (docs / (page.path.rsplit("/", 1)[-1] + ".html")).write_text(page.html())
    researcher = ScriptedResearcher()

    def respond(request: fa.AnthropicRequest) -> Any:
        if request.system.startswith("You are a friendly") or "deep_research" in request.system:
            return anthropic_voice_agent(request)
        return researcher.anthropic(request)

    with fa.FakeAnthropicServer(respond) as server:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "BACKLINE_PLUGINS": "deep_research,anthropic",
        }
        env.pop("ANTHROPIC_AUTH_TOKEN", None)
        child = pexpect.spawn(
            BACKLINE,
            [
                "console",
                "--background",
                "deep_research",
                "--plain",
                "--search",
                "local",
                "--research-docs",
                str(docs),
                "--research-dir",
                str(reports),
                "--research-model",
                "claude-sonnet-5-5",
                "--research-stage-models",
                "verify=claude-haiku-4-5",
            ],
            cwd=str(tmp_path),
            env=env,
            encoding="utf-8",
            timeout=90,
        )
        try:
            child.expect(r"\[deep_research\] waiting for a research question")
            child.sendline("Research varroa mites and winter losses. Just start.")
            # (Updates relayed while the agent speaks are coalesced: wait for the state.)
            child.expect(r"\[deep_research\] done, listening for follow-ups · sources read \d+")
            child.expect(r"report: (\S+\.md)")
            report = Path(child.match.group(1))
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        models = {(stage_of(r.system), r.model) for r in server.requests}
    assert child.exitstatus == 0
    assert report.parent == reports and report.is_file()
    assert "## Findings" in report.read_text()
    # Each stage ran on its configured model; the voice agent on the default one.
    assert models == {
        ("plan", "claude-sonnet-5-5"),
        ("extract", "claude-sonnet-5-5"),
        ("verify", "claude-haiku-4-5"),
        ("write", "claude-sonnet-5-5"),
        (None, models_of_voice(models)),
    }
    assert researcher.calls["verify"] > 0
