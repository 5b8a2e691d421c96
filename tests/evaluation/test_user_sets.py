"""A user's JSONL evaluation set: its format, clear errors for bad lines, and how answers are matched."""

from __future__ import annotations

import pytest

from cli.eval import list_table
from contracts.evaluation import SetScores
from evals.base import EvalSetError
from evals.registry import load_set
from evals.user_sets import EvalItem, load_user_set
from openclaw_rl.settings import Settings

GOOD = '{"messages": [{"role": "user", "content": "What is 7 * 6?"}], "expected": "42"}'


def _write(tmp_path, *lines: str):
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_good_file_loads_with_line_ids_and_skips_blank_and_comment_lines(tmp_path):
    items = load_user_set(_write(tmp_path, "# my set", GOOD, "", GOOD.replace("}]", '}], "id": "mul"', 1)))
    assert [i.id for i in items] == ["line-2", "mul"]
    assert items[0].match == "contains" and items[0].ignore_case


@pytest.mark.parametrize(
    "bad, says",
    [
        ('{"messages": [{"role": "user", "content": "hi"}]', "line 2: not a JSON object"),
        ('{"messages": [{"role": "user", "content": "hi"}]}', "line 2: expected: Field required"),
        ('{"messages": [], "expected": "x"}', "line 2: messages: List should have at least 1 item"),
        ('{"messages": [{"role": "assistant", "content": "hi"}], "expected": "x"}', "last message must be the user's"),
        ('{"messages": [{"role": "user", "content": "hi"}], "expected": "x", "match": "fuzzy"}', "line 2: match:"),
        ('{"messages": [{"role": "user", "content": "hi"}], "expected": "(", "match": "regex"}', "regular expression"),
        ('{"messages": [{"role": "user", "content": "hi"}], "expected": "x", "answer": "y"}', "line 2: answer: Extra"),
    ],
)
def test_a_bad_line_is_refused_with_its_number_and_reason(tmp_path, bad, says):
    path = _write(tmp_path, GOOD, bad, GOOD)
    with pytest.raises(EvalSetError) as err:
        load_user_set(path)
    assert str(path) in str(err.value) and says in str(err.value)


def test_an_empty_or_missing_file_is_refused(tmp_path):
    with pytest.raises(EvalSetError, match="no items"):
        load_user_set(_write(tmp_path, "# nothing yet"))
    with pytest.raises(EvalSetError, match="cannot be read"):
        load_user_set(tmp_path / "absent.jsonl")


def _item(expected: str, match: str, ignore_case: bool = True) -> EvalItem:
    msgs = [{"role": "user", "content": "q"}]
    return EvalItem(messages=msgs, expected=expected, match=match, ignore_case=ignore_case)


def test_matching_exact_contains_regex_and_case():
    assert _item("42", "exact").matches("  42\n") and not _item("42", "exact").matches("it is 42")
    assert _item("Paris", "contains").matches("<think>maybe Lyon</think>It is paris.")
    assert not _item("Lyon", "contains").matches("<think>maybe Lyon</think>It is Paris.")  # thinking is not the answer
    assert not _item("Paris", "contains", ignore_case=False).matches("it is paris")
    assert _item(r"\b4[0-9]\b", "regex").matches("about 42 apples") and not _item(r"^\d+$", "regex").matches("a 1")


def test_sets_by_name(tmp_path):
    settings = Settings(eval={"user_sets": {"mine": str(_write(tmp_path, GOOD, GOOD))}, "personalization_problems": 3})
    mine = load_set("user-mine", settings)
    assert (mine.metric, len(mine.cases)) == ("accuracy", 2)
    assert mine.cases[0].score("The answer is 42.") == 1.0 and mine.cases[0].score("41") == 0.0
    student = load_set("personalization-student", settings)
    assert student.metric == "score" and len(student.cases) == 3
    plain = "Tom bought 3 notebooks for 4 dollars each, so that came to 12 dollars and he paid that much in all."
    assert student.cases[0].score(plain) == 1.0  # a plain paragraph with a number: what the student wants
    assert student.cases[0].score("**Answer:** 12\n1. step") < 1.0
    for unknown in ("user-other", "personalization-parent", "gsm8k"):
        with pytest.raises(EvalSetError):
            load_set(unknown, settings)


def test_a_bad_set_name_in_settings_is_refused():
    with pytest.raises(ValueError, match="eval set 'My Set'"):
        Settings(eval={"user_sets": {"My Set": "x.jsonl"}})


def test_list_table_has_a_row_per_version_and_a_column_per_set():
    scores = [
        SetScores(set="user-mine", version=10, metrics={"accuracy": 0.5}, count=2),
        SetScores(set="personalization-student", version=10, metrics={"score": 0.25}, count=3),
        SetScores(set="user-mine", version=20, metrics={"accuracy": 1.0}, count=2),
    ]
    lines = list_table(scores).splitlines()
    assert lines[0].split() == ["version", "personalization-student", "user-mine"]
    assert lines[1].split() == ["10", "0.250", "0.500"] and lines[2].split() == ["20", "-", "1.000"]
