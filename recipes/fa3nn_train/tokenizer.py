"""The tokenizer: a hub tokenizer by name when the machine is online, otherwise a byte-level BPE trained on the
corpus with `tokenizers` and cached (keyed by corpus fingerprint and vocab size), so later runs load it in
milliseconds and every process of a distributed run uses the identical file.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

EOS = "<|endoftext|>"
TRAIN_SAMPLE_MB = 8  # text the local BPE learns from; more changes merges little at these vocab sizes


@dataclass
class TextTokenizer:
    """What the recipe needs from a tokenizer: batched encoding, the vocabulary size and the end-of-text id."""

    encode_batch: object  # list[str] -> list[list[int]]
    vocab_size: int
    eos_id: int
    name: str


def _local(dataset, text_field: str, vocab_size: int, cache_dir: Path, fingerprint: str) -> TextTokenizer:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    key = hashlib.sha256(f"{fingerprint}|{vocab_size}|{TRAIN_SAMPLE_MB}".encode()).hexdigest()[:12]
    path = cache_dir / f"bpe-{vocab_size}-{key}.json"
    if not path.exists():
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )

        def sample():
            budget = TRAIN_SAMPLE_MB * 1_000_000
            for row in dataset:
                text = row[text_field]
                budget -= len(text)
                yield text
                if budget <= 0:
                    return

        tokenizer.train_from_iterator(sample(), trainer)
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tokenizer.save(str(tmp))
        os.replace(tmp, path)
    tokenizer = Tokenizer.from_file(str(path))
    return TextTokenizer(
        encode_batch=lambda texts: [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)],
        vocab_size=tokenizer.get_vocab_size(),
        eos_id=tokenizer.token_to_id(EOS),
        name=str(path),
    )


def _hub(name: str) -> TextTokenizer:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
    except Exception as error:
        raise RuntimeError(
            f"could not load tokenizer {name!r} from the hub ({error}); offline, set data.tokenizer=local"
        ) from error
    if tokenizer.eos_token_id is None:
        raise ValueError(f"tokenizer {name!r} has no end-of-text token; pick another or use data.tokenizer=local")
    return TextTokenizer(
        encode_batch=lambda texts: tokenizer(texts, add_special_tokens=False)["input_ids"],
        vocab_size=len(tokenizer),
        eos_id=tokenizer.eos_token_id,
        name=name,
    )


def load_tokenizer(data, dataset, text_field: str, cache_dir: Path, fingerprint: str) -> TextTokenizer:
    if data.tokenizer == "local":
        return _local(dataset, text_field, data.vocab_size, cache_dir, fingerprint)
    return _hub(data.tokenizer)
