"""The research models: one backline ``LLM`` per stage, called with bounded concurrency.

Any backline LLM works. By default each stage's LLM is built through the plugin
manager's LLM registry (``register_llms``; ``anthropic`` unless configured), with
the stage's model from the configuration. Answers are JSON objects in text, so
every chat model can produce them; ``parse_json`` is lenient about fences and
prose around the object.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from backline.llm import LLM, ChatContext, ChatMessage, LLMError, TextDelta

from .config import STAGES, ResearchConfig

LLMSource = LLM | Mapping[str, LLM] | Callable[[str, "str | None"], LLM]
"""One LLM for every stage, one per stage (``{"verify": llm, ...}``; missing stages use
the registry), or a function ``(stage, model) -> LLM``."""


MAX_TOKENS = 4096
"""Output tokens asked of a registry LLM that takes ``max_tokens`` (the report is long)."""


class ModelCallFailed(Exception):
    """A model call failed or timed out; the message says which stage and why."""


class ResearchModels:
    """Builds the LLM of each stage once, and runs calls: at most ``concurrency`` at a
    time, each within ``timeout`` seconds. ``calls`` counts calls per stage."""

    def __init__(self, config: ResearchConfig, llm: LLMSource | None = None) -> None:
        self.config = config
        self._source = llm
        self._llms: dict[str, LLM] = {}
        self._manager: Any = None
        self._gate = asyncio.Semaphore(config.limits.llm_concurrency)
        self.calls: Counter[str] = Counter()

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def llm_for(self, stage: str) -> LLM:
        """The LLM ``stage`` runs on (built on first use)."""
        if stage not in STAGES:
            raise ValueError(f"unknown research stage {stage!r}")
        found = self._llms.get(stage)
        if found is None:
            found = self._build(stage)
            self._llms[stage] = found
        return found

    def _build(self, stage: str) -> LLM:
        source, model = self._source, self.config.model_for(stage)
        if isinstance(source, LLM):
            return source
        if isinstance(source, Mapping) and stage in source:
            return source[stage]
        if callable(source) and not isinstance(source, Mapping):
            return source(stage, model)
        if self._manager is None:
            from backline.plugins import PluginManager

            self._manager = PluginManager.from_environment().load()
        options: dict[str, Any] = {} if model is None else {"model": model}
        try:  # room for a whole report; a factory that takes no such option gets none
            llm: LLM = self._manager.llm(self.config.llm, max_tokens=MAX_TOKENS, **options)
        except TypeError:
            llm = self._manager.llm(self.config.llm, **options)
        return llm

    async def complete(self, stage: str, system: str, user: str) -> str:
        """The text of one answer to ``user`` under the ``system`` prompt."""
        llm = self.llm_for(stage)
        ctx = ChatContext([ChatMessage(role="system", content=system)])
        ctx.add_message(role="user", content=user)
        async with self._gate:
            self.calls[stage] += 1
            parts: list[str] = []
            try:
                async with asyncio.timeout(self.config.limits.llm_timeout):
                    async with llm.chat(ctx) as stream:
                        async for chunk in stream:
                            if isinstance(chunk, TextDelta):
                                parts.append(chunk.text)
            except TimeoutError:
                raise ModelCallFailed(
                    f"the {stage} model did not answer within {self.config.limits.llm_timeout:g} s"
                ) from None
            except LLMError as e:
                raise ModelCallFailed(f"the {stage} model failed: {e}") from None
        return "".join(parts)

    async def ask_json(self, stage: str, system: str, user: str) -> dict[str, Any] | None:
        """One call, its answer parsed as a JSON object (``None`` when it is not one)."""
        return parse_json(await self.complete(stage, system, user))


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's answer: bare, fenced, or the outermost ``{...}``."""
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None
