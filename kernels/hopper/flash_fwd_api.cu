// The Hopper forward's plain C ABI (pointers, strides, shapes, stream; no torch headers), loaded from Python with
// ctypes (fa3nn/backends/hopper.py). The kernels are instantiated in flash_fwd_d{64,128,256,192}.cu.
//
// Build (what fa3nn.backends.hopper_build does, every unit in parallel):
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -Xcompiler -fPIC -c flash_fwd_{api,d64,d128,d256,d192}.cu
//   nvcc -gencode=arch=compute_90a,code=sm_90a -shared -o libfa3nn_hopper.so flash_fwd_*.o
#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "flash_fwd_launch.cuh"

using namespace fa3nn::hopper::host;

namespace {
thread_local char g_error[512] = "";
}  // namespace

namespace fa3nn::hopper::host {
int fail(const char* fmt, const char* detail) {
  std::snprintf(g_error, sizeof(g_error), fmt, detail);
  return 1;
}
}  // namespace fa3nn::hopper::host

// The C ABI is all this library exports: it is built with -fvisibility=hidden (hopper_build.NVCC_FLAGS).
#pragma GCC visibility push(default)
extern "C" {

// The version of this C ABI (argument lists and meanings of every fa3nn_hopper_* function): fa3nn.backends.
// hopper_build.load refuses a library whose version is not the one its ctypes bindings are written for, so that a
// prebuilt library (FA3NN_HOPPER_LIB) from another revision fails with a message instead of reading arguments in the
// wrong places (a float added to a call moves no integer argument on x86-64: an older library would ignore it
// silently). 1: 2026-12-04 (window_left / window_right / softcap in the forward, window_left / window_right in the
// backward); 2: softcap in the backward (after window_right); 3: sinks in the forward (after softcap); 4: headdim_v
// in the forward and the backward (after headdim), fa3nn_hopper_supports_headdim removed (never called; the head-dim
// pairs are fa3nn/backends/hopper_bwd.py's HEADDIM_PAIRS). Libraries built before 1 have no version and are refused
// too. 5: max_ctas in the forward and the FP8 forward (after variant; FlashAttention-3's sm_margin). 6: tile_counter in
// the forward (after max_ctas; the dynamic deal of varlen calls). 7: tile_counter in the FP8 forward (after max_ctas).
// 8: kv_parts in the backward (after ctas; GQA in parts, fp32 partial dK / dV). 9: kv_parts any divisor of the
// group (8 took powers of two only).
int fa3nn_hopper_abi_version() { return 9; }

const char* fa3nn_hopper_last_error() { return g_error; }

// Forward attention. q (batch, seqlen_q, nheads, d), k (batch, seqlen_k, nheads_kv, d), v (batch, seqlen_k,
// nheads_kv, dv), out (batch, seqlen_q, nheads, dv), lse (batch, nheads, seqlen_q) float32 natural log; (d, dv)
// equal 64, 128 or 256, or 192 / 128 (multi-head latent attention; no windows or softcap there). Varlen (cu_seqlens_q non-null): q/out (total_q, nheads, d / dv), k/v
// (total_k, nheads_kv, d / dv), lse (nheads, total_q), batch = number of sequences, seqlen_q/seqlen_k =
// total_q/total_k.
// strides: 12 element strides, (batch, row, head) for q, k, v, out; the head dim must be contiguous.
// variant: 0 = full design, 1 = no pingpong, 2 = no intra-warpgroup overlap, 3 = neither (ablation builds exist for
// bf16 non-causal); 4, 5 = experimental tile shapes (bf16; see Tiles); 6 = without the cross-tile pipeline (bf16);
// 7 = the default with the causal deal before 2026-12-01 (L2-sized sections, round-robin; Problem::causal_deal);
// 8 = the default with O rescaled on every rise of a row maximum (Problem::rescale_log2 = 0);
// 9 = diagnostic without K/V loads (wrong results; measures the kernel without its L2 traffic); 10 / 11 = the
// default with each row's max from integer maxes / from the float tree at every head dim (bf16; OnlineSoftmax
// kIntMax, the same maxima; the default takes integer maxes at d128 only); 12 = the default with one causal section
// over every tile at any length (Problem::causal_deal 2).
// window_left / window_right: a sliding window, query row i sees key j iff i + off - left <= j <= i + off + right,
// off = seqlen_k - seqlen_q, -1 = unbounded (fa3nn/masks.py); causal sets right to 0. Anything but (-1, -1) and
// (-1, 0) runs the window kernels (variant 0 only; dense or varlen; not at 192 / 128). softcap: 0 (none) or the cap c > 0 of
// softmax(c * tanh(scores * softmax_scale / c)) (variant 0 only). sinks: null, or nheads float32 on the device, a
// logit per query head that joins every row's softmax without a value (gpt-oss; fa3nn/sinks.py): out and lse are
// those of the softmax with the sink, a row that attends no key gets zeros and lse = its head's sink.
// max_ctas: 0 = one CTA per SM (each walking tiles), n > 0 = at most n (persistent_grid: the SMs left to overlapping
// kernels, FlashAttention-3's sm_margin).
// tile_counter: null, or (varlen calls) one int of device memory that the call may overwrite: the tiles are then
// dealt dynamically (each CTA's next tile from this counter, zeroed on the stream before the launch; FwdConfig::
// kDynamic), else statically (CTA i takes tiles i, i + grid, ...). Calls running concurrently need one each.
// Returns 0, or nonzero with fa3nn_hopper_last_error() set. Never synchronizes.
int fa3nn_hopper_fwd(const void* q, const void* k, const void* v, void* out, float* lse, const int* cu_seqlens_q,
                     const int* cu_seqlens_k, int batch, int seqlen_q, int seqlen_k, int max_seqlen_q, int nheads,
                     int nheads_kv, int headdim, int headdim_v, const int64_t* strides, float softmax_scale, int causal,
                     int window_left, int window_right, float softcap, const float* sinks, int bf16, int variant,
                     int max_ctas, int* tile_counter, void* stream) {
  g_error[0] = '\0';
  Problem pr{q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, batch, seqlen_q, seqlen_k, max_seqlen_q,
             nheads, nheads_kv, headdim, strides, softmax_scale, static_cast<cudaStream_t>(stream)};
  if (nheads_kv <= 0 || nheads % nheads_kv != 0) return fail("%s", "nheads must be a multiple of nheads_kv");
  if (max_ctas < 0) return fail("%s", "max_ctas must be 0 (one CTA per SM) or positive");
  if (const int status = window_args(causal, window_left, window_right, pr.window)) return status;
  if (const int status = softcap_arg(softmax_scale, softcap)) return status;
  pr.softcap = softcap;
  pr.sinks = sinks;
  pr.headdim_v = headdim_v;
  pr.max_ctas = max_ctas;
  pr.tile_counter = tile_counter;
  if (headdim == 192 && headdim_v == 128) return run_d192_128(pr, bf16 != 0, causal != 0, variant);
  if (headdim_v == headdim) {
    switch (headdim) {
      case 64: return run_d64(pr, bf16 != 0, causal != 0, variant);
      case 128: return run_d128(pr, bf16 != 0, causal != 0, variant);
      case 256: return run_d256(pr, bf16 != 0, causal != 0, variant);
    }
  }
  return fail("%s", kUnsupportedHeadDims);
}

}  // extern "C"
#pragma GCC visibility pop
