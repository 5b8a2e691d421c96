"""HumanEval problems turned into small buggy repositories: the bug, the tests, the issue text.

Each problem's prompt plus canonical solution is a module of real, working
code. A bug is injected into the entry function by one source-level mutation
of a kind real code has (an off-by-one bound, a wrong comparison, a missing
guard clause, a wrong operator or default, inverted logic), replacing only the
mutated token so the oracle patch is the one-line fix a person would write.
The problem's `check(candidate)` is split into one pytest test per assertion
(with the statements it needs before it); the tests the bug breaks become the
hidden FAIL_TO_PASS tests, the ones it leaves passing are the repository's
visible tests (PASS_TO_PASS). Every choice is deterministic: candidates are
tried in a fixed order, rotated by the problem's number so the bug kinds vary.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("off-by-one", "wrong-comparison", "missing-edge-case", "wrong-operator", "wrong-default", "inverted-logic")
MAX_CANDIDATES = 16
"""Mutations tried per problem before settling for one that breaks every test (or giving up)."""
TEST_TIMEOUT_S = 5


@dataclass
class Mutation:
    kind: str
    source: str
    """The whole module with the bug in it."""
    line: int


@dataclass
class Probe:
    """A test of the form `assert f(args) == expected`: the issue text can quote the call and both values."""

    call: str
    expected: str | None
    """The expected value's source; None: a true value is expected (`assert f(x)`)."""
    negated: bool = False
    """`assert not f(x)`: a false value is expected."""


@dataclass
class TestCase:
    source: str
    """The test function's body (the assertion and the statements it needs), `candidate` already renamed."""
    check: str
    """The assertion itself, as a person would quote it."""
    probe: Probe | None = None


@dataclass
class Problem:
    number: int
    entry: str
    module: str
    source: str
    """prompt + canonical solution: the working module."""
    header: str
    """The test module's imports."""
    tests: list[TestCase] = field(default_factory=list)


# ---- problems and their tests ------------------------------------------------------------
def module_name(entry: str) -> str:
    # A module named like the standard library (or `tests`) would shadow it when the tests import it.
    return f"{entry}_lib" if entry in sys.stdlib_module_names or entry in ("tests", "conftest") else entry


def problem(raw: dict) -> Problem:
    number = int(raw["task_id"].split("/")[1])
    entry = raw["entry_point"]
    source = raw["prompt"] + raw["canonical_solution"]
    source = source.rstrip() + "\n"
    module = module_name(entry)
    test_tree = ast.parse(raw["test"])
    check = next(n for n in test_tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    mod_tree = ast.parse(source)
    defined = {n.name for n in mod_tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    used = {n.id for n in ast.walk(check) if isinstance(n, ast.Name)}
    names = [entry] + sorted((defined & used) - {entry})
    top = [n for n in test_tree.body if n is not check and not _is_metadata(n)]
    header = "".join(ast.unparse(n) + "\n" for n in top if isinstance(n, ast.Import | ast.ImportFrom))
    header += f"from {module} import {', '.join(names)}\n"
    p = Problem(number=number, entry=entry, module=module, source=source, header=header)
    context: list[ast.stmt] = []
    for stmt in check.body:
        if _is_test(stmt):
            p.tests.append(_test_case(context, stmt, entry))
        else:
            context.append(stmt)
    return p


def _is_metadata(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "METADATA" for t in node.targets)


def _uses_candidate(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "candidate" for n in ast.walk(node))


def _is_test(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
        return False
    return _uses_candidate(stmt) and any(isinstance(n, ast.Assert) for n in ast.walk(stmt))


class _Rename(ast.NodeTransformer):
    def __init__(self, entry: str):
        self.entry = entry

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(id=self.entry, ctx=node.ctx), node) if node.id == "candidate" else node


def _test_case(context: list[ast.stmt], stmt: ast.stmt, entry: str) -> TestCase:
    body = [_Rename(entry).visit(ast.parse(ast.unparse(s)).body[0]) for s in [*context, stmt]]
    src = "\n".join(ast.unparse(s) for s in body)
    if any(isinstance(n, ast.Name) and n.id == "random" for s in body for n in ast.walk(s)):
        src = "import random\nrandom.seed(0)\n" + src  # unseeded random inputs would make a test flaky
    last = body[-1]
    check = ast.unparse(last.test) if isinstance(last, ast.Assert) else ast.unparse(last)
    probe = _probe(last, entry)
    if probe is not None and _names(probe) & _stored(body[:-1]):
        probe = None  # the call needs the statements before it: quote the assertion instead
    return TestCase(source=src, check=check, probe=probe)


def _names(probe: Probe) -> set[str]:
    exprs = [probe.call] + ([probe.expected] if probe.expected is not None else [])
    return {n.id for e in exprs for n in ast.walk(ast.parse(e, mode="eval")) if isinstance(n, ast.Name)}


def _stored(stmts: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif isinstance(n, ast.alias):
                names.add((n.asname or n.name).split(".")[0])
            elif isinstance(n, ast.FunctionDef | ast.ClassDef):
                names.add(n.name)
    return names


def _probe(stmt: ast.stmt, entry: str) -> Probe | None:
    if not isinstance(stmt, ast.Assert):
        return None
    t = stmt.test

    def is_call(n: ast.AST) -> bool:
        return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == entry

    if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq | ast.Is) and is_call(t.left):
        return Probe(call=ast.unparse(t.left), expected=ast.unparse(t.comparators[0]))
    if is_call(t):
        return Probe(call=ast.unparse(t), expected=None)
    if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and is_call(t.operand):
        return Probe(call=ast.unparse(t.operand), expected=None, negated=True)
    return None


def test_name(entry: str, i: int, hidden: bool) -> str:
    return f"test_{entry}_issue_{i}" if hidden else f"test_{entry}_{i}"


def test_module(p: Problem, cases: list[tuple[str, TestCase]]) -> str:
    """A pytest module: the header, then one function per (name, case)."""
    funcs = [f"def {name}():\n{textwrap.indent(case.source, '    ')}\n" for name, case in cases]
    return p.header + "".join("\n\n" + f for f in funcs)


# ---- mutations ------------------------------------------------------------------------------
def mutations(p: Problem) -> list[Mutation]:
    """Every candidate bug in the entry function, in the order they are tried."""
    tree = ast.parse(p.source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == p.entry)
    src = _Source(p.source)
    found: dict[str, list[Mutation]] = {k: [] for k in KINDS}
    stmts = func.body[1:] if _has_docstring(func) else func.body

    def add(kind: str, new: str | None, line: int) -> None:
        if new is not None and new != p.source:
            found[kind].append(Mutation(kind=kind, source=new, line=line))

    for node in [n for s in stmts for n in ast.walk(s)]:
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                left = node.left if i == 0 else node.comparators[i - 1]
                swap = _COMPARE_SWAP.get(type(op))
                if swap is not None:
                    kind = "inverted-logic" if isinstance(op, ast.Eq | ast.NotEq | ast.In) else "wrong-comparison"
                    add(kind, src.replace_between(left, node.comparators[i], *swap), node.lineno)
        elif isinstance(node, ast.BinOp):
            swap = _BINOP_SWAP.get(type(node.op))
            if swap is not None:
                add("wrong-operator", src.replace_between(node.left, node.right, *swap), node.lineno)
        elif isinstance(node, ast.BoolOp):
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            add("inverted-logic", src.replace_between(node.values[0], node.values[1], old, new), node.lineno)
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for delta in (1, -1):
                if node.value + delta >= 0:
                    add("off-by-one", src.replace_node(node, str(node.value + delta)), node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
            stop = node.args[1] if len(node.args) > 1 else node.args[0]
            if isinstance(stop, ast.Name | ast.Call | ast.Attribute | ast.Subscript):
                add("off-by-one", src.replace_node(stop, f"{src.segment(stop)} - 1"), node.lineno)
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and type(node.value.value) is bool:
            add("inverted-logic", src.replace_node(node.value, str(not node.value.value)), node.lineno)
        elif isinstance(node, ast.keyword) and isinstance(node.value, ast.Constant) and type(node.value.value) is bool:
            add("wrong-default", src.replace_node(node.value, str(not node.value.value)), node.value.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
            if node.func.attr == "split" and not node.keywords:
                add("wrong-default", src.replace_call_args(node, '" "'), node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            other = "max" if node.func.id == "min" else "min"
            add("wrong-default", src.replace_node(node.func, other), node.lineno)
    # A guard clause dropped: `if <edge case>: return ...` at the top of a block.
    for node in [n for s in stmts for n in ast.walk(s)] + [func]:
        for body in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if not isinstance(body, list) or len(body) < 2:
                continue
            for s in body[:-1]:
                if isinstance(s, ast.If) and not s.orelse and len(s.body) == 1:
                    if isinstance(s.body[0], ast.Return | ast.Continue | ast.Break):
                        add("missing-edge-case", src.drop_lines(s), s.lineno)
    start = p.number % len(KINDS)
    order = KINDS[start:] + KINDS[:start]
    return [m for kind in order for m in sorted(found[kind], key=lambda m: m.line)]


_COMPARE_SWAP = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.In: ("in", "not in"),
}
_BINOP_SWAP = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.FloorDiv: ("//", "%"), ast.Mod: ("%", "//")}


def _has_docstring(func: ast.FunctionDef) -> bool:
    first = func.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


class _Source:
    """Edits of a module's text at AST positions (which count UTF-8 bytes within a line)."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def _index(self, line: int, col: int) -> int:
        return self.starts[line - 1] + len(self.lines[line - 1].encode()[:col].decode())

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self._index(node.lineno, node.col_offset), self._index(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.text[a:b]

    def replace_node(self, node: ast.AST, new: str) -> str:
        a, b = self.span(node)
        return self.text[:a] + new + self.text[b:]

    def replace_between(self, left: ast.AST, right: ast.AST, old: str, new: str) -> str | None:
        """Replace the operator token `old` in the text between two operands (exactly one occurrence)."""
        a, b = self.span(left)[1], self.span(right)[0]
        gap = self.text[a:b]
        tokens = gap.replace("(", " ").replace(")", " ").split()
        if tokens != [old]:
            return None
        i = gap.index(old)
        return self.text[: a + i] + new + self.text[a + i + len(old) :]

    def replace_call_args(self, call: ast.Call, args: str) -> str | None:
        end = self.span(call)[1]
        if not self.text[:end].endswith("()"):
            return None
        return self.text[: end - 1] + args + self.text[end - 1 :]

    def drop_lines(self, stmt: ast.stmt) -> str | None:
        first, last = stmt.lineno, stmt.end_lineno
        if self.lines[first - 1][: stmt.col_offset].strip():
            return None  # shares its line with other code
        return "".join(self.lines[: first - 1] + self.lines[last:])


# ---- running tests against a candidate -----------------------------------------------------------
_RUNNER = """\
import json, signal, sys, traceback
sys.path.insert(0, sys.argv[1])
import tests_gen
probes = json.loads(sys.argv[2])
ns = vars(tests_gen)
def alarm(*_):
    raise TimeoutError("test timed out")
signal.signal(signal.SIGALRM, alarm)
out = {}
for name in json.loads(sys.argv[3]):
    signal.alarm(%(timeout)d)
    try:
        ns[name]()
        res = {"ok": True}
    except TimeoutError:
        res = {"ok": False, "timeout": True}
    except BaseException as e:
        res = {"ok": False, "error": type(e).__name__ + (": " + str(e) if str(e) else "")}
    if not res["ok"] and name in probes:
        call, expected = probes[name]
        try:
            res["actual"] = repr(eval(call, ns))
        except TimeoutError:
            res["actual_timeout"] = True
        except NameError:
            pass  # the call needs more than the module's names: no quote
        except BaseException as e:
            res["raised"] = type(e).__name__ + (": " + str(e) if str(e) else "")
        try:
            res["expected"] = repr(eval(expected, ns)) if expected is not None else None
        except BaseException:
            pass
    signal.alarm(0)
    out[name] = res
print(json.dumps(out))
""" % {"timeout": TEST_TIMEOUT_S}


def run_tests(p: Problem, module_source: str) -> dict[str, dict] | None:
    """Each test's result on `module_source` (None: the module does not even import or the run hung)."""
    cases = [(f"test_{i}", c) for i, c in enumerate(p.tests)]
    probes = {name: (c.probe.call, c.probe.expected) for name, c in cases if c.probe is not None}
    with tempfile.TemporaryDirectory(prefix="oc-he-") as tmp:
        Path(tmp, f"{p.module}.py").write_text(module_source)
        Path(tmp, "tests_gen.py").write_text(test_module(p, cases))
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _RUNNER, tmp, json.dumps(probes), json.dumps([n for n, _ in cases])],
                capture_output=True,
                text=True,
                cwd=tmp,
                timeout=TEST_TIMEOUT_S * len(cases) + 30,
                env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"},
            )
        except subprocess.TimeoutExpired:
            return None
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- the issue text ---------------------------------------------------------------------------
def issue_text(p: Problem, failing: list[tuple[TestCase, dict]]) -> str:
    """Written from the failing behaviour, as a user reports it: the call, what it did, what was expected."""
    where = f"`{p.entry}` (in `{p.module}.py`)"
    for case, res in failing:
        probe = case.probe
        if probe is None or ("actual" not in res and "raised" not in res):
            continue
        if probe.expected is None:
            want = "a false value" if probe.negated else "a true value"
        elif "expected" in res:
            want = f"`{_clip(res['expected'])}`"
        else:
            continue
        got = f"raises `{_clip(res['raised'])}`" if "raised" in res else f"returns `{_clip(res['actual'])}`"
        style = p.number % 3
        if style == 0:
            return (
                f"{p.entry} gives a wrong result\n\n"
                f"{where} gives the wrong answer for some inputs. Calling `{probe.call}` {got}, "
                f"but {want} is expected.\n"
            )
        if style == 1:
            return (
                f"Unexpected result from {p.entry}\n\n"
                f"Steps to reproduce:\n\n```python\n>>> from {p.module} import {p.entry}\n>>> {probe.call}\n```\n\n"
                f"This {got}. I expected {want}, as the function's docstring describes.\n"
            )
        return f"Bug in {p.entry}\n\n`{probe.call}` {got} instead of {want}. Looks like a bug in {where}.\n"
    case, res = failing[0]
    what = res.get("error") or "AssertionError"
    return (
        f"{p.entry} fails a check\n\n"
        f"{where} does not behave as its docstring says. This check fails with `{_clip(what)}`:\n\n"
        f"```python\nassert {case.check}\n```\n"
    )


def _clip(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."
