"""The pretraining recipe run in this process (a 0.1M-parameter model, about 2 s a run): what a run logs about its
learning rate, what metrics.jsonl holds after a resume, and which resumes it refuses."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pretrain_kit  # skips this module without the training extras; puts recipes/ on sys.path
import pytest
from pretrain_kit import SMALL_IN_PROCESS, train_in_process

# isort: split
import pretrain
from fa3nn_train.config import ConfigError, load_config
from fa3nn_train.optim import lr_at

cache_dir = pretrain_kit.cache_dir  # the fixtures, bound here so that tests request them (quiet_tokenizers: autouse)
quiet_tokenizers = pretrain_kit.quiet_tokenizers


def _jsonl_steps(run_dir) -> list[int]:
    return [json.loads(line)["step"] for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def test_logged_lr_is_the_one_the_step_trained_with(tmp_path, cache_dir):
    """Step 1 of a 2-step warmup trains at lr / 2; the line for step 1 said lr (the schedule's value for step 2,
    read after scheduler.step()), and every later line was one step ahead too."""
    history = train_in_process(tmp_path, cache_dir, "run.max_steps=4")
    optim = load_config("tiny", SMALL_IN_PROCESS).optim
    expected = [lr_at(step - 1, optim, 4) for step in (1, 2, 3, 4)]  # LambdaLR: lr x (lr_at / lr), rounded
    assert [m["lr"] for m in history] == pytest.approx(expected, rel=1e-12, abs=0)
    assert expected[:3] == [1.5e-3, 3e-3, 3e-3] and expected[3] < 3e-3  # warmup, then cosine


def test_a_zero_learning_rate_trains_at_zero(tmp_path, cache_dir):
    """optim.lr=0 passes the config's checks (a run that times steps without learning) but build_scheduler divided
    by it: ZeroDivisionError before the first step. Now every step trains at 0 and the weights stay the initial ones
    (weight decay is lr-scaled too)."""
    import torch
    from fa3nn_train.model import build_model
    from safetensors.torch import load_file

    history = train_in_process(tmp_path, cache_dir, "run.max_steps=2", "optim.lr=0", "optim.min_lr=0")
    assert [m["lr"] for m in history] == [0.0, 0.0] and all(m["grad_norm"] > 0 for m in history)
    torch.manual_seed(load_config("tiny", SMALL_IN_PROCESS).run.seed)  # pretrain.main's init
    initial = build_model(load_config("tiny", SMALL_IN_PROCESS).model, 512, 64).state_dict()
    trained = load_file(tmp_path / "checkpoints/step-00000002/model.safetensors")
    assert trained.keys() == initial.keys() and all(torch.equal(trained[k], initial[k]) for k in initial)


def test_resume_after_a_crash_logs_each_step_once(tmp_path, cache_dir):
    """A run that crashed after logging step 4 but last saved step 2 resumes at step 2 in the same run_dir: its
    metrics.jsonl kept the crashed run's steps 3 and 4 and appended the resumed ones, [1, 2, 3, 4, 3, 4, 5]."""
    args = ["run.max_steps=4", "run.save_every=2", "run.keep_checkpoints=2"]
    first = train_in_process(tmp_path, cache_dir, *args)
    (tmp_path / "checkpoints/latest").write_text("step-00000002")  # the step-4 save never happened
    shutil.rmtree(tmp_path / "checkpoints/step-00000004")
    resumed = train_in_process(tmp_path, cache_dir, *args[1:], "run.max_steps=5", "--resume")
    assert [m["step"] for m in resumed] == [3, 4, 5]
    assert [m["loss"] for m in resumed[:2]] == [m["loss"] for m in first[2:]]
    assert _jsonl_steps(tmp_path) == [1, 2, 3, 4, 5]


def test_resume_trains_with_the_optimizer_settings_it_is_given(tmp_path, cache_dir):
    """A resume that changes optim.lr, min_lr, weight_decay, beta2, eps or run.max_steps (allowed: they do not
    change the data order) trained with the checkpoint's: AdamW's load_state_dict restores each group's lr,
    weight_decay, betas and eps, and LambdaLR's its base_lrs, so weight decay 0.5 and beta2 0.99 were ignored and
    steps 3-4 trained at 3.0e-3 (the checkpoint's lr) and 1.65e-3 (the new schedule's factor times the old lr)
    instead of 1e-3 and 5.5e-4."""
    import torch

    train_in_process(tmp_path, cache_dir, "run.max_steps=2")
    changed = ["run.max_steps=4", "optim.lr=1e-3", "optim.min_lr=1e-4", "optim.weight_decay=0.5", "optim.beta2=0.99",
               "optim.eps=1e-6"]
    resumed = train_in_process(tmp_path, cache_dir, *changed, "--resume")
    optim = load_config("tiny", [*SMALL_IN_PROCESS, *changed]).optim
    assert [m["lr"] for m in resumed] == pytest.approx([lr_at(s, optim, 4) for s in (2, 3)], rel=1e-12, abs=0)
    groups = torch.load(tmp_path / "checkpoints/step-00000004/optimizer.pt", weights_only=True)["param_groups"]
    assert [(g["weight_decay"], tuple(g["betas"]), g["eps"], g["initial_lr"]) for g in groups] == [
        (0.5, (0.9, 0.99), 1e-6, 1e-3), (0.0, (0.9, 0.99), 1e-6, 1e-3)]
    scheduler = torch.load(tmp_path / "checkpoints/step-00000004/scheduler.pt", weights_only=True)
    assert scheduler["base_lrs"] == [1e-3, 1e-3]


@pytest.mark.parametrize("change, message", [
    ("run.global_batch_size=16", "run.global_batch_size: 8 in the checkpoint, 16 now"),
    ("data.seq_len=32", "data.seq_len: 64 in the checkpoint, 32 now"),
    ("run.seed=7", "run.seed: 1234 in the checkpoint, 7 now"),
])
def test_resume_refuses_a_change_of_the_data_order(tmp_path, cache_dir, change, message):
    """The data position of a checkpoint is its step (data.py): with another global batch, sequence length, seed or
    corpus the resumed run trained on other blocks than the interrupted one would have, and said nothing."""
    train_in_process(tmp_path, cache_dir, "run.max_steps=1")
    with pytest.raises(ConfigError) as error:
        train_in_process(tmp_path, cache_dir, "run.max_steps=2", change, "--resume")
    assert message in str(error.value) and "start a fresh run" in str(error.value), str(error.value)
    assert _jsonl_steps(tmp_path) == [1]  # refused before anything was trained or logged
    # what does not touch the data order may change
    assert [m["step"] for m in train_in_process(tmp_path, cache_dir, "run.max_steps=2", "data.prefetch_steps=2",
                                                "optim.lr=1e-3", "optim.min_lr=1e-4", "--resume")] == [2]


@pytest.mark.parametrize("before, after", [(None, "per_tile"), ("delayed", None), ("delayed", "per_tile")],
                         ids=["fp8_on", "fp8_off", "delayed_to_per_tile"])
def test_resume_may_change_the_fp8_attention_recipe(tmp_path, cache_dir, capsys, before, after):
    """bf16 first and FP8 later (or FP8 turned off, or another recipe) across a resume: the strict load raised
    torch's "Missing key(s) ... fp8_state.hadamard_signs" / "Unexpected key(s) ... fp8_state.amax_history". Now the
    checkpoint's FP8 attention state this run does not hold is dropped, what it holds fresh starts as in a fresh run,
    the run says so, and every other weight is the checkpoint's (a step at lr 0 keeps what it loaded)."""
    import torch
    from safetensors.torch import load_file

    def fp8(recipe):
        return [] if recipe is None else [f"model.fp8_attention={recipe}"]

    train_in_process(tmp_path, cache_dir, "run.max_steps=1", *fp8(before))
    saved = load_file(tmp_path / "checkpoints/step-00000001/model.safetensors")
    capsys.readouterr()
    # lr 0 for the resumed step: its weights are then the ones it loaded (weight decay is lr-scaled too)
    resumed = train_in_process(tmp_path, cache_dir, "run.max_steps=2", "optim.lr=0", "optim.min_lr=0", *fp8(after),
                               "--resume")
    assert [m["step"] for m in resumed] == [2] and resumed[0]["loss"] > 0
    printed = capsys.readouterr().out
    held = {"per_tile": 2, "delayed": 2 * 3, None: 0}  # per layer: the signs; history, scale, skipped_updates
    assert f"{held[before]} FP8 attention state tensors of the checkpoint not loaded, {held[after]} started fresh" \
        in printed, printed
    layers = [k for k in saved if ".fp8_state." not in k]
    trained = load_file(tmp_path / "checkpoints/step-00000002/model.safetensors")
    assert set(layers) == {k for k in trained if ".fp8_state." not in k}
    assert all(torch.equal(saved[k], trained[k]) for k in layers)  # the checkpoint's weights, loaded
    assert len(trained) - len(layers) == held[after]


@pytest.mark.parametrize("max_steps", [1, 2])
def test_resume_refuses_a_max_steps_it_has_already_reached(tmp_path, cache_dir, max_steps):
    """--resume from step 2 with run.max_steps 1 or 2 (an override forgotten or lowered): the loop ran no step,
    saved nothing and exited 0 after "resumed from ... at step 2", as if the run had trained on."""
    train_in_process(tmp_path, cache_dir, "run.max_steps=2")
    with pytest.raises(ConfigError) as error:
        train_in_process(tmp_path, cache_dir, f"run.max_steps={max_steps}", "--resume")
    assert (f"run.max_steps = {max_steps} but step-00000002 is at step 2: nothing to train; raise run.max_steps"
            in str(error.value)), str(error.value)
    assert _jsonl_steps(tmp_path) == [1, 2]
    assert [m["step"] for m in train_in_process(tmp_path, cache_dir, "run.max_steps=3", "--resume")] == [3]


def test_options_and_overrides_mix_in_any_order():
    """`pretrain.py run.max_steps=300 --resume optim.lr=1e-3` exited with "unrecognized arguments: optim.lr=1e-3"
    (argparse takes a nargs="*" positional once, so overrides after an option were refused)."""
    args = pretrain.parse_args(["run.max_steps=300", "--resume", "optim.lr=1e-3", "--no-wandb", "run.seed=1"])
    assert args.resume and args.no_wandb and args.overrides == ["run.max_steps=300", "optim.lr=1e-3", "run.seed=1"]


def test_accelerate_launch_cpu_with_several_processes_warns(tmp_path, monkeypatch):
    """`accelerate launch --num_processes 2 --cpu recipes/pretrain.py` starts one process (accelerate's simple
    launcher runs several only under mpirun, with --mpirun_hostfile), which trained alone with 2x the accumulation;
    only "1 process(es)" in its header said so. That launcher leaves ACCELERATE_USE_CPU=True and MASTER_ADDR set
    (the latter only for --num_processes > 1) and no WORLD_SIZE."""
    from fa3nn_train.runtime import make_accelerator

    config = load_config("tiny", ["run.wandb=false"])
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # `accelerate launch --num_processes 1 --cpu`: nothing to say
        assert make_accelerator(config, tmp_path).num_processes == 1
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.warns(UserWarning, match=r"accelerate launch --cpu started 1 process.*torchrun --standalone "
                                         r"--nproc_per_node N recipes/pretrain.py"):
        make_accelerator(config, tmp_path)


def test_fsdp_asked_for_on_cpu_warns(tmp_path, monkeypatch):
    """`accelerate launch` with an FSDP config (ACCELERATE_USE_FSDP=true) on a machine without a GPU: accelerate
    runs DDP-style replication (MULTI_CPU, or NO for one process) and the run said nothing, so a CPU rehearsal of an
    FSDP2 run exercised neither sharding nor the FSDP checkpoint path."""
    from fa3nn_train.runtime import make_accelerator

    config = load_config("tiny", ["run.wandb=false"])
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "2")
    with pytest.warns(UserWarning, match=r"FSDP was asked for \(ACCELERATE_USE_FSDP\) but accelerate runs NO"):
        assert make_accelerator(config, tmp_path).distributed_type.name == "NO"
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_accelerator(config, tmp_path)


def test_log_line_shows_small_tflops():
    """The README's CPU run printed "TFLOP/s 0.00/dev" on every line (4.6 GFLOP/s at two decimals of a TFLOP/s),
    reading as no compute at all; three significant digits show it and change nothing on a GPU's hundreds."""
    from fa3nn_train.metrics_logger import format_line

    line = {"step": 10, "loss": 7.1, "lr": 3e-3, "grad_norm": 0.9, "tokens_per_s": 572.0,
            "tokens_per_s_per_device": 572.0, "tflops_per_device": 0.004559, "mfu": None, "peak_mem_gib": 0.85}
    assert "TFLOP/s 0.00456/dev" in format_line(line), format_line(line)
    assert "TFLOP/s 362/dev | MFU 36.6%" in format_line({**line, "tflops_per_device": 362.4, "mfu": 0.3663})


def test_drop_steps_after_keeps_a_log_whose_last_line_a_crash_cut(tmp_path):
    """A crash mid-write leaves metrics.jsonl ending in half a line: the resume keeps the whole lines up to its step
    and drops the cut one (json.loads of it raised, and the resume died before training)."""
    from fa3nn_train.metrics_logger import drop_steps_after

    jsonl = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in (1, 2, 3, 4)]
    jsonl.write_text("".join(lines) + '{"step": 5, "lo')
    drop_steps_after(jsonl, 3)
    assert jsonl.read_text() == "".join(lines[:3])
    jsonl.write_text("".join(lines) + '{"step": 5, "lo')
    drop_steps_after(jsonl, 9)
    assert jsonl.read_text() == "".join(lines)


class _StubAccelerator:
    """What save_checkpoint / load_checkpoint read of an Accelerator, for one process whose distributed type is
    given: accelerate has no FSDP on CPU, so the FSDP path is driven by hand on a fully_shard'ed model."""

    is_main_process, process_index = True, 0

    def __init__(self, distributed_type: str):
        from types import SimpleNamespace

        self.distributed_type = SimpleNamespace(name=distributed_type)

    def wait_for_everyone(self):
        pass

    def unwrap_model(self, model):
        return model


def _fsdp_resume_worker(rank, init_file, run_dir):
    import torch
    import torch.distributed as dist
    from fa3nn_train.checkpoint import load_checkpoint, save_checkpoint
    from fa3nn_train.model import build_model
    from fa3nn_train.optim import build_optimizer, build_scheduler
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=1)
    try:
        config = load_config("tiny", SMALL_IN_PROCESS)

        def make(shard: bool):
            torch.manual_seed(0)
            model = build_model(config.model, 512, 64)
            if shard:
                for layer in model.model.layers:
                    fully_shard(layer)
                fully_shard(model)
            optimizer = build_optimizer(model, config.optim)
            return model, optimizer, build_scheduler(optimizer, config.optim, 10)

        def train_step(model, optimizer, scheduler, seed):
            ids = torch.randint(0, 512, (2, 16), generator=torch.Generator().manual_seed(seed))
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()

        plain = make(False)
        train_step(*plain, seed=1)
        path = save_checkpoint(_StubAccelerator("NO"), Path(run_dir), 1, *plain, {"tokens_seen": 1}, keep=1)
        sharded = make(True)
        assert load_checkpoint(_StubAccelerator("FSDP"), path, *sharded)["step"] == 1
        train_step(*plain, seed=2)
        train_step(*sharded, seed=2)

        def gaps():
            full = get_model_state_dict(sharded[0], options=StateDictOptions(full_state_dict=True, cpu_offload=True))
            return {name: (full[name] - tensor).abs().max().item() for name, tensor in plain[0].state_dict().items()}

        to_fsdp = gaps()
        # and back: FSDP's checkpoint (optimizer state by name) resumed without FSDP
        path = save_checkpoint(_StubAccelerator("FSDP"), Path(run_dir), 2, *sharded, {"tokens_seen": 2}, keep=1)
        plain = make(False)
        assert load_checkpoint(_StubAccelerator("NO"), path, *plain)["step"] == 2
        train_step(*plain, seed=3)
        train_step(*sharded, seed=3)
        (Path(run_dir) / "gaps.json").write_text(json.dumps({"to_fsdp": to_fsdp, "from_fsdp": gaps()}))
    finally:
        dist.destroy_process_group()


def test_fsdp_resumes_a_checkpoint_saved_without_fsdp(tmp_path):
    """A run saved on one GPU or with DDP (optimizer.pt keyed by position, torch's optimizer state_dict) resumed
    with FSDP2: torch.distributed.checkpoint's set_state_dict wants parameter names and raised KeyError
    'state.0.step'. Now the positions are mapped to names first, and one more step on each matches exactly (one
    rank: FSDP2's step is the plain one's, bit for bit); so does the way back, FSDP's checkpoint resumed without."""
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("needs torch.distributed with gloo")
    mp.spawn(_fsdp_resume_worker, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=1, join=True)
    for gaps in json.loads((tmp_path / "gaps.json").read_text()).values():
        assert len(gaps) > 10 and max(gaps.values()) == 0.0, gaps

