"""backline-deep-research: deep research by voice, as a backline background session.

Clarify, plan, search, read, verify each claim three times against its source,
and write a report whose every finding cites the sources it came from.
"""

from .background import BACKGROUND_ID, deep_research_background
from .config import STAGES, ResearchConfig, ResearchLimits
from .evidence import Claim, Source, passage_in, tally
from .fetch import Fetcher, FetchError, Page, normalize_url
from .models import LLMSource, ResearchModels, parse_json
from .prompts import DESCRIPTION, VOICE_INSTRUCTIONS, stage_of
from .report import slugify
from .research import Outcome, ResearchRound, RoundFailed
from .worker import ResearchWorker, SearchFactory

__all__ = [
    "BACKGROUND_ID",
    "DESCRIPTION",
    "STAGES",
    "VOICE_INSTRUCTIONS",
    "Claim",
    "FetchError",
    "Fetcher",
    "LLMSource",
    "Outcome",
    "Page",
    "ResearchConfig",
    "ResearchLimits",
    "ResearchModels",
    "ResearchRound",
    "ResearchWorker",
    "RoundFailed",
    "SearchFactory",
    "Source",
    "deep_research_background",
    "normalize_url",
    "parse_json",
    "passage_in",
    "slugify",
    "stage_of",
    "tally",
]
