"""The no-key try-out of ``deep_research``: ``backline try deep_research``.

The research searches a small folder of documents shipped beside this module (the
``local`` provider: nothing is fetched), and every model answers from the fake
Anthropic server on 127.0.0.1: the voice agent (backline's careful scripted one) and
each research stage (``ScriptedResearcher``: it quotes the sentences with figures,
confirms them, and writes a report that cites them). The report is saved in the
working folder. Found through the ``backline.offline_scripts`` entry point.
"""

from __future__ import annotations

from pathlib import Path

from backline.testing import fake_anthropic as fa
from backline.testing.offline import voice_agent

from .config import ENV_DOCS, ENV_SEARCH
from .prompts import stage_of
from .testing import ScriptedResearcher

CORPUS = Path(__file__).parent / "offline_corpus"
ENVIRONMENT = {ENV_SEARCH: "local", ENV_DOCS: str(CORPUS)}
HINT = (
    "Ask a research question about night trains in Europe (the documents here are a "
    "small local corpus), e.g. 'are night trains coming back in Europe?'; 'status?' "
    "reads the research's state."
)

_researcher = ScriptedResearcher()


def respond(request: fa.AnthropicRequest) -> fa.AnthropicResponse:
    if stage_of(request.system) is not None:
        response: fa.AnthropicResponse = _researcher.anthropic(request)
        return response
    return voice_agent(request, names={"deep_research": "the research"})
