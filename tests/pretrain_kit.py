"""Shared setup of the pretraining recipe's tests (test_pretrain.py, test_pretrain_eval.py,
test_pretrain_resume_log.py): importing this module skips the test module without the training extras and puts
recipes/ on sys.path (import it before fa3nn_train or pretrain); the small-model overrides; an in-process run; and the
fixtures. A test module binds a fixture to its own name (`cache_dir = pretrain_kit.cache_dir`) rather than importing
it: pytest finds fixtures among a module's attributes, and ruff (F811) takes a test's parameter for a redefinition of
an imported name."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("datasets")
pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))

# A 0.1M-parameter model on 0.5 MB of the stdlib corpus: seconds per run.
SMALL = [
    "model.hidden_size=64", "model.intermediate_size=128", "model.num_layers=2", "data.seq_len=64",
    "data.vocab_size=512", "data.max_corpus_mb=0.5", "run.global_batch_size=8", "run.micro_batch_size=4",
    "run.log_every=1", "optim.warmup_steps=2", "eval.batches=1",
]
# SMALL for runs in the pytest process (train_in_process): batches made on demand, no background prefetch thread.
SMALL_IN_PROCESS = [*SMALL, "data.prefetch_steps=0"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fa3nn-cache")


@pytest.fixture(autouse=True)
def quiet_tokenizers(monkeypatch):
    """TOKENIZERS_PARALLELISM=false around every test of a module that binds this fixture (autouse applies there, not
    to every test), for the modules that run the recipe in the pytest process."""
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


def train_in_process(run_dir, cache_dir, *args) -> list[dict]:
    """pretrain.main on SMALL_IN_PROCESS, then `args`, without wandb; returns the logged metrics."""
    import pretrain  # here, not at the top: test_pretrain.py runs the recipe in subprocesses and never imports it

    return pretrain.main(["--run-dir", str(run_dir), "--no-wandb", f"data.cache_dir={cache_dir}", *SMALL_IN_PROCESS,
                          *args])
