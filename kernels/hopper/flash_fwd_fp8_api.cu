// The Hopper FP8 forward's plain C ABI (pointers, strides, shapes, stream; no torch headers), loaded from Python
// with ctypes (fa3nn/backends/hopper_fp8.py). The kernels are instantiated in flash_fwd_fp8_d{64,128,256}.cu; errors
// go through the bf16 library's fail() / fa3nn_hopper_last_error() (flash_fwd_api.cu), built into the same library.
#include <cuda_runtime.h>

#include <cstdint>

#include "flash_fwd_fp8_launch.cuh"

using namespace fa3nn::hopper::host;

// The C ABI is all this library exports: it is built with -fvisibility=hidden (hopper_build.NVCC_FLAGS).
#pragma GCC visibility push(default)
extern "C" {

// FP8 forward attention. e4m3 q8 (batch, seqlen_q, nheads, d), k8 (batch, seqlen_k, nheads_kv, d), vt8 (batch,
// nheads_kv, d, seqlen_k_pad) = V transposed with the keys zero-padded to seqlen_k_pad (a multiple of 16); out
// (batch, seqlen_q, nheads, d) bf16 (out_bf16) or fp16; lse (batch, nheads, seqlen_q) float32 natural log.
// Varlen (cu_seqlens_q non-null): q8/out (total_q, nheads, d), k8 (total_k, nheads_kv, d), vt8 (nheads_kv, d,
// vt_columns) with sequence i's keys at columns vt_starts[i].. (vt_starts: int32 (batch + 1), every entry a multiple
// of 16, zeros between sequences; fa3nn/fp8/operands.py); lse (nheads, total_q); batch = number of sequences,
// seqlen_q/seqlen_k = total_q/total_k, seqlen_k_pad = vt8's column count. Dense calls pass vt_starts null.
// Descales float32 (batch, nheads, tiles) for q (block_q rows per tile) and (batch, nheads_kv, tiles) for k and v
// (block_k rows per tile); block_k must be a multiple of 128 (or of 192 at head dim 128: the 192-key kernel, which
// also serves block_k >= max_seqlen_k there beyond 1024 keys) or >= max_seqlen_k.
// strides: 12 element strides: (batch, row, head) for q8 and k8, (batch, head, d) for vt8, (batch, row, head) for
// out; the last dim of each must be contiguous. descale_strides: (batch, head) for q, k, v descales.
// variant: 0 = the default design (persistent launch; d128: 192-key blocks where block_k allows, beyond 1024 keys);
// 53 = the default with the recipes' fast_exp2 (d128's 256-key kernel with the linear exp2 on half its scores;
// bf16 or fp16 out); benchmarks (bf16 out): 1 = without pingpong, 2 = the other stage count (d128, d256), 3 = a
// quarter of the exp2s on the FP32 pipe (d128), 5 = one CTA per tile instead of one per SM, 6-50 = the variants
// listed in flash_fwd_fp8_launch.cuh (fa3nn/backends/hopper_fp8.py VARIANTS names them).
// max_ctas: as fa3nn_hopper_fwd's (0 = one CTA per SM; variant 5 launches one per tile whatever it says).
// tile_counter: as fa3nn_hopper_fwd's (varlen calls of the 256-key d128 default, variants 0 and 53, deal their
// tiles dynamically given one int of device memory; null, or any other kernel: the static deal).
// Returns 0, or nonzero with fa3nn_hopper_last_error() set. Never synchronizes.
int fa3nn_hopper_fp8_fwd(const void* q8, const void* k8, const void* vt8, void* out, float* lse,
                         const int* cu_seqlens_q, const int* cu_seqlens_k, const int* vt_starts,
                         const float* q_descale, const float* k_descale, const float* v_descale, int batch,
                         int seqlen_q, int seqlen_k, int seqlen_k_pad, int max_seqlen_q, int max_seqlen_k, int nheads,
                         int nheads_kv, int headdim,
                         const int64_t* strides, const int64_t* descale_strides, int block_q, int block_k,
                         float softmax_scale, int causal, int out_bf16, int variant, int max_ctas, int* tile_counter,
                         void* stream) {
  if (nheads_kv <= 0 || nheads % nheads_kv != 0) return fail("%s", "nheads must be a multiple of nheads_kv");
  if (block_q <= 0) return fail("%s", "block_q must be positive");
  if (max_ctas < 0) return fail("%s", "max_ctas must be 0 (one CTA per SM) or positive");
  if (block_k <= 0 || (block_k % 128 != 0 && block_k % 192 != 0 && block_k < max_seqlen_k))
    return fail("%s", "block_k must be a multiple of 128 (the kernel's key block; 192 at head dim 128) or >= "
                      "max_seqlen_k");
  if (cu_seqlens_q != nullptr && vt_starts == nullptr)
    return fail("%s", "varlen calls need vt_starts (each sequence's first vt8 column, a multiple of 16)");
  if (seqlen_k_pad % 16 != 0 || seqlen_k_pad < seqlen_k)
    return fail("%s", "vt8's key dimension must be padded to a multiple of 16 that holds every key");
  Fp8Problem pr{q8, k8, vt8, out, lse, cu_seqlens_q, cu_seqlens_k, vt_starts, q_descale, k_descale, v_descale,
                batch, seqlen_q, seqlen_k, seqlen_k_pad, max_seqlen_q, max_seqlen_k, nheads, nheads_kv, headdim,
                strides, descale_strides, block_q, block_k, softmax_scale, out_bf16 != 0, causal != 0,
                static_cast<cudaStream_t>(stream)};
  pr.max_ctas = max_ctas;
  pr.tile_counter = tile_counter;
  switch (headdim) {
    case 64: return run_fp8_d64(pr, variant);
    case 128: return run_fp8_d128(pr, variant);
    case 256: return run_fp8_d256(pr, variant);
    default: return fail("%s", "unsupported head dim for the FP8 forward (built: 64, 128, 256)");
  }
}

}  // extern "C"
#pragma GCC visibility pop
