"""Local next-token scoring through the runner: prompts/s by batch size, against one prompt per forward pass.

Why: HealthContradict scores 3,761 prompts of up to tens of thousands of tokens per model; the HF adapter
gathers the runner's concurrent calls into batches. This script builds a small random Llama offline (the
test suite's tiny tokenizer, a wider model so the forward pass dominates), scores the same HealthContradict
prompts through the runner at batch size 1 (the baseline: what the authors' script does) and at larger
batch sizes, and prints prompts/s and the ratio to the baseline measured in the same run. It also checks
that every batch size gives the same probabilities as the baseline (left padding must not change them).

    python bench/hf_scoring_speed.py [--prompts 96] [--words 60] [--hidden 256] [--layers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_core.healthcontradict.hf_logits import HFLogitModel  # noqa: E402
from bench_core.healthcontradict.items import HCInstance  # noqa: E402
from bench_core.healthcontradict.prompts import get_template_set  # noqa: E402
from bench_core.healthcontradict.run import HCSettings, TokenizerCounter, build_jobs  # noqa: E402
from bench_core.kernel.runner import Runner  # noqa: E402
from bench_core.kernel.store import ResultStore  # noqa: E402


def build_model(target: Path, hidden: int, layers: int) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.bench_core.healthcontradict.tiny_lm import build_tiny_lm

    build_tiny_lm(target)  # tokenizer (and a tiny model, replaced below)
    tokenizer_vocab = LlamaForCausalLM.from_pretrained(target).config.vocab_size
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tokenizer_vocab,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=4096,
    )
    LlamaForCausalLM(config).save_pretrained(target)
    return target


def instances(n: int, words: int) -> list[HCInstance]:
    return [
        HCInstance(
            instance_id=str(k),
            topic_id=k,
            query=f"Can coffee help you lose weight {k}?",
            query_stance="yes" if k % 2 else "no",
            doc_a=" ".join(["green coffee is useful for weight loss"] * (words // 7 + k % 5)),
            doc_b=" ".join(["Of course not! Studies show no benefit"] * (words // 7 + k % 3)),
        )
        for k in range(n)
    ]


def run(model_dir: Path, items: list[HCInstance], batch_size: int, out: Path) -> tuple[float, dict[str, float]]:
    model = HFLogitModel(model_dir, batch_size=batch_size)
    template_set = get_template_set()
    settings = HCSettings(
        template_set=template_set.id, scorer="hf", temperature=None, logprobs=False, label_mode="variants"
    )
    jobs = build_jobs(items, ["CIC"], model, template_set, settings, counter=TokenizerCounter(model))
    store = ResultStore(out)
    runner = Runner(store, concurrency=2 * batch_size, timeout=3600, progress=False)
    started = time.perf_counter()
    asyncio.run(runner.run(jobs))
    elapsed = time.perf_counter() - started
    probabilities = {r["key"]["item"]: r["parsed"]["p_yes"] for r in store.iter_records()}
    store.close()
    return len(items) / elapsed, probabilities


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=96)
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    items = instances(args.prompts, args.words)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp) / "model", args.hidden, args.layers)
        baseline, reference = run(model_dir, items, 1, Path(tmp) / "b1")
        print(f"batch size  1: {baseline:7.1f} prompts/s (baseline: one prompt per forward pass)")
        for size in (4, 8, 16):
            rate, probabilities = run(model_dir, items, size, Path(tmp) / f"b{size}")
            drift = max(abs(probabilities[k] - reference[k]) for k in reference)
            print(
                f"batch size {size:2d}: {rate:7.1f} prompts/s  x{rate / baseline:4.2f}  max |Δp| vs size 1: {drift:.1e}"
            )


if __name__ == "__main__":
    main()
