import pytest
import torch

from rlmath.advantages import combined_advantages, opd_advantages
from rlmath.signals import (
    Dispatch,
    HintVote,
    Method,
    dispatch,
    majority_vote,
    parse_boxed,
    parse_hint_vote,
    representative,
    select_hint,
    teacher_messages,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("reasoning... \\boxed{1}", 1),
        ("\\boxed{-1}", -1),
        ("\\boxed{ 0 }", 0),
        ("first \\boxed{1} then on reflection \\boxed{-1}", -1),  # the last one counts
        ("\\boxed{1} but finally \\boxed{5}", 1),  # a disallowed last value falls back to the last allowed one
        ("\\boxed{good}", None),
        ("\\boxed{1.0}", 1),
        ("\\boxed{0.5}", None),
        ("no box at all", None),
        ("", None),
    ],
)
def test_parse_boxed(text, expected):
    assert parse_boxed(text) == expected


def test_majority_vote():
    assert majority_vote([1, 1, -1]) == 1
    assert majority_vote([-1, None, -1]) == -1
    assert majority_vote([1, -1]) == 0  # tie at the top
    assert majority_vote([1, -1, 0]) == 0  # three-way tie
    assert majority_vote([None, None, None]) == 0  # all unparsable
    assert majority_vote([]) == 0
    assert majority_vote([0, 0, 1]) == 0
    assert majority_vote([1, None, None]) == 1


def test_representative_is_the_first_agreeing_output():
    assert representative([-1, 1, 1], ["a", "b", "c"], 1) == "b"
    assert representative([None], ["x"], 0) is None


def test_hint_parsing_and_selection():
    v = parse_hint_vote("yes \\boxed{1} [HINT_START] Check the file first. [HINT_END]")
    assert v == HintVote(score=1, hint="Check the file first.")
    assert parse_hint_vote("\\boxed{-1}") == HintVote(score=-1, hint=None)
    assert parse_hint_vote("\\boxed{0} [HINT_START]x[HINT_END]").score is None  # 0 is not a hint score
    ten, eleven = "a" * 10, "b" * 11
    assert select_hint([HintVote(1, ten)]) is None  # must be longer than 10
    assert select_hint([HintVote(1, f"  {eleven}  ")]) == eleven
    assert select_hint([HintVote(1, eleven), HintVote(1, "c" * 20), HintVote(-1, "d" * 40)]) == "c" * 20
    assert select_hint([HintVote(None, "e" * 30), HintVote(1, None)]) is None
    assert select_hint([]) is None


def test_teacher_messages():
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "tool_call_id": "1", "content": "t"},
    ]
    out = teacher_messages(msgs, "do X")
    assert out[1]["content"] == "q\n\n[user's hint / instruction]\ndo X"
    assert msgs[1]["content"] == "q"  # the input is not modified
    assert out[3] == msgs[3]
    no_user = teacher_messages([{"role": "system", "content": "s"}], "do X")
    assert no_user[0]["content"] == "s\n\n[user's hint / instruction]\ndo X"
    assert teacher_messages([], "do X") == [{"role": "user", "content": "[user's hint / instruction]\ndo X"}]
    parts = teacher_messages([{"role": "user", "content": [{"type": "text", "text": "q"}]}], "h")
    assert parts[0]["content"] == "q\n\n[user's hint / instruction]\nh"


def test_advantages_by_hand():
    teacher, old = [-0.5, -2.0, -1.0], [-1.0, -1.0, -1.0]
    assert opd_advantages(teacher, old) == [0.5, -1.0, 0.0]
    assert combined_advantages(1.0, teacher, old) == [1.5, 0.0, 1.0]
    assert combined_advantages(-1.0, teacher, old, w_binary=0.5, w_opd=2.0) == [0.5, -2.5, -0.5]
    assert combined_advantages(-1.0, None, old) == [-1.0, -1.0, -1.0]
    with pytest.raises(ValueError):
        opd_advantages([0.0, 0.0], [0.0, 0.0, 0.0])


def test_advantages_are_the_bits_torch_float32_gave():
    """Plain Python rounded to float32 after each operation, as the torch float32 tensors it replaced."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        n = int(torch.randint(1, 64, (1,), generator=gen))
        teacher = (torch.randn(n, generator=gen, dtype=torch.float64) * 3).tolist()
        old = (torch.randn(n, generator=gen, dtype=torch.float64) * 3).tolist()
        reward, w_binary, w_opd = float(torch.randn(1, generator=gen)), 0.3, 0.7
        t, o = torch.tensor(teacher), torch.tensor(old)  # float32, as before
        expected = (torch.full_like(o, w_binary * reward) + w_opd * (t - o)).tolist()
        assert combined_advantages(reward, teacher, old, w_binary, w_opd) == expected
        assert combined_advantages(reward, None, old, w_binary) == torch.full_like(o, w_binary * reward).tolist()


@pytest.mark.parametrize(
    "hint, score, expected",
    [
        ("h", 1, Dispatch(1.0, True, 1, "hint and score")),
        ("h", -1, Dispatch(-1.0, True, 1, "hint and score")),
        ("h", 0, Dispatch(0.0, True, 1, "hint only")),
        ("h", None, Dispatch(0.0, True, 1, "hint only")),
        (None, 1, Dispatch(1.0, False, 1, "score only")),
        (None, -1, Dispatch(-1.0, False, 1, "score only")),
        (None, 0, None),
        (None, None, None),
    ],
)
def test_combined_dispatch_table(hint, score, expected):
    assert (
        dispatch(Method.COMBINED, has_next_state=True, eval_score=score, hint=hint, session_has_effective_sample=True)
        == expected
    )


def test_binary_and_opd_dispatch_and_the_at_least_one_rule():
    b = Method.BINARY
    assert dispatch(b, has_next_state=True, eval_score=1, hint=None, session_has_effective_sample=True).reward == 1.0
    assert dispatch(b, has_next_state=True, eval_score=0, hint=None, session_has_effective_sample=True) is None
    kept = dispatch(b, has_next_state=True, eval_score=0, hint=None, session_has_effective_sample=False)
    assert kept == Dispatch(0.0, False, 1, "at least one sample per session")
    last = dispatch(b, has_next_state=False, eval_score=None, hint=None, session_has_effective_sample=True)
    assert last.loss_mask == 0 and last.reward == 0.0
    o = Method.OPD
    assert dispatch(o, has_next_state=True, eval_score=None, hint="h", session_has_effective_sample=True).use_teacher
    assert dispatch(o, has_next_state=True, eval_score=1, hint=None, session_has_effective_sample=False) is None
    assert dispatch(o, has_next_state=False, eval_score=None, hint=None, session_has_effective_sample=False) is None
    assert (
        dispatch(Method.COMBINED, has_next_state=False, eval_score=None, hint=None, session_has_effective_sample=False)
        is None
    )
