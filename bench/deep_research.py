"""Deep research: one offline round end to end, its wall time and its model calls.

A research round as ``backline console --background deep_research`` runs it, with
the voice agent and the research models scripted (``ScriptedLLM``, zero delay) and
the web played by a corpus server on 127.0.0.1 (SearXNG JSON search, real fetch,
robots.txt, trafilatura). So the figures are the pipeline's own cost: the
orchestration, HTTP on loopback and extraction, without any model latency.

  round       wall time of a whole round (question -> report saved), median and max
              over ``--rounds`` rounds in one session (the first includes imports)
  calls       model calls per stage in one round

    python bench/deep_research.py
    python bench/deep_research.py --rounds 10 --pages 20
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import print_table, run, write_results
from backline_deep_research import ResearchConfig, ResearchLimits, deep_research_background
from backline_deep_research import state as st
from backline_deep_research.testing import CorpusPage, CorpusServer, ScriptedResearcher

from backline.testing import BackgroundDriver


def corpus(pages: int) -> list[CorpusPage]:
    return [
        CorpusPage(
            f"/topic/{i}",
            f"Page {i} about river deltas",
            (
                f"River delta number {i} grew by {i + 3} square kilometres in 2020.",
                "Sediment from upstream builds new land each flood season.",
                f"About {10 * i + 5} thousand people live on delta {i}.",
            ),
        )
        for i in range(pages)
    ]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    researcher = ScriptedResearcher(
        angles=[("growth", "river delta grew"), ("people", "people live delta")]
    )
    durations: list[float] = []
    with tempfile.TemporaryDirectory() as reports:
        async with CorpusServer(corpus(args.pages)) as web:
            config = ResearchConfig(
                search="searxng",
                searxng_url=web.url,
                report_dir=Path(reports),
                limits=ResearchLimits(host_interval=0.001),
                allow_private_hosts=True,  # the corpus is on 127.0.0.1
            )
            definition = deep_research_background(config, llm=researcher.llm())
            async with BackgroundDriver(definition, timeout=120) as driver:
                for n in range(1, args.rounds + 1):
                    started = time.perf_counter()
                    await driver.say(f"Research how river deltas change ({n}). Just start.")
                    await driver.wait_for(
                        lambda n=n: (
                            sum(s.get("phase") == st.DONE for s in driver.result().states) >= n
                        ),
                        what="the round to end",
                    )
                    durations.append(time.perf_counter() - started)
    calls = {stage: count // args.rounds for stage, count in researcher.calls.items()}
    print_table(
        "deep research: one round, offline (scripted models, corpus on loopback)",
        ["measure", "value"],
        [
            ["rounds", args.rounds],
            ["first round (s)", f"{durations[0]:.3f}"],
            ["median round (s)", f"{statistics.median(durations):.3f}"],
            ["max round (s)", f"{max(durations):.3f}"],
            ["model calls per round", sum(calls.values())],
            *[[f"  {stage}", count] for stage, count in calls.items()],
        ],
    )
    return {"durations_s": durations, "calls_per_round": calls}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--profile", default=None)
    args = parser.parse_args()
    results = run(lambda: main(args), profile=args.profile)
    write_results("deep_research", args, results)
