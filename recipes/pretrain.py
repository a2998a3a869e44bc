"""Pretrain a Llama-style model with fa3nn attention, on one CPU process or many GPUs through accelerate.

    python recipes/pretrain.py                                    # tiny config: 2 CPU cores, < 3 minutes
    python recipes/pretrain.py --config llama-125m optim.lr=1e-3  # any field: section.field=value
    accelerate launch --config_file configs/accelerate/8gpu-fsdp2.yaml recipes/pretrain.py --config llama-1b
    python recipes/pretrain.py --resume                           # continue the run in run_dir exactly

Each optimizer step consumes `run.global_batch_size` sequences whatever the number of processes; the loss is the
mean next-token cross-entropy over all of them (summed per micro-batch, divided by the global target count), so a
run on W processes follows the same trajectory as one process with gradient accumulation. Every `eval.every` steps
and at the end it logs the loss on held-out documents (fa3nn_train.evaluation), which training never sees.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `fa3nn_train` imports however this script is launched

import torch  # noqa: E402
from fa3nn_train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint, trainer_state  # noqa: E402
from fa3nn_train.config import check_resume, load_config  # noqa: E402
from fa3nn_train.corpus import load_documents  # noqa: E402
from fa3nn_train.data import BlockStream, micro_batches, prefetched  # noqa: E402
from fa3nn_train.evaluation import build_eval_set, eval_due, evaluate, hold_out  # noqa: E402
from fa3nn_train.metrics_logger import MetricsLogger, drop_steps_after, format_line  # noqa: E402
from fa3nn_train.model import build_model, flops_per_token, loss_sum  # noqa: E402
from fa3nn_train.optim import apply_config_after_resume, build_optimizer, build_scheduler  # noqa: E402
from fa3nn_train.runtime import make_accelerator, start_trackers  # noqa: E402
from fa3nn_train.stall_watch import StallWatch  # noqa: E402
from fa3nn_train.tokenizer import load_tokenizer  # noqa: E402

import fa3nn  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tiny", help="a name in configs/ (tiny, llama-125m, ...) or a .toml path")
    parser.add_argument("--run-dir", help="where metrics, wandb files and checkpoints go (default: run.run_dir)")
    parser.add_argument("--resume", action="store_true", help="continue from run_dir/checkpoints/latest")
    parser.add_argument("--no-wandb", action="store_true", help="log to metrics.jsonl and stdout only")
    parser.add_argument("overrides", nargs="*", metavar="section.field=value")
    return parser.parse_intermixed_args(argv)  # overrides before and after options


def main(argv=None, keep_process_group: bool = False) -> list[dict]:
    """Train; returns the logged metrics. keep_process_group leaves torch.distributed up for a next run in the same
    processes (compare_attention): re-initializing a destroyed group can hang under torchrun (seen with gloo)."""
    args = parse_args(argv)
    config = load_config(args.config, args.overrides + (["run.wandb=false"] if args.no_wandb else []))
    run, data = config.run, config.data
    run_dir = Path(args.run_dir or run.run_dir.format(config=config.name))
    run_dir.mkdir(parents=True, exist_ok=True)
    accelerator = make_accelerator(config, run_dir)
    world, rank = accelerator.num_processes, accelerator.process_index
    accum = run.grad_accum_steps(world)
    torch.manual_seed(run.seed)  # same init on every process

    cache_dir = Path(data.cache_dir).expanduser()
    with accelerator.main_process_first():  # the main process builds the corpus and tokenizer, the others load them
        corpus, text_field = load_documents(data, cache_dir)
        fingerprint = getattr(corpus, "_fingerprint", None) or f"{data.source}|{data.hub_config}|{data.split}"
        dataset, held_out = hold_out(corpus, config.eval.holdout_documents, data.streaming, text_field)
        if held_out is not None:  # the local tokenizer learns from the training documents alone
            fingerprint += f"|holdout {config.eval.holdout_documents}"
        tokenizer = load_tokenizer(data, dataset, text_field, cache_dir, fingerprint)
        eval_set = build_eval_set(config, held_out, text_field, tokenizer, cache_dir, rank, world)

    model = build_model(config.model, tokenizer.vocab_size, data.seq_len)
    flops = flops_per_token(model, config.model, data.seq_len)
    if config.model.compile:
        model = torch.compile(model)
    optimizer = build_optimizer(model, config.optim)
    scheduler = build_scheduler(optimizer, config.optim, run.max_steps)
    model, optimizer = accelerator.prepare(model, optimizer)

    start_step, state = 0, {"tokens_seen": 0, "wandb_id": None}
    if args.resume:
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            raise SystemExit(f"--resume: no checkpoint under {run_dir / 'checkpoints'}; run without --resume first")
        saved = trainer_state(checkpoint)
        check_resume(saved.get("config"), config, checkpoint.name, saved["step"])
        state = load_checkpoint(accelerator, checkpoint, model, optimizer, scheduler)
        apply_config_after_resume(optimizer, scheduler, config.optim)  # optim.* and run.max_steps as given now
        start_step = state["step"]
        if accelerator.is_main_process:  # lines a crashed run logged after its last checkpoint are logged again
            drop_steps_after(run_dir / "metrics.jsonl", start_step)
        accelerator.print(f"resumed from {checkpoint} at step {start_step}")
    elif accelerator.is_main_process:
        (run_dir / "metrics.jsonl").unlink(missing_ok=True)  # a fresh run starts a fresh log
    n_params = sum(p.numel() for p in accelerator.unwrap_model(model).parameters())
    launch = {"processes": world, "grad_accum_steps": accum, "run_dir": str(run_dir), "params": n_params,
              "flops_per_token": flops, "device": _device_name(accelerator.device)}
    state["wandb_id"] = start_trackers(accelerator, config, run_dir, state.get("wandb_id"), launch)
    accelerator.print(
        f"{config.name}: {n_params / 1e6:.1f}M params, attention={config.model.attention}, {world} process(es) x "
        f"{run.micro_batch_size} seqs x {accum} accumulation = {run.global_batch_size} seqs of {data.seq_len} tokens;"
        f" tokenizer {tokenizer.name} ({tokenizer.vocab_size} tokens); run dir {run_dir}"
    )
    if eval_set is not None:
        accelerator.print(eval_set.description)

    stream = BlockStream(dataset, text_field, tokenizer, data.seq_len, data.keep_boundaries, run.seed,
                         data.streaming, data.shuffle_buffer, data.block_shuffle_buffer)
    batches = prefetched(micro_batches(stream, start_step, run.global_batch_size, run.micro_batch_size, rank, world),
                         data.prefetch_steps)
    tokens_per_step = run.global_batch_size * data.seq_len
    logger = MetricsLogger(accelerator, run_dir, flops, tokens_per_step)
    progress = _progress(accelerator, start_step, run.max_steps)
    history, device = [], accelerator.device
    if run.warmup_steps_excluded == 0:
        logger.start_window(start_step)
    # Host-side stall finder. The stall it was added for (6-10 s every 42nd step of llama-1b on 2 H200s) was the
    # block shuffle buffer refilling at each epoch end, fixed in data.BlockStream.
    stall_file = (run_dir / f"stalls-rank{rank}.txt").open("a") if run.stall_dump_s > 0 else None
    stall_watch = StallWatch(run.stall_dump_s, stall_file) if stall_file is not None else None
    for step in range(start_step, run.max_steps):
        if stall_watch is not None:  # stacks of every thread if this step is still running after stall_dump_s
            stall_watch.arm(step + 1)
        micro, global_targets = next(batches)
        micro = [batch.to(device) for batch in micro]
        loss_total = torch.zeros((), device=device)
        for i, batch in enumerate(micro):
            sync = contextlib.nullcontext() if i == accum - 1 else accelerator.no_sync(model)
            with sync:
                loss, _ = loss_sum(model, batch)
                accelerator.backward(loss * (world / global_targets))  # DDP/FSDP average over processes
            loss_total += loss.detach()
        if config.model.fp8_attention:  # delayed scaling: fold (all-reduce) the step's amaxes once, on every rank
            fa3nn.sync_amax(model)
        grad_norm = accelerator.clip_grad_norm_(model.parameters(), config.optim.grad_clip or float("inf"))
        optimizer.step()
        lr = scheduler.get_last_lr()[0]  # the rate this step trained with; after scheduler.step() it is the next's
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state["tokens_seen"] += tokens_per_step
        done = step + 1
        if done == start_step + run.warmup_steps_excluded:
            logger.start_window(done)  # tokens/s leaves out allocator warm-up and compilation
        evaluating = eval_set is not None and eval_due(config.eval, done, run.max_steps)
        if done % run.log_every == 0 or done == run.max_steps or evaluating:
            mean_loss = (accelerator.reduce(loss_total, "sum") / global_targets).item()
            metrics = logger.measure(done, mean_loss, lr, float(grad_norm), state["tokens_seen"])
            if evaluating:  # before the checkpoint: a resume from this step does not evaluate it again
                metrics.update(evaluate(model, eval_set, accelerator))
                logger.leave_out(done)  # the evaluation's time is not training's: not in tokens/s
            history.append(logger.write(metrics))
            if accelerator.is_main_process:
                progress.write(format_line(metrics))
        if (run.save_every and done % run.save_every == 0) or done == run.max_steps:
            save_checkpoint(accelerator, run_dir, done, model, optimizer, scheduler,
                            {**state, "config": config.to_dict(), "world_size": world}, run.keep_checkpoints)
            logger.start_window(done)  # leave checkpoint I/O out of tokens/s
        if stall_watch is not None:
            stall_watch.disarm()
        progress.update(1)
    batches.close()  # stops and joins the prefetch thread before the process group and the process go away
    if stall_file is not None:
        stall_file.close()
    progress.close()
    logger.close()
    if keep_process_group:
        for tracker in accelerator.trackers:
            tracker.finish()
    else:
        accelerator.end_training()  # finishes the trackers and destroys the process group
    return history


def _device_name(device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def _progress(accelerator, start: int, total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, desc="pretrain", unit="step", dynamic_ncols=True, file=sys.stdout,
                disable=not accelerator.is_main_process)


if __name__ == "__main__":
    main()
