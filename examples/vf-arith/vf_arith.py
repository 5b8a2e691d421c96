"""A verifiers environment written against verifiers' public (classic) API, as `vf-init` lays one out.

`vf.load_environment("vf_arith", kind=...)` imports this module and calls `load_environment`:

- `kind="single"`: a `vf.SingleTurnEnv`; the model answers in `<answer>...</answer>` (a `vf.XMLParser`), and the
  rubric gives 1 for the right number, 0 otherwise (plus a 0-weight format metric).
- `kind="tools"`: a `vf.ToolEnv` with a python tool, `multiply`; the same rubric scores the final answer.
- `kind="guess"`: a `vf.MultiTurnEnv` whose `env_response` says "higher" or "lower" until the number is guessed
  (at most `max_turns` guesses); reward 1 for guessing it.

The dataset is built in memory (`datasets.Dataset.from_list`): nothing is downloaded.
"""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset

SYSTEM = "Answer with the number only, inside <answer>...</answer>."
PROBLEMS = [("What is 6 times 7?", "42"), ("What is 12 times 12?", "144"), ("What is 9 times 11?", "99")]


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def _rubric(parser: vf.Parser) -> vf.Rubric:
    def correct_answer(completion, answer, parser) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    rubric = vf.Rubric(funcs=[correct_answer], weights=[1.0], parser=parser)
    rubric.add_metric(parser.get_format_reward_func())
    return rubric


class GuessEnv(vf.MultiTurnEnv):
    """Guess the number: the environment answers "higher" or "lower"; the episode ends when it is guessed."""

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs) -> vf.Messages:
        guess = (self.parser.parse_answer(messages[-1:]) or "").strip()  # this turn's answer only
        target = int(state["answer"])
        if not guess.lstrip("-").isdigit():
            return [vf.UserMessage(content="Give a whole number inside <answer>...</answer>.")]
        if int(guess) == target:
            state["final_env_response"] = [vf.UserMessage(content="Correct!")]
            return state["final_env_response"]
        return [vf.UserMessage(content="higher" if int(guess) < target else "lower")]


def load_environment(kind: str = "single", max_turns: int = 4, **kwargs) -> vf.Environment:
    parser = vf.XMLParser(["answer"], answer_field="answer")
    if kind == "guess":
        rows = [{"question": "Guess my number between 1 and 10.", "answer": "7"}]
        return GuessEnv(
            eval_dataset=Dataset.from_list(rows),
            system_prompt=SYSTEM,
            parser=parser,
            rubric=_rubric(parser),
            max_turns=max_turns,
            **kwargs,
        )
    rows = [{"question": q, "answer": a, "info": {"source": "vf_arith"}} for q, a in PROBLEMS]
    common = dict(eval_dataset=Dataset.from_list(rows), system_prompt=SYSTEM, parser=parser, rubric=_rubric(parser))
    if kind == "single":
        return vf.SingleTurnEnv(**common, **kwargs)
    if kind == "tools":
        return vf.ToolEnv(tools=[multiply], max_turns=max_turns, **common, **kwargs)
    raise ValueError(f"unknown kind {kind!r}: single, tools or guess")
