"""The test corpus: 20 pages about honeybees, written by the tests, served on loopback."""

from __future__ import annotations

from backline_deep_research.testing import CorpusPage

PAGES = [
    CorpusPage(
        "/bees/colony-losses",
        "Colony losses in the United States",
        (
            "Beekeepers in the United States lost 48 percent of their managed colonies "
            "between April 2022 and April 2023.",
            "Losses were highest in winter, when colonies cannot forage.",
        ),
    ),
    CorpusPage(
        "/bees/varroa",
        "The varroa mite",
        (
            "The varroa mite was first found in the United States in 1987.",
            "It feeds on the fat body of bees and spreads deformed wing virus.",
        ),
    ),
    CorpusPage(
        "/bees/pesticides",
        "Neonicotinoid pesticides",
        (
            "The European Union banned three neonicotinoids for outdoor use in 2018.",
            "Field studies disagree on how much the pesticides harm honeybee colonies.",
        ),
    ),
    CorpusPage(
        "/bees/pollination",
        "What pollination is worth",
        (
            "Honeybees pollinate crops worth about 15 billion dollars a year in the United States.",
            "Almonds depend almost entirely on managed honeybees.",
        ),
    ),
    CorpusPage(
        "/bees/almonds",
        "Almond pollination",
        (
            "California's almond orchards need about 2 million honeybee colonies every February.",
            "Colonies are trucked in from across the country.",
        ),
    ),
    CorpusPage(
        "/bees/nutrition",
        "Bee nutrition",
        (
            "A colony needs between 15 and 55 kilograms of pollen a year.",
            "Monoculture farming leaves bees with a poor diet for much of the season.",
        ),
    ),
    CorpusPage(
        "/bees/wild",
        "Wild bees",
        (
            "There are more than 20000 species of bees in the world.",
            "Most wild bees are solitary and do not make honey.",
        ),
    ),
    CorpusPage(
        "/bees/ccd",
        "Colony collapse disorder",
        (
            "Colony collapse disorder was first named in 2006.",
            "Reports of classic colony collapse have become rare since 2010.",
        ),
    ),
    CorpusPage(
        "/bees/winter",
        "Wintering colonies",
        (
            "A honeybee colony keeps its winter cluster at about 35 degrees Celsius.",
            "Bees shiver their flight muscles to make heat.",
        ),
    ),
    CorpusPage(
        "/bees/queens",
        "Queen bees",
        (
            "A queen bee can lay up to 2000 eggs a day in spring.",
            "Beekeepers replace queens every one or two years.",
        ),
    ),
    CorpusPage(
        "/bees/honey",
        "Honey production",
        (
            "The United States produced about 126 million pounds of honey in 2022.",
            "Imports now supply most of the honey Americans eat.",
        ),
    ),
    CorpusPage(
        "/bees/climate",
        "Climate and bees",
        (
            "Warmer winters let varroa mites breed for 2 more months in some regions.",
            "Droughts shrink the flowers bees depend on.",
        ),
    ),
    CorpusPage(
        "/bees/viruses",
        "Bee viruses",
        (
            "Deformed wing virus is found in more than 50 percent of colonies surveyed.",
            "Mites inject the virus directly into developing bees.",
        ),
    ),
    CorpusPage(
        "/bees/treatments",
        "Mite treatments",
        (
            "Oxalic acid treatments kill up to 90 percent of the mites on adult bees.",
            "Treatments work best when the colony has no brood.",
        ),
    ),
    CorpusPage(
        "/bees/history",
        "A short history of beekeeping",
        (
            "People have kept bees in hives for at least 9000 years.",
            "The movable frame hive was patented in 1852.",
        ),
    ),
    CorpusPage(
        "/bees/europe",
        "Bees in Europe",
        (
            "European beekeepers reported winter losses of 16 percent in 2021.",
            "Losses vary widely between countries.",
        ),
    ),
    CorpusPage(
        "/bees/urban",
        "Urban beekeeping",
        (
            "London had more than 7000 registered hives in 2020.",
            "Too many hives in a city can outstrip the flowers available.",
        ),
    ),
    CorpusPage(
        "/bees/research",
        "Breeding resistant bees",
        (
            "Bees bred for hygienic behaviour remove up to 95 percent of infested brood.",
            "Breeding programmes take many years to spread resistant stock.",
        ),
    ),
    CorpusPage(
        "/bees/numbers",
        "How many colonies are there",
        (
            "The number of managed colonies worldwide rose to about 100 million in 2022.",
            "Beekeepers split colonies to replace the ones they lose.",
        ),
    ),
    CorpusPage(
        "/bees/myths",
        "Bee myths",
        (
            "Honeybees will not go extinct: the number of managed colonies has grown.",
            "The 48 percent loss figure measures turnover, not a shrinking population.",
        ),
    ),
]
