"""LLM metrics: the ``llm_metrics`` event of one model request, built from its timings."""

from __future__ import annotations

from typing import Literal

from ..llm.llm import LLM, Usage, llm_label
from .events import LLMMetrics


def llm_metrics(
    llm: LLM,
    speech_id: str,
    *,
    started: float,
    first: float | None,
    ended: float,
    first_audio: float | None = None,
    usage: Usage | None,
    status: Literal["completed", "cancelled", "failed"],
) -> LLMMetrics:
    """The event for a request sent at ``started``, first output at ``first``, first
    audio at ``first_audio`` (a model that speaks), ended at ``ended`` (event-loop
    seconds)."""
    name, model = llm_label(llm)
    # Built through its __dict__, once per request: a frozen dataclass's __init__ sets
    # each of its eleven fields through object.__setattr__ (about four times the cost).
    event = _new(LLMMetrics)
    event.__dict__.update(
        {
            "speech_id": speech_id,
            "llm": name,
            "model": model,
            "ttft": None if first is None else first - started,
            "duration": ended - started,
            "input_tokens": None if usage is None else usage.input_tokens,
            "output_tokens": None if usage is None else usage.output_tokens,
            "tokens_per_second": tokens_per_second(usage, first, ended),
            "status": status,
            "ttfa": None if first_audio is None else first_audio - started,
            "type": "llm_metrics",
        }
    )
    return event


_new = object.__new__


def tokens_per_second(usage: Usage | None, first: float | None, ended: float) -> float | None:
    """Output tokens per second after the first output (``None`` without usage)."""
    if usage is None or first is None or usage.output_tokens <= 0 or ended <= first:
        return None
    return usage.output_tokens / (ended - first)
