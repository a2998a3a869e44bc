"""FP8 attention forward, emulated with torch's float8 dtypes: the oracle FP8 kernels are tested against, on any
device (the CPU included).

Two FP8 formats, both 1 sign bit + 7 bits:
    e4m3  4 exponent bits, 3 mantissa bits: max 448, relative rounding error <= 2^-4 (6.25%), subnormals down to
          2^-9. The precise one: Q, K, V and P are all e4m3 in the forward.
    e5m2  5 exponent bits, 2 mantissa bits: max 57344, error <= 2^-3. Range over precision: it is for gradients,
          which this forward-only FP8 never quantizes (Format.HYBRID = e4m3 forward / e5m2 backward).
Either way 8 bits cannot hold bf16's range, so every tensor travels with scales: x8 = saturate(x * scale) and
x ~= x8 * descale, with scale = 448 / amax per tile (fa3nn.fp8.scaling).

Layout rules. Hopper's FP8 wgmma reads both operands from shared memory K-major (the reduction dimension
contiguous). For S = Q·Kᵀ the reduction is headdim, which is already contiguous in Q and K. For O = P·V the
reduction is over keys, but V is stored keys-major, so the quantization pass writes Vᵀ per tile (headdim-major
rows of keys); that is a layout change only and this emulation keeps V as given. P never leaves registers: the
kernel converts its fp32 accumulator fragment to e4m3 and permutes it into the A-operand layout.

Rounding points, in the order a kernel performs them (this module reproduces each):
    1. Q, K, V -> e4m3 with their scales (Q and K after the Hadamard rotation in fp32) by fa3nn.fp8.quantize.
    2. S = Q8·K8ᵀ: products of two e4m3 values are exact in fp32; accumulation in fp32. (Hopper's FP8 tensor cores
       accumulate with fewer than fp32's 24 mantissa bits inside one wgmma; over headdim <= 256 the difference is
       far below the e4m3 input rounding, so fp32 here is the oracle, not a bit-exact model.)
    3. S *= q_descale[query tile] * k_descale[key tile] * softmax_scale, in fp32; then softcap and the mask.
    4. Online softmax over key blocks of `block_n` columns (the native kernel's key block by default, 128:
       fa3nn.fp8.key_blocks.native_key_block): m = running row max,
       P = exp(S - m) in fp32 (<= 1), l += rowsum(P) from the fp32 P (before any FP8 rounding); or, where the
       kernel takes the row sums from its P V GEMM (fa3nn.fp8.key_blocks.p8_row_sums: head dim 128 on 256-key
       blocks), l += rowsum(P8) / P_SCALE, the sum of the rounded probabilities of step 5 that multiply V.
    5. P8 = e4m3(P * P_SCALE): P <= 1 would waste e4m3's range above 1 and flush probabilities below 2^-9 to zero;
       scaling by 2^8 (FlashAttention-3's max offset of 8 in exp2) maps P into [0, 256], keeps probabilities down
       to 2^-17, and being a power of two it folds back exactly. The linear form (the recipes' fast_exp2 on the
       d128 256-key kernel, and its benchmark variants; linear_exp2_every > 0): on the P fragment registers
       linear_exp2_columns picks, P8 is the e4m3 value whose bit pattern is round(8 x + LINEAR_BIAS),
       x = log2(P * P_SCALE), with no exp2 at all (linear_exp2_p8; kernels/hopper/e4m3_exp2.cuh).
    6. acc = acc * exp(m_old - m_new) + P8·V8 * v_descale, fp32. With one V scale per key tile a kernel folds
       v_descale[t-1] / v_descale[t] into the rescale it already applies to acc, so it costs nothing. The fp32 sum
       is the kernels' too only if they add each block's P8·V8 into fp32 (the promoted native d64/d128 and Triton
       kernels): a tensor-core accumulator carried across blocks loses ~1.2% of V's mean per 1000 keys.
    7. O = acc / (l * P_SCALE) rounded once to the inputs' dtype (bf16 or fp16); lse = m + log(l) in fp32
       (-inf for a row with no attended key, whose output is 0).
"""

from __future__ import annotations

import math

import torch

from fa3nn.fp8.key_blocks import KEY_BLOCK, fast_exp2_every, native_key_block, p8_row_sums
from fa3nn.fp8.quantize import QuantizedQKV
from fa3nn.fp8.scaling import E4M3, rows_from_tiles
from fa3nn.masks import Window

P_SCALE = 256.0  # 2^8: P in [0, 1] -> [0, 256], inside e4m3's 448
# The linear exp2's pattern k = round(8 x + LINEAR_BIAS) (kernels/hopper/e4m3_exp2.cuh kLinearBias): 56 puts x = 0 on
# 1.0; the 0.46 takes out the octave line's mean excess over 2^x (4.07%) and still rounds x = 8 to 256.
LINEAR_BIAS = 56.0 - 0.46
_LOG2E = 1.4426950408889634
UNMASKED = Window()
BLOCK_N = None  # default block_n: the native kernel's key block for the call (fa3nn.fp8.key_blocks.native_key_block)


def _block_n(block_n: int | None, quantized: QuantizedQKV, max_seqlen_k: int) -> int:
    """block_n as given, or the native kernel's key block for these descale tiles (128 where none fits: the
    emulation itself takes any block)."""
    if block_n is not None:
        return block_n
    return native_key_block(quantized.q.shape[-1], quantized.block_k, max_seqlen_k) or KEY_BLOCK


def _fold(x: torch.Tensor, nheads_kv: int) -> torch.Tensor:
    """(batch, seqlen, nheads, ...) -> (batch, nheads_kv, group * seqlen, ...): query heads of one K/V head in rows."""
    batch, seqlen, nheads = x.shape[:3]
    x = x.transpose(1, 2)  # (batch, nheads, seqlen, ...); head h reads K/V head h // group
    return x.reshape(batch, nheads_kv, (nheads // nheads_kv) * seqlen, *x.shape[3:])


def _unfold(x: torch.Tensor, seqlen: int) -> torch.Tensor:
    batch, nheads_kv, rows = x.shape[:3]
    return x.reshape(batch, nheads_kv * (rows // seqlen), seqlen, *x.shape[3:]).transpose(1, 2)


def linear_exp2_p8(x: torch.Tensor) -> torch.Tensor:
    """The linear exp2 of exp2 arguments x = log2(P * P_SCALE) (<= 8; -inf for a masked key) as the kernel computes
    it, float32: y = 8 x + LINEAR_BIAS in fp32, rounded to f16 with negatives to 0 (cvt.rn.relu.f16x2), + 1024 in
    f16 (an integer k), and the e4m3 value of bit pattern k."""
    y = (x.float() * 8.0 + LINEAR_BIAS).clamp(min=0.0).to(torch.float16)
    k = ((y + 1024.0).float() - 1024.0).to(torch.uint8)  # f16 + f16 rounds to f16: an integer in [1024, 2048)
    return k.view(E4M3).float()


def linear_exp2_columns(rows: torch.Tensor, cols: torch.Tensor, every: int) -> torch.Tensor:
    """Which (query row, key) pairs of a key block take the linear exp2 when every `every`-th P fragment register
    does (kernels/hopper/e4m3_exp2.cuh linear_exp2_register): rows are query rows of the sequence (query tiles start
    at multiples of 16), cols keys of the block from its first (0 ..). A (rows, cols) bool mask."""
    slot = (rows[:, None] % 16 >= 8).long() + 2 * (cols[None, :] % 32 >= 16).long()
    return (cols[None, :] // 32 + slot) % every == every - 1


def attention_fp8_dense(
    quantized: QuantizedQKV,
    softmax_scale: float,
    window: Window = UNMASKED,
    softcap: float = 0.0,
    out_dtype: torch.dtype = torch.bfloat16,
    block_n: int | None = BLOCK_N,
    p_scale: float = P_SCALE,
    p_dtype: torch.dtype = E4M3,
    sum_rounded_p: bool | None = None,
    linear_exp2_every: int | None = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense FP8 forward: e4m3 q (batch, seqlen_q, nheads, d), k/v (batch, seqlen_k, nheads_kv, d[v]) with their
    descales -> out (batch, seqlen_q, nheads, dv) in out_dtype, lse (batch, nheads, seqlen_q) float32.

    p_dtype / p_scale say how P is rounded before P·V; with bf16 operands, unit descales, p_dtype=torch.bfloat16
    and p_scale=1 the same code models a bf16 FlashAttention kernel (the accuracy script's bf16 row).
    sum_rounded_p: the row sums from the rounded P (step 4's second form); None: as the native kernel walking
    block_n-key blocks at this head dim does. linear_exp2_every > 0: every linear_exp2_every-th P fragment
    register's P8 from the linear exp2 (rounding point 5's linear form; e4m3 P at P_SCALE only); None: as the
    native kernel walking block_n-key blocks at this head dim does under the recipes' fast_exp2."""
    q8, k8, v8 = quantized.q, quantized.k, quantized.v
    batch, seqlen_q, nheads, _ = q8.shape
    seqlen_k, nheads_kv = k8.shape[1], k8.shape[2]
    block_n = _block_n(block_n, quantized, seqlen_k)
    if linear_exp2_every is None:
        linear_exp2_every = fast_exp2_every(q8.shape[-1], block_n)
    if isinstance(linear_exp2_every, bool) or not isinstance(linear_exp2_every, int):
        raise TypeError(f"linear_exp2_every must be an int (or None), got {linear_exp2_every!r}")
    if linear_exp2_every < 0 or (linear_exp2_every and (p_dtype != E4M3 or p_scale != P_SCALE)):
        raise ValueError(f"linear_exp2_every must be >= 0 and needs e4m3 P at p_scale {P_SCALE}, got "
                         f"{linear_exp2_every} with {p_dtype} at {p_scale}")
    if sum_rounded_p is None:
        sum_rounded_p = p8_row_sums(q8.shape[-1], block_n)
    group = nheads // nheads_kv
    f32 = torch.float32
    q_rows = _fold(q8.to(f32), nheads_kv)  # exact: every e4m3 value is an fp32 value
    q_descale = _fold(rows_from_tiles(quantized.q_descale, quantized.block_q, seqlen_q), nheads_kv)
    k_descale = rows_from_tiles(quantized.k_descale, quantized.block_k, seqlen_k).transpose(1, 2)  # (b, hk, sk)
    v_descale = rows_from_tiles(quantized.v_descale, quantized.block_k, seqlen_k).transpose(1, 2)
    k_t = k8.to(f32).permute(0, 2, 3, 1)  # (b, hk, d, sk)
    v_rows = v8.to(f32).transpose(1, 2)  # (b, hk, sk, dv)
    allowed = window.allowed(0, seqlen_q, seqlen_q, seqlen_k, q8.device)
    if allowed is not None:
        allowed = allowed.repeat(group, 1)  # folded row g * seqlen_q + i is query row i

    rows = group * seqlen_q
    row_max = torch.full((batch, nheads_kv, rows), float("-inf"), dtype=f32, device=q8.device)
    row_sum = torch.zeros(batch, nheads_kv, rows, dtype=f32, device=q8.device)
    acc = torch.zeros(batch, nheads_kv, rows, v8.shape[-1], dtype=f32, device=q8.device)
    for start in range(0, seqlen_k, block_n):
        cols = slice(start, min(seqlen_k, start + block_n))
        scores = torch.matmul(q_rows, k_t[..., cols])  # rounding point 2
        scores = scores * (q_descale.unsqueeze(-1) * k_descale[:, :, None, cols] * softmax_scale)  # 3
        if softcap > 0:
            scores = torch.tanh(scores / softcap) * softcap
        if allowed is not None:
            scores = scores.masked_fill(~allowed[:, cols], float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1))
        # A row with nothing attended so far keeps max -inf; subtract 0 there so exp gives 0, never NaN.
        safe_max = torch.where(torch.isneginf(new_max), torch.zeros_like(new_max), new_max)
        rescale = torch.exp(row_max - safe_max)
        probs = torch.exp(scores - safe_max.unsqueeze(-1))  # 4
        probs8 = (probs * p_scale).to(p_dtype).to(f32)  # 5
        if linear_exp2_every:
            x = (scores - safe_max.unsqueeze(-1)) * _LOG2E + math.log2(p_scale)
            rows_in_sequence = torch.arange(rows, device=q8.device) % seqlen_q
            keys_in_block = torch.arange(cols.stop - cols.start, device=q8.device)
            probs8 = torch.where(linear_exp2_columns(rows_in_sequence, keys_in_block, linear_exp2_every),
                                 linear_exp2_p8(x), probs8)
        row_sum = row_sum * rescale + (probs8.sum(dim=-1) / p_scale if sum_rounded_p else probs.sum(dim=-1))
        acc = acc * rescale.unsqueeze(-1) + torch.matmul(probs8, v_rows[:, :, cols] * v_descale[:, :, cols, None])
        row_max = new_max
    attended = row_sum > 0
    out = acc / torch.where(attended, row_sum * p_scale, torch.ones_like(row_sum)).unsqueeze(-1)  # 7
    lse = torch.where(attended, row_max + torch.log(row_sum), torch.full_like(row_sum, float("-inf")))
    out = _unfold(out, seqlen_q).to(out_dtype)
    lse = lse.reshape(batch, nheads, seqlen_q)
    return out, lse


def attention_fp8(
    quantized: QuantizedQKV,
    softmax_scale: float,
    window: Window = UNMASKED,
    softcap: float = 0.0,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.bfloat16,
    block_n: int | None = BLOCK_N,
    sum_rounded_p: bool | None = None,
    linear_exp2_every: int | None = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """attention_fp8_dense, or for a packed batch (cu_seqlens given) the same per sequence: out (total_q, nheads,
    dv), lse (nheads, total_q). Descales of sequence i are row i of the (batch, nheads, tiles) descale tensors.
    block_n None: the key block the native kernel would walk (for a packed batch: chosen with its longest key
    sequence, as the kernel chooses). sum_rounded_p and linear_exp2_every as in attention_fp8_dense (sum_rounded_p
    None: as that native kernel)."""
    if cu_seqlens_q is None:
        return attention_fp8_dense(quantized, softmax_scale, window, softcap, out_dtype, block_n,
                                   sum_rounded_p=sum_rounded_p, linear_exp2_every=linear_exp2_every)
    q8, k8, v8 = quantized.q, quantized.k, quantized.v
    out = torch.zeros(*q8.shape[:-1], v8.shape[-1], dtype=out_dtype, device=q8.device)
    lse = torch.full((q8.shape[1], q8.shape[0]), float("-inf"), dtype=torch.float32, device=q8.device)
    starts_q, starts_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    block_n = _block_n(block_n, quantized, max((b - a for a, b in zip(starts_k, starts_k[1:])), default=0))
    for i in range(len(starts_q) - 1):
        rows_q, rows_k = slice(starts_q[i], starts_q[i + 1]), slice(starts_k[i], starts_k[i + 1])
        if rows_q.start == rows_q.stop or rows_k.start == rows_k.stop:
            continue  # no queries, or no keys: zeros and lse = -inf
        one = QuantizedQKV(
            q8[rows_q][None], k8[rows_k][None], v8[rows_k][None],
            quantized.q_descale[i : i + 1], quantized.k_descale[i : i + 1], quantized.v_descale[i : i + 1],
            quantized.block_q, quantized.block_k,
        )
        o, s = attention_fp8_dense(one, softmax_scale, window, softcap, out_dtype, block_n,
                                   sum_rounded_p=sum_rounded_p, linear_exp2_every=linear_exp2_every)
        out[rows_q], lse[:, rows_q] = o[0], s[0]
    return out, lse


# Training with an FP8 forward runs the bf16 backward (fa3nn.fp8.backward), which reads lse and
# delta = rowsum(dO * O) saved by the FP8 forward, whose e4m3 errors enter dS = P * (dP - delta) directly. Where the
# softmax gradient nearly cancels (rows attending few keys: the first rows under a causal mask) that error is e4m3's
# relative precision where the bf16 path has bf16's, 2^-4 / 2^-8 = 16x. So dq, dk, dv meet the error-ratio rule
# against the bf16 path (bf16 forward + bf16 backward) with ratio 2 * 16 = 32 instead of 2. Measured worst cases on
# N(0, 1) inputs (tests/test_fp8_reference.py shapes, 4 seeds, every recipe): from the original Q and K
# (backward_from="inputs") 7 non-causal, 26 causal; from the quantized ones (the default) 24 and 20. Where the
# scores spread the "inputs" backward leaves this bound far behind (fa3nn.fp8.backward).
FP8_GRAD_ERROR_RATIO = 2.0 * 2 ** (8 - 4)
