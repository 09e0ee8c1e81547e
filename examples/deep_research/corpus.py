"""The demo's corpus: a few pages about night trains in Europe, served on 127.0.0.1."""

from __future__ import annotations

from backline_deep_research.testing import CorpusPage

PAGES = [
    CorpusPage(
        "/trains/revival",
        "The night train revival",
        (
            "Austria's railway ran night trains on 20 routes across Europe in 2023.",
            "Operators say demand grew after flight prices rose.",
        ),
    ),
    CorpusPage(
        "/trains/emissions",
        "Night trains and emissions",
        (
            "A night train journey emits about 90 percent less carbon than the same trip by plane.",
            "The figure depends on how the electricity is made.",
        ),
    ),
    CorpusPage(
        "/trains/paris-berlin",
        "Paris to Berlin by sleeper",
        (
            "The Paris to Berlin night train started running in December 2023.",
            "It runs three times a week and takes about 14 hours.",
        ),
    ),
    CorpusPage(
        "/trains/costs",
        "What a sleeper costs",
        (
            "Sleeper cabins cost 3 to 4 times more to run per passenger than seats.",
            "Track access charges are a large share of the price.",
        ),
    ),
    CorpusPage(
        "/trains/history",
        "A short history of sleepers",
        (
            "Many European night trains were cut between 2000 and 2016.",
            "Low-cost airlines took most of their passengers.",
        ),
    ),
    CorpusPage(
        "/trains/policy",
        "Policy for night trains",
        (
            "The European Commission named 10 pilot routes for new cross-border services in 2023.",
            "Rules for tickets across borders remain fragmented.",
        ),
    ),
]
