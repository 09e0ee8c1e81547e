"""`make demo-research`: deep research by voice, offline, with only the models scripted.

The real console, the real backline-deep-research plugin, its real searxng
provider, fetcher (robots.txt, rate limit, size cap) and trafilatura extraction
run against a small web on 127.0.0.1 (a corpus server with a SearXNG JSON search
endpoint). A fake Anthropic server on 127.0.0.1 scripts both models: the voice
agent's and the research stages' (each through AnthropicLLM). No key, no network.
The user's lines are typed by a script that waits for the conversation.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from backline_deep_research import ResearchConfig, ResearchLimits, deep_research_background
from backline_deep_research import state as st
from backline_deep_research.prompts import stage_of
from backline_deep_research.testing import (
    CorpusServer,
    ScriptedResearcher,
    anthropic_voice_agent,
)
from corpus import PAGES  # next to this file
from research_assistant import ResearchAssistant

from backline import Session
from backline.io.console import run_console
from backline.llm.anthropic import AnthropicLLM
from backline.testing import fake_anthropic as fa

ASK = "Research whether night trains are coming back in Europe."
ANSWER = "Mostly Austria, France and Germany, over the last five years."


def clarify(user: str) -> dict[str, Any]:
    """The research model asks one question, then takes the answer into the question."""
    if "Clarifications from the user" in user:
        return {
            "ready": True,
            "question": "Are night trains coming back in Austria, France and Germany since 2020?",
        }
    return {"ready": False, "questions": ["Which countries matter most to you?"]}


async def type_lines(writer: int, session: Session[Any], echo: Any) -> None:
    """The user: types a line, waits for what it should cause, types the next."""
    states: list[Any] = []
    changed = asyncio.Event()

    def on_state(event: Any) -> None:
        states.append(event.state)
        changed.set()

    session.on("background_state", on_state)

    async def until(predicate: Any) -> None:
        while not any(predicate(s) for s in states):
            changed.clear()
            await asyncio.wait_for(changed.wait(), 60)

    async def type_line(text: str) -> None:
        echo(f"you> {text}\n")
        os.write(writer, (text + "\n").encode())

    await type_line(ASK)
    await until(lambda s: s.get("phase") == st.CLARIFYING)
    asked = asyncio.Event()
    session.on("background_reply", lambda e: asked.set() if e.status == "completed" else None)
    await asyncio.wait_for(asked.wait(), 60)
    await asyncio.wait_for(session.wait_for_idle(), 60)
    await type_line(ANSWER)
    await until(lambda s: s.get("phase") == st.DONE)
    await asyncio.wait_for(session.wait_for_idle(), 60)
    answered = asyncio.Event()
    session.on(
        "conversation_item_added",
        lambda e: (
            answered.set()
            if e.item.type == "message"
            and e.item.role == "assistant"
            and e.item.content.startswith("The research is")
            else None
        ),
    )
    await type_line("status?")
    await asyncio.wait_for(answered.wait(), 60)
    await type_line("/quit")


async def main() -> int:
    researcher = ScriptedResearcher(
        clarify=clarify,
        angles=[
            ("the revival", "night train revival routes"),
            ("emissions", "night train emissions carbon"),
            ("costs and policy", "sleeper costs policy"),
        ],
    )

    def respond(request: fa.AnthropicRequest) -> Any:
        if stage_of(request.system) is not None:
            return researcher.anthropic(request)
        return anthropic_voice_agent(request)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="research-") as reports:
        async with CorpusServer(PAGES) as web:
            with fa.FakeAnthropicServer(respond) as server:

                def research_llm(stage: str, model: str | None) -> AnthropicLLM:
                    return AnthropicLLM(model, base_url=server.url, api_key="sk-ant-fake-key")

                config = ResearchConfig(
                    search="searxng",
                    searxng_url=web.url,
                    report_dir=Path(reports),
                    limits=ResearchLimits(host_interval=0.05),  # our own server: no need to wait
                    allow_private_hosts=True,  # the demo's web is on 127.0.0.1
                )
                voice = AnthropicLLM(base_url=server.url, api_key="sk-ant-fake-key")
                session: Session[Any] = Session(
                    voice, background=[deep_research_background(config, llm=research_llm)]
                )
                reader, writer = os.pipe()

                def echo(text: str) -> None:
                    sys.stdout.write(text)
                    sys.stdout.flush()

                with os.fdopen(reader, "r") as stdin:
                    typing = asyncio.ensure_future(type_lines(writer, session, echo))
                    try:
                        await run_console(
                            session,
                            ResearchAssistant(),
                            rich=False,
                            stdin=stdin,
                            banner="backline demo: deep research by voice (offline)",
                        )
                    finally:
                        typing.cancel()
                        os.close(writer)
                voice_calls = sum(1 for r in server.requests if stage_of(r.system) is None)
        elapsed = time.perf_counter() - started
        [report] = list(Path(reports).glob("*.md"))  # noqa: ASYNC240
        text = report.read_text()
        print(f"\nThe report, {report.name}:\n")
        findings = text.split("## Findings")[1].split("## Evidence")[0].strip()
        print("    " + findings.replace("\n", "\n    "))
        sources = re.findall(r"^\d+\. .*$", text, re.MULTILINE)
        print("\n    Sources:\n    " + "\n    ".join(sources))
    calls = researcher.calls
    print(
        f"\nThe round took {elapsed:.2f} s of wall time with {sum(calls.values())} research "
        f"model calls ({', '.join(f'{k} {v}' for k, v in calls.items())}) and {voice_calls} "
        "voice model calls."
    )
    print(
        "\nThe models in this demo were scripted: a fake Anthropic server on 127.0.0.1 "
        "answered the voice agent and every research stage, and a corpus server on "
        "127.0.0.1 played the web. The console, the plugin, the SearXNG provider, the "
        "fetcher and the extractor ran for real.\n"
        "For the real thing: export ANTHROPIC_API_KEY=sk-ant-... and run "
        "`backline console --background deep_research` (add --search searxng "
        "--searxng-url URL, or --search tavily with TAVILY_API_KEY; ddgs needs no key)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
