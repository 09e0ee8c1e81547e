"""An import-linter contract of our own: packages that must use only public names.

``lint-imports`` (``make lint``) loads it from ``pyproject.toml``
(``[tool.importlinter] contract_types``). A module is private when a part of its
dotted name starts with ``_`` (not a dunder): ``backline._queue``,
``backline.llm._anthropic_convert``. A plugin imports ``backline`` and
``backline.llm``, never those.
"""

from __future__ import annotations

from typing import Any

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def is_private(module: str) -> bool:
    return any(
        part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
        for part in module.split(".")
    )


class NoPrivateImports(Contract):
    """``source_modules`` (and their descendants) import no private module of
    ``target_packages``."""

    type_name = "no_private_imports"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    target_packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        sources: set[str] = set()
        for module in self.source_modules:  # type: ignore[attr-defined]
            sources.add(module.name)
            sources |= graph.find_descendants(module.name)
        targets = list(self.target_packages)  # type: ignore[attr-defined]
        found: list[dict[str, Any]] = []
        for importer in sorted(sources):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                top = imported.split(".")[0]
                if top in targets and is_private(imported):
                    for detail in graph.get_import_details(importer=importer, imported=imported):
                        found.append(detail)
        return ContractCheck(kept=not found, metadata={"found": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for detail in check.metadata["found"]:
            output.print_error(
                f"{detail['importer']}:{detail['line_number']} imports the private module "
                f"{detail['imported']} ({detail['line_contents'].strip()}): use a public "
                "name instead (re-exported by the package, or listed in its __all__)",
                bold=False,
            )
            output.new_line()
