"""A Hugging Face training step on padded batches through fa3nn.patch_hf, the native varlen backward against the
Triton one it replaced (hopper_bwd.refusal patched to refuse varlen again, so dispatch sends it to triton), and SDPA
(cuDNN / its own padding path) on the same model and batch; and the batch's real tokens packed into one row, by
restarting position_ids (fa3nn reads the mask's layout) or cu_seq_lens alone (no mask work), against SDPA's packed
mask. patch_hf runs a right-padded attention_mask as slots
(fa3nn.slots: q, k, v as views, three packed sequences per row); fa3nn_unpadded is the same with the gather /
scatter unpadding it did before (hf_padding.RIGHT_PADDING_AS_SLOTS = False), which left-padded masks still take.

A Llama-style model from a config (no download): hidden 2048, 16 heads (head dim 128), 4 K/V heads, 8 layers,
bf16 weights; batch 8 x 2048 with lengths uniform in [256, 2048] (seed 0), right-padded. Median step time (forward,
loss, backward; no optimizer) over interleaved rounds, and tokens/s over the real (unpadded) tokens.

    python scripts/hf_varlen_step_ab.py --json out.json [--rounds 5] [--layers 8] [--calls sdpa ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import time_ms  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.integrations import hf_padding  # noqa: E402
from fa3nn.integrations.hf import patch_hf  # noqa: E402


def build(attn: str, layers: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_attention_heads=16, num_key_value_heads=4,
                         num_hidden_layers=layers, vocab_size=32000, max_position_embeddings=4096)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to("cuda", torch.bfloat16)
    if attn == "fa3nn":
        patch_hf(model)
    return model


def batch(batch_size: int, seqlen: int):
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(256, seqlen + 1, (batch_size,), generator=generator)
    ids = torch.randint(0, 32000, (batch_size, seqlen), generator=generator).cuda()
    mask = (torch.arange(seqlen)[None] < lengths[:, None]).cuda()
    labels = ids.masked_fill(~mask, -100)
    return dict(input_ids=ids, attention_mask=mask.long(), labels=labels), int(lengths.sum())


def packed(inputs):
    """The same real tokens flattened into one row: restarting position_ids (transformers reads the packing into the
    mask, fa3nn's mask function reads it back as a layout), or cu_seq_lens alone (no mask work: the baseline of the
    layout's cost). No cache, as in training."""
    mask = inputs["attention_mask"].bool()
    ids, labels = inputs["input_ids"][mask][None], inputs["labels"][mask][None]
    lengths = mask.sum(-1)
    positions = torch.cat([torch.arange(int(n), device=ids.device) for n in lengths])[None]
    cu = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
    common = dict(input_ids=ids, labels=labels, use_cache=False)
    return (dict(common, position_ids=positions),
            dict(common, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=int(lengths.max()),
                 max_length_k=int(lengths.max())))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--calls", nargs="*", default=None, help="a subset of the calls to time (names as in the "
                        "table); default all")
    args = parser.parse_args()
    inputs, tokens = batch(8, 2048)
    models = {"sdpa": build("sdpa", args.layers), "fa3nn": build("fa3nn", args.layers)}
    native_refusal = hopper_bwd.refusal

    def triton_refusal(call):
        return "varlen refused for this A/B" if call.varlen else native_refusal(call)

    by_positions, by_cu_seqlens = packed(inputs)

    def step(model, refusal, slots=True, call_inputs=inputs):
        def run():
            hopper_bwd.refusal, hf_padding.RIGHT_PADDING_AS_SLOTS = refusal, slots
            try:
                model(**call_inputs).loss.backward()
            finally:
                hopper_bwd.refusal, hf_padding.RIGHT_PADDING_AS_SLOTS = native_refusal, True
            model.zero_grad(set_to_none=True)
        return run

    calls = {"sdpa": step(models["sdpa"], native_refusal),
             "fa3nn_native_varlen_bwd": step(models["fa3nn"], native_refusal),
             "fa3nn_unpadded": step(models["fa3nn"], native_refusal, slots=False),
             "fa3nn_triton_varlen_bwd": step(models["fa3nn"], triton_refusal),
             "sdpa_packed_position_ids": step(models["sdpa"], native_refusal, call_inputs=by_positions),
             "fa3nn_packed_position_ids": step(models["fa3nn"], native_refusal, call_inputs=by_positions),
             "fa3nn_packed_cu_seqlens": step(models["fa3nn"], native_refusal, call_inputs=by_cu_seqlens)}
    if args.calls:
        unknown = set(args.calls) - set(calls)
        if unknown or "sdpa" not in args.calls:
            parser.error(f"--calls takes names of {', '.join(calls)} and must include sdpa (the ratios' base); got "
                         f"{', '.join(sorted(unknown)) or 'no sdpa'}")
        calls = {m: c for m, c in calls.items() if m in args.calls}
    samples = {m: [] for m in calls}
    for _ in range(args.rounds):
        for m, c in calls.items():
            samples[m].append(time_ms([c], args.iters, 1))
    result = dict(gpu=torch.cuda.get_device_name(), layers=args.layers, real_tokens=tokens, padded_tokens=8 * 2048,
                  step_ms={m: statistics.median(s) for m, s in samples.items()}, samples_ms=samples)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print("| attention | step ms | real tokens/s | x sdpa |")
    print("|---|---|---|---|")
    for m, ms in result["step_ms"].items():
        print(f"| {m} | {ms:.1f} | {tokens / ms * 1e3:,.0f} | {result['step_ms']['sdpa'] / ms:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
