"""The pretraining recipe run in this process (a 0.1M-parameter model, about 2 s a run): what a run logs about its
learning rate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("datasets")
pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))

import pretrain  # noqa: E402
from fa3nn_train.config import load_config  # noqa: E402
from fa3nn_train.optim import lr_at  # noqa: E402

SMALL = [
    "model.hidden_size=64", "model.intermediate_size=128", "model.num_layers=2", "data.seq_len=64",
    "data.vocab_size=512", "data.max_corpus_mb=0.5", "run.global_batch_size=8", "run.micro_batch_size=4",
    "run.log_every=1", "optim.warmup_steps=2", "data.prefetch_steps=0",
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fa3nn-cache")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


def _train(run_dir, cache_dir, *args):
    return pretrain.main(["--run-dir", str(run_dir), "--no-wandb", f"data.cache_dir={cache_dir}", *SMALL, *args])


def _jsonl_steps(run_dir) -> list[int]:
    return [json.loads(line)["step"] for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def test_logged_lr_is_the_one_the_step_trained_with(tmp_path, cache_dir):
    """Step 1 of a 2-step warmup trains at lr / 2; the line for step 1 said lr (the schedule's value for step 2,
    read after scheduler.step()), and every later line was one step ahead too."""
    history = _train(tmp_path, cache_dir, "run.max_steps=4")
    optim = load_config("tiny", SMALL).optim
    expected = [lr_at(step - 1, optim, 4) for step in (1, 2, 3, 4)]  # LambdaLR: lr x (lr_at / lr), rounded
    assert [m["lr"] for m in history] == pytest.approx(expected, rel=1e-12, abs=0)
    assert expected[:3] == [1.5e-3, 3e-3, 3e-3] and expected[3] < 3e-3  # warmup, then cosine
