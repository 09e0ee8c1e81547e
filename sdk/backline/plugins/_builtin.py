"""The built-in plugin ``anthropic``: the Anthropic adapter, registered like any plugin.

``anthropic`` (the package) is imported only when the factory runs, so loading
plugins stays fast.
"""

from __future__ import annotations

import os
import typing
from typing import TYPE_CHECKING, Any

from ._hookspecs import hookimpl

if TYPE_CHECKING:
    from ..llm.llm import LLM
    from ._core_kinds import RegisterLLM

DESCRIPTION = (
    "Claude through Anthropic's Messages API (ANTHROPIC_API_KEY; model: $BACKLINE_MODEL "
    "or the adapter's default)"
)


def anthropic_models() -> list[str]:
    """The models the installed ``anthropic`` package lists (its ``ModelParam``)."""
    from anthropic.types import ModelParam

    names: list[str] = []
    for arm in typing.get_args(ModelParam):
        names += [a for a in typing.get_args(arm) if isinstance(a, str)]
    return names


def anthropic_default_model() -> str:
    """``$BACKLINE_MODEL``, else the adapter's ``DEFAULT_MODEL``."""
    from ..llm.anthropic import DEFAULT_MODEL, MODEL_ENV

    return os.environ.get(MODEL_ENV) or DEFAULT_MODEL


def anthropic_llm(model: str | None = None, **options: Any) -> LLM:
    """Build ``backline.llm.anthropic.AnthropicLLM(model, **options)``."""
    from ..llm.anthropic import AnthropicLLM

    return AnthropicLLM(model, **options)


@hookimpl
def register_llms(register: RegisterLLM) -> None:
    register(
        "anthropic",
        anthropic_llm,
        description=DESCRIPTION,
        models=anthropic_models,
        default_model=anthropic_default_model,
    )
