"""What a base agent policy can do before any RL: held-out episodes played in this process, in the real sandbox.

    .venv/bin/python -m bench.agents.probe MODEL_DIR [--tasks 36] [--samples 4] [--setting toolcall|terminal]

For the first held-out tasks of each setting, episodes are played with the model through Hugging Face `generate`
(no stack): greedy once, then `--samples` times at `--temperature` (how the benchmark's base scores are taken). The
environments are the real ones, their commands run in the bubblewrap sandbox. Prints, per setting, the success
rates and how often the first step is a tool call and exactly the right one: the numbers that tell whether RL
has something to start from (some successes) and somewhere to go (not all).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.agents import terminal_trajectories, trajectories
from envs.agent_turn import observation_messages, parse_action
from envs.terminal import counting_tasks

SETTINGS = ("toolcall", "terminal")


def _generate(model, tokenizer, messages: list[dict], tools: list[dict], sample: bool, max_new_tokens: int,
              temperature: float = 1.0) -> str:  # fmt: skip
    import torch

    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, return_tensors="pt")
    ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
    with torch.no_grad():
        sampling = {"do_sample": True, "temperature": temperature} if sample else {"do_sample": False}
        out = model.generate(ids, max_new_tokens=max_new_tokens, top_p=None, top_k=None, **sampling)
    return tokenizer.decode(out[0][ids.shape[1] :], skip_special_tokens=True)


def play(model, tokenizer, env, sample: bool, max_steps: int, max_new_tokens: int = 160, temperature: float = 1.0
         ) -> tuple[float, list[str]]:  # fmt: skip
    """One episode: (outcome, the policy's texts)."""
    messages, tools, texts = env.reset(), env.tools(), []
    try:
        for n in range(max_steps):
            text = _generate(model, tokenizer, messages, tools, sample, max_new_tokens, temperature)
            texts.append(text)
            action, message = parse_action(text, call_id_prefix=f"s{n}")
            obs = env.step(action)
            messages += [message, *observation_messages(obs)]
            if obs.done:
                break
        return env.outcome(), texts
    finally:
        env.close()


def _cases(setting: str, tasks: int, task_root: Path):
    """(the env factory, the right first step) per held-out task."""
    if setting == "toolcall":
        from envs.toolcall.math_env import MathEnv

        for p in trajectories.held_out()[:tasks]:
            yield (
                (lambda pool, p=p: MathEnv(p, pool, max_steps=trajectories.MAX_STEPS)),
                trajectories.call_text(trajectories.solution(p)),
            )
        return
    from envs.terminal.source import TerminalTasks

    source = TerminalTasks([counting_tasks.ensure_tasks(task_root)], max_steps=terminal_trajectories.MAX_STEPS)
    for t in counting_tasks.held_out()[:tasks]:
        first = terminal_trajectories.bash(f"{t.command} > {counting_tasks.ANSWER_FILE}")
        yield (lambda pool, t=t: source.make(t.task_id, pool)), first


def probe(model_dir: str, tasks: int, samples: int, settings=SETTINGS, work: Path | None = None,
          temperature: float = 1.0) -> dict:  # fmt: skip
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from envs.sandbox import SandboxPool

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    work = work or Path(tempfile.mkdtemp(prefix="agent-probe-"))
    work.chmod(0o711)  # the sandbox uids traverse it to reach their workspaces
    pool = SandboxPool(work / "sandboxes")
    report = {}
    for setting in settings:
        steps = trajectories.MAX_STEPS if setting == "toolcall" else terminal_trajectories.MAX_STEPS
        greedy = sampled = calls = exact = 0
        n = 0
        for make_env, first in _cases(setting, tasks, work / "tasks"):
            n += 1
            outcome, texts = play(model, tokenizer, make_env(pool), sample=False, max_steps=steps)
            greedy += outcome
            calls += texts[0].lstrip().startswith("<tool_call>")
            exact += texts[0].strip() == first
            for _ in range(samples):
                sampled += play(
                    model, tokenizer, make_env(pool), sample=True, max_steps=steps, temperature=temperature
                )[0]
        report[setting] = {
            "tasks": n,
            "greedy_success": round(greedy / max(1, n), 3),
            "sampled_success": round(sampled / max(1, n * samples), 3) if samples else None,
            "first_step_a_call": calls,
            "first_step_exact": exact,
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--tasks", type=int, default=36)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--setting", choices=SETTINGS, action="append")
    parser.add_argument("--temperature", type=float, default=1.0, help="of the sampled episodes")
    args = parser.parse_args()
    print(
        json.dumps(probe(args.model, args.tasks, args.samples, tuple(args.setting or SETTINGS), None, args.temperature))
    )


if __name__ == "__main__":
    main()
