"""The pretraining recipe's evaluation (recipes/fa3nn_train/evaluation.py): the held-out set, the eval loss and how
it is reduced over processes, its config fields, and that it leaves training (and exact resume) untouched."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pretrain_kit  # skips this module without the training extras; puts recipes/ on sys.path
import pytest
import torch
import torch.nn.functional as F
from pretrain_kit import SMALL_IN_PROCESS, train_in_process

# isort: split
from fa3nn_train.config import ConfigError, load_config
from fa3nn_train.data import IGNORE_INDEX, BlockStream
from fa3nn_train.evaluation import EvalSet, eval_blocks, evaluate, hold_out

cache_dir = pretrain_kit.cache_dir  # the fixtures, bound here so that tests request them (quiet_tokenizers: autouse)
quiet_tokenizers = pretrain_kit.quiet_tokenizers


def _blocks(count: int, seq_len: int, vocab: int, seed: int = 0):
    """Random (input_ids, position_ids, targets) blocks with a document start (restarting positions, an ignored
    target) inside each, as pack_blocks cuts them."""
    generator = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(count):
        tokens = torch.randint(1, vocab, (seq_len + 1,), generator=generator).numpy()
        start = int(torch.randint(2, seq_len - 1, (), generator=generator))
        positions = torch.cat([torch.arange(start), torch.arange(seq_len - start)]).numpy()
        targets = tokens[1:].copy()
        targets[start - 1] = IGNORE_INDEX
        blocks.append((tokens[:-1], positions, targets))
    return blocks


class _OneProcess:
    """What evaluate reads of an Accelerator: its device and a sum over processes (here one)."""

    device = torch.device("cpu")

    @staticmethod
    def reduce(tensor, reduction):
        assert reduction == "sum"
        return tensor


def _tiny_model():
    from fa3nn_train.model import build_model

    torch.manual_seed(0)
    return build_model(load_config("tiny", SMALL_IN_PROCESS).model, 512, 16)


def test_eval_loss_is_the_mean_token_loss_over_the_held_out_blocks():
    """5 blocks in micro-batches of 2 (the last one padded with an ignored row): the eval loss is the sum of every
    target's cross-entropy over the target count, computed here block by block in float64, not a mean of
    per-batch means. Evaluation runs in eval mode without autograd and hands the model back in train mode."""
    model = _tiny_model().train()
    blocks = _blocks(5, 16, 512)
    seen = []
    hook = model.model.layers[0].register_forward_hook(
        lambda module, args, out: seen.append((module.training, torch.is_grad_enabled())))
    result = evaluate(model, EvalSet(blocks, micro=2, rank=0, world=1), _OneProcess())
    hook.remove()

    total, count = 0.0, 0
    with torch.no_grad():
        for input_ids, positions, targets in blocks:
            logits = model(input_ids=torch.from_numpy(input_ids)[None],
                           position_ids=torch.from_numpy(positions)[None]).logits[0].double()
            targets = torch.from_numpy(targets)
            total += F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, reduction="sum").item()
            count += int((targets != IGNORE_INDEX).sum())
    assert count == 5 * 15 and result["eval/tokens"] == count
    assert result["eval/loss"] == pytest.approx(total / count, rel=1e-6, abs=0)
    assert result["eval/perplexity"] == pytest.approx(math.exp(total / count), rel=1e-6, abs=0)
    assert 5.5 < result["eval/loss"] < 7.0  # ln 512 = 6.24 for an untrained model
    assert seen == [(False, False)] * 3  # three micro-batches, each in eval mode under no_grad
    assert model.training and all(p.grad is None for p in model.parameters())


class _Bigram(torch.nn.Module):
    """A next-token table: the model of the multi-process test, which spawns processes that need no transformers."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(512, 512)
        torch.nn.init.normal_(self.table.weight, generator=torch.Generator().manual_seed(0))

    def forward(self, input_ids, position_ids):
        from types import SimpleNamespace

        return SimpleNamespace(logits=self.table(input_ids))


def _eval_worker(rank, world, init_file, out_dir):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        class Reduce:
            device = torch.device("cpu")

            @staticmethod
            def reduce(tensor, reduction):
                dist.all_reduce(tensor)
                return tensor

        model = torch.nn.parallel.DistributedDataParallel(_Bigram())
        result = evaluate(model, EvalSet(_blocks(7, 16, 512), micro=2, rank=rank, world=world), Reduce())
        (Path(out_dir) / f"eval-{rank}.json").write_text(json.dumps(result))
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    # Every rank is past the barrier, its result written: the process leaves without tearing down the gloo group and
    # DDP's reducer. Their teardown aborted a worker at exit ("terminate called without an active exception",
    # SIGABRT) in two clean-clone CI runs: s48 rank 0 with the group left to the interpreter's shutdown, s51 rank 2
    # after a barrier, `del model` and destroy_process_group (0 of 20 local runs either time). What the test checks is
    # in the result files; os._exit skips the C++ destructors that abort.
    os._exit(0)


def test_processes_share_the_eval_set_and_agree_with_one():
    """7 blocks in micro-batches of 2 (4, the last padded) over 3 gloo processes: rank 0 evaluates micro-batches 0
    and 3, ranks 1 and 2 one each and then an ignored one, so that every rank runs as many forwards (DDP and FSDP2
    forwards hold collectives). Each process sums its loss and target count in float64 and one all_reduce adds
    them: every rank reports the one-process loss to float64 rounding, where a mean of per-rank means would weigh
    rank 0's two micro-batches like the others' one (training's 1-vs-2-process runs: test_pretrain.py)."""
    import tempfile

    import torch.multiprocessing as mp

    one = evaluate(_Bigram(), EvalSet(_blocks(7, 16, 512), micro=2, rank=0, world=1), _OneProcess())
    assert one["eval/tokens"] == 7 * 15
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_eval_worker, args=(3, f"{tmp}/store", tmp), nprocs=3, join=True)
        results = [json.loads((Path(tmp) / f"eval-{rank}.json").read_text()) for rank in range(3)]
    for result in results:
        assert result["eval/tokens"] == one["eval/tokens"]
        assert result["eval/loss"] == pytest.approx(one["eval/loss"], rel=1e-12, abs=0)


def _corpus(tmp_path, documents: int = 40, files: int = 3):
    """A local jsonl corpus in several files (shards when streaming); document i is "d<i> " repeated, so a
    character of its text tells which document a token came from."""
    folder = tmp_path / "corpus"
    folder.mkdir(parents=True)
    for f in range(files):
        rows = [{"text": f"d{i} " * (8 + i % 5)} for i in range(documents) if i % files == f]
        (folder / f"part-{f}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


class _DocTokenizer:
    """Every character of document i becomes token i + 1 (eos 0): a block's tokens name its documents."""

    eos_id = 0

    @staticmethod
    def encode_batch(texts):
        return [[int(text.split()[0][1:]) + 1] * len(text) for text in texts]


@pytest.mark.parametrize("streaming", [False, True])
def test_held_out_documents_never_reach_training(tmp_path, streaming):
    """eval.holdout_documents: 6 of 40 documents, the same ones at every call (no process, rank or seed enters the
    choice), disjoint from the training documents and together all of them; over three epochs of the training
    stream (shuffled per epoch, streaming shards too) no block holds a held-out document's token, and every eval
    block holds only held-out ones."""
    from fa3nn_train.corpus import load_documents

    config = load_config("tiny", [f"data.source={_corpus(tmp_path)}", f"data.streaming={streaming}"])
    corpus, field = load_documents(config.data, tmp_path)
    train, held = hold_out(corpus, 6, streaming, field)
    again_train, again_held = hold_out(load_documents(config.data, tmp_path)[0], 6, streaming, field)

    def documents(dataset):
        return sorted(int(row[field].split()[0][1:]) for row in dataset)

    assert documents(held) == documents(again_held) and len(documents(held)) == 6
    assert documents(train) == documents(again_train)
    assert sorted(documents(held) + documents(train)) == list(range(40))
    if not streaming:  # a uniform sample of the corpus, not its first documents
        assert documents(held) != list(range(6))

    stream = iter(BlockStream(train, field, _DocTokenizer(), 16, True, 1234, streaming, 8, 8))
    epoch_tokens = sum(len(row[field]) + 1 for row in train)
    trained = {int(t) - 1 for _ in range(3 * epoch_tokens // 16) for t in next(stream)[0] if t}
    assert trained == set(documents(train))
    evaluated = eval_blocks(held, field, _DocTokenizer(), 16, True, 10**6)
    assert {int(t) - 1 for block in evaluated for t in block[0] if t} == set(documents(held))


@pytest.mark.parametrize("streaming", [False, True])
def test_eval_set_of_a_txt_corpus_reads_its_text_column(tmp_path, streaming):
    """A .txt corpus's documents are in column "text" whatever data.text_field says (corpus.load_documents); the
    eval set read the held-out documents' data.text_field column and raised KeyError 'body'. Two processes take 3
    of its 6 micro-batches of 2 blocks each, every block once."""
    from fa3nn_train.corpus import load_documents
    from fa3nn_train.evaluation import build_eval_set

    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("".join(f"d{i} " * (8 + i % 5) + "\n" for i in range(30)))
    config = load_config("tiny", [f"data.source={corpus_file}", "data.text_field=body", f"data.streaming={streaming}",
                                  "data.seq_len=16", "run.global_batch_size=4", "run.micro_batch_size=2",
                                  "eval.batches=3", "eval.holdout_documents=10"])
    corpus, field = load_documents(config.data, tmp_path)
    assert field == "text"
    _, held = hold_out(corpus, 10, streaming, field)
    shares = [build_eval_set(config, held, field, _DocTokenizer(), tmp_path, rank, 2) for rank in (0, 1)]
    assert [share.blocks for share in shares] == [12, 12] and [len(share.batches) for share in shares] == [3, 3]
    rows = [tuple(row.tolist()) for share in shares for batch in share.batches for row in batch.input_ids]
    assert len(set(rows)) == 12


def test_holdout_leaves_too_small_a_corpus_with_an_error(tmp_path):
    from fa3nn_train.corpus import load_documents

    for streaming in (False, True):
        config = load_config("tiny", [f"data.source={_corpus(tmp_path / str(streaming), 5, 1)}",
                                      f"data.streaming={streaming}"])
        corpus, field = load_documents(config.data, tmp_path)
        with pytest.raises(ConfigError, match=r"eval.holdout_documents \(5\) must be smaller than the 5 documents"):
            hold_out(corpus, 5, streaming, field)


def test_eval_is_logged_and_leaves_training_untouched(tmp_path, cache_dir):
    """eval/loss and eval/perplexity every eval.every steps and at the end, in metrics.jsonl and the returned
    history (wandb gets the same dict); steps that only evaluate log a line too. Training with evaluation gives the
    losses, bit for bit, of training without it on the same held-out split."""
    with_eval = train_in_process(tmp_path / "on", cache_dir, "run.max_steps=5", "run.log_every=2", "eval.every=3",
                                 "eval.batches=1")
    assert [m["step"] for m in with_eval] == [2, 3, 4, 5]
    evaluated = {m["step"]: m for m in with_eval if "eval/loss" in m}
    assert sorted(evaluated) == [3, 5]
    for m in evaluated.values():
        assert m["eval/perplexity"] == pytest.approx(math.exp(m["eval/loss"]), rel=1e-12)
        assert m["eval/tokens"] > 0.9 * 8 * 64  # one global batch of 8 blocks of 64, a few targets ignored
    assert evaluated[5]["eval/loss"] < evaluated[3]["eval/loss"]
    logged = [json.loads(line) for line in (tmp_path / "on/metrics.jsonl").read_text().splitlines()]
    assert logged == with_eval
    without = train_in_process(tmp_path / "off", cache_dir, "run.max_steps=5", "run.log_every=2", "eval.every=0",
                               "eval.at_end=false")
    assert not any("eval/loss" in m for m in without)
    assert [m["loss"] for m in without] == [m["loss"] for m in with_eval if m["step"] != 3]


def test_resume_with_eval_matches_uninterrupted_run(tmp_path, cache_dir):
    """Evaluating every step, a run resumed from its step-2 checkpoint logs the training and eval losses of the run
    that went on, bit for bit; the resume may change eval.every, eval.batches and eval.at_end (they decide no
    training data), but not eval.holdout_documents (it does)."""
    args = ["run.max_steps=4", "run.save_every=2", "run.keep_checkpoints=3", "eval.every=1", "eval.batches=1"]
    full = train_in_process(tmp_path / "full", cache_dir, *args)
    assert [m["step"] for m in full] == [1, 2, 3, 4] and all("eval/loss" in m for m in full)
    for name, changes in (("same", []), ("changed", ["eval.every=3", "eval.batches=2", "eval.at_end=false"])):
        run_dir = tmp_path / name
        shutil.copytree(tmp_path / "full/checkpoints/step-00000002", run_dir / "checkpoints/step-00000002")
        (run_dir / "checkpoints/latest").write_text("step-00000002")
        resumed = train_in_process(run_dir, cache_dir, *args, *changes, "--resume")
        assert [m["step"] for m in resumed] == [3, 4]
        assert [(m["loss"], m["grad_norm"]) for m in resumed] == [(m["loss"], m["grad_norm"]) for m in full[2:]]
        if name == "same":
            assert [m["eval/loss"] for m in resumed] == [m["eval/loss"] for m in full[2:]]
        else:
            assert "eval/loss" in resumed[0] and "eval/loss" not in resumed[1]
    with pytest.raises(ConfigError, match=r"eval.holdout_documents: 8 in the checkpoint, 4 now"):
        train_in_process(tmp_path / "full", cache_dir, *args, "run.max_steps=5", "eval.holdout_documents=4", "--resume")


def test_resume_of_a_checkpoint_from_before_eval_refuses_a_holdout(tmp_path, cache_dir):
    """A checkpoint saved before the eval section existed trained on the whole corpus: resuming it with held-out
    documents would train on other data, so it is refused (the saved config has no eval.holdout_documents: 0)."""
    train_in_process(tmp_path, cache_dir, "run.max_steps=1", "eval.holdout_documents=0", "eval.every=0",
                     "eval.at_end=false")
    trainer = tmp_path / "checkpoints/step-00000001/trainer.json"
    state = json.loads(trainer.read_text())
    del state["config"]["eval"]
    trainer.write_text(json.dumps(state))
    with pytest.raises(ConfigError, match=r"eval.holdout_documents: 0 in the checkpoint, 8 now"):
        train_in_process(tmp_path, cache_dir, "run.max_steps=2", "--resume")
    resumed = train_in_process(tmp_path, cache_dir, "run.max_steps=2", "eval.holdout_documents=0", "eval.every=0",
                               "eval.at_end=false", "--resume")
    assert [m["step"] for m in resumed] == [2]


BAD_EVAL_VALUES = {
    "eval.every=-1": "eval.every must be >= 0 (0: only eval.at_end), got -1",
    "eval.batches=0": "eval.batches must be >= 1, got 0",
    "eval.holdout_documents=-2": "eval.holdout_documents must be >= 0 (0: none), got -2",
    "eval.at_end=sometimes": "eval.at_end must be true or false, got 'sometimes'",
    "eval.batchs=3": "unknown field eval.batchs; eval has: every",
}


@pytest.mark.parametrize("override", BAD_EVAL_VALUES)
def test_bad_eval_values_are_refused_naming_the_field(override):
    with pytest.raises(ConfigError, match=re.escape(BAD_EVAL_VALUES[override])):
        load_config("tiny", [override])


def test_eval_config_problems_are_reported_with_the_others():
    with pytest.raises(ConfigError) as error:
        load_config("tiny", ["eval.every=-1", "run.max_steps=0", "eval.holdout_documents=0"])
    message = str(error.value)
    assert message.startswith("3 config problems:\n"), message
    for expected in ("eval.every must be >= 0", "run.max_steps must be >= 1",
                     "evaluation (eval.at_end) needs a held-out set, and there is none: set "
                     "eval.holdout_documents > 0"):
        assert expected in message, (expected, message)
    with pytest.raises(ConfigError, match=r"eval.holdout_documents must be 0 when eval.split or eval.source names"):
        load_config("tiny", ["eval.split=validation", "data.source=HuggingFaceFW/fineweb-edu"])
    with pytest.raises(ConfigError, match=r"eval.split names a split of the hub dataset data.source; data.source "
                                          r"'stdlib' is local: name a file or folder with eval.source"):
        load_config("tiny", ["eval.split=validation", "eval.holdout_documents=0"])
    # what works: no evaluation and no holdout; a separate eval corpus
    assert load_config("tiny", ["eval.every=0", "eval.at_end=false", "eval.holdout_documents=0"]).eval.every == 0
    assert load_config("tiny", ["eval.source=/data/valid.jsonl", "eval.holdout_documents=0"]).eval.source


def test_a_separate_eval_source_keeps_the_whole_corpus_for_training(tmp_path, cache_dir):
    """eval.source names a file: the eval set is its first blocks and training keeps every document of
    data.source, so it trains as a run without evaluation does."""
    valid = tmp_path / "valid.jsonl"
    valid.write_text("".join(json.dumps({"text": f"def f{i}(x):\n    return x * {i}\n" * 20}) + "\n"
                             for i in range(30)))
    history = train_in_process(tmp_path / "run", cache_dir, "run.max_steps=2", "eval.holdout_documents=0",
                               f"eval.source={valid}", "eval.batches=1")
    plain = train_in_process(tmp_path / "plain", cache_dir, "run.max_steps=2", "eval.holdout_documents=0",
                             "eval.every=0", "eval.at_end=false")
    assert [m["loss"] for m in history] == [m["loss"] for m in plain]
    assert "eval/loss" not in history[0] and history[1]["eval/tokens"] > 0.9 * 8 * 64


def test_log_line_shows_the_eval_loss():
    from fa3nn_train.metrics_logger import format_line

    line = {"step": 50, "loss": 6.5, "lr": 3e-3, "grad_norm": 0.9, "peak_mem_gib": 0.85}
    assert "eval" not in format_line(line)
    shown = format_line({**line, "eval/loss": 6.25, "eval/perplexity": math.exp(6.25), "eval/tokens": 16000})
    assert "eval loss 6.2500 | eval ppl 518.0" in shown, shown
