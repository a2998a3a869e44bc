"""Run configuration: five dataclasses, one per TOML table ([model], [data], [optim], [run], [eval]) of a file in
configs/.

Every field is documented where it is declared; `load_config` rejects unknown keys and bad values with a message
that names the field. Command-line overrides use the same dotted names: `optim.lr=3e-4 run.max_steps=100`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from fa3nn.dispatch import BACKEND_CHOICES
from fa3nn.fp8 import from_recipe_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
ATTENTIONS = ("fa3nn", "sdpa", "eager")
MIXED_PRECISIONS = ("auto", "no", "bf16")


class ConfigError(ValueError):
    """A config file or override names an unknown field or gives a value that cannot work."""


def _require(problems: list[str], where: str, value, ok: bool, rule: str) -> bool:
    """Adds a problem naming the field to `problems` unless `ok`; returns `ok`. Callers write `ok` so that nan fails
    it: every comparison with nan is False, so a check written as `value < 0` let nan through (run.stall_dump_s=nan
    was accepted)."""
    if not ok:
        problems.append(f"{where} must be {rule}, got {value!r}")
    return ok


def _at_least(problems: list[str], where: str, value, minimum, note: str = "") -> bool:
    """value >= minimum, and finite (optim.lr=inf and run.stall_dump_s=nan were accepted)."""
    return _require(problems, where, value, math.isfinite(value) and value >= minimum,
                    f"{_number(value)}>= {minimum}{note}")


def _positive(problems: list[str], where: str, value, note: str = "") -> bool:
    return _require(problems, where, value, math.isfinite(value) and value > 0, f"{_number(value)}> 0{note}")


def _raise_problems(problems: list[str]) -> None:
    """One ConfigError naming every bad field: a config with three bad values took three runs to learn of them."""
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} config problems:\n" + "\n".join(f"  {p}" for p in problems))


def _is_local(source: str) -> bool:
    """data.source names the offline stdlib corpus or a local file or folder (corpus.load_documents' rule)."""
    return source == "stdlib" or Path(source).expanduser().exists()


def _number(value) -> str:
    """How a rule names a float ("a finite number >= 0": inf and nan are floats); an int needs no word."""
    return "" if isinstance(value, int) else "a finite number "


@dataclass
class ModelConfig:
    """A Llama-style decoder (transformers' LlamaForCausalLM), randomly initialized: no weights are downloaded."""

    hidden_size: int = 128  # d_model
    intermediate_size: int = 352  # SwiGLU inner width
    num_layers: int = 4
    num_heads: int = 4  # query heads; head_dim = hidden_size // num_heads
    num_kv_heads: int = 2  # key/value heads (GQA when < num_heads)
    rope_theta: float = 10000.0
    init_std: float = 0.02  # std of the normal init of every linear and embedding weight
    tie_embeddings: bool = False  # share the input embedding with the output head
    attention: str = "fa3nn"  # "fa3nn" (patch_hf), or transformers' own "sdpa"/"eager" for baselines
    backend: str = "auto"  # fa3nn backend: auto | hopper | triton | reference
    fp8_attention: str | None = None  # fa3nn FP8 attention recipe: per_tile | current | delayed (None = no FP8)
    activation_checkpointing: bool = False  # recompute each decoder layer in the backward
    compile: bool = False  # torch.compile the model

    def check(self, problems: list[str]) -> None:
        # sizes before the divisibility checks, which run only on valid sizes: a zero divisor raised a bare
        # ZeroDivisionError, and a zero or negative size passed them and failed later, inside transformers
        sizes = ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads")
        sizes_ok = all([_at_least(problems, f"model.{name}", getattr(self, name), 1) for name in sizes])
        _positive(problems, "model.rope_theta", self.rope_theta)
        _positive(problems, "model.init_std", self.init_std, " (a zero init gives every unit the same weights)")
        _require(problems, "model.backend", self.backend, self.backend in BACKEND_CHOICES, f"one of {BACKEND_CHOICES}")
        if sizes_ok and self.hidden_size % self.num_heads:
            problems.append(f"model.hidden_size ({self.hidden_size}) must be divisible by model.num_heads "
                            f"({self.num_heads})")
        elif sizes_ok and (self.hidden_size // self.num_heads) % 2:
            # transformers refused it only once the corpus and tokenizer were built, naming neither field
            problems.append(f"model.hidden_size / model.num_heads = {self.hidden_size} / {self.num_heads} = "
                            f"{self.hidden_size // self.num_heads} must be even (rotary embeddings rotate pairs of "
                            "dimensions)")
        if sizes_ok and self.num_heads % self.num_kv_heads:
            problems.append(f"model.num_heads ({self.num_heads}) must be a multiple of model.num_kv_heads "
                            f"({self.num_kv_heads})")
        _require(problems, "model.attention", self.attention, self.attention in ATTENTIONS, f"one of {ATTENTIONS}")
        if self.attention != "fa3nn" and self.fp8_attention is not None:
            problems.append("model.fp8_attention needs model.attention = 'fa3nn'")
        if self.fp8_attention is not None:
            try:
                from_recipe_name(self.fp8_attention)
            except ValueError as error:
                problems.append(f"model.fp8_attention: {error}")


@dataclass
class DataConfig:
    """Where text comes from, how it is tokenized, and how it is cut into training blocks."""

    source: str = "stdlib"  # "stdlib" (Python's own docs + sources, offline), a local .txt/.jsonl/.parquet file or
    # folder, or a hub dataset name (needs network)
    hub_config: str | None = None  # the hub dataset's config name, if it has several
    split: str = "train"
    text_field: str = "text"  # column holding the text (jsonl/parquet/hub)
    streaming: bool = False  # iterate without downloading/tokenizing everything first (large corpora)
    shuffle_buffer: int = 10_000  # documents held for shuffling when streaming
    block_shuffle_buffer: int = 2048  # packed blocks held for shuffling (0 keeps packing order)
    tokenizer: str = "local"  # "local": a byte-level BPE trained on the corpus and cached; else a hub name
    vocab_size: int = 4096  # size of the locally trained tokenizer (hub tokenizers bring their own)
    seq_len: int = 128  # tokens per training sequence
    keep_boundaries: bool = True  # documents never attend to each other inside a block (position_ids restart)
    max_corpus_mb: float = 4.0  # cap on the "stdlib" corpus size
    cache_dir: str = "~/.cache/fa3nn"  # built corpora and trained tokenizers
    prefetch_steps: int = 4  # global steps of batches a background thread prepares ahead (0: on demand, in the loop)

    def check(self, problems: list[str]) -> None:
        _at_least(problems, "data.shuffle_buffer", self.shuffle_buffer, 0, " (0: no shuffle while streaming)")
        _at_least(problems, "data.block_shuffle_buffer", self.block_shuffle_buffer, 0, " (0 keeps packing order)")
        _positive(problems, "data.max_corpus_mb", self.max_corpus_mb)
        _at_least(problems, "data.prefetch_steps", self.prefetch_steps, 0, " (0 turns the background thread off)")
        _at_least(problems, "data.seq_len", self.seq_len, 2)
        if self.tokenizer == "local":
            _at_least(problems, "data.vocab_size", self.vocab_size, 300, " for a byte-level BPE (256 bytes + merges)")


@dataclass
class OptimConfig:
    """AdamW with linear warmup then cosine decay to min_lr."""

    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 10
    weight_decay: float = 0.1  # applied to matrices only, never to norms or biases
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping

    def check(self, problems: list[str]) -> None:
        _at_least(problems, "optim.lr", self.lr, 0)
        if not 0 <= self.min_lr <= self.lr:
            problems.append(f"optim.min_lr ({self.min_lr}) must be in [0, optim.lr = {self.lr}]")
        _at_least(problems, "optim.warmup_steps", self.warmup_steps, 0)
        _at_least(problems, "optim.weight_decay", self.weight_decay, 0)
        for name in ("beta1", "beta2"):  # AdamW's range, which torch checks only once the model and data are built
            beta = getattr(self, name)
            _require(problems, f"optim.{name}", beta, 0 <= beta < 1, "in [0, 1)")
        _positive(problems, "optim.eps", self.eps, " (it keeps a zero gradient's update from being 0 / 0)")
        _at_least(problems, "optim.grad_clip", self.grad_clip, 0, " (0: no clipping)")


@dataclass
class RunConfig:
    """Steps, batch, precision, logging and checkpoints."""

    max_steps: int = 100
    global_batch_size: int = 16  # sequences per optimizer step, over all processes
    micro_batch_size: int = 8  # sequences per process per forward; accumulation fills the rest
    mixed_precision: str = "auto"  # "auto": bf16 autocast on GPU, fp32 on CPU; or "no" / "bf16"
    fp8_linear: bool = False  # FP8 linear layers through accelerate's torchao backend (GPU, torchao installed)
    seed: int = 1234
    log_every: int = 10  # steps between log lines (JSONL, wandb, stdout)
    save_every: int = 0  # steps between checkpoints; 0 saves only at the end
    keep_checkpoints: int = 2  # newest checkpoints kept on disk
    run_dir: str = "runs/{config}"  # "{config}" becomes the config name
    wandb: bool = True  # log to Weights & Biases (offline mode when no API key is configured)
    wandb_project: str = "fa3nn-pretrain"
    warmup_steps_excluded: int = 2  # first steps left out of tokens/s (allocation, compilation)
    # > 0: a step that runs longer than this many seconds writes every thread's Python stack to
    # run_dir/stalls-rank{R}.txt (fa3nn_train.stall_watch), to find host-side stalls; 0: off
    stall_dump_s: float = 0.0

    def check(self, problems: list[str]) -> None:
        # batch sizes before the modulo, which runs only on valid sizes: 0 raised ZeroDivisionError, a negative micro
        # batch trained on nothing and reported tokens/s, a zero global batch gave a nan loss
        micro_ok = _at_least(problems, "run.micro_batch_size", self.micro_batch_size, 1)
        global_ok = _at_least(problems, "run.global_batch_size", self.global_batch_size, 1)
        if micro_ok and global_ok and self.global_batch_size % self.micro_batch_size:
            problems.append(f"run.global_batch_size ({self.global_batch_size}) must be a multiple of "
                            f"run.micro_batch_size ({self.micro_batch_size})")
        _require(problems, "run.mixed_precision", self.mixed_precision, self.mixed_precision in MIXED_PRECISIONS,
                 f"one of {MIXED_PRECISIONS}")
        _at_least(problems, "run.stall_dump_s", self.stall_dump_s, 0, " (0: off)")
        for name in ("max_steps", "log_every", "keep_checkpoints"):
            _at_least(problems, f"run.{name}", getattr(self, name), 1)
        _at_least(problems, "run.save_every", self.save_every, 0, " (0 saves only at the end)")
        _at_least(problems, "run.warmup_steps_excluded", self.warmup_steps_excluded, 0)
        try:  # pretrain.main formats it; another placeholder raised a bare KeyError there
            self.run_dir.format(config="")
        except (KeyError, IndexError, ValueError):
            problems.append(f"run.run_dir may hold no placeholder but {{config}}, got {self.run_dir!r} (write a "
                            "literal brace as {{ or }})")
        _at_least(problems, "run.seed", self.seed, 0, " (numpy's generators, which datasets shuffles with, take no "
                  "negative seed)")

    def grad_accum_steps(self, world_size: int) -> int:
        per_step = self.micro_batch_size * world_size
        if self.global_batch_size % per_step:
            raise ConfigError(
                f"run.global_batch_size ({self.global_batch_size}) must be a multiple of run.micro_batch_size x "
                f"processes ({self.micro_batch_size} x {world_size}); change one of them"
            )
        return self.global_batch_size // per_step


@dataclass
class EvalConfig:
    """Validation loss on text the run never trains on (fa3nn_train.evaluation): by default documents held out of
    data.source, or a separate corpus (eval.source) or hub split (eval.split)."""

    every: int = 50  # optimizer steps between evaluations; 0: only at the end (eval.at_end)
    at_end: bool = True  # evaluate after the last step too
    batches: int = 8  # global batches (run.global_batch_size blocks of data.seq_len tokens) per evaluation
    # documents of data.source held out of training, the eval set (0: none). Chosen from the corpus alone (see
    # evaluation.hold_out), so it decides which data training sees: a resume may not change it
    holdout_documents: int = 8
    source: str | None = None  # a separate eval corpus, read like data.source (local file/folder or hub dataset)
    split: str | None = None  # the hub split to evaluate on (of eval.source, else of data.source), e.g. "validation"

    @property
    def enabled(self) -> bool:
        return self.every > 0 or self.at_end

    def check(self, problems: list[str]) -> None:
        _at_least(problems, "eval.every", self.every, 0, " (0: only eval.at_end)")
        _at_least(problems, "eval.batches", self.batches, 1)
        _at_least(problems, "eval.holdout_documents", self.holdout_documents, 0, " (0: none)")


@dataclass
class TrainConfig:
    name: str = "tiny"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def check(self, problems: list[str] | None = None) -> TrainConfig:
        """Raises one ConfigError naming every bad field (with `problems`, those found earlier too)."""
        problems = [] if problems is None else problems
        for section in (self.model, self.data, self.optim, self.run, self.eval):
            section.check(problems)
        self._check_eval_set(problems)
        _raise_problems(problems)
        return self

    def _check_eval_set(self, problems: list[str]) -> None:
        """Where the eval set comes from: held-out documents, or eval.source / eval.split, never both."""
        evaluation = self.eval
        named = evaluation.source is not None or evaluation.split is not None
        if named and evaluation.holdout_documents > 0:
            problems.append("eval.holdout_documents must be 0 when eval.split or eval.source names the eval set (held-"
                            f"out documents would only be lost to training), got {evaluation.holdout_documents}")
        elif evaluation.enabled and not named and evaluation.holdout_documents == 0:
            asked = [f"eval.every = {evaluation.every}"] if evaluation.every > 0 else []
            asked += ["eval.at_end"] if evaluation.at_end else []
            problems.append(f"evaluation ({' and '.join(asked)}) needs a held-out set, and there is none: set "
                            "eval.holdout_documents > 0, eval.split or eval.source, or turn evaluation off "
                            "(eval.every=0 eval.at_end=false)")
        where, source = ("data.source", self.data.source) if evaluation.source is None else ("eval.source",
                                                                                             evaluation.source)
        if evaluation.split is not None and _is_local(source):
            problems.append(f"eval.split names a split of the hub dataset {where}; {where} {source!r} is local: name "
                            "a file or folder with eval.source")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# The fields that decide which blocks step s trains on (fa3nn_train.data): a checkpoint's data position is its step,
# so a resume that changes one of them would silently train on other blocks than the interrupted run.
DATA_ORDER_FIELDS = (
    "data.source", "data.hub_config", "data.split", "data.text_field", "data.streaming", "data.shuffle_buffer",
    "data.block_shuffle_buffer", "data.tokenizer", "data.vocab_size", "data.seq_len", "data.keep_boundaries",
    "data.max_corpus_mb", "run.seed", "run.global_batch_size", "eval.holdout_documents",
)
# What a checkpoint whose config lacks a field (saved before the field existed) trained with.
DATA_ORDER_DEFAULTS_BEFORE_FIELD = {"eval.holdout_documents": 0}


def check_resume(saved: dict | None, config: TrainConfig, checkpoint_name: str, step: int | None = None) -> None:
    """Refuse to resume from a checkpoint whose config (trainer.json's, a TrainConfig.to_dict()) differs from
    `config` in a DATA_ORDER_FIELDS field (None, a checkpoint without its config, is not checked), or whose `step`
    is already run.max_steps or past it: the loop then ran no step and the run exited 0 as if it had trained on."""
    if step is not None and step >= config.run.max_steps:
        raise ConfigError(f"--resume: run.max_steps = {config.run.max_steps} but {checkpoint_name} is at step {step}: "
                          f"nothing to train; raise run.max_steps (e.g. run.max_steps={step + config.run.max_steps})")
    if saved is None:
        return
    now = config.to_dict()
    changed = []
    for dotted in DATA_ORDER_FIELDS:
        section, name = dotted.split(".")
        if name in saved.get(section, {}):
            was = saved[section][name]
        elif dotted in DATA_ORDER_DEFAULTS_BEFORE_FIELD:
            was = DATA_ORDER_DEFAULTS_BEFORE_FIELD[dotted]
        else:
            continue
        if was != now[section][name]:
            changed.append(f"{dotted}: {was!r} in the checkpoint, {now[section][name]!r} now")
    if changed:
        raise ConfigError(
            f"--resume from {checkpoint_name} would train on other data than the interrupted run (a checkpoint's data "
            f"position is its step): {'; '.join(changed)}. Resume with the checkpoint's values, or start a fresh run "
            "(another --run-dir, or no --resume)"
        )


def _coerce(section: str, name: str, value, annotation: str):
    where = f"{section}.{name}"
    kinds = {"int": int, "float": float, "bool": bool, "str": str}
    optional = annotation.endswith("| None")
    base = annotation.replace("| None", "").strip()
    if value is None or (isinstance(value, str) and value.lower() == "none" and optional):
        if optional:
            return None
        raise ConfigError(f"{where} may not be None")
    kind = kinds[base]
    if isinstance(value, str) and kind is not str:  # from the command line
        if kind is bool:
            if value.lower() not in ("true", "false", "1", "0"):
                raise ConfigError(f"{where} must be true or false, got {value!r}")
            return value.lower() in ("true", "1")
        try:
            return kind(float(value)) if kind is int and float(value).is_integer() else kind(value)
        except ValueError:
            raise ConfigError(f"{where} must be {base}, got {value!r}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where} must be {base}, got {value!r} ({type(value).__name__})")
    return value


def _apply(config: TrainConfig, section: str, values: dict, problems: list[str]) -> None:
    """Sets the fields; an unknown one or a value of the wrong type adds a problem and leaves the field as it was."""
    if section == "name":
        config.name = str(values)
        return
    target = getattr(config, section, None)
    if not dataclasses.is_dataclass(target):
        problems.append(f"unknown config table [{section}]; tables: model, data, optim, run, eval")
        return
    fields = {f.name: f for f in dataclasses.fields(target)}
    for name, value in values.items():
        if name not in fields:
            problems.append(f"unknown field {section}.{name}; {section} has: {', '.join(fields)}")
            continue
        try:
            setattr(target, name, _coerce(section, name, value, str(fields[name].type)))
        except ConfigError as error:
            problems.append(str(error))


def resolve_config_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = CONFIG_DIR / f"{name_or_path}.toml"
    if not path.exists():
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))
        raise ConfigError(f"no config {name_or_path!r} (looked at {path}); known configs: {known}")
    return path


def load_config(name_or_path: str = "tiny", overrides: list[str] = ()) -> TrainConfig:
    """A config file (a name from configs/ or a path) plus `section.field=value` overrides, checked."""
    path = resolve_config_path(name_or_path)
    with open(path, "rb") as f:
        tables = tomllib.load(f)
    config = TrainConfig(name=path.stem)
    problems = []  # every unknown field and bad value, file and overrides, in one error
    for section, values in tables.items():
        _apply(config, section, values, problems)
    for override in overrides:
        key, sep, value = override.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot:
            problems.append(f"overrides look like section.field=value (e.g. optim.lr=3e-4), got {override!r}")
            continue
        _apply(config, section, {name: value}, problems)
    return config.check(problems)
