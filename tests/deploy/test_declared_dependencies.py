"""Every third-party import of product code is a declared dependency of the base install, or an optional package
(an extra's, or bfcl-eval, installed apart) imported only where it is used and failing there with the command that
installs it. Checked on the source, against what pyproject.toml declares, never against what happens to be
installed: a package that is here only because another dependency pulls it in (cryptography through Authlib, for
one) is exactly what this must catch. A bare install proves the same from the other side (test_bare_install.py).

Product code is what the wheel ships: the packages setuptools finds under [tool.setuptools.packages.find]'s
`include`. That takes in bench/ (`openclaw-rl bench` runs it) and harnesses/ (client loops a user runs against a
stack); tests/ and benchmarks/ are not shipped: they run from a checkout, with the test extra.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import setuptools
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
PACKAGES = sorted(setuptools.find_packages(str(REPO), include=SETUPTOOLS["packages"]["find"]["include"]))
FIRST_PARTY = {p.split(".")[0] for p in PACKAGES}
NOT_FOR_USERS = {"test"}
"""Extras that are the project's own tooling: product code may not lean on them."""
INSTALLED_APART = {"bfcl-eval": "pip install --no-deps bfcl-eval"}
"""Optional packages that no extra can install (their own dependencies must stay out), with the command that does."""
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


@dataclass(frozen=True)
class Import:
    module: str
    """The module as written (`from a.b import c`: `a.b.c`, which may be an attribute; resolution allows for it)."""
    path: Path
    line: int
    lazy: bool
    """Inside a function: it runs when the function does, not when the module is imported."""
    guarded: bool
    """In the body of a `try` whose handlers catch ImportError."""

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


class _Collector(ast.NodeVisitor):
    def __init__(self, path: Path):
        self.path, self.found = path, []
        self._functions = self._guards = 0

    def _function(self, node: ast.AST) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Try(self, node: ast.Try) -> None:
        catches = any(_catches_import_error(h) for h in node.handlers)
        self._guards += catches
        for stmt in node.body:
            self.visit(stmt)
        self._guards -= catches
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    visit_TryStar = visit_Try

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):  # never runs
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            for alias in node.names:
                self._add(node.module if alias.name == "*" else f"{node.module}.{alias.name}", node)

    def _add(self, module: str, node: ast.stmt) -> None:
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in FIRST_PARTY or top == "__future__":
            return
        self.found.append(Import(module, self.path, node.lineno, self._functions > 0, self._guards > 0))


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in IMPORT_ERRORS for k in kinds)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_in(path: Path, source: str | None = None) -> list[Import]:
    collector = _Collector(path)
    collector.visit(ast.parse(source if source is not None else path.read_text(), str(path)))
    return collector.found


def product_files() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((REPO / package.replace(".", "/")).glob("*.py"))


@dataclass(frozen=True)
class Declared:
    base: frozenset[str]
    extras: dict[str, frozenset[str]]
    """Extra -> its distributions (the extras a user installs; not NOT_FOR_USERS)."""

    @classmethod
    def of(cls, project: dict) -> Declared:
        def names(reqs: Iterable[str]) -> frozenset[str]:
            return frozenset(canonicalize_name(Requirement(r).name) for r in reqs)

        extras = project.get("optional-dependencies", {})
        return cls(
            names(project["dependencies"]),
            {e: names(reqs) for e, reqs in extras.items() if e not in NOT_FOR_USERS},
        )

    def extras_of(self, dist: str) -> list[str]:
        return sorted(e for e, dists in self.extras.items() if dist in dists)

    def hints(self, dist: str) -> list[str]:
        """The install commands a missing `dist` should name."""
        if dist in INSTALLED_APART:
            return [INSTALLED_APART[dist]]
        return [f"openclaw-rl[{e}]" for e in self.extras_of(dist)]


@cache
def _packages_distributions() -> dict[str, list[str]]:
    return md.packages_distributions()


@cache
def _files(dist: str) -> frozenset[str]:
    return frozenset(str(f) for f in md.distribution(dist).files or ())


@cache
def distributions_of(module: str) -> frozenset[str]:
    """The installed distributions that provide `module` (a namespace package such as `google` or `opentelemetry`
    is shared: the ones holding the longest prefix of the module's path win)."""
    parts = module.split(".")
    owners = sorted(set(_packages_distributions().get(parts[0], ())))
    if len(owners) > 1:
        for depth in range(len(parts), 1, -1):
            stem = "/".join(parts[:depth])
            holding = [d for d in owners if any(f == f"{stem}.py" or f.startswith(f"{stem}/") for f in _files(d))]
            if holding:
                owners = holding
                break
    return frozenset(canonicalize_name(d) for d in owners)


def violations(imports: Iterable[Import], declared: Declared, sources: dict[Path, str]) -> list[str]:
    """What breaks the rule, one line each. `sources`: the product files' text, where the install hints are looked
    for (a guard's own file for a guarded import; any product file for a lazy one, checked before it runs)."""
    everywhere = "\n".join(sources.values())
    found, seen = [], set()
    for imp in imports:
        dists = distributions_of(imp.module)
        if (imp.path, imp.line, dists) in seen:  # `from x import a, b`: one line
            continue
        seen.add((imp.path, imp.line, dists))
        if not dists:
            found.append(f"{imp.where()}: {imp.module} is not installed here: its distribution cannot be told")
            continue
        if dists & declared.base:
            continue
        optional = sorted(d for d in dists if d in INSTALLED_APART or declared.extras_of(d))
        if not optional:
            found.append(
                f"{imp.where()}: {imp.module} ({', '.join(sorted(dists))}) is not declared: a base dependency, or an "
                "extra's behind a guard (here only because something else pulls it in)"
            )
            continue
        hints = [h for d in optional for h in declared.hints(d)]
        if not (imp.lazy or imp.guarded):
            found.append(f"{imp.where()}: {imp.module} ({hints[0]}) is optional but imported unguarded at module level")
        elif imp.guarded and not any(h in sources.get(imp.path, "") for h in hints):
            found.append(f"{imp.where()}: the guard around {imp.module} does not name {' or '.join(hints)}")
        elif not any(h in everywhere for h in hints):
            found.append(f"{imp.where()}: nothing in product code says {' or '.join(hints)} before {imp.module} runs")
    return found


def test_product_code_imports_only_declared_packages_and_optional_ones_behind_their_extra():
    sources = {path: path.read_text() for path in product_files()}
    imports = [imp for path, text in sources.items() for imp in imports_in(path, text)]
    assert len(sources) > 200 and len(imports) > 300, "the walk found too little product code"
    assert not violations(imports, Declared.of(PYPROJECT["project"]), sources), "\n".join(
        violations(imports, Declared.of(PYPROJECT["project"]), sources)
    )


def test_the_check_catches_a_transitive_only_pull_and_an_unguarded_extra():
    """starlette is installed (fastapi pulls it in); declared without it, the import is a violation. megatron-core
    is the megatron extra's: at module level it is one, inside a guard that names the extra it is not."""
    path = REPO / "api" / "example.py"
    source = (
        "import fastapi\nfrom starlette.types import ASGIApp\nfrom megatron.core import parallel_state\n"
        "try:\n    import megatron.core\nexcept ImportError as e:\n"
        "    raise ImportError(\"pip install 'openclaw-rl[megatron]'\") from e\n"
    )
    declared = Declared(frozenset({"fastapi"}), {"megatron": frozenset({"megatron-core"})})
    found = violations(imports_in(path, source), declared, {path: source})
    assert [line.split(": ", 1)[0] for line in found] == ["api/example.py:2", "api/example.py:3"], found
    assert "not declared" in found[0] and "unguarded at module level" in found[1]
    assert distributions_of("google.protobuf.json_format") == {"protobuf"}  # a namespace shared by two


def test_every_data_file_of_a_product_package_ships_in_the_wheel():
    """A file a product package reads beside its modules must be package-data, or an installed stack misses it."""
    patterns = SETUPTOOLS.get("package-data", {})
    shipped = {
        f
        for package, globs in patterns.items()
        for pattern in globs
        for f in (REPO / package.replace(".", "/")).glob(pattern)
        if f.is_file()
    }
    roots = [REPO / p for p in sorted(FIRST_PARTY)]
    data = {
        f
        for root in roots
        for f in root.rglob("*")
        if f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in f.parts
    }
    missing = sorted(str(f.relative_to(REPO)) for f in data - shipped)
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"
