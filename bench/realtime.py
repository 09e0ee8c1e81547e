"""Realtime models: backline's CPU per realtime turn, and the latency from the server's
first audio delta to the first frame handed to the speaker.

A minimal OpenAI Realtime server runs in a child process on loopback (so its CPU is
not counted): ``session.update`` → ``session.updated``; ``response.create`` →
``response.created``, the reply (text deltas, or audio deltas of 20 ms each with their
transcript), ``response.done``. The client is a real ``Session`` on
``OpenAIRealtimeLLM`` (backline-openai), driven by ``session.run``:

- CPU per turn: the client process's CPU time over the turns ÷ turns, for text and
  for audio (``use_audio()``: the replies are played into a sink that plays at once).
- First audio delta → output: the server notes when it sent each reply's first audio
  delta (``time.monotonic``, one clock for both processes on Linux) and passes it to
  the bench through a queue; the sink notes when the reply's first frame reaches it.
  The figure includes the loopback hop (tens of microseconds) and everything
  backline does: parsing, base64, the runtime, the output. Target (issue 31): ≤ 2 ms p50.

    python bench/realtime.py                 # the default sizes (make bench)
    python bench/realtime.py --turns 500
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import os
import time
from typing import Any

from _common import Target, print_table, print_targets, run, summarize_us, write_results

from backline import Agent, Session
from backline.speech import AudioFrame

WORDS = ["It", "is", "sunny", "in", "Oslo", "today", "and", "the", "wind", "is", "light"]
CHUNK = base64.b64encode(bytes(960)).decode()  # 20 ms of 24 kHz PCM


# -- the server (a child process) --------------------------------------------------------
def serve(port_out: Any, stamps: Any, stop: Any) -> None:  # pragma: no cover - the child
    from websockets.asyncio.server import serve as ws_serve

    async def handle(ws: Any) -> None:
        ids = iter(range(1, 1 << 30))
        audio = False
        async for raw in ws:
            event = json.loads(raw)
            kind = event.get("type")
            if kind == "session.update":
                audio = event["session"].get("output_modalities") == ["audio"]
                await ws.send(json.dumps({"type": "session.updated", "session": {}}))
            elif kind == "response.create":
                rid, item = f"resp_{next(ids)}", f"item_{next(ids)}"
                await ws.send(json.dumps({"type": "response.created", "response": {"id": rid}}))
                at = {"response_id": rid, "item_id": item, "output_index": 0, "content_index": 0}
                added = {"type": "message", "id": item, "role": "assistant", "content": []}
                await ws.send(
                    json.dumps({"type": "response.output_item.added", "item": added, **at})
                )
                said = ""
                for n, word in enumerate(WORDS):
                    delta = word if n == 0 else " " + word
                    said += delta
                    if audio:
                        if n == 0:
                            stamps.put(time.monotonic())
                        chunk = {"type": "response.output_audio.delta", "delta": CHUNK, **at}
                        await ws.send(json.dumps(chunk))
                        kind_ = "response.output_audio_transcript.delta"
                    else:
                        kind_ = "response.output_text.delta"
                    await ws.send(json.dumps({"type": kind_, "delta": delta, **at}))
                part = (
                    {"type": "output_audio", "transcript": said}
                    if audio
                    else {"type": "output_text", "text": said}
                )
                output = [{**added, "content": [part]}]
                usage = {"input_tokens": 10, "output_tokens": len(WORDS)}
                body = {"id": rid, "status": "completed", "output": output, "usage": usage}
                await ws.send(json.dumps({"type": "response.done", "response": body}))

    async def main() -> None:
        async with ws_serve(handle, "127.0.0.1", 0, ping_interval=None) as server:
            port_out.put(next(iter(server.sockets)).getsockname()[1])
            await asyncio.get_running_loop().run_in_executor(None, stop.wait)

    asyncio.run(main())


# -- the client ----------------------------------------------------------------------------
class StampSink:
    """Plays at once; notes when each reply's first frame arrived (``arm()`` per turn)."""

    def __init__(self) -> None:
        self.first_at: float | None = None
        self._played = 0.0

    def arm(self) -> None:
        self.first_at = None

    def write(self, frame: AudioFrame) -> None:
        if self.first_at is None:
            self.first_at = time.monotonic()
        self._played += frame.duration

    def clear(self) -> None:
        pass

    @property
    def played(self) -> float:
        return self._played

    async def drained(self) -> None:
        return None


async def turns(url: str, n: int, *, audio: bool, stamps: Any) -> dict[str, Any]:
    from backline_openai.realtime import OpenAIRealtimeLLM

    from backline.speech import SpeechOutput

    llm = OpenAIRealtimeLLM(base_url=url, api_key="bench", ping_interval=None)
    output = None
    sink = StampSink()
    if audio:
        llm.use_audio()
        output = SpeechOutput(_NoTTS(), sink)
    session: Session[Any] = Session(llm, output=output, user_away_timeout=None)
    await session.start(Agent("Answer briefly."))
    for _ in range(10):  # warm up: the socket, the first allocations
        await session.run(user_input="weather?", timeout=10)
    sent: list[float] = []
    firsts: list[float] = []
    cpu = time.process_time()
    for _ in range(n):
        sink.arm()
        await session.run(user_input="weather?", timeout=10)
        if sink.first_at is not None:
            firsts.append(sink.first_at)
    cpu = time.process_time() - cpu
    if audio:  # the server's stamp of every reply's first audio delta, warm-up included
        sent = [stamps.get(timeout=10) for _ in range(10 + n)]
    latencies = [first - at for first, at in zip(firsts, sent[10:], strict=False)]
    await session.aclose()
    await llm.aclose()
    if output is not None:
        await output.aclose()
    return {"cpu_us_per_turn": cpu / n * 1e6, "latency": latencies, "turns": n}


class _NoTTS:
    name = "none"
    sample_rate = 24000

    async def synthesize(self, text: str) -> Any:  # pragma: no cover - never called
        raise AssertionError("the model speaks itself")
        yield


async def main(args: argparse.Namespace) -> None:
    try:
        import backline_openai  # noqa: F401
    except ImportError:
        print("backline-openai is not installed: the realtime benchmark needs it")
        return
    ctx = multiprocessing.get_context("spawn")
    port_q, stamps, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    child = ctx.Process(target=serve, args=(port_q, stamps, stop), daemon=True)
    child.start()
    try:
        port = await asyncio.get_running_loop().run_in_executor(None, port_q.get, True, 30)
        url = f"http://127.0.0.1:{port}/v1"
        text = await turns(url, args.turns, audio=False, stamps=stamps)
        spoken = await turns(url, args.turns, audio=True, stamps=stamps)
    finally:
        stop.set()
        child.join(10)
    latency = summarize_us(spoken["latency"])
    print_table(
        f"A realtime turn (OpenAIRealtimeLLM, {args.turns} turns, {len(WORDS)} words each; "
        "the server in another process)",
        ["modality", "CPU µs per turn"],
        [
            ["text", f"{text['cpu_us_per_turn']:.0f}"],
            ["audio (20 ms deltas, played)", f"{spoken['cpu_us_per_turn']:.0f}"],
        ],
    )
    print_table(
        "The server's first audio delta -> the first frame handed to the speaker",
        ["p50 ms", "p99 ms", "turns"],
        [
            [
                f"{latency['p50_us'] / 1000:.3f}",
                f"{latency['p99_us'] / 1000:.3f}",
                len(spoken["latency"]),
            ]
        ],
    )
    targets = [
        Target(
            "realtime adapter, first audio delta → output (p50)",
            latency["p50_us"] / 1000 if spoken["latency"] else None,
            2.0,
            unit="ms",
        )
    ]
    print_targets(targets)
    write_results(
        "realtime",
        args,
        {"text": text, "audio": {**spoken, "latency": latency}, "pid": os.getpid()},
        targets,
    )


def cli() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--turns", type=int, default=200)
    p.add_argument("--profile", help="cProfile (unused)")
    args = p.parse_args()
    run(lambda: main(args))


if __name__ == "__main__":
    cli()
