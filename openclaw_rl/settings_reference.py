"""The configuration reference (docs/settings-reference.md), generated from the settings tree itself.

Every field of `Settings`, section by section: its dotted name, the environment variable that sets it, its type,
its default, and the docstring written under it in the settings package (openclaw_rl/settings/).
tests/test_settings_reference.py fails when the page and the tree disagree, so the page cannot go stale:

    .venv/bin/python -m openclaw_rl.settings_reference > docs/settings-reference.md
"""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from openclaw_rl import settings as settings_module
from openclaw_rl.settings import Settings

HEADER = """# Settings reference

Generated from `openclaw_rl/settings/` by `python -m openclaw_rl.settings_reference` (a test keeps it in step
with the code). Every setting can come from an environment variable (shown), from the TOML file named by
`OPENCLAW_RL_CONFIG` (the dotted name's parts are its tables and key), or keep its default; how the sources
combine, and the security-relevant ones, are in [Configuration and security](configuration.md).
`openclaw-rl config` prints the effective values with secrets masked.
"""


def field_docs() -> dict[tuple[str, str], str]:
    """(class name, field name) -> the docstring written under the field."""
    docs: dict[tuple[str, str], str] = {}
    package = Path(inspect.getsourcefile(settings_module)).parent  # the settings package: a module per section
    classes = [n for f in sorted(package.glob("*.py")) for n in ast.parse(f.read_text()).body]
    for cls in (n for n in classes if isinstance(n, ast.ClassDef)):
        body = cls.body
        for node, nxt in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[(cls.name, node.target.id)] = inspect.cleandoc(nxt.value.value)
    return docs


def _model_of(annotation) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _type_name(annotation) -> str:
    text = getattr(annotation, "__name__", None) if not typing.get_args(annotation) else None
    text = text or str(annotation)
    text = re.sub(r"\b(typing|pathlib|openclaw_rl\.settings(\.\w+)?|pydantic\.types)\.", "", text)
    return text.replace("NoneType", "None")


def _default(field) -> str:
    if field.default is PydanticUndefined:
        value = field.default_factory() if field.default_factory is not None else None
    else:
        value = field.default
    if isinstance(value, SecretStr):
        return '"" (secret)' if not value.get_secret_value() else "(secret)"
    if isinstance(value, BaseModel):
        return "(section)"
    if hasattr(value, "value") and not isinstance(value, (int, float, str)):
        value = value.value  # an enum
    text = repr(str(value)) if isinstance(value, Path) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows(model: type[BaseModel], prefix: str, docs: dict) -> list[tuple[str, list[tuple[str, ...]]]]:
    """Sections of (dotted name, env var, type, default, doc) rows, depth first."""
    own: list[tuple[str, ...]] = []
    nested: list[tuple[str, list]] = []
    for name, field in model.model_fields.items():
        dotted = f"{prefix}.{name}" if prefix else name
        sub = _model_of(field.annotation)
        if sub is not None:
            nested += rows(sub, dotted, docs)
            continue
        env = "OPENCLAW_RL_" + dotted.upper().replace(".", "__")
        doc = next((docs[(c.__name__, name)] for c in model.__mro__ if (c.__name__, name) in docs), "")
        own.append((f"`{dotted}`", f"`{env}`", f"`{_cell(_type_name(field.annotation))}`", f"`{_default(field)}`", doc))
    return ([(prefix, own)] if own else []) + nested


def render() -> str:
    docs = field_docs()
    out = [HEADER]
    for section, items in rows(Settings, "", docs):
        out.append(f"\n## {section or 'Top level'}\n")
        out.append("| setting | environment variable | type | default | what it does |")
        out.append("|---|---|---|---|---|")
        for name, env, typ, default, doc in items:
            out.append(f"| {name} | {env} | {typ} | {default} | {_cell(doc)} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
