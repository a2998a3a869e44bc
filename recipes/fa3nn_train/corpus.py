"""Text corpora through `datasets`: local files, hub datasets, and the offline default built from Python itself.

The default ("stdlib") is real text that every Python installation carries, so the recipe runs with no network and
no committed data: the documentation topics of `pydoc_data` (English prose, ~0.5 MB) followed by the standard
library's own .py sources in path order (~30 MB), capped at `max_corpus_mb`. It is written once to a JSONL file in
the cache directory (one document per line) and then read like any other local corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
import sysconfig
from pathlib import Path

LOCAL_FORMATS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def stdlib_documents(max_mb: float):
    """(name, text) pairs: pydoc topics, then stdlib sources, until max_mb of UTF-8 text."""
    budget = int(max_mb * 1e6)
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions strip pydoc_data; the sources alone are plenty
        topics = {}
    for name in sorted(topics):
        budget -= len(topics[name].encode())
        yield f"pydoc:{name}", topics[name]
        if budget <= 0:
            return
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or "dist-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a few test fixtures are deliberately not UTF-8
        if not text.strip():
            continue
        budget -= len(text.encode())
        yield str(path.relative_to(root)), text
        if budget <= 0:
            return


def build_stdlib_corpus(cache_dir: Path, max_mb: float) -> Path:
    """Write the stdlib corpus as JSONL ({"text": ...} per document) once; later calls return the cached file."""
    import platform

    key = hashlib.sha256(f"{platform.python_version()}|{sysconfig.get_paths()['stdlib']}|{max_mb}".encode())
    path = cache_dir / f"stdlib-corpus-{key.hexdigest()[:12]}.jsonl"
    if path.exists():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        for name, text in stdlib_documents(max_mb):
            f.write(json.dumps({"text": text, "source": name}) + "\n")
    os.replace(tmp, path)  # atomic: concurrent processes never read a half-written corpus
    return path


def _local_files(source: Path) -> tuple[str, list[str]]:
    files = sorted(p for p in source.rglob("*") if p.suffix in LOCAL_FORMATS) if source.is_dir() else [source]
    if not files:
        raise FileNotFoundError(f"no {'/'.join(LOCAL_FORMATS)} files under {source}")
    kinds = {LOCAL_FORMATS.get(p.suffix) for p in files}
    if len(kinds) != 1 or None in kinds:
        raise ValueError(f"data.source {source}: files must share one of the formats {sorted(LOCAL_FORMATS)}; "
                         f"found suffixes {sorted({p.suffix for p in files})}")
    return kinds.pop(), [str(p) for p in files]


def load_documents(data, cache_dir: Path):
    """A `datasets` Dataset (or IterableDataset when data.streaming) with the text in column data.text_field."""
    import datasets

    source = data.source
    if source == "stdlib":
        source = str(build_stdlib_corpus(cache_dir, data.max_corpus_mb))
    path = Path(source).expanduser()
    if path.exists():
        builder, files = _local_files(path)
        dataset = datasets.load_dataset(builder, data_files=files, split="train", streaming=data.streaming,
                                        cache_dir=str(cache_dir / "datasets"))
    else:
        try:
            dataset = datasets.load_dataset(source, data.hub_config, split=data.split, streaming=data.streaming)
        except Exception as error:
            raise RuntimeError(
                f"data.source {source!r} is neither a local file/folder nor a reachable hub dataset ({error}). "
                "Offline, use data.source=stdlib or a local .txt/.jsonl/.parquet path"
            ) from error
    text_field = "text" if builder_is_text(path) else data.text_field
    if text_field not in (dataset.column_names or [text_field]):
        raise ValueError(f"data.text_field {text_field!r} is not a column of {source}; columns: {dataset.column_names}")
    return dataset, text_field


def builder_is_text(path: Path) -> bool:
    return path.exists() and (path.suffix == ".txt" or (path.is_dir() and any(path.rglob("*.txt"))))
