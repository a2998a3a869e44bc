"""Delayed-scaling state: history and scale updates, bad-amax handling, state_dict round trips, the training
forward's updates, and the once-per-step amax all_reduce across two gloo processes."""

import contextlib
import copy
import datetime
import os
import time
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.checkpoint import checkpoint

from fa3nn import FlashAttentionV3
from fa3nn.backends.base import AttnParams
from fa3nn.fp8 import (
    CurrentScaling,
    DelayedScaling,
    DelayedScalingState,
    HadamardRotation,
    PerTileScaling,
    fp8_attention_forward,
    make_state,
    quantize_qkv,
    sync_amax,
)
from fa3nn.fp8.state import switch_state
from fa3nn.masks import Window

PARAMS = AttnParams(0.125, Window(), 0.0, False)


def _step(state, amax):
    state.observe(torch.tensor(amax, dtype=torch.float32))
    state.update()


def test_make_state():
    assert isinstance(make_state(DelayedScaling()), DelayedScalingState)
    assert isinstance(make_state(PerTileScaling()), HadamardRotation)
    assert make_state(PerTileScaling(incoherent=False)) is None
    assert make_state(CurrentScaling()) is None and make_state(None) is None
    with pytest.raises(TypeError, match="recipe"):
        make_state("per_tile")


def test_history_and_scale_max_vs_most_recent():
    for algo, expect_k in (("max", 8.0), ("most_recent", 2.0)):
        state = DelayedScalingState(DelayedScaling(amax_history_len=3, amax_compute_algo=algo))
        assert not state.started
        _step(state, [1.0, 8.0, 4.0])
        assert state.started
        _step(state, [2.0, 2.0, 448.0])
        assert state.amax_history.tolist() == [[2.0, 2.0, 448.0], [1.0, 8.0, 4.0], [0.0, 0.0, 0.0]]
        expect = [448 / 2.0, 448 / expect_k, 1.0] if algo == "max" else [224.0, 224.0, 1.0]
        torch.testing.assert_close(state.scale, torch.tensor(expect), rtol=0, atol=0)
    _step(state, [4.0, 4.0, 4.0])
    _step(state, [7.0, 7.0, 7.0])  # history of 3: the oldest row (1, 8, 4) falls out
    assert state.amax_history[:, 0].tolist() == [7.0, 4.0, 2.0]


def test_margin():
    state = DelayedScalingState(DelayedScaling(margin=3))
    _step(state, [1.0, 2.0, 4.0])
    torch.testing.assert_close(state.scale, torch.tensor([56.0, 28.0, 14.0]), rtol=0, atol=0)


def test_observe_keeps_the_max_of_a_step():
    state = DelayedScalingState(DelayedScaling())
    state.observe(torch.tensor([1.0, 5.0, 2.0]))
    state.observe(torch.tensor([3.0, 1.0, 2.0]))
    state.update()
    assert state.amax_history[0].tolist() == [3.0, 5.0, 2.0]
    assert not state.pending and state.pending_amax.tolist() == [0.0, 0.0, 0.0]
    state.update()  # nothing pending: no change, nothing counted
    assert state.amax_history[1].tolist() == [0.0, 0.0, 0.0] and state.skipped_updates.tolist() == [0, 0, 0]


def test_bad_amax_keeps_previous_scale_counts_and_warns_once():
    state = DelayedScalingState(DelayedScaling(amax_history_len=4))
    _step(state, [2.0, 2.0, 2.0])
    scale = state.scale.clone()
    _step(state, [float("nan"), 0.0, float("inf")])
    torch.testing.assert_close(state.scale, scale, rtol=0, atol=0)
    assert state.skipped_updates.tolist() == [1, 1, 1]
    assert state.amax_history[1].tolist() == [0.0, 0.0, 0.0]  # bad amaxes are not pushed
    _step(state, [4.0, float("nan"), 1.0])
    assert state.skipped_updates.tolist() == [1, 2, 1]
    torch.testing.assert_close(state.scale, torch.tensor([112.0, 224.0, 224.0]), rtol=0, atol=0)
    model = nn.ModuleDict({"attn": state})
    with pytest.warns(UserWarning, match="amax was 0, NaN or Inf"):
        assert sync_amax(model) == 0  # single process: no all_reduce, only the check
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sync_amax(model)  # once


def test_switching_delayed_recipes_keeps_skipped_updates():
    """switch_state (assigning a layer's fp8_recipe, DelayedScaling to DelayedScaling) keeps skipped_updates, as its
    docstring says: a new state started from [0, 0, 0] lost the [0, 1, 2] skips counted here (NaN and 0, then Inf),
    and test_fp8_api's switching test never skips."""
    old = DelayedScalingState(DelayedScaling(amax_history_len=4))
    _step(old, [1.0, float("nan"), 0.0])
    _step(old, [2.0, 3.0, float("inf")])
    assert old.skipped_updates.tolist() == [0, 1, 2]
    new = switch_state(old, old.recipe, DelayedScaling(amax_history_len=2, margin=1), 0)
    assert new.skipped_updates.tolist() == [0, 1, 2]
    assert new.amax_history.tolist() == [[2.0, 3.0, 0.0], [1.0, 0.0, 0.0]]  # v never had a good amax
    assert new.scale.tolist() == pytest.approx([448 / 2 / 2, 448 / 3 / 2, 1.0], rel=1e-6)  # margin 1; v's placeholder


def test_state_dict_round_trip_is_exact():
    recipe = DelayedScaling(amax_history_len=5)
    state = DelayedScalingState(recipe)
    for amax in ([1.5, 2.0, 3.0], [0.3, 7.0, float("nan")], [2.25, 0.5, 1.0]):
        _step(state, amax)
    saved = state.state_dict()
    assert set(saved) == {"amax_history", "scale", "skipped_updates"}
    restored = DelayedScalingState(recipe)
    restored.load_state_dict(saved)
    for name in saved:
        assert torch.equal(getattr(restored, name), getattr(state, name)), name
    assert restored.started  # read back from the loaded history
    q, k, v = (torch.randn(1, 64, 2, 32) * 3 for _ in range(3))
    a, b = quantize_qkv(q, k, v, recipe, state), quantize_qkv(q, k, v, recipe, restored)
    assert torch.equal(a.q.view(torch.uint8), b.q.view(torch.uint8)) and torch.equal(a.v_descale, b.v_descale)


def test_first_forward_scales_from_its_own_amax_then_delayed():
    recipe = DelayedScaling()
    state = make_state(recipe)
    q, k, v = (torch.randn(1, 64, 2, 32) for _ in range(3))
    q[0, 3, 1, 7] = 20.0
    first = quantize_qkv(q, k, v, recipe, state)
    assert first.q_descale.flatten()[0].item() == pytest.approx(20.0 / 448, rel=1e-6)
    fp8_attention_forward(q, k, v, PARAMS, recipe, state, training=True)  # observes
    assert state.amax_history[0, 0] == 0.0 and state.pending_amax[0] == 20.0
    sync_amax(state)  # updates (single process: no reduction)
    assert state.amax_history[0, 0] == 20.0
    later = quantize_qkv(q * 0.5, k, v, recipe, state)
    assert later.q_descale.flatten()[0].item() == pytest.approx(20.0 / 448, rel=1e-6)  # the delayed scale


def test_training_forward_observes_every_call_eval_does_not():
    """Training forwards max-accumulate their amax, sync_amax folds it in once per step (single process too); the
    scales do not move in between. Eval forwards record nothing."""
    recipe = DelayedScaling(amax_history_len=8)
    state = make_state(recipe)
    q, k, v = (torch.randn(2, 40, 2, 32) for _ in range(3))
    for step in range(3):
        fp8_attention_forward(q * (step + 1), k, v, PARAMS, recipe, state, training=True)
        scale = state.scale.clone()
        fp8_attention_forward(q * 0.5, k, v, PARAMS, recipe, state, training=True)  # a second call in the step
        assert torch.equal(state.scale, scale) and state.pending_amax[0] == (q * (step + 1)).abs().max()
        sync_amax(state)
    assert state.amax_history[:3, 0].tolist() == pytest.approx([3 * q.abs().max().item(), 2 * q.abs().max().item(),
                                                                q.abs().max().item()], rel=1e-6)
    history = state.amax_history.clone()
    fp8_attention_forward(q * 10, k, v, PARAMS, recipe, state, training=False)
    assert torch.equal(state.amax_history, history) and not state.pending


@pytest.mark.parametrize("recipe", [PerTileScaling(), CurrentScaling(), DelayedScaling(amax_history_len=4)],
                         ids=["per_tile", "current", "delayed"])
def test_training_after_an_inference_mode_evaluation(recipe):
    """A layer first called under torch.inference_mode (an evaluation before training) then trains: nothing it
    cached in the evaluation may be an inference tensor (the incoherent rotation was one: 'Inference tensors cannot
    be saved for backward' at the first training step). Its outputs are those of a layer that never evaluated."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 64, 2, 64) for _ in range(3))
    evaluated, fresh = (FlashAttentionV3(causal=True, fp8=recipe) for _ in range(2))
    with torch.inference_mode():
        evaluated.eval()(q, k, v)
    outputs, grads = [], []
    for layer in (evaluated.train(), fresh):
        leaf = q.clone().requires_grad_()
        out = layer(leaf, k, v)
        out.sum().backward()
        outputs.append(out.detach())
        grads.append(leaf.grad)
    assert torch.equal(outputs[0], outputs[1]) and torch.equal(grads[0], grads[1])
    assert grads[0].abs().sum() > 0


def test_stateless_fp8_call_trains_after_an_inference_mode_call():
    """The same through fa3nn.flash_attn_func(fp8="per_tile"), whose rotation lives in a module-level cache."""
    from fa3nn import flash_attn_func

    q, k, v = (torch.randn(1, 64, 2, 64) for _ in range(3))
    with torch.inference_mode():
        evaluated = flash_attn_func(q, k, v, causal=True, fp8="per_tile")
    leaf = q.clone().requires_grad_()
    trained = flash_attn_func(leaf, k, v, causal=True, fp8="per_tile")
    trained.sum().backward()
    assert torch.equal(trained.detach(), evaluated) and leaf.grad.abs().sum() > 0


@pytest.mark.parametrize("recipe", [PerTileScaling(), CurrentScaling()], ids=["per_tile", "current"])
def test_a_layer_made_under_inference_mode_trains_without_delayed_state(recipe):
    """Made under inference_mode, a layer whose recipe keeps no state to update (its Hadamard signs are inference
    tensors) evaluates and trains, with the outputs of one made outside it."""
    q, k, v = (torch.randn(1, 64, 2, 64) for _ in range(3))
    with torch.inference_mode():
        made_inside = FlashAttentionV3(causal=True, fp8=recipe)
        inside_eval = made_inside(q, k, v)
    made_outside = FlashAttentionV3(causal=True, fp8=recipe)
    leaf = q.clone().requires_grad_()
    trained = made_inside(leaf, k, v)
    trained.sum().backward()
    assert torch.equal(inside_eval, made_outside(q, k, v).detach()) and torch.equal(trained.detach(), inside_eval)
    assert leaf.grad.abs().sum() > 0


def test_delayed_state_made_under_inference_mode_refuses_training_by_name():
    """Its amax history cannot be updated outside inference_mode: training says so and what to do instead of
    torch's 'Inplace update to inference tensor' (evaluation, under inference_mode or eval(), still runs)."""
    q, k, v = (torch.randn(1, 64, 2, 64) for _ in range(3))
    with torch.inference_mode():
        layer = FlashAttentionV3(causal=True, fp8=DelayedScaling(amax_history_len=4))
        layer(q, k, v)
    layer.eval()(q, k, v)
    with pytest.raises(RuntimeError, match=r"DelayedScaling state .* created under torch\.inference_mode\(\).*"
                                           r"create the module outside inference_mode"):
        layer.train()(q.clone().requires_grad_(), k, v)


# --- two gloo processes ---------------------------------------------------------------------------------------


def _count_all_reduces() -> tuple[list, object]:
    """dist.all_reduce wrapped (in this worker process) to record each call's tensor shape in the returned list;
    also returns the original, to put back."""
    calls, all_reduce = [], dist.all_reduce

    def counting_all_reduce(tensor, *args, **kwargs):
        calls.append(tuple(tensor.shape))
        return all_reduce(tensor, *args, **kwargs)

    dist.all_reduce = counting_all_reduce
    return calls, all_reduce


def _worker(rank, world, init_file, nan_rank, results):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        recipe = DelayedScaling(amax_history_len=4)
        layers = nn.ModuleList([make_state(recipe) for _ in range(3)])
        calls, all_reduce = _count_all_reduces()
        q, k, v = (torch.randn(1, 32, 2, 16) for _ in range(3))
        q[0, 0, 0, 0] = 10.0 * (rank + 1)  # rank 1 holds the larger q amax
        v[0, 0, 0, 0] = float("nan") if rank == nan_rank else 1.0
        for _ in range(2):  # two micro-batches in one step: observed, not yet folded into the history
            fp8_attention_forward(q, k, v, PARAMS, recipe, layers[0], training=True)
        if rank == 0:  # layer 1 runs on rank 0 only; layer 2 runs on no rank
            fp8_attention_forward(q, k, v, PARAMS, recipe, layers[1], training=True)
        pending_before = layers[0].amax_history.abs().sum().item()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            groups = sync_amax(layers)
        dist.all_reduce = all_reduce
        results[rank] = dict(
            pending_before=pending_before,
            calls=calls,
            groups=groups,
            history=[layer.amax_history.clone() for layer in layers],
            scale=[layer.scale.clone() for layer in layers],
            skipped=[layer.skipped_updates.tolist() for layer in layers],
            warned=any("NaN" in str(w.message) for w in caught),
            expected_k=k.abs().max().item(),
        )
    finally:
        dist.destroy_process_group()


GLOO = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                          reason="needs torch.distributed with the gloo backend")


@GLOO
@pytest.mark.parametrize("nan_rank", [0, 1])
def test_sync_amax_two_gloo_processes(tmp_path, nan_rank):
    """One all_reduce for all layers; every rank ends with the max over ranks; a NaN amax on either rank is a bad amax
    on both. gloo's MAX keeps a NaN that comes first (rank 0's) and drops one that comes second (max(3.1, NaN) =
    3.1), so with the NaN on rank 1 only observe()'s NaN -> +Inf keeps it: without that, v's amax from rank 0 (3.12)
    was pushed and skipped_updates stayed [0, 0, 0] on both ranks."""
    results = mp.Manager().dict()
    mp.spawn(_worker, args=(2, os.fspath(tmp_path / "store"), nan_rank, results), nprocs=2, join=True)
    r0, r1 = results[0], results[1]
    for r in (r0, r1):
        assert r["pending_before"] == 0.0  # distributed: nothing updated in the forward
        # ONE all_reduce for all layers: (layers, q/k/v + flag), after the first sync's check of the layer count
        assert r["calls"] == [(2,), (3, 4)] and r["groups"] == 1
        # a NaN on one rank is a bad amax on all ranks (not dropped by MAX); the message: what was pushed instead
        assert r["skipped"][0] == [0, 0, 1], r["history"][0][0]
        assert r["warned"]
    for layer in range(3):
        assert torch.equal(r0["history"][layer], r1["history"][layer])  # every rank holds the same history
        assert torch.equal(r0["scale"][layer], r1["scale"][layer])
    assert r0["history"][0][0, 0].item() == 20.0  # the max over ranks
    assert r0["history"][0][0, 1].item() == max(r0["expected_k"], r1["expected_k"])
    assert r0["scale"][0][2].item() == 1.0 and r0["history"][0][0, 2].item() == 0.0  # v keeps its initial scale
    assert r1["history"][1][0, 0].item() == 10.0  # layer 1 ran on rank 0 only; rank 1 gets its amax too
    assert r0["history"][2].abs().sum().item() == 0.0 and r0["skipped"][2] == [0, 0, 0]  # ran nowhere: untouched


def _training_loop_worker(rank, world, init_file, results):
    """Two FlashAttentionV3 layers per rank, each called twice per step (gradient accumulation), checkpointed, with an
    eval forward between steps; then the same layers synced over a one-rank group passed to sync_amax."""
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        own_group = [dist.new_group([r]) for r in range(world)][rank]  # every rank creates every group
        calls, all_reduce = _count_all_reduces()
        recipe = DelayedScaling(amax_history_len=3, margin=1)
        model = nn.ModuleList([FlashAttentionV3(fp8=recipe, layer_idx=i) for i in range(2)]).train()

        def block(q, k, v):
            return model[1](model[0](q, k, v), k, v).float().square()

        step_amax = []  # this rank's per-step max over both micro-batches, of layer 0's q, k, v
        for step in range(4):
            amax = torch.zeros(3)
            for micro_batch in range(2):
                generator = torch.Generator().manual_seed(100 * step + 10 * micro_batch + rank)
                q, k, v = (torch.randn(1, 16, 2, 16, generator=generator).mul(rank + step + 1).requires_grad_()
                           for _ in range(3))
                amax = torch.maximum(amax, torch.stack([t.detach().abs().max() for t in (q, k, v)]))
                checkpoint(block, q, k, v, use_reentrant=False).sum().backward()
            model.eval()
            with torch.no_grad():
                block(q * 100, k, v)  # eval: records nothing
            model.train()
            step_amax.append(amax)
            sync_amax(model)
        results[rank] = dict(
            calls=list(calls),
            history=[layer.fp8_state.amax_history.clone() for layer in model],
            scale=[layer.fp8_state.scale.clone() for layer in model],
            step_amax=torch.stack(step_amax),
        )
        dist.all_reduce = all_reduce
        # A one-rank group given to sync_amax (a data-parallel group of one: tensor parallelism over the world):
        # the forward left its amax for the hook, which must fold it in without a reduction.
        layer = FlashAttentionV3(fp8=DelayedScaling(amax_history_len=3)).train()
        q, k, v = (torch.full((1, 16, 2, 16), float(rank + 2 + i)) for i in range(3))
        layer(q, k, v)
        reductions = sync_amax(layer, group=own_group)
        results[rank] = dict(results[rank], own_group=dict(
            reductions=reductions, history=layer.fp8_state.amax_history[0].tolist(),
            pending=bool(layer.fp8_state.pending), scale=layer.fp8_state.scale.tolist()))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def training_loop_results(tmp_path_factory):
    results = mp.Manager().dict()
    init_file = os.fspath(tmp_path_factory.mktemp("gloo") / "store")
    mp.spawn(_training_loop_worker, args=(2, init_file, results), nprocs=2, join=True)
    return results[0], results[1]


@GLOO
def test_sync_amax_two_gloo_processes_training_loop(training_loop_results):
    """Once per step, not per layer call: 4 steps of 2 layers x 2 micro-batches (checkpointed, so each forward runs
    twice) make 4 all_reduces of one (layers, 4) tensor (and one of the layer count before the first); every rank
    ends with the same history and scales, the history holding the max over ranks of each step's amax and
    scale = 448 / max(history) / 2**margin."""
    r0, r1 = training_loop_results
    assert r0["calls"] == r1["calls"] == [(2,)] + [(2, 4)] * 4  # the layer count checked at the first sync only
    for layer in range(2):
        assert torch.equal(r0["history"][layer], r1["history"][layer])
        assert torch.equal(r0["scale"][layer], r1["scale"][layer])
    expect = torch.maximum(r0["step_amax"], r1["step_amax"])  # (steps, 3): max over ranks
    assert torch.equal(r0["history"][0], expect.flip(0)[:3])  # newest first; history of 3: step 0 rolled out
    history_max = r0["history"][0].amax(dim=0)
    assert torch.equal(r0["scale"][0], (448.0 / 2) / history_max)


@GLOO
def test_sync_amax_over_a_one_rank_group_updates(training_loop_results):
    """sync_amax(model, group=<a one-rank group>) while the recipe reduces over the world: the forward deferred its
    update to the hook, and the hook skipped states with nothing to reduce, so the history stayed empty for good and
    every forward quantized with its own amax (pending was never folded in)."""
    for rank, result in enumerate(training_loop_results):
        got = result["own_group"]
        assert got["reductions"] == 0
        assert got["history"] == [rank + 2.0, rank + 3.0, rank + 4.0] and not got["pending"]
        assert got["scale"] == (448.0 / torch.tensor([rank + 2.0, rank + 3.0, rank + 4.0])).tolist()


@pytest.mark.parametrize("bad", ["model", None, 3, ["layer"]])
def test_sync_amax_names_what_it_takes(bad):
    """A string was iterated character by character and nothing synced (returned 0); None failed in iter()."""
    with pytest.raises(TypeError, match=r"sync_amax"):
        sync_amax(bad)


def test_hadamard_signs_take_any_seed():
    """Seeds mix with the layer index below 2**64 (torch.Generator's range): 2**70 once failed at the first call."""
    from fa3nn.fp8 import HadamardRotation

    big = HadamardRotation(2**70, 3).hadamard_signs
    assert big.abs().eq(1).all() and torch.equal(big, HadamardRotation(2**70 % 2**64, 3).hadamard_signs)
    assert torch.equal(HadamardRotation(5, 2).hadamard_signs, HadamardRotation(5, 2).hadamard_signs)
    with pytest.raises(TypeError, match=r"layer_idx must be an int >= 0"):
        HadamardRotation(0, "a")
    with pytest.raises(ValueError, match=r"seed must be an int >= 0, got -1"):
        HadamardRotation(-1, 0)


def test_a_tensor_with_no_amax_yet_scales_from_this_call():
    """A first step whose V amax was 0 (NaN and Inf alike: not pushed) leaves V's history column empty and its scale
    the placeholder 1.0. The next forward quantized V with that 1.0, since `started` asked whether the history held
    any amax at all: V at 1e-3 then fell into e4m3's subnormals (output SQNR 5 dB against 26 with its own amax)."""
    recipe = DelayedScaling()
    state = make_state(recipe)
    q, k, v = (torch.randn(1, 64, 2, 32) for _ in range(3))
    fp8_attention_forward(q, k, torch.zeros_like(v), PARAMS, recipe, state, training=True)
    sync_amax(state)
    assert state.skipped_updates.tolist() == [0, 0, 1] and state.scale[2].item() == 1.0
    small_v = v * 1e-3
    for quantize in (quantize_qkv, torch.compile(quantize_qkv, fullgraph=True, backend="eager")):
        quantized = quantize(q * 0.5, k, small_v, recipe, state)
        assert quantized.q_descale.flatten()[0].item() == pytest.approx(q.abs().max().item() / 448, rel=1e-6)
        assert quantized.v_descale.flatten()[0].item() == pytest.approx(small_v.abs().max().item() / 448, rel=1e-6)
    fp8_attention_forward(q, k, small_v, PARAMS, recipe, state, training=True)
    sync_amax(state)
    assert state.amax_history[0, 2].item() == small_v.abs().max().item() and state.started
    assert state.scale[2].item() == (448.0 / small_v.abs().max()).item()


def test_skip_warning_points_at_the_sync_amax_call():
    """The warning's stacklevel counted sync_amax's frames without the wrapper of its torch.no_grad() decorator, so
    it named torch/utils/_contextlib.py as its source rather than the training loop's sync_amax line."""
    state = DelayedScalingState(DelayedScaling())
    _step(state, [1.0, 0.0, 1.0])
    with pytest.warns(UserWarning, match="amax was 0, NaN or Inf") as caught:
        sync_amax(state)
    assert [w.filename for w in caught] == [__file__]


def _spawn_with_timeout(worker, world: int, init_file: str, results, seconds: float = 60.0) -> None:
    """mp.spawn that cannot hang the suite: joins for at most `seconds`, then kills the workers and fails."""
    context = mp.start_processes(worker, args=(world, init_file, results), nprocs=world, join=False,
                                 start_method="spawn")
    deadline = time.monotonic() + seconds
    while not context.join(timeout=1.0):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"{worker.__name__} did not finish in {seconds} s")


def _layer_count_mismatch_worker(rank, world, init_file, results):
    """Rank r holds 2 + r delayed-scaling layers (pipeline stages synced over the world by mistake)."""
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    try:
        model = nn.ModuleList([FlashAttentionV3(fp8=DelayedScaling(amax_history_len=4), layer_idx=i)
                               for i in range(2 + rank)]).train()
        q, k, v = (torch.randn(1, 32, 2, 16) for _ in range(3))
        for layer in model:
            layer(q, k, v)
        try:
            sync_amax(model)
            results[rank] = "no error"
        except RuntimeError as error:
            results[rank] = str(error)
    finally:
        dist.destroy_process_group()


@GLOO
def test_sync_amax_refuses_ranks_with_different_layers(tmp_path):
    """Ranks whose models hold different numbers of DelayedScaling layers packed tensors of different sizes into one
    all_reduce: gloo aborted the worker process (SIGABRT, 'Received data size doesn't match expected size'), NCCL
    would hang or mix one layer's amaxes into another's. Every rank must raise, naming both counts."""
    results = mp.Manager().dict()
    _spawn_with_timeout(_layer_count_mismatch_worker, 3, os.fspath(tmp_path / "store"), results)
    for rank in range(3):
        assert "different numbers of DelayedScaling layers" in results[rank], results[rank]
        assert f"this rank {2 + rank}" in results[rank] and "2 to 4" in results[rank], results[rank]


def test_loading_a_history_rescales_it_with_this_layers_recipe():
    """The loaded `scale` was kept as saved: a checkpoint of DelayedScaling(margin=1) loaded into a margin-0 layer
    quantized its next forward with half the recipe's scale (224 / amax for 448 / amax), and one saved under "max"
    loaded into "most_recent" with the history's max, silently, until the next update. The scales are recomputed
    from the loaded history with the layer's recipe, as switching fp8_recipe does; a history of another length is
    refused naming amax_history_len."""
    saved = DelayedScalingState(DelayedScaling(amax_history_len=3, margin=1))
    _step(saved, [8.0, 4.0, 2.0])
    _step(saved, [1.0, 1.0, 1.0])
    for recipe, expect in ((DelayedScaling(amax_history_len=3), [56.0, 112.0, 224.0]),
                           (DelayedScaling(amax_history_len=3, amax_compute_algo="most_recent"), [448.0] * 3),
                           (DelayedScaling(amax_history_len=3, margin=1), [28.0, 56.0, 112.0])):
        loaded = DelayedScalingState(recipe)
        loaded.load_state_dict(saved.state_dict())
        assert loaded.scale.tolist() == expect, recipe
        assert torch.equal(loaded.amax_history, saved.amax_history)
    empty = DelayedScalingState(DelayedScaling(amax_history_len=3, margin=2))
    empty.load_state_dict(DelayedScalingState(DelayedScaling(amax_history_len=3)).state_dict())
    assert empty.scale.tolist() == [1.0, 1.0, 1.0] and not empty.started  # no history: the placeholder stays
    with pytest.raises(RuntimeError, match=r"amax_history_len=3.*amax_history_len=5"):
        DelayedScalingState(DelayedScaling(amax_history_len=5)).load_state_dict(saved.state_dict())


def _deepcopy_worker(rank, world, init_file, results):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    try:
        group = dist.new_group([0])
        layer = FlashAttentionV3(fp8=DelayedScaling(amax_history_len=4, process_group=group)).train()
        q, k, v = (torch.randn(1, 32, 2, 16) for _ in range(3))
        layer(q, k, v)
        try:
            copied = copy.deepcopy(layer)
        except TypeError as error:
            results[rank] = str(error)
            return
        results[rank] = dict(same_group=copied.fp8_recipe.process_group is group,
                             same_recipe=copied.fp8_recipe == layer.fp8_recipe,
                             history=torch.equal(copied.fp8_state.amax_history, layer.fp8_state.amax_history),
                             own_history=copied.fp8_state.amax_history is not layer.fp8_state.amax_history)
    finally:
        dist.destroy_process_group()


@GLOO
def test_deepcopy_of_a_layer_reducing_over_a_group(tmp_path):
    """copy.deepcopy(model) (an EMA copy, a reference model) failed with "cannot pickle ProcessGroup" once the
    DelayedScaling recipe named a process group: the copy now shares the group and owns a copy of the state."""
    results = mp.Manager().dict()
    _spawn_with_timeout(_deepcopy_worker, 1, os.fspath(tmp_path / "store"), results)
    assert results[0] == dict(same_group=True, same_recipe=True, history=True, own_history=True), results[0]


class _ProjectedAttention(nn.Module):
    """A Linear (so that DDP has parameters) in front of a DelayedScaling layer."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.attn = FlashAttentionV3(fp8=DelayedScaling(amax_history_len=4), backend="reference")

    def forward(self, q, k, v):
        return self.attn(self.proj(q), k, v)


def _ddp_accumulation_worker(rank, world, init_file, results):
    """Two steps of three micro-batches under DDP(broadcast_buffers=True); rank 1's first micro-batch holds by far
    the largest q. Per no_sync setting: (the q amax the history should hold, the one it holds) per step, and
    whether every rank holds the same history and scales."""
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    try:
        out = {}
        for use_no_sync in (False, True):
            torch.manual_seed(0)
            model = _ProjectedAttention().train()
            ddp = nn.parallel.DistributedDataParallel(model, broadcast_buffers=True)
            steps = []
            for step in range(2):
                seen = torch.zeros(())
                for micro in range(3):
                    generator = torch.Generator().manual_seed(100 * step + 10 * micro + rank)
                    q, k, v = (torch.rand(1, 8, 2, 16, generator=generator) + 0.1 for _ in range(3))
                    if rank == 1 and micro == 0:
                        q = q * 100.0
                    sync = ddp.no_sync() if use_no_sync and micro < 2 else contextlib.nullcontext()
                    with sync:
                        ddp(q, k, v).float().sum().backward()
                    with torch.no_grad():
                        seen = torch.maximum(seen, model.proj(q).abs().max())
                dist.all_reduce(seen, op=dist.ReduceOp.MAX)
                sync_amax(ddp)
                state = model.attn.fp8_state
                every = [torch.zeros(5, 3) for _ in range(world)]
                dist.all_gather(every, torch.cat([state.amax_history, state.scale.unsqueeze(0)]))
                steps.append((float(seen), float(state.amax_history[0, 0]),
                              all(torch.equal(every[0], other) for other in every)))
                ddp.zero_grad()
            out[use_no_sync] = steps
        results[rank] = out
    finally:
        dist.destroy_process_group()


@GLOO
def test_sync_amax_under_ddp_broadcast_buffers_keeps_every_micro_batch(tmp_path):
    """DistributedDataParallel(broadcast_buffers=True) (its default, and accelerate's) broadcasts every buffer from
    rank 0 before a forward that follows a synced one. With pending_amax / pending as (non-persistent) buffers, the
    amaxes rank 1 observed in earlier micro-batches of a step were replaced by rank 0's whenever gradient
    accumulation ran without no_sync (or accelerate's sync_each_batch=True): the history got 1.27 for 121.8 here,
    and the next steps quantized rank 1's q with a scale ~100 times too large (saturating)."""
    results = mp.Manager().dict()
    _spawn_with_timeout(_ddp_accumulation_worker, 2, os.fspath(tmp_path / "store"), results)
    for rank in range(2):
        for use_no_sync, steps in results[rank].items():
            for expect, got, same in steps:
                assert expect > 50.0 and got == pytest.approx(expect, rel=1e-6), (rank, use_no_sync, steps)
                assert same, (rank, use_no_sync, steps)
