"""Randomly initialised models of the real Qwen3 sizes, for GPU figures without downloading weights.

The tiny default model measures the code's overhead; these measure what a GPU does with a model of the size users
train (the paper: Qwen3 4B / 8B / 32B). Same tokenizer and chat template as the tiny model (the real Qwen BPE),
the architecture numbers of the published Qwen3 configs, weights from a fixed seed, saved in bf16.

    .venv/bin/python benchmarks/qwen3_shapes.py --shape qwen3-0.6b --out /tmp/qwen3-0.6b
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import tiny_qwen3  # noqa: E402

# (hidden, intermediate, layers, attention heads, kv heads, tied embeddings); head_dim 128 in every size
SHAPES: dict[str, tuple[int, int, int, int, int, bool]] = {
    "qwen3-0.6b": (1024, 3072, 28, 16, 8, True),
    "qwen3-1.7b": (2048, 6144, 28, 16, 8, True),
    "qwen3-4b": (2560, 9728, 36, 32, 8, True),
    "qwen3-8b": (4096, 12288, 36, 32, 8, False),
}


def shape_config(shape: str) -> dict:
    hidden, inter, layers, heads, kv, tied = SHAPES[shape]
    return tiny_qwen3._model_config() | {
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": 128,
        "tie_word_embeddings": tied,
        "torch_dtype": "bfloat16",
    }


def parameter_count(config: dict) -> int:
    """Parameters of a Qwen3 / Qwen2 / Llama-style dense config (what the FLOP counts in the benchmarks use)."""
    h, i, n = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    q, d = config["num_attention_heads"], head_dim(config)
    kv = config.get("num_key_value_heads") or q
    attn = h * q * d + 2 * h * kv * d + q * d * h  # q, k, v, o projections
    attn += 2 * d if config.get("model_type") == "qwen3" else 0  # its q / k norms
    attn += (q + 2 * kv) * d if config.get("attention_bias") or config.get("model_type") == "qwen2" else 0
    per_layer = attn + 3 * h * i + 2 * h
    embed = config["vocab_size"] * h * (1 if config["tie_word_embeddings"] else 2)
    return n * per_layer + embed + h


def head_dim(config: dict) -> int:
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def build(shape: str, out: Path) -> Path:
    """Write a servable and trainable checkpoint of `shape` into `out` (initialised on the GPU when there is one)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    template = (Path(tiny_qwen3.__file__).parent / "chat_template.jinja").read_text()
    (out / "tokenizer.json").write_text(tiny_qwen3.build_tokenizer_json())
    (out / "tokenizer_config.json").write_text(json.dumps(tiny_qwen3._tokenizer_config(template), indent=2))
    (out / "chat_template.jinja").write_text(template)
    torch.manual_seed(tiny_qwen3.SEED)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen3ForCausalLM(Qwen3Config(**shape_config(shape))).to(torch.bfloat16)
    model.generation_config.eos_token_id = [151645, 151643]
    model.generation_config.pad_token_id = 151643
    model.save_pretrained(out, safe_serialization=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    build(args.shape, args.out)
    print(f"{args.shape}: {parameter_count(shape_config(args.shape)) / 1e9:.2f}B parameters in {args.out}")


if __name__ == "__main__":
    main()


def bench_model(model: Path | None, shape: str | None, work: Path) -> Path:
    """What a benchmark runs on: --model as given, else a random model of --shape, else the tiny default model."""
    if model is not None:
        return model
    if shape:
        return build(shape, work / shape)
    return tiny_qwen3.ensure_tiny_model(work / "tiny-qwen3")


def start_engine(model: Path, work: Path, log: Path | None, timeout_s: float) -> tuple[subprocess.Popen, str]:
    """A real engine process on `model` (data dir `work`, its stderr into `log`), once it answers /health."""
    from tests.helpers import CLI, REPO, free_port, wait_http

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")} | {
        "OPENCLAW_RL_DATA_DIR": str(work)
    }
    proc = subprocess.Popen(
        CLI + ["engine", "--model", str(model), "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w") if log else subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/health", timeout=timeout_s, proc=proc)
    return proc, url
