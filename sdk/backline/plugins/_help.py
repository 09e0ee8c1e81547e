"""Help pages in sections: a front end's options grouped by where they come from.

``backline console --help`` shows the session's options, then each plugin's, each
under a title, then the command's own. The sections are click-option-group's
``OptionGroup`` and ``GroupedOption`` (a title row, the options indented under it),
with one difference: an ``OptionSection`` finds its options in the command being
shown, so one section (a plugin's options) can join any number of commands, also
after they were built (``attach_options``).
"""

from __future__ import annotations

import itertools
from typing import Any

import click
from click_option_group import GroupedOption, OptionGroup

_titles = itertools.count()


class OptionSection(OptionGroup):
    """A titled block of options in a command's help (``name``: the title, ``help``: a
    line beside it). Its options are the ``GroupedOption`` parameters of the command
    being shown whose ``group`` is this section."""

    def get_options(self, ctx: click.Context) -> dict[str, GroupedOption]:
        return {
            p.name: p
            for p in ctx.command.params
            if isinstance(p, GroupedOption) and p.group is self and p.name is not None
        }

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        return None if record is None else (record[0].rstrip(), record[1])

    def option(self, *param_decls: str, **attrs: Any) -> GroupedOption:  # type: ignore[override]
        """A ``GroupedOption`` of this section (``click.Option``'s arguments)."""
        return GroupedOption(list(param_decls), group=self, **attrs)

    def title(self) -> click.Option:
        """The parameter that shows the title: put it before the section's options."""
        return _SectionTitle(self)


class _SectionTitle(click.Option):
    """A parameter with no flag that only shows its section's title in the help."""

    def __init__(self, section: OptionSection) -> None:
        super().__init__([f"--backline-section-{next(_titles)}"], hidden=True, expose_value=False)
        self.opts = []
        self.secondary_opts = []
        self.section = section

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        return self.section.get_help_record(ctx)


def add_section(
    command: click.Command, section: OptionSection, options: list[click.Option]
) -> None:
    """Add ``section``'s title and ``options`` to ``command`` after the sections it has
    (so the command's own options stay last, above ``--help``), unless it has this one."""
    params = command.params
    if any(isinstance(p, _SectionTitle) and p.section is section for p in params):
        return
    sectioned = [i for i, p in enumerate(params) if isinstance(p, (GroupedOption, _SectionTitle))]
    at = sectioned[-1] + 1 if sectioned else len(params)
    params[at:at] = [section.title(), *options]
