"""Configuration: the limits of a research round and where its parts come from.

Everything is read from the environment when a session starts (the front-end
options registered in ``plugin.py`` export to these variables), so the variables
alone work as well as the flags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .hosts import Network

ENV_SEARCH = "BACKLINE_RESEARCH_SEARCH"
ENV_SEARXNG_URL = "BACKLINE_SEARXNG_URL"
ENV_DOCS = "BACKLINE_RESEARCH_DOCS"
ENV_REPORT_DIR = "BACKLINE_RESEARCH_DIR"
ENV_LLM = "BACKLINE_RESEARCH_LLM"
ENV_MODEL = "BACKLINE_RESEARCH_MODEL"
ENV_STAGE_MODELS = "BACKLINE_RESEARCH_STAGE_MODELS"
ENV_LIMITS = "BACKLINE_RESEARCH_LIMITS"
ENV_ALLOW_PRIVATE_HOSTS = "BACKLINE_RESEARCH_ALLOW_PRIVATE_HOSTS"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")

STAGES = ("clarify", "plan", "extract", "verify", "write")
"""The stages that call a model; each may run on its own model (``--research-stage-models``)."""

DEFAULT_SEARCH = "ddgs"
DEFAULT_LLM = "anthropic"


@dataclass(frozen=True)
class ResearchLimits:
    """Every bound of a research round (the plugin's own; documented defaults).

    Set any of them with ``--research-limits "max_sources=12,page_chars=6000"``
    (or ``BACKLINE_RESEARCH_LIMITS``).
    """

    clarify_rounds: int = 3
    """Clarifying exchanges before research starts (then it goes ahead)."""
    clarify_timeout: float = 180.0
    """Seconds to wait for an answer to clarifying questions, then go ahead without it."""
    max_angles: int = 5
    """Search angles the planner may propose (more are ignored)."""
    results_per_angle: int = 6
    """Search results asked for per angle."""
    max_sources: int = 8
    """Unique sources read per round (URLs normalised to host + path)."""
    page_chars: int = 8000
    """Characters of a page's text kept for the models (cut with a visible marker)."""
    max_page_bytes: int = 2_000_000
    """A page (or robots.txt) larger than this is skipped, not read."""
    max_claims: int = 10
    """Claims put to verification per round."""
    votes_per_claim: int = 3
    """Independent verification votes per claim."""
    llm_concurrency: int = 4
    """Model calls in flight at once."""
    llm_timeout: float = 120.0
    """Seconds one model call may take; a late one counts as failed."""
    search_timeout: float = 20.0
    """Seconds one search may take; a late one is skipped and counted."""
    fetch_timeout: float = 15.0
    """Seconds one page fetch may take in all (robots.txt, redirects, body)."""
    host_interval: float = 1.0
    """Minimum seconds between two requests to one host (robots.txt Crawl-delay may raise it)."""
    max_redirects: int = 5
    """Redirects followed per fetch (each target is checked against its robots.txt)."""
    summary_chars: int = 2000
    """Characters of the previous report's summary carried into a follow-up round."""
    steering_notes: int = 20
    """Steering notes kept per round (later ones replace the oldest)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(
                    f"research limit {f.name} must be a positive number, got {value!r}"
                )
            if f.type in ("int", int) and not isinstance(value, int):
                raise ValueError(f"research limit {f.name} must be a whole number, got {value!r}")

    def with_(self, **changes: Any) -> ResearchLimits:
        """A copy with ``changes`` (validated like the constructor)."""
        return replace(self, **changes)

    @classmethod
    def parse(cls, text: str, base: ResearchLimits | None = None) -> ResearchLimits:
        """``"max_sources=12, page_chars=6000"`` over ``base`` (default: the defaults)."""
        known = {f.name: f for f in fields(cls)}
        changes: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, sep, raw = (s.strip() for s in part.partition("="))
            if not sep or name not in known:
                raise ValueError(
                    f"research limits: {part!r} is not NAME=VALUE with a known NAME; "
                    f"known: {', '.join(known)}"
                )
            try:
                value: Any = int(raw) if known[name].type in ("int", int) else float(raw)
            except ValueError:
                raise ValueError(f"research limits: {name}={raw!r} is not a number") from None
            changes[name] = value
        return (base or cls()).with_(**changes)


def parse_stage_models(text: str) -> dict[str, str]:
    """``"verify=claude-haiku-4-5, write=claude-opus-4-1"`` -> ``{stage: model}``."""
    models: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        stage, sep, model = (s.strip() for s in part.partition("="))
        if not sep or stage not in STAGES or not model:
            raise ValueError(
                f"research stage models: {part!r} is not STAGE=MODEL; stages: {', '.join(STAGES)}"
            )
        models[stage] = model
    return models


@dataclass(frozen=True)
class ResearchConfig:
    """Where a research round's parts come from, and its limits.

    ``search``: the search provider's name (any registered with
    ``register_search_providers``). ``llm``: the LLM's name in the plugin
    registry (``register_llms``); ``model`` its model for every stage, and
    ``stage_models`` a model per stage. ``report_dir``: where reports are saved.
    ``docs``: the folder the ``local`` provider searches.
    ``allow_private_hosts``: fetch pages on loopback, private, link-local and other
    non-public addresses too (to research an intranet; off by default, see
    ``hosts.py``). ``network``: how the fetcher resolves names and connects
    (default: the system resolver, direct connections).
    """

    search: str = DEFAULT_SEARCH
    llm: str = DEFAULT_LLM
    model: str | None = None
    stage_models: Mapping[str, str] = field(default_factory=dict)
    report_dir: Path = field(default_factory=Path.cwd)
    docs: Path | None = None
    searxng_url: str | None = None
    limits: ResearchLimits = field(default_factory=ResearchLimits)
    allow_private_hosts: bool = False
    network: Network | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.stage_models) - set(STAGES))
        if unknown:
            raise ValueError(
                f"unknown research stage(s) {', '.join(unknown)}; stages: {', '.join(STAGES)}"
            )
        object.__setattr__(self, "stage_models", dict(self.stage_models))
        object.__setattr__(self, "report_dir", Path(self.report_dir).expanduser())

    def model_for(self, stage: str) -> str | None:
        """The model a stage runs on (``None``: the LLM's default)."""
        return self.stage_models.get(stage, self.model)

    def search_options(self) -> dict[str, Any]:
        """Options for the chosen provider's factory (what this config knows of it)."""
        if self.search == "searxng" and self.searxng_url:
            return {"url": self.searxng_url}
        if self.search == "local" and self.docs is not None:
            return {"folder": self.docs}
        return {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ResearchConfig:
        """Read the ``BACKLINE_RESEARCH_*`` variables; keyword overrides win (None is ignored).

        Raises ``ValueError`` naming the variable whose value is wrong.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for key, var in (("search", ENV_SEARCH), ("llm", ENV_LLM), ("model", ENV_MODEL)):
            if env.get(var, "").strip():
                values[key] = env[var].strip()
        if env.get(ENV_SEARXNG_URL, "").strip():
            values["searxng_url"] = env[ENV_SEARXNG_URL].strip()
        if env.get(ENV_REPORT_DIR, "").strip():
            values["report_dir"] = Path(env[ENV_REPORT_DIR].strip())
        if env.get(ENV_DOCS, "").strip():
            values["docs"] = Path(env[ENV_DOCS].strip())
        flag = env.get(ENV_ALLOW_PRIVATE_HOSTS, "").strip().lower()
        if flag not in _TRUE + _FALSE:
            raise ValueError(
                f"{ENV_ALLOW_PRIVATE_HOSTS}: {env[ENV_ALLOW_PRIVATE_HOSTS]!r} is not 1 or 0 "
                "(or true/false, yes/no, on/off)"
            )
        values["allow_private_hosts"] = flag in _TRUE
        try:
            if env.get(ENV_STAGE_MODELS, "").strip():
                values["stage_models"] = parse_stage_models(env[ENV_STAGE_MODELS])
            if env.get(ENV_LIMITS, "").strip():
                values["limits"] = ResearchLimits.parse(env[ENV_LIMITS])
        except ValueError as e:
            var = ENV_LIMITS if "limit" in str(e) else ENV_STAGE_MODELS
            raise ValueError(f"{var}: {e}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
