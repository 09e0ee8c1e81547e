"""The plugin: the ``deep_research`` background session, its front-end options, the
``register_search_providers`` hook (``search.py``), and the first-party search providers
(``ddgs``, ``searxng``, ``tavily``, ``brave``, ``local``)."""

from __future__ import annotations

from backline import hookimpl
from backline.plugins import RegisterBackground, RegisterHookspecs, RegisterOption

from . import search
from .background import deep_research_background
from .config import (
    ENV_ALLOW_PRIVATE_HOSTS,
    ENV_DOCS,
    ENV_LIMITS,
    ENV_LLM,
    ENV_MODEL,
    ENV_REPORT_DIR,
    ENV_SEARCH,
    ENV_SEARXNG_URL,
    ENV_STAGE_MODELS,
)
from .providers import PROVIDERS, factory
from .search import SEARCH_PROVIDERS, RegisterSearchProvider, search_provider_names


@hookimpl
def register_hookspecs(register: RegisterHookspecs) -> None:
    # Provider plugins implement register_search_providers, before or after this loads.
    register(search, kinds=[SEARCH_PROVIDERS])


@hookimpl
def register_background_sessions(register: RegisterBackground) -> None:
    # The configuration is read from the environment when a session starts.
    register(deep_research_background())


@hookimpl
def register_search_providers(register: RegisterSearchProvider) -> None:
    for name, (_, _, description) in PROVIDERS.items():
        register(name, factory(name), description=description)


@hookimpl
def register_options(register: RegisterOption) -> None:
    register(
        "--search",
        envvar=ENV_SEARCH,
        background="deep_research",
        choices=search_provider_names,
        metavar="NAME",
        help="Deep research: the search provider (ddgs, searxng, tavily, brave, local, or "
        "one from another plugin; default ddgs).",
    )
    register(
        "--searxng-url",
        envvar=ENV_SEARXNG_URL,
        background="deep_research",
        metavar="URL",
        help="Deep research: the SearXNG instance for --search searxng.",
    )
    register(
        "--research-docs",
        envvar=ENV_DOCS,
        background="deep_research",
        metavar="DIR",
        help="Deep research: the folder of documents for --search local.",
    )
    register(
        "--research-dir",
        envvar=ENV_REPORT_DIR,
        background="deep_research",
        metavar="DIR",
        help="Deep research: where reports are saved (default: the working directory).",
    )
    register(
        "--research-llm",
        envvar=ENV_LLM,
        background="deep_research",
        choices=lambda manager: manager.llm_names(),
        metavar="NAME",
        help="Deep research: the LLM (a registered name; default anthropic).",
    )
    register(
        "--research-model",
        envvar=ENV_MODEL,
        background="deep_research",
        metavar="MODEL",
        help="Deep research: the model of every research stage.",
    )
    register(
        "--research-stage-models",
        envvar=ENV_STAGE_MODELS,
        background="deep_research",
        metavar="STAGE=MODEL,...",
        help="Deep research: a model per stage (clarify, plan, extract, verify, write).",
    )
    register(
        "--research-limits",
        envvar=ENV_LIMITS,
        background="deep_research",
        metavar="NAME=VALUE,...",
        help="Deep research: limits, e.g. max_sources=12,page_chars=6000 "
        "(docs/deep-research.md lists them).",
    )
    register(
        "--research-allow-private-hosts",
        envvar=ENV_ALLOW_PRIVATE_HOSTS,
        background="deep_research",
        is_flag=True,
        help="Deep research: also read pages on loopback, private and link-local addresses "
        "(an intranet); refused by default.",
    )
