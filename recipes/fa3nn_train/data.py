"""Tokenized documents -> fixed-length training blocks -> per-process micro-batches, resumable by step.

Packing: documents, each followed by the end-of-text token, are concatenated and cut into windows of seq_len + 1
tokens with stride seq_len (inputs = window[:-1], targets = window[1:]), so no token is wasted on padding.
With `keep_boundaries`, position_ids restart at 0 where a document starts inside a block: fa3nn's patched model (and
transformers' own masks) then keep documents from attending to each other, and the target that would predict a new
document's first token from the previous one is ignored (-100).

Blocks then pass through a buffered shuffle (data.block_shuffle_buffer) so that one global batch mixes documents;
the buffer runs across epoch ends, so a corpus smaller than the buffer mixes neighbouring epochs.

Order and sharding: the block stream is a pure function of (config, seed), identical on every process.
Global step s uses blocks [s * G, (s + 1) * G) with G = global_batch_size; process r of W takes micro-batch m as
blocks s * G + (m * W + r) * micro + [0, micro). The data position in a checkpoint is therefore just the step, and
1 process or W processes see the same global batch at every step.
"""

from __future__ import annotations

import itertools
import queue
import random
import threading
from dataclasses import dataclass

import numpy as np
import torch

IGNORE_INDEX = -100
# Documents tokenized per encode_batch call. The training loop pulls blocks between steps, so tokenizing is hidden
# behind the GPU only when each step's share is small: with 256 rows every 16th llama-1b step (stdlib corpus,
# 4096-token blocks, 16 per step) waited 0.8-1.6 s for one call on a CPU core; 16 rows keeps steps under ~0.15 s.
ROWS_PER_ENCODE = 16


@dataclass
class Batch:
    input_ids: torch.Tensor  # (micro, seq_len) int64
    position_ids: torch.Tensor  # (micro, seq_len) int64
    targets: torch.Tensor  # (micro, seq_len) int64, IGNORE_INDEX where no loss

    def to(self, device) -> Batch:
        return Batch(*(t.to(device, non_blocking=True) for t in (self.input_ids, self.position_ids, self.targets)))


def pack_blocks(token_docs, seq_len: int, eos_id: int, keep_boundaries: bool, chunk_windows: int = 16):
    """Yields (input_ids, position_ids, targets) int64 numpy arrays of length seq_len from token-id lists.
    Documents are gathered until `chunk_windows` windows are ready and cut in vectorized numpy: per-token Python
    here would cost ~1 µs a token, a visible share of a GPU step at 10^5-10^6 tokens/s."""
    window = seq_len + 1
    pieces, piece_starts, pending = [], [], 0
    carry_tokens, carry_starts = np.empty(0, np.int64), np.empty(0, bool)

    def cut(tokens, starts):
        count = (len(tokens) - 1) // seq_len if len(tokens) >= window else 0
        for w in range(count):
            lo = w * seq_len
            yield _block(tokens[lo: lo + window], starts[lo: lo + window], keep_boundaries)
        rest = count * seq_len  # the last token of a window is the first of the next
        return tokens[rest:], starts[rest:]

    for doc in token_docs:
        doc_tokens = np.asarray(doc + [eos_id], dtype=np.int64)
        doc_starts = np.zeros(len(doc_tokens), dtype=bool)
        doc_starts[0] = True
        pieces.append(doc_tokens)
        piece_starts.append(doc_starts)
        pending += len(doc_tokens)
        if len(carry_tokens) + pending >= chunk_windows * seq_len + 1:
            tokens = np.concatenate([carry_tokens, *pieces])
            starts = np.concatenate([carry_starts, *piece_starts])
            carry_tokens, carry_starts = yield from cut(tokens, starts)
            pieces, piece_starts, pending = [], [], 0
    if pieces:
        yield from cut(np.concatenate([carry_tokens, *pieces]), np.concatenate([carry_starts, *piece_starts]))


def _block(tokens: np.ndarray, starts: np.ndarray, keep_boundaries: bool):
    seq_len = len(tokens) - 1
    inputs, targets = tokens[:-1], tokens[1:].copy()
    index = np.arange(seq_len, dtype=np.int64)
    if not keep_boundaries:
        return inputs, index, targets
    # position = distance to the latest document start at or before t (the block's first token counts as one)
    block_starts = starts[:-1].copy()
    block_starts[0] = True
    positions = index - np.maximum.accumulate(np.where(block_starts, index, 0))
    targets[starts[1:]] = IGNORE_INDEX
    return inputs, positions, targets


class BlockStream:
    """Infinite, deterministic stream of blocks over epochs of a `datasets` corpus."""

    def __init__(self, dataset, text_field: str, tokenizer, seq_len: int, keep_boundaries: bool, seed: int,
                 streaming: bool, shuffle_buffer: int, block_shuffle_buffer: int):
        self.dataset, self.text_field, self.tokenizer = dataset, text_field, tokenizer
        self.seq_len, self.keep_boundaries, self.seed = seq_len, keep_boundaries, seed
        self.streaming, self.shuffle_buffer = streaming, shuffle_buffer
        self.block_shuffle_buffer = block_shuffle_buffer

    def _documents(self, epoch: int):
        if self.streaming:
            shuffled = self.dataset.shuffle(seed=self.seed + epoch, buffer_size=self.shuffle_buffer)
        else:
            shuffled = self.dataset.shuffle(seed=self.seed + epoch)
        for rows in shuffled.iter(batch_size=ROWS_PER_ENCODE):
            yield from self.tokenizer.encode_batch(rows[self.text_field])

    def _epochs(self):
        for epoch in itertools.count():
            produced = 0
            for block in pack_blocks(self._documents(epoch), self.seq_len, self.tokenizer.eos_id, self.keep_boundaries):
                produced += 1
                yield block
            if produced == 0:
                raise ValueError(f"the corpus holds fewer than data.seq_len + 1 = {self.seq_len + 1} tokens")

    def __iter__(self):
        # One shuffle buffer over the endless chain of epochs, never drained: a buffer per epoch emptied at the end
        # of each epoch and then refilled before its next block, which tokenized the whole next epoch inside one
        # training step whenever the epoch was shorter than the buffer (6-10 s with both GPUs idle, every 42nd step
        # of llama-1b on 2 H200s; benchmarks/results/scaling-h200x2-20261130-2045/summary.md). Now every block
        # out costs one block in, and only the first step pays for filling the buffer.
        yield from shuffle_buffered(self._epochs(), self.block_shuffle_buffer, self.seed)


def shuffle_buffered(items, buffer_size: int, seed: int):
    """Deterministic buffered shuffle: hold `buffer_size` items, emit a random one as each new item arrives.
    Blocks cut from one long document arrive in a row; without this a whole global batch can come from one file,
    and the loss swings with whatever file it is."""
    if buffer_size <= 1:
        yield from items
        return
    rng = random.Random(seed)
    buffer = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        index = rng.randrange(buffer_size)
        yield buffer[index]
        buffer[index] = item
    rng.shuffle(buffer)
    yield from buffer


def micro_batches(blocks, start_step: int, global_batch: int, micro: int, rank: int, world: int):
    """Yields, per global step from start_step on, this process's list of micro-batches (see module docstring) and
    the number of loss targets in the whole global batch (every process sees every block, so it needs no
    collective and no device sync)."""
    accum = global_batch // (micro * world)
    stream = iter(blocks)
    for _ in itertools.islice(stream, start_step * global_batch):  # resume: skip what earlier steps consumed
        pass
    while True:
        step_blocks = list(itertools.islice(stream, global_batch))
        mine = []
        for m in range(accum):
            offset = (m * world + rank) * micro
            rows = step_blocks[offset: offset + micro]
            mine.append(Batch(*(torch.from_numpy(np.stack([row[i] for row in rows])) for i in range(3))))
        global_targets = sum(int((block[2] != IGNORE_INDEX).sum()) for block in step_blocks)
        yield mine, global_targets


def prefetched(items, depth: int):
    """Iterates `items` in a background thread, up to `depth` items ahead, in the same order; an exception raised
    while producing is raised here, at the item where it happened. depth 0 iterates in the caller's thread. Close
    the generator (or exhaust it) when done: that stops and joins the thread.
    Tokenizing (encode_batch runs without the GIL) then overlaps the training step instead of lengthening the step
    that needs a large document."""
    if depth == 0:
        yield from items
        return
    slots, stop = queue.Queue(maxsize=depth), threading.Event()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((False, None))
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
            put((False, error))

    thread = threading.Thread(target=produce, name="fa3nn-data-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = slots.get()
            if ok:
                yield item
            elif item is None:
                return
            else:
                raise item
    finally:
        # Stop and join, so no producer is inside datasets / tokenizers native code when the process exits: a
        # thread left running there aborted a 2-process run at exit ("terminate called without an active
        # exception", CI 2026-12-01). The producer sees `stop` at its next put, after at most one item.
        stop.set()
        thread.join()
