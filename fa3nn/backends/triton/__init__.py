"""The portable Triton backend: forward and backward on any NVIDIA GPU from sm_80 (A100) on, and on the CPU under
Triton's interpreter (TRITON_INTERPRET=1, for tests).

On the CPU it needs two switches: TRITON_INTERPRET=1, set before triton is first imported (Triton decorates its
own standard library in interpreter mode only then), and FA3NN_TRITON_CPU=1, so that `backend="auto"` never
picks the (very slow) interpreter on its own just because the variable is set in the environment.

Features: fp16/bf16 (fp32 under the interpreter only), head dims up to 256 (q and v may differ; non-powers of two are
padded in registers, never in memory), causal and sliding windows aligned bottom-right, softcap, MQA/GQA by indexing
the K/V head (never a repeated copy), varlen via cu_seqlens, lse, and the gradient into lse.

The default backward has no atomics (a dK/dV kernel and a separate dQ kernel), so it is bitwise deterministic and
`deterministic=True` costs nothing. FA3NN_TRITON_ATOMIC_DQ=1 selects a backward that adds dQ by fp32 atomics
from the dK/dV kernel (fewer matmuls, not deterministic; deterministic=True still gets the atomic-free one; at
padded head dim 256 the output split's dK kernel adds it); on the H200 with Triton 3.6 it measured slower except
at d256 8k non-causal (+4.5%), so it is opt-in (benchmarks/NOTES.md).

Triton is imported lazily: without it (or without a GPU and the interpreter) `refusal` says why and the rest of
fa3nn still works. kernels.py holds the kernels, launch.py the launchers, configs.py the tile table (one pinned
tile per kernel, head dim, causal and sequence bucket; FA3NN_TRITON_AUTOTUNE=1 opts into autotuning). Opt-in
FA3NN_TRITON_TILES=<table> (configs.CANDIDATE_TABLES; on the H200 no table beat the pinned tiles at every shape) and
the leaner dK/dV step FA3NN_TRITON_UNMASKED_ROW_STATS (default on since the H200 measured it faster, bitwise the
same results); at padded head dim 256 the dK/dV kernel split by output into a dV kernel and a dK kernel
(FA3NN_TRITON_DKDV_OUTPUTS, auto: where configs.OUTPUT_SPLIT says, d256, +12-23% on the H200 over the head-dim split
FA3NN_TRITON_DKDV_SPLIT_D that runs with FA3NN_TRITON_DKDV_OUTPUTS=joint); the dQ kernel on a second CUDA stream
beside the key-block kernels (FA3NN_TRITON_BWD_STREAMS, default on: +1-4%, bitwise the same); the dK/dV kernel's
scores as queries x keys (FA3NN_TRITON_DKDV_QUERY_MAJOR, auto: where
configs.QUERY_MAJOR says, head dims <= 64, measured +2-12% on the whole backward on the
H200); the dK/dV kernel's Q/dO through tensor descriptors (FA3NN_TRITON_DKDV_TMA, auto: where
configs.TMA_LOADS["dkdv"] says, d128 with key-major 64x64/4w/2 tiles, +1-12% on the whole backward on the H200; with
one stage they lost) and the dQ kernel's K/V (FA3NN_TRITON_DQ_TMA, auto: configs.TMA_LOADS["dq"], d64 / d128);
descriptors over (batch, seqlen, heads * dim) views, so the copy engine zero-fills rows past a sequence and no
masked run zeroes them (FA3NN_TRITON_TMA_BATCHED, auto: configs.TMA_BATCHED per direction, e.g. the d128 backward
+1-4% non-causal and +10-19% causal up to 2k, the d256 causal forward +3-16%);
scripts/triton_tile_ab.py times them (benchmarks/NOTES.md, v3, "2026-12-01 fourth", "2026-12-02 twelfth" and
"thirteenth").

FP8: quantize.py is the fused quantization pass (bf16/fp16 Q, K, V -> e4m3 operands, fa3nn.fp8.operands) that every
GPU FP8 forward is fed by, fp8_kernels.py / fp8_launch.py the Triton FP8 forward (sm_89+; the interpreter too).
"""

from __future__ import annotations

import importlib.util
import os

import torch

from fa3nn.backends.base import AttnCall, Backend
from fa3nn.backends.triton import configs

MAX_HEADDIM = 256
GPU_DTYPES = (torch.float16, torch.bfloat16)
INTERPRETER_DTYPES = (torch.float16, torch.float32)  # the interpreter's bf16 tl.dot is wrong (numpy has no bf16)


# Found once at import (find_spec does not import triton; asked per call it was a visible share of a short call's
# host time), a plain bool that torch.compile reads as a constant: torch 2.11's Dynamo cannot trace find_spec, even
# behind functools.cache, so fa3nn.explain failed under fullgraph=True there ("function marked as skipped").
_TRITON_INSTALLED = importlib.util.find_spec("triton") is not None
MIN_CAPABILITY = (8, 0)  # the oldest GPU served: sm_80 (A100)


def _interpreting() -> bool:
    """FA3NN_TRITON_CPU=1 (configs.switch: 1 or 0) and TRITON_INTERPRET on, as Triton reads it (3.9's knobs: 1,
    true, on or yes, any case)."""
    opted_in = configs.env_switch("FA3NN_TRITON_CPU", "0")
    return opted_in and os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def _launch():
    from fa3nn.backends.triton import launch

    return launch


class TritonBackend(Backend):
    name = "triton"

    def refusal(self, call: AttnCall, backward: bool) -> str | None:
        if not _TRITON_INSTALLED:
            return "triton is not installed (pip install 'fa3nn[triton]')"
        if call.device_type == "cuda":
            if call.capability is not None and call.capability < MIN_CAPABILITY:
                return f"needs an sm_80 or newer GPU (this one is sm_{call.capability[0]}{call.capability[1]})"
            if call.dtype not in GPU_DTYPES:
                return f"dtype {call.dtype} is not supported on the GPU (supported: float16, bfloat16)"
        elif call.device_type == "cpu":
            if not _interpreting():
                return ("CPU tensors run only under Triton's interpreter, for tests (set TRITON_INTERPRET=1 before "
                        "importing triton, and FA3NN_TRITON_CPU=1)")
            if call.dtype not in INTERPRETER_DTYPES:
                return f"dtype {call.dtype} is not supported under the interpreter (supported: float16, float32)"
        else:
            return f"device {call.device_type} is not supported (needs CUDA, or the CPU interpreter)"
        for operands, headdim in (("q/k", call.headdim), ("v", call.headdim_v)):
            if headdim > MAX_HEADDIM:
                return f"head dim {headdim} of {operands} is over {MAX_HEADDIM}"
        if call.nheads % call.nheads_kv != 0:
            return f"nheads {call.nheads} is not a multiple of nheads_kv {call.nheads_kv}"
        return None

    def fp8_refusal(self, call: AttnCall) -> str | None:
        """Whether the Triton FP8 forward (fp8_kernels.py, fed by the fused pass in quantize.py) serves a call."""
        if call.device_type == "cuda" and call.capability is not None and call.capability < (8, 9):
            return (f"FP8 tensor cores need an sm_89 or newer GPU (this one is sm_{call.capability[0]}"
                    f"{call.capability[1]})")
        return self.refusal(call, backward=False)

    @staticmethod
    def forward_fp8(*args, **kwargs):
        """fa3nn.dispatch.FP8Path's kernel signature; see fp8_launch.forward_fp8."""
        from fa3nn.backends.triton import fp8_launch

        return fp8_launch.forward_fp8(*args, **kwargs)

    def forward(self, q, k, v, params, varlen, sinks=None):
        return _launch().forward(q, k, v, params, varlen, sinks)

    def backward(self, dout, q, k, v, out, lse, dlse, params, varlen):
        return _launch().backward(dout, q, k, v, out, lse, dlse, params, varlen)

    def backward_with_sinks(self, dout, q, k, v, out, lse, dlse, params, varlen, sinks):
        """The sinks' gradient from the backward's delta kernel (launch.backward), as the native backward does."""
        return _launch().backward(dout, q, k, v, out, lse, dlse, params, varlen, sinks)
