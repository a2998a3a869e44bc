"""Validation: a held-out set cut from the corpus before training sees it, and the mean token loss on it.

The held-out set (eval.holdout_documents = n > 0) is n whole documents of data.source, chosen from the corpus alone:
no seed, process count or rank enters the choice, so every process of every run on that corpus (and data.streaming
setting) holds out the same documents, and training never sees them in any epoch:
    map-style     n document indices drawn uniformly without replacement by numpy's generator seeded HOLDOUT_SEED;
                  training reads the other indices (Dataset.select), in the same per-epoch shuffles as before.
    streaming     the first n documents in the corpus's stored order (a stream cannot be sampled without reading it
                  whole); training filters out every document whose text is one of theirs (a content hash), so
                  the filter holds in every epoch's shard and buffer shuffle, and exact duplicates of a held-out
                  document elsewhere in the corpus are not trained on either.
Holding documents out (not blocks) keeps training and eval apart although training re-packs documents into other
blocks in every epoch. eval.source / eval.split instead name a separate corpus or hub split; training then keeps
the whole of data.source. The local tokenizer is trained on the training documents only.

The eval set is the first eval.batches x run.global_batch_size blocks packed from those documents in stored order
(as training packs them: data.keep_boundaries, seq_len), built once at start-up on every process. Its micro-batches
of run.micro_batch_size go to processes as training's do (micro-batch m to process m % W); every process runs as
many forwards (a short last round gets a fully ignored batch: DDP and FSDP2 forwards hold collectives). The loss is
sum(cross-entropy) / sum(targets) over all of them, both summed in float64 on each process and then all-reduced, so
1 or W processes give the same number (to float64 rounding), not a mean of per-process means.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import warnings

import numpy as np
import torch
from fa3nn_train.config import ConfigError
from fa3nn_train.data import IGNORE_INDEX, ROWS_PER_ENCODE, Batch, pack_blocks
from fa3nn_train.model import loss_sum

HOLDOUT_SEED = 0  # fixed: runs with another run.seed evaluate on the same documents


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def hold_out(corpus, n: int, streaming: bool, text_field: str):
    """(training documents, held-out documents) of `corpus` (a datasets Dataset, or IterableDataset when streaming);
    the held-out ones as a Dataset in the corpus's order. n = 0: (corpus, None)."""
    import datasets

    if n == 0:
        return corpus, None
    if not streaming:
        if n >= len(corpus):
            raise ConfigError(f"eval.holdout_documents ({n}) must be smaller than the {len(corpus)} documents of "
                              "data.source, which training needs some of")
        held = np.sort(np.random.default_rng(HOLDOUT_SEED).choice(len(corpus), size=n, replace=False))
        kept = np.setdiff1d(np.arange(len(corpus)), held, assume_unique=True)
        return corpus.select(kept), corpus.select(held)
    first = [row[text_field] for row in corpus.take(n + 1)]
    if len(first) <= n:
        raise ConfigError(f"eval.holdout_documents ({n}) must be smaller than the {len(first)} documents of "
                          "data.source, which training needs some of")
    held_texts = first[:n]
    held_digests = frozenset(_digest(text) for text in held_texts)
    training = corpus.filter(lambda text: _digest(text) not in held_digests, input_columns=text_field)
    return training, datasets.Dataset.from_dict({text_field: held_texts})


def eval_documents(config, held_out, text_field: str, cache_dir):
    """The documents the eval set is cut from and their text column: the held-out ones (`held_out`, in the corpus's
    column `text_field`), or eval.source / eval.split's corpus."""
    from fa3nn_train.corpus import load_documents

    evaluation = config.eval
    if evaluation.source is None and evaluation.split is None:
        return held_out, text_field
    source = evaluation.source if evaluation.source is not None else config.data.source
    data = dataclasses.replace(config.data, source=source, split=evaluation.split or config.data.split,
                               hub_config=config.data.hub_config if evaluation.source is None else None)
    return load_documents(data, cache_dir)


def eval_blocks(documents, text_field: str, tokenizer, seq_len: int, keep_boundaries: bool, count: int) -> list:
    """The first `count` blocks packed from `documents` in their stored order (no shuffle)."""

    def token_docs():
        for rows in documents.iter(batch_size=ROWS_PER_ENCODE):
            yield from tokenizer.encode_batch(rows[text_field])

    return list(itertools.islice(pack_blocks(token_docs(), seq_len, tokenizer.eos_id, keep_boundaries), count))


def build_eval_set(config, held_out, text_field: str, tokenizer, cache_dir, rank: int, world: int) -> EvalSet | None:
    """This process's share of the eval set (held_out and text_field: hold_out's documents and the corpus's text
    column); None when evaluation is off."""
    evaluation, data = config.eval, config.data
    if not evaluation.enabled:
        return None
    documents, text_field = eval_documents(config, held_out, text_field, cache_dir)
    wanted = evaluation.batches * config.run.global_batch_size
    blocks = eval_blocks(documents, text_field, tokenizer, data.seq_len, data.keep_boundaries, wanted)
    held = evaluation.source is None and evaluation.split is None
    where = f"the {evaluation.holdout_documents} documents of eval.holdout_documents" if held else \
        "eval.source / eval.split"
    more = " (raise eval.holdout_documents for more)" if held else ""
    if not blocks:
        raise ConfigError(f"the eval set is empty: {where} hold fewer than data.seq_len + 1 = {data.seq_len + 1} "
                          f"tokens{more}")
    if len(blocks) < wanted:
        warnings.warn(f"eval.batches = {evaluation.batches} asks for {wanted} blocks but {where} give "
                      f"{len(blocks)}: evaluating on those{more}", stacklevel=2)
    eval_set = EvalSet(blocks, config.run.micro_batch_size, rank, world)
    when = [f"every {evaluation.every} steps"] if evaluation.every else []
    eval_set.description = (f"eval: {len(blocks)} blocks of {data.seq_len} tokens from {where}, "
                            f"{' and '.join(when + ['at the end'] if evaluation.at_end else when)}")
    return eval_set


class EvalSet:
    """One process's eval micro-batches (see the module docstring): micro-batch m of the whole set goes to process
    m % world, the last one is padded with ignored rows, and a process short of a micro-batch in the last round gets
    a fully ignored one."""

    def __init__(self, blocks: list, micro: int, rank: int, world: int):
        rows = [tuple(torch.from_numpy(np.asarray(a)) for a in block) for block in blocks]
        ignored = (rows[0][0], rows[0][1], torch.full_like(rows[0][2], IGNORE_INDEX))
        rows += [ignored] * (-len(rows) % micro)
        micro_batches = [rows[i: i + micro] for i in range(0, len(rows), micro)]
        rounds = math.ceil(len(micro_batches) / world)
        mine = [micro_batches[i * world + rank] if i * world + rank < len(micro_batches) else [ignored] * micro
                for i in range(rounds)]
        self.batches = [Batch(*(torch.stack([row[k] for row in batch]) for k in range(3))) for batch in mine]
        self.blocks = len(blocks)
        self.description = f"eval: {len(blocks)} blocks"  # build_eval_set says where from and when


def eval_due(evaluation, step: int, max_steps: int) -> bool:
    """Whether the trainer evaluates after optimizer step `step` (1-based)."""
    return (evaluation.every > 0 and step % evaluation.every == 0) or (evaluation.at_end and step == max_steps)


def evaluate(model, eval_set: EvalSet, accelerator) -> dict:
    """eval/loss (mean next-token cross-entropy over every target of the eval set, all processes), eval/perplexity
    and eval/tokens. Runs the model as training does (its autocast, attention backend and parallel wrapper) in eval
    mode without autograd, then restores the mode it was in. Collective: every process calls it."""
    was_training = model.training
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=accelerator.device)  # loss sum, target count
    try:
        with torch.no_grad():
            for batch in eval_set.batches:
                loss, count = loss_sum(model, batch.to(accelerator.device))
                totals += torch.stack([loss.double(), totals.new_tensor(count)])
    finally:
        model.train(was_training)
    loss_sum_all, tokens = accelerator.reduce(totals, "sum").tolist()
    loss = loss_sum_all / tokens
    perplexity = math.exp(loss) if loss < 700 else math.inf  # math.exp overflows past 709
    return {"eval/loss": loss, "eval/perplexity": perplexity, "eval/tokens": int(tokens)}
