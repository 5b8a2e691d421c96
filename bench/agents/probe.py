"""What a base agent policy can do before any RL, step by step, greedy, in this process (no stack).

    .venv/bin/python -m bench.agents.probe MODEL_DIR [--tasks 35]

For each of the first held-out problems: is the first step a tool call, is it exactly the right program (the
question's numbers copied), and, given the right program's printed value as the tool's reply, does the answer
copy it into `\\boxed{}`? These are the two copies only good tool use needs; an episode succeeds only when both
hold, so their rates bound the base's success from above.
"""

from __future__ import annotations

import argparse
import json

from activities.agent_step import parse_action
from bench.agents import trajectories
from envs.toolcall.math_env import MathEnv


def _greedy(model, tokenizer, messages: list[dict], tools: list[dict], max_new_tokens: int) -> str:
    import torch

    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, return_tensors="pt")
    ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0][ids.shape[1] :], skip_special_tokens=True)


def probe(model_dir: str, tasks: int) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    calls = exact_code = copied = 0
    for problem in trajectories.held_out()[:tasks]:
        env = MathEnv(problem, None, max_steps=trajectories.MAX_STEPS)
        opening, tools = env.reset(), env.tools()
        first = _greedy(model, tokenizer, opening, tools, 120)
        program = trajectories.call_text(trajectories.solution(problem))
        calls += first.lstrip().startswith("<tool_call>")
        exact_code += first.strip() == program
        _, message = parse_action(program, call_id_prefix="s0")
        reply = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "name": "python"}
        answer = _greedy(model, tokenizer, [*opening, message, {**reply, "content": problem.answer}], tools, 40)
        copied += f"\\boxed{{{problem.answer}}}" in answer
    return {"tasks": tasks, "tool_call_first": calls, "exact_program": exact_code, "answer_copied": copied}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--tasks", type=int, default=35)
    args = parser.parse_args()
    print(json.dumps(probe(args.model, args.tasks)))


if __name__ == "__main__":
    main()
