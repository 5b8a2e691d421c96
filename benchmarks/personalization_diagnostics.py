"""Why a personalization run went where it went: per version, what the trainer saw and what the policy became.

Reads a method's data folder of a run kept with `--keep-data` (`<run>/<method>-data`): the trainer's step lines
(records/steps.jsonl: entropy, the PPO ratio's KL, per stream the advantages and, for OPD, teacher - rollout
gaps), the judge's records (accepted hints per version) and the checkpoints. Each kept checkpoint then answers the
held-out problems again here (Hugging Face, CPU) and is measured against the base: score, token entropy, KL to the
base (Monte Carlo over its own answers, per token), and the teacher's signal on them: the mean log-prob the hint
context adds to the answer's tokens, for answers that satisfy the user (score 1) and for those that do not. OPD
learns from that gap; when it no longer separates good answers from bad ones, OPD has nothing left to teach.

    .venv/bin/python benchmarks/personalization_diagnostics.py RUN/opd-data [--versions 0,4,8,12,16] [--samples 2]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from activities.judgement_log import read_judgements  # noqa: E402
from activities.step_log import read_steps  # noqa: E402
from evals.personalization import styles  # noqa: E402
from evals.personalization.problems import HELD_OUT_SEED, eval_problems  # noqa: E402
from evals.personalization.scorer import RuleScorer  # noqa: E402
from openclaw_rl.settings import Settings  # noqa: E402
from rlmath.signals import TEACHER_HINT_TEMPLATE  # noqa: E402

STUDENT_HINT = "Write it as one plain paragraph in a casual way, like a student wrote it: no bold, no numbered steps."
"""One hint with every student preference (the users' corrections name parts of it)."""


def load(path: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    return model.eval()


def answers(model, tok, prompts: list[list[int]], samples: int, max_new: int, seed: int) -> list[list[int]]:
    """`samples` sampled answers (token ids, stop token excluded) per prompt, at temperature 1."""
    stop = [tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    torch.manual_seed(seed)
    out = []
    for p in prompts:
        ids = torch.tensor([p] * samples)
        with torch.no_grad():
            gen = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new,
                eos_token_id=stop,
                pad_token_id=stop[-1],
            )
        for row in gen[:, len(p) :].tolist():
            cut = next((i for i, t in enumerate(row) if t in stop), len(row))
            out.append(row[:cut])
    return out


def token_stats(model, prompt: list[int], answer: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs [T] of the answer's tokens after `prompt`, and the entropy [T] at each of those positions."""
    ids = torch.tensor([prompt + answer])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    lp = torch.log_softmax(logits, -1)
    return lp.gather(-1, torch.tensor(answer)[:, None])[:, 0], -(lp.exp() * lp).sum(-1)


def measure(model, base, renderer, tasks, samples: int, max_new: int, seed: int) -> dict:
    scorer = RuleScorer()
    tok = renderer.tokenizer
    requests = [styles.ask("student", t, random.Random(f"eval-ask:{i}")) for i, t in enumerate(tasks)]
    prompts = [renderer.render([{"role": "user", "content": r}]) for r in requests]
    hinted = [
        renderer.render([{"role": "user", "content": r + TEACHER_HINT_TEMPLATE.format(hint=STUDENT_HINT)}])
        for r in requests
    ]
    outs = answers(model, tok, prompts, samples, max_new, seed)
    scores, ent, kl, gap_good, gap_bad, lengths = [], [], [], [], [], []
    for j, a in enumerate(outs):
        i = j // samples
        if not a:
            continue
        s = scorer.score("student", tasks[i], renderer.decode(a)).value
        lp, h = token_stats(model, prompts[i], a)
        lp_base, _ = token_stats(base, prompts[i], a)
        lp_hint, _ = token_stats(model, hinted[i], a)
        scores.append(s)
        ent += h.tolist()
        kl += (lp - lp_base).tolist()
        (gap_good if s == 1.0 else gap_bad).append(float((lp_hint - lp).mean()))
        lengths.append(len(a))
    with_hint = answers(model, tok, hinted, samples, max_new, seed + 1)
    hint_scores = [
        scorer.score("student", tasks[j // samples], renderer.decode(a)).value for j, a in enumerate(with_hint)
    ]

    def mean(xs):
        return round(statistics.fmean(xs), 4) if xs else None

    return {
        "score": mean(scores),
        "score_with_hint": mean(hint_scores),
        "entropy": mean(ent),
        "kl_to_base": mean(kl),
        "answer_tokens": mean(lengths),
        "hint_gap_good": mean(gap_good),
        "hint_gap_bad": mean(gap_bad),
        "good_answers": len(gap_good),
        "answers": len(scores),
    }


def hints_by_version(records: Path) -> dict[int, Counter]:
    out: dict[int, Counter] = {}
    for f in sorted(records.glob("policy-*/personal.jsonl")):
        v = int(f.parent.name.split("-")[1])
        c = Counter()
        for judged in read_judgements(f, Settings().keyring()):  # sealed lines too (activities.judgement_log)
            hint = judged.model_dump(mode="json")["judge"].get("hint")
            if hint:
                c[hint] += 1
        out[v] = c
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data_dir", type=Path, help="<run>/<method>-data of a run kept with --keep-data")
    p.add_argument("--model", type=Path, help="the base policy (default: the one the run's results.json names)")
    p.add_argument("--versions", default="", help="checkpoints to measure (default: every other one kept)")
    p.add_argument("--problems", type=int, default=36)
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--max-new", type=int, default=160)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    torch.set_num_threads(1)
    from policy_client.chat import renderer_for

    ckpts = args.data_dir / "checkpoints"
    kept = sorted(int(d.name.split("-")[1]) for d in ckpts.glob("policy-*") if d.name.split("-")[1].isdigit())
    versions = [int(v) for v in args.versions.split(",") if v] or [0, *kept[1::2]]
    base_path = args.model or Path(
        json.loads((args.data_dir.parent / "results.json").read_text())["base_model"]["path"]
    )
    renderer = renderer_for(str(base_path))
    base = load(base_path)
    tasks = eval_problems(HELD_OUT_SEED, args.problems)

    print("trainer, per step (records/steps.jsonl):")
    print(f"{'v':>3} {'samples':>7} {'entropy':>7} {'ppo_kl':>7} {'gap':>7} {'gap>0':>6} {'|A|':>6} {'stale':>5}")
    steps = read_steps(args.data_dir / "records")
    for r in steps:
        s = r.sources.get("personal")
        if s is None:
            continue
        gap = f"{s.teacher_gap_mean:+.3f}" if s.teacher_gap_mean is not None else "-"
        pos = f"{s.teacher_gap_positive:.2f}" if s.teacher_gap_positive is not None else "-"
        print(
            f"{r.version:>3} {s.samples:>7} {r.metrics.entropy:>7.3f} {r.metrics.approx_kl:>7.4f} {gap:>7} {pos:>6} "
            f"{s.advantage_abs_mean:>6.3f} {s.staleness_mean:>5.2f}"
        )
    hints = hints_by_version(args.data_dir / "records")
    print("\naccepted hints, per version the samples were generated by (top 3):")
    for v, c in sorted(hints.items()):
        print(f"  v{v}: {sum(c.values())} hints; " + "; ".join(f"{k}x {h!r}" for h, k in c.most_common(3)))

    print(f"\nheld-out, {args.problems} problems x {args.samples} answers per version, sampled here (T=1):")
    cols = ("score", "score_with_hint", "entropy", "kl_to_base", "answer_tokens", "hint_gap_good", "hint_gap_bad")
    print(f"{'v':>3} " + " ".join(f"{c:>15}" for c in cols))
    figures = {"steps": [r.model_dump() for r in steps], "versions": {}}
    for v in versions:
        model = base if v == 0 else load(ckpts / f"policy-{v}")
        m = measure(model, base, renderer, tasks, args.samples, args.max_new, args.seed)
        figures["versions"][v] = m
        print(f"{v:>3} " + " ".join(f"{'-' if m[c] is None else m[c]:>15}" for c in cols), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
