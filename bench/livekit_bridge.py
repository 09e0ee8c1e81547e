"""The LiveKit bridge: added latency per turn, CPU and memory per session.

Both sides run LiveKit Agents in text mode (an ``AgentSession`` with no room) and
the same zero-delay model, so what differs is the bridge:

- ``plain``: LiveKit's own pipeline, its agent's LLM a zero-delay fake LiveKit LLM;
- ``bridged``: ``backline-livekit``: LiveKit's turn -> backline ``Session`` (a
  zero-delay ``ScriptedLLM``) -> a LiveKit speech.

Latency: from ``AgentSession.run(user_input=...)`` (LiveKit hands over a
recognised turn) to the first text reaching LiveKit's transcription output (the
text would reach the TTS in the same step). The bridge's added latency is the
difference of the medians. CPU and memory: K sessions in one fresh child process
each, every session running ``--turns`` turns; RSS per idle session and CPU per
turn, for both sides.

    python bench/livekit_bridge.py                         # make bench
    python bench/livekit_bridge.py --turns 200 --sessions 10,100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import subprocess
import sys
import time
from typing import Any

from _common import print_table, summarize_us, write_results

REPLY = "Sure, that is done."


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() // 1024


# -- the two sides -----------------------------------------------------------------------
def _zero_llm() -> Any:
    """A LiveKit LLM answering ``REPLY`` at once (LiveKit's own pipeline)."""
    from livekit.agents import APIConnectOptions, llm
    from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

    class ZeroStream(llm.LLMStream):
        async def _run(self) -> None:
            for word in REPLY.split(" "):
                self._event_ch.send_nowait(
                    llm.ChatChunk(id="bench", delta=llm.ChoiceDelta(role="assistant", content=word))
                )

    class ZeroLLM(llm.LLM[Any]):
        def chat(
            self,
            *,
            chat_ctx: llm.ChatContext,
            tools: Any = None,
            conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
            **_: Any,
        ) -> llm.LLMStream:
            return ZeroStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)

    return ZeroLLM()


class FirstText:
    """LiveKit's transcription output, timing the first text of each reply."""

    def __init__(self) -> None:
        from livekit.agents.voice.io import TextOutput

        outer = self

        class Output(TextOutput):
            async def capture_text(self, text: str) -> None:
                if outer.waiting is not None and not outer.waiting.done():
                    outer.waiting.set_result(time.perf_counter())

            def flush(self) -> None:
                pass

        self.output = Output(label="bench", next_in_chain=None)
        self.waiting: asyncio.Future[float] | None = None


async def _start(kind: str) -> tuple[Any, Any, FirstText]:
    """A started session of ``kind``; returns (LiveKit session, closer, first-text probe)."""
    from livekit.agents import Agent, AgentSession

    probe = FirstText()
    if kind == "plain":
        lk: Any = AgentSession(
            llm=_zero_llm(),
            vad=None,
            user_away_timeout=None,
            turn_handling={"turn_detection": None, "preemptive_generation": {"enabled": False}},
        )
        lk.output.transcription = probe.output
        await lk.start(Agent(instructions="A benchmark."))
        return lk, lk, probe
    from backline_livekit import LiveKitBridge

    from backline import Agent as BAgent
    from backline import Session
    from backline.testing import ScriptedLLM, text

    session: Session[Any] = Session(
        ScriptedLLM(lambda _: text(REPLY), record=False), user_away_timeout=None
    )
    bridge = LiveKitBridge(session)
    lk = bridge.agent_session(vad=None, turn_handling={"turn_detection": None})
    lk.output.transcription = probe.output
    await bridge.start(lk, BAgent("A benchmark."))
    return lk, bridge, probe


async def _turn(lk: Any, probe: FirstText) -> float:
    loop = asyncio.get_running_loop()
    probe.waiting = loop.create_future()
    started = time.perf_counter()
    result = lk.run(user_input="do it")
    first = await asyncio.wait_for(probe.waiting, 10)
    await asyncio.wait_for(result, 10)
    return first - started


async def latency(kind: str, turns: int, warmup: int) -> dict[str, Any]:
    lk, closer, probe = await _start(kind)
    try:
        for _ in range(warmup):
            await _turn(lk, probe)
        samples = [await _turn(lk, probe) for _ in range(turns)]
    finally:
        await closer.aclose()
    return {"kind": kind, "turns": turns, **summarize_us(samples)}


async def footprint(kind: str, sessions: int, turns: int) -> dict[str, Any]:
    import gc

    gc.collect()
    base = _rss_kb()
    started = [await _start(kind) for _ in range(sessions)]
    for lk, _, probe in started:  # one turn each: every lazy path loaded
        await _turn(lk, probe)
    gc.collect()
    idle = _rss_kb()
    cpu0 = time.process_time()
    wall0 = time.perf_counter()

    async def drive(lk: Any, probe: FirstText) -> None:
        for _ in range(turns):
            await _turn(lk, probe)

    await asyncio.gather(*(drive(lk, probe) for lk, _, probe in started))
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    for _, closer, _ in started:
        await closer.aclose()
    total = sessions * turns
    return {
        "kind": kind,
        "sessions": sessions,
        "turns": total,
        "rss_per_idle_session_kb": round((idle - base) / sessions, 1),
        "cpu_us_per_turn": round(cpu / total * 1e6, 1),
        "turns_per_s": round(total / wall, 1),
    }


def _child(kind: str, sessions: int, turns: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(sessions), str(turns)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=100, help="measured turns (latency)")
    p.add_argument("--warmup", type=int, default=10, help="unmeasured turns first")
    p.add_argument("--sessions", default="10,50", help="session counts (CPU and memory)")
    p.add_argument("--session-turns", type=int, default=10, help="turns per session there")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    logging.getLogger("livekit").setLevel(logging.ERROR)

    if args.child:
        kind, sessions, turns = args.child[0], int(args.child[1]), int(args.child[2])
        print(json.dumps(asyncio.run(footprint(kind, sessions, turns))))
        return

    async def both() -> list[dict[str, Any]]:
        return [await latency(k, args.turns, args.warmup) for k in ("plain", "bridged")]

    lat = asyncio.run(both())
    added = {q: round(lat[1][q] - lat[0][q], 1) for q in ("p50_us", "p99_us", "mean_us")}
    print_table(
        "Turn -> first text out (LiveKit text mode, zero-delay model)",
        ["pipeline", "turns", "p50 µs", "p99 µs", "mean µs"],
        [[r["kind"], r["turns"], r["p50_us"], r["p99_us"], r["mean_us"]] for r in lat]
        + [["added by the bridge", "", added["p50_us"], added["p99_us"], added["mean_us"]]],
    )
    sizes = [int(s) for s in args.sessions.split(",") if s.strip()]
    foot = [_child(k, n, args.session_turns) for n in sizes for k in ("plain", "bridged")]
    print_table(
        "Per session (K sessions in one process, all turning concurrently)",
        ["pipeline", "sessions", "turns", "RSS/idle session KB", "CPU µs/turn", "turns/s"],
        [
            [
                r["kind"],
                r["sessions"],
                r["turns"],
                r["rss_per_idle_session_kb"],
                r["cpu_us_per_turn"],
                r["turns_per_s"],
            ]
            for r in foot
        ],
    )
    path = write_results(
        "livekit_bridge", args, {"latency": lat, "added": added, "footprint": foot}
    )
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
