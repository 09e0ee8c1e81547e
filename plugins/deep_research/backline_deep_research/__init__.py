"""backline-deep-research: deep research by voice, as a backline background session.

Clarify, plan, search, read, verify each claim three times against its source,
and write a report whose every finding cites the sources it came from.
"""

from .background import BACKGROUND_ID, deep_research_background
from .config import STAGES, ResearchConfig, ResearchLimits
from .evidence import Claim, Source, passage_in, tally
from .fetch import Fetcher, FetchError, HostRefused, Page, normalize_url
from .hosts import Network
from .models import LLMSource, ResearchModels, parse_json
from .prompts import DESCRIPTION, VOICE_INSTRUCTIONS, stage_of
from .report import slugify
from .research import Outcome, ResearchRound, RoundFailed
from .search import (
    SEARCH_PROVIDERS,
    RegisterSearchProvider,
    SearchProvider,
    SearchProviderEntry,
    SearchProviderFactory,
    SearchResult,
    search_provider,
    search_provider_names,
    search_providers,
)
from .worker import ResearchWorker, SearchFactory

__all__ = [
    "BACKGROUND_ID",
    "DESCRIPTION",
    "SEARCH_PROVIDERS",
    "STAGES",
    "VOICE_INSTRUCTIONS",
    "Claim",
    "FetchError",
    "Fetcher",
    "HostRefused",
    "LLMSource",
    "Network",
    "Outcome",
    "Page",
    "RegisterSearchProvider",
    "ResearchConfig",
    "ResearchLimits",
    "ResearchModels",
    "ResearchRound",
    "ResearchWorker",
    "RoundFailed",
    "SearchFactory",
    "SearchProvider",
    "SearchProviderEntry",
    "SearchProviderFactory",
    "SearchResult",
    "Source",
    "deep_research_background",
    "normalize_url",
    "parse_json",
    "passage_in",
    "search_provider",
    "search_provider_names",
    "search_providers",
    "slugify",
    "stage_of",
    "tally",
]
