// The Hopper backward's plain C ABI, loaded with ctypes (fa3nn/backends/hopper_bwd.py).
// Kernels are instantiated in flash_bwd_d{64,128,256,192}.cu; fail() and fa3nn_hopper_last_error() live in
// flash_fwd_api.cu (one library).
#include <cuda_runtime.h>

#include <cstdint>

#include "flash_bwd_launch.cuh"

using namespace fa3nn::hopper::host;

// The C ABI is all this library exports: it is built with -fvisibility=hidden (hopper_build.NVCC_FLAGS).
#pragma GCC visibility push(default)
extern "C" {

// Backward, MHA, GQA or MQA (nheads_kv divides nheads; query head h reads K/V head h / (nheads / nheads_kv)).
// Dense (cu_seqlens_q / cu_seqlens_k null): q, dq (batch, seqlen_q, nheads, d), out, dout (batch, seqlen_q, nheads,
// dv); k, dk (batch, seqlen_k, nheads_kv, d), v, dv (batch, seqlen_k, nheads_kv, dv); (d, dv) equal 64, 128 or 256,
// or 192 / 128 (multi-head latent attention: variants 1 and 5, no window or softcap; flash_bwd_mla.cuh,
// flash_bwd_mla_keys.cuh); lse (batch, nheads, seqlen_q) float32 natural log from the forward, contiguous; dlse, the
// gradient into lse, the same layout, or null; max_seqlen_q / max_seqlen_k equal seqlen_q / seqlen_k. Workspaces:
// dq_accum (batch, nheads, seqlen_q_rounded, d), lse_log2 and delta (batch, nheads, seqlen_q_rounded), float32,
// contiguous, seqlen_q_rounded = seqlen_q rounded up to a multiple of fa3nn_hopper_bwd_block_m() (128); their
// contents on entry do not matter (dq_accum 16-B aligned for the 16-byte preprocess / postprocess, else 2-byte ones).
// Varlen (cu_seqlens_q / cu_seqlens_k: (batch + 1) int32 offsets on the device, batch = sequences): q, dq (seqlen_q =
// total query rows, nheads, d), out, dout (the same with dv), k, dk (seqlen_k = total key rows, nheads_kv, d), v, dv
// (the same with dv), lse (nheads,
// seqlen_q); max_seqlen_q / max_seqlen_k the longest sequences; the workspaces have batch 1 and seqlen_q_rounded =
// (seqlen_q + 128 * batch) rounded down to 128 rows (flash_bwd_seq.cuh); dk and dv must be zeroed first (rows of
// sequences without queries are not written); built for the default variant of each head dim (3 at 128, 4 at 64,
// 1 at 256 and at 192 / 128).
// strides: 24 element strides, (batch, row, head) for q, k, v, out, dout, dq, dk, dv; head dim contiguous (varlen:
// the batch strides are not read).
// variant: 0 = dQ summed by per-thread fp32 reductions, 1 = bulk dQ (fp32 tile in shared memory, added by TMA
// reduce-adds from one producer thread; flash_bwd.cuh), 2 = overlap (next block's score GEMMs issued before this
// block's dQ GEMM; flash_bwd_overlap.cuh), 3 = both, 4 = bulk dQ with 128-row query blocks (head dim 64 only); head
// dim 256 has 0 and 1 only (flash_bwd_cols.cuh; its bulk dQ stages in the Q / dO ring), 192 / 128 has 1 and 5
// (mla_keys: 128-key blocks, flash_bwd_mla_keys.cuh); any of them + 16
// (kScalarPrePostBit) with the 2-byte preprocess / postprocess kernels (benchmarks; by default the 16-byte
// preprocess runs wherever out and dout, the 16-byte postprocess wherever dq, are 16-B aligned with strides of
// multiples of 8 elements); + 32 (kScalarDKDVBit): dK / dV stored 4 bytes at a time (by default 16 bytes wherever dk
// and dv are 16-B aligned with strides of multiples of 8 elements). Python's DEFAULT_VARIANTS picks per head dim
// (DENSE_DEFAULT_VARIANTS for dense calls at 192 / 128: 5).
// window_left / window_right: a sliding window, query row i sees key j iff i + off - left <= j <= i + off + right,
// off = seqlen_k - seqlen_q, -1 = unbounded (fa3nn/masks.py); causal sets right to 0. Anything but (-1, -1) and
// (-1, 0) runs the window kernels: dense, the default variant, one CTA per tile; dk and dv must be zeroed first (key
// blocks no query's window reaches are not written).
// softcap: 0 (none) or the cap c > 0 of softmax(c * tanh(scores * softmax_scale / c)) (Gemma 2), the forward's
// (fa3nn_hopper_fwd): the lse passed in must come from a forward with the same cap. Softcap kernels are built for the
// default variant of each head dim, dense or varlen, with any mask.
// grid_order: 0 = auto (flash_bwd_launch.cuh tile_order: outermost per batch for dense causal GQA/MQA one CTA per
// tile, outermost for it persistent and for dense causal MHA over few (head, batch) pairs, persistent or of few key
// blocks, else innermost), 1 = key blocks innermost (the MHA order), 2 = outermost, 3 = outermost within each batch
// (flash_bwd.cuh, bwd_tile); for benchmarks and tests.
// ctas: the main kernel's CTAs. 0 = auto (one per SM chaining tiles where use_persistent_bwd says so, else one per
// (key block, K/V head, batch) tile), -2 = auto for a varlen call whose sequences all have one query length and one
// key length, both positive (the dense call's rule; kCtasAutoUniform), -1 = one per tile, n > 0 = at most n, each
// walking tiles blockIdx.x + k * n (the persistent form; tests pass small n so that few tiles chain).
// kv_parts: 1, or (GQA/MQA) a divisor of the group: each K/V head's query heads walked by kv_parts tiles
// per key block, dk and dv then fp32 (batch, seqlen_k, nheads_kv * kv_parts, d / dv) buffers (varlen: (total_k,
// nheads_kv * kv_parts, ...)), head h * kv_parts + part holding that part's sum (strides in elements as above; zeroed
// first where dk / dv would be), which the caller sums over the parts (fa3nn/backends/hopper_bwd.py).
// Returns 0, or nonzero with fa3nn_hopper_last_error() set. Never synchronizes.
int fa3nn_hopper_bwd(const void* dout, const void* q, const void* k, const void* v, const void* out, const float* lse,
                     const float* dlse, void* dq, void* dk, void* dv, float* dq_accum, float* lse_log2, float* delta,
                     const int* cu_seqlens_q, const int* cu_seqlens_k, int batch, int seqlen_q, int seqlen_k,
                     int max_seqlen_q, int max_seqlen_k, int nheads, int nheads_kv, int headdim, int headdim_v,
                     const int64_t* strides, float softmax_scale, int causal, int window_left, int window_right,
                     float softcap, int bf16, int variant, int grid_order, int ctas, int kv_parts, void* stream) {
  if (nheads_kv <= 0 || nheads % nheads_kv != 0)
    return fail("%s", "nheads_kv must be positive and divide nheads (GQA/MQA: query heads in groups of equal size)");
  if (kv_parts < 1 || (nheads / nheads_kv) % kv_parts != 0)
    return fail("%s", "kv_parts must be a positive divisor of the GQA group (nheads / nheads_kv)");
  if (!(softmax_scale > 0.f)) return fail("%s", "softmax_scale must be positive");
  if (const int status = softcap_arg(softmax_scale, softcap)) return status;
  if (grid_order < 0 || grid_order > 3) return fail("%s", "grid_order must be 0 (auto), 1, 2 or 3");
  if ((cu_seqlens_q == nullptr) != (cu_seqlens_k == nullptr))
    return fail("%s", "pass both cu_seqlens_q and cu_seqlens_k (varlen) or neither (dense)");
  if (cu_seqlens_q == nullptr && (max_seqlen_q != seqlen_q || max_seqlen_k != seqlen_k))
    return fail("%s", "a dense backward's max_seqlen_q / max_seqlen_k must equal seqlen_q / seqlen_k");
  BwdProblem pr{dout,     q,        k,        v,          out,          lse,          dlse,         dq,
                dk,       dv,       dq_accum, lse_log2,   delta,        cu_seqlens_q, cu_seqlens_k, batch,
                seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k, nheads, nheads_kv,   headdim,      strides,
                softmax_scale, grid_order, static_cast<cudaStream_t>(stream)};
  if (ctas < kCtasAutoUniform)
    return fail("%s", "ctas must be 0 (auto), -2 (auto, varlen of one length), -1 (one CTA per tile) or a positive "
                      "CTA count");
  if (const int status = window_args(causal, window_left, window_right, pr.window)) return status;
  pr.ctas = ctas;
  pr.kv_parts = kv_parts;
  pr.softcap = softcap;
  pr.headdim_v = headdim_v;
  pr.prepost_vec = (variant & kScalarPrePostBit) == 0;
  pr.dkdv_vec16 = (variant & kScalarDKDVBit) == 0;
  variant &= ~(kScalarPrePostBit | kScalarDKDVBit);
  if (headdim == 192 && headdim_v == 128) return run_bwd_d192_128(pr, bf16 != 0, causal != 0, variant);
  if (headdim_v == headdim) {
    switch (headdim) {
      case 64: return run_bwd_d64(pr, bf16 != 0, causal != 0, variant);
      case 128: return run_bwd_d128(pr, bf16 != 0, causal != 0, variant);
      case 256: return run_bwd_d256(pr, bf16 != 0, causal != 0, variant);
    }
  }
  return fail("%s", kUnsupportedHeadDims);
}

// Rows the backward's workspaces are padded to (seqlen_q rounded up to a multiple of this).
int fa3nn_hopper_bwd_block_m() { return fa3nn::hopper::kBwdRowsRounding; }

}  // extern "C"
#pragma GCC visibility pop
