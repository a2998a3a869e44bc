// Host-side launch of the Hopper forward: TMA tensor maps, the tile table per head dim, and the dispatch from a
// call's shape to a compiled instantiation. Included by one translation unit per head dim (flash_fwd_d*.cu), which
// nvcc compiles in parallel; flash_fwd_api.cu holds the C ABI.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "flash_fwd.cuh"
#include "fwd_deal_model.cuh"

namespace fa3nn::hopper::host {

// Records an error message for fa3nn_hopper_last_error() and returns nonzero (defined in flash_fwd_api.cu).
int fail(const char* fmt, const char* detail);

// The forward's and the backward's refusal of head dims they were not built for.
constexpr const char* kUnsupportedHeadDims =
    "unsupported head dims (built: q / k and v equal 64, 128 or 256, or q / k 192 with v 128)";

// cuTensorMapEncodeTiled, resolved through the runtime so the library needs no -lcuda at link time.
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline EncodeTiledFn encode_tiled() {
  static EncodeTiledFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      ptr = nullptr;
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// A 4-d tensor, dims innermost first with the byte strides of dims 1..3, as a tensor map with the given box (in
// elements) and swizzle; box elements out of bounds are zero-filled (loads) or not written (stores). Every tensor
// map of the library (forward, FP8 forward, backward) is encoded here.
inline bool encode_map(CUtensorMap* map, CUtensorMapDataType dtype, const void* base, const int64_t (&dims)[4],
                       const int64_t (&byte_strides)[3], const int (&box)[4], CUtensorMapSwizzle swizzle) {
  const cuuint64_t g_dims[4] = {cuuint64_t(dims[0]), cuuint64_t(dims[1]), cuuint64_t(dims[2]), cuuint64_t(dims[3])};
  const cuuint64_t g_strides[3] = {cuuint64_t(byte_strides[0]), cuuint64_t(byte_strides[1]),
                                   cuuint64_t(byte_strides[2])};
  const cuuint32_t g_box[4] = {cuuint32_t(box[0]), cuuint32_t(box[1]), cuuint32_t(box[2]), cuuint32_t(box[3])};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  EncodeTiledFn fn = encode_tiled();
  if (fn == nullptr) return false;
  return fn(map, dtype, 4, const_cast<void*>(base), g_dims, g_strides, g_box, elem_strides,
            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A (batch, rows, heads, headdim) 16-bit tensor (strides in elements) with box (64, box_rows, 1, 1), 128B swizzle:
// each box lands as one SW128 panel of box_rows x 128 B.
inline bool make_map(CUtensorMap* map, const void* base, bool bf16, int64_t headdim, int64_t rows, int64_t heads,
                     int64_t batch, int64_t row_stride, int64_t head_stride, int64_t batch_stride, int box_rows) {
  return encode_map(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, base,
                    {headdim, rows, heads, batch}, {row_stride * 2, head_stride * 2, batch_stride * 2},
                    {kPanelCols, box_rows, 1, 1}, CU_TENSOR_MAP_SWIZZLE_128B);
}

// The batch stride (elements) of a TMA map over a tensor that is dense or packed (varlen: one batch of `rows` rows,
// whose batch stride TMA never steps but wants valid). The bf16 forward's, the FP8 forward's and the backward's maps.
inline int64_t map_batch_stride(bool varlen, int64_t batch_stride, int64_t rows, int64_t row_stride) {
  return varlen ? rows * row_stride : batch_stride;
}

// A call's window as the kernels take it (forward and backward): (left, right), -1 unbounded (fa3nn/masks.py);
// local selects the kLocal kernels, for anything but full (-1, -1) and causal (-1, 0).
struct WindowArgs {
  bool local = false;
  int left = -1, right = -1;
};

// The C ABI's (causal, window_left, window_right) -> WindowArgs; causal bounds the window on the right at the
// diagonal, and a local window takes causal over (causal comes back 0: the window kernels mask both bounds). 0, or
// nonzero from fail() for sizes below -1.
inline int window_args(int& causal, int left, int right, WindowArgs& window) {
  if (left < -1 || right < -1)
    return fail("%s", "window_left / window_right must be -1 (unbounded) or a key count >= 0");
  if (causal != 0) right = 0;
  window = {left >= 0 || right > 0, left, right};
  if (window.local) causal = 0;
  return 0;
}

// Both C ABIs' softcap argument: 0 (none) or a finite cap > 0 small enough a divisor that softmax_scale / softcap,
// the kernels' tanh argument scale (softcap_pre), stays finite in float32. Python checks the same first
// (fa3nn.checks.check_softcap).
inline int softcap_arg(float softmax_scale, float softcap) {
  if (!(softcap >= 0.f && softcap < INFINITY)) return fail("%s", "softcap must be a finite number >= 0 (0: none)");
  if (softcap > 0.f && !(softmax_scale / softcap < INFINITY))
    return fail("%s", "softcap is too small for softmax_scale: softmax_scale / softcap overflows float32");
  return 0;
}

// Softcap's folding into a launch's parameters (the forward's FwdParams, the backward's BwdParams): scores become
// tanh(s * softcap_pre) with softcap_pre = softmax_scale / cap (softcap_scores, softmax.cuh), and the cap moves into
// the exp2's scale, scale_log2 = cap log2 e, in place of softmax_scale log2 e.
template <class Params>
inline void fold_softcap(Params& p, float softmax_scale, float softcap) {
  p.softcap_pre = softmax_scale / softcap;
  p.scale_log2 = softcap * 1.4426950408889634f;
}

struct Problem {
  const void *q, *k, *v;
  void* out;
  float* lse;
  const int *cu_seqlens_q, *cu_seqlens_k;
  int batch, seqlen_q, seqlen_k, max_seqlen_q, nheads, nheads_kv, headdim;
  const int64_t* strides;  // q, k, v, out: (batch, row, head) each, in elements
  float softmax_scale;
  cudaStream_t stream;
  // Causal deal: 1 (the default) = one (batch, head) pair per section, dealt boustrophedon, where
  // use_one_pair_sections, else as 0; 0 (variant 7, the deal before 2026-12-01) = L2-sized sections dealt round-robin
  // where use_l2_sections, else one section dealt boustrophedon. Measured on the H200 (bench_hopper, same run, 14:59
  // UTC 2026-12-01, benchmarks/results/onepair-h200-20261201-1459): causal d256 512-4096 +5/+10/+12/+20%, d128
  // 2048-8192 +3/+7/+3%, d64 512/1024 +3/+5%, d128 512/1024 and d64 2048/4096 within 1%; simulated max / mean SM
  // work 1.03-1.06 against 1.05-1.25 (scripts/simulate_causal_balance.py). 2 (FP8 variant 56): one section over every
  // tile, dealt boustrophedon, at any length (the default's deal beyond the one-pair lengths).
  int causal_deal = 1;
  // OnlineSoftmax::step's rescale_log2. The default 8 (probabilities up to 256 against a stale row maximum, as
  // FlashAttention-4 does) skips the O rescale wherever no row of a warp rises by more than that, which after a row's
  // first key blocks is nearly always; variant 8 takes 0, the rescale on every rise (the kernel before 2026-12-01).
  float rescale_log2 = 8.f;
  WindowArgs window;  // local: the FwdConfig::kLocal kernels (dispatch_local)
  float softcap = 0.f;  // > 0: the FwdConfig::kSoftcap kernels (dispatch_softcap)
  const float* sinks = nullptr;  // FwdParams::sinks (nheads float32 on the device), or null
  int headdim_v = 0;  // V's and O's head dim: Cfg::kHeadDimV (headdim but for the 192 / 128 kernels, flash_fwd_d192.cu)
  int max_ctas = 0;   // > 0: at most this many CTAs (persistent_grid; FlashAttention-3's sm_margin), else one per SM
  // Varlen calls: one int of device memory for the dynamic deal's counter (FwdConfig::kDynamic; zeroed here before
  // the launch), or null for the static deal.
  int* tile_counter = nullptr;
};

inline int l2_bytes() {
  int device = 0, bytes = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device);
  return bytes > 0 ? bytes : 50 << 20;
}

// Whether a causal call walks its tiles longest-first within L2-sized sections of heads (scheduler.cuh) rather than
// longest-first over all tiles. Sections cut DRAM re-reads of K/V but, with the static round-robin assignment,
// unbalance the SMs when a section holds few heads. Measured on the H200 at the FA3 shapes (benchmarks/NOTES.md):
// d128 causal 512: 0.75 -> 0.87 of cuDNN, 2048: 0.85 -> 0.94, 8192: 0.95 -> 1.03, but 16384: 1.04 -> 0.91;
// d256 512: 0.70 -> 0.79, 4096: 0.87 -> 0.89, 8192: 0.97 -> 0.90; d64 2048: 0.95 -> 0.83 (192-row tiles).
// Variant 7 keeps this deal for comparison; the default (Problem::causal_deal) replaces it by one-pair sections.
inline bool use_l2_sections(int headdim, int max_seqlen_q) {
  return (headdim == 128 && max_seqlen_q <= 8192) || (headdim == 256 && max_seqlen_q <= 4096);
}

// Where the default deal takes one (batch, head) pair per section, boustrophedon: simulated to balance the SMs within
// 3-6% (scripts/simulate_causal_balance.py): the sectioned shapes above, and d64 up to 4096 (1.03-1.06; the
// L2-sized sections had measured 0.95 -> 0.83 of cuDNN at d64 causal 2048, simulated 1.19). Beyond them the default
// deals one section over every tile. The FP8 forward (kv_element_bytes 1) at d128 takes one pair per section up to
// 4096 query rows only: interleaved against it, one section measured d128 causal 8k +3.9%, 4k +0.1%, 2k -6.1%
// (s24f-h200-20261203-2204, 15 rounds, the chained 256-key kernel; d256 2k -4.9%, 4k +2.0%, 8k -0.9%, so d256 keeps
// its lengths; the bf16 forward against one section, its variant 12, two runs s25b / s25c: d128 8k +1.8 / +0.5%, d64
// 4k +1.2 / +0.7%, losses at d128 2k-4k and d256: within the spread where positive, so the bf16 lengths stay).
inline bool use_one_pair_sections(int headdim, int max_seqlen_q, int kv_element_bytes = 2) {
  if (headdim == 128 && kv_element_bytes == 1) return max_seqlen_q <= 4096;
  // Multi-head latent attention (192 / 128): with one section over every tile its causal 512 read K/V from DRAM once
  // per query block, 370 MB against the 210 MB of its tensors (ncu, H100, s40a 2026-12-06: DRAM 81% busy, L2 hit
  // rate 32%; cuDNN 204 MB, 0.67x its time). One pair per section, H100 s42c (same run, x cuDNN): causal 512 0.68 ->
  // 0.97, 1024 0.68 -> 1.07, 2048 0.93 -> 1.05, but 4096 1.17 -> 1.09 (non-causal unchanged, 8192 within 3%).
  if (headdim == 192) return max_seqlen_q <= 2048;
  return headdim == 64 ? max_seqlen_q <= 4096 : use_l2_sections(headdim, max_seqlen_q);
}

// How much better one section over every tile must balance the SMs (max / mean per-CTA work, fwd_deal_model.cuh)
// before a causal call leaves the one-pair deal, whose L2 locality measured +3-7% at the paper's shapes.
constexpr double kOnePairDealMargin = 0.10;

inline int num_sms() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms > 0 ? sms : 132;
}

// A persistent launch's grid: one CTA per tile up to one per SM, or up to max_ctas where that is positive (the caller
// leaves the other SMs to kernels that overlap this one: FlashAttention-3's sm_margin, fa3nn/fa3_compat.py). A CTA
// runs on one SM, so at most max_ctas SMs are busy with this launch.
inline int persistent_grid(long long tiles, int sms, int max_ctas) {
  const int cap = max_ctas > 0 && max_ctas < sms ? max_ctas : sms;
  return static_cast<int>(tiles < cap ? tiles : cap);
}

namespace {
// Whether this library has raised instantiation Cfg's dynamic shared-memory limit. Not a function-local static: in a
// template that is a process-wide unique symbol (STB_GNU_UNIQUE), so two builds of this library in one process
// (bench_hopper.py --compare) shared it, and the second build launched unconfigured ("invalid argument"). nvcc gives
// this unnamed namespace a hashed name that differed in each of the v7 builds (NOTES.md), so each kept its own flag.
template <class Cfg>
bool smem_configured = false;
}  // namespace

// Raises kernel's dynamic shared-memory limit to Cfg::kSmemBytes the first time this library launches Cfg (every
// launcher: forward, FP8 forward, backward). 0, or nonzero from fail().
template <class Cfg, class Kernel>
int configure_smem(Kernel kernel) {
  if (!smem_configured<Cfg>) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) != cudaSuccess)
      return fail("cudaFuncSetAttribute: %s", cudaGetErrorString(cudaGetLastError()));
    smem_configured<Cfg> = true;
  }
  return 0;
}

// 0 if the launches before it were accepted, else nonzero from fail(fmt, the CUDA error).
inline int check_launch(const char* fmt) {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? 0 : fail(fmt, cudaGetErrorString(err));
}

// The FwdParams fields the bf16 and FP8 launchers fill alike: output and lse addressing, shapes, the tile scheduler's
// fields, scale_log2. ProblemT is Problem or Fp8Problem (same field names; out's strides at strides[9..11]);
// kv_element_bytes (2 for bf16/fp16 K and V, 1 for e4m3 K and Vt) sizes the causal schedule's L2 sections.
template <class Cfg, class ProblemT>
FwdParams fill_fwd_params(const ProblemT& pr, int kv_element_bytes) {
  const bool varlen = pr.cu_seqlens_q != nullptr;
  const int64_t* st = pr.strides;
  FwdParams p{};
  p.out = pr.out;
  p.lse = pr.lse;
  p.cu_seqlens_q = pr.cu_seqlens_q;
  p.cu_seqlens_k = pr.cu_seqlens_k;
  p.out_batch_stride = varlen ? 0 : st[9];
  p.out_row_stride = st[10];
  p.out_head_stride = st[11];
  p.lse_batch_stride = varlen ? 0 : int64_t(pr.nheads) * pr.seqlen_q;  // dense lse (b, h, sq)
  p.lse_head_stride = pr.seqlen_q;                                     // varlen lse (h, total_q)
  p.batch = pr.batch;
  p.seqlen_q = pr.seqlen_q;
  p.seqlen_k = pr.seqlen_k;
  p.nheads = pr.nheads;
  p.group = pr.nheads / pr.nheads_kv;
  p.group_div = FastDiv(p.group);
  p.num_m_blocks = (pr.max_seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
  p.heads_per_section = pr.batch * pr.nheads;  // one section: plain longest-first over every tile
  bool one_pair = Cfg::kCausal && pr.causal_deal == 1 &&
                  use_one_pair_sections(pr.headdim, pr.max_seqlen_q, kv_element_bytes);
  if (one_pair && !varlen) {
    // Few (batch, head) pairs: one section over every tile where the one-pair deal is modelled to balance the SMs
    // worse by more than kOnePairDealMargin (fwd_deal_model.cuh). Dense calls, bf16 / fp16 and FP8; varlen calls keep
    // their deals. Measured with scripts/fwd_deal_shapes.py (causal, this rule x the one-pair deal it replaces, same
    // process, H100): bf16 (s55b) d128 one 8k x 8 / 16 / 24 heads 1.61 / 1.47 / 1.22, one 4k x 16 / 24 1.37 / 1.16
    // (then 1.14-1.33x cuDNN), d64 one 4k x 16 1.25; FP8 d128 (s56a, --fp8, its one-pair lengths end at 4k) one 4k x
    // 8 / 16 / 24 1.52 / 1.37 / 1.23, one 2k x 16 1.25. Where it keeps the one-pair deal (the paper's 2 x 8k x 16 and
    // 8 x 2k x 16, FP8's 4 x 4k x 16, one 2k x 32) 0.95-1.05: the same kernels and deal in both builds, noise.
    static const int sms = num_sms();
    const long long pairs = static_cast<long long>(pr.batch) * pr.nheads;
    const int grid = persistent_grid(pairs * p.num_m_blocks, sms, pr.max_ctas);
    one_pair = !one_section_balances_better(p.num_m_blocks, Cfg::kBlockM, Cfg::kBlockN, pr.seqlen_q, pr.seqlen_k,
                                            pairs, grid, kOnePairDealMargin);
  }
  if (one_pair) {
    p.heads_per_section = 1;  // the default deal: one (batch, head) pair per section, boustrophedon
  } else if (Cfg::kCausal && pr.causal_deal == 0 && use_l2_sections(pr.headdim, pr.max_seqlen_q)) {
    // Causal sections: as many (batch, head) pairs as keep their K/V within half the L2 (one K/V head serves
    // nheads / nheads_kv query heads), at least one.
    static const int l2 = l2_bytes();
    const int64_t keys_per_seq = varlen ? (int64_t(pr.seqlen_k) + pr.batch - 1) / pr.batch : pr.seqlen_k;
    const int64_t kv_bytes_per_head = 2 * keys_per_seq * pr.headdim * kv_element_bytes * pr.nheads_kv / pr.nheads;
    const int64_t bh = int64_t(pr.batch) * pr.nheads;
    int64_t section = kv_bytes_per_head > 0 ? (l2 / 2) / kv_bytes_per_head : bh;
    section = section < 1 ? 1 : (section > bh ? bh : section);
    p.heads_per_section = static_cast<int>(section);
  }
  // Boustrophedon with one section or one pair per section, round-robin over L2-sized sections.
  p.boustrophedon = one_pair || p.heads_per_section >= pr.batch * pr.nheads ? 1 : 0;
  p.scale_log2 = pr.softmax_scale * 1.4426950408889634f;
  return p;
}

template <class Cfg>
int launch_dealt(const Problem& pr) {
  const bool varlen = pr.cu_seqlens_q != nullptr;
  const int64_t map_batch = varlen ? 1 : pr.batch;
  const int64_t* st = pr.strides;
  if (pr.headdim != Cfg::kHeadDim || pr.headdim_v != Cfg::kHeadDimV)
    return fail("%s", "internal: a call reached a kernel of other head dims");
  CUtensorMap tq, tk, tv;
  if (!make_map(&tq, pr.q, Cfg::kBF16, pr.headdim, pr.seqlen_q, pr.nheads, map_batch,
                st[1], st[2], map_batch_stride(varlen, st[0], pr.seqlen_q, st[1]), Cfg::kBlockM) ||
      !make_map(&tk, pr.k, Cfg::kBF16, pr.headdim, pr.seqlen_k, pr.nheads_kv, map_batch,
                st[4], st[5], map_batch_stride(varlen, st[3], pr.seqlen_k, st[4]), Cfg::kBlockN) ||
      !make_map(&tv, pr.v, Cfg::kBF16, Cfg::kHeadDimV, pr.seqlen_k, pr.nheads_kv, map_batch,
                st[7], st[8], map_batch_stride(varlen, st[6], pr.seqlen_k, st[7]), Cfg::kBlockN))
    return fail("%s", "cuTensorMapEncodeTiled failed (pointers must be 16-B aligned, strides multiples of 8 elements)");

  // O: one 64-row box per consumer warpgroup and panel, for the TMA-store epilogue of dense calls. An output whose
  // base or strides TMA cannot address (not 16-B aligned) keeps the direct stores.
  CUtensorMap to{};
  const bool store_o_tma = Cfg::kTmaStoreO && !varlen &&
                           make_map(&to, pr.out, Cfg::kBF16, Cfg::kHeadDimV, pr.seqlen_q, pr.nheads, pr.batch,
                                    st[10], st[11], st[9], 64);

  FwdParams p = fill_fwd_params<Cfg>(pr, 2);
  p.store_o_tma = store_o_tma ? 1 : 0;
  p.rescale_log2 = pr.rescale_log2;
  p.window_left = pr.window.left;
  p.window_right = pr.window.right;
  p.sinks = pr.sinks;
  if (pr.window.local != Cfg::kLocal) return fail("%s", "internal: a window call reached a kernel without windows or back");
  if ((pr.softcap > 0.f) != Cfg::kSoftcap)
    return fail("%s", "internal: a softcap call reached a kernel without softcap or back");
  if constexpr (Cfg::kSoftcap) fold_softcap(p, pr.softmax_scale, pr.softcap);

  const long long tiles = static_cast<long long>(p.num_m_blocks) * pr.nheads * pr.batch;
  if (tiles == 0) return 0;
  if (tiles > 0x7fffffffLL) return fail("%s", "too many tiles for one launch");  // the scheduler's int tile indices
  static const int sms = num_sms();
  const int grid = persistent_grid(tiles, sms, pr.max_ctas);
  p.deal = TileDeal::make(p.num_m_blocks, pr.nheads, pr.batch, p.heads_per_section, p.boustrophedon, grid);
  if constexpr (Cfg::kDynamic) {
    p.tile_counter = pr.tile_counter;
    p.num_tiles = static_cast<int>(tiles);
    const cudaError_t err = cudaMemsetAsync(pr.tile_counter, 0, sizeof(int), pr.stream);
    if (err != cudaSuccess) return fail("zeroing the tile counter: %s", cudaGetErrorString(err));
  }
  auto kernel = flash_fwd_kernel<Cfg>;
  if (const int status = configure_smem<Cfg>(kernel)) return status;
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, pr.stream>>>(tq, tk, tv, to, p);
  return check_launch("kernel launch: %s");
}

// Tile choices per head dim: kBlockN, K/V stages, consumer warpgroups (kBlockM = 64 per consumer). Variant 0 is
// the default, variant 4 serves short causal calls and d128 non-causal calls up to 1024, variant 5 the longer d128
// non-causal calls and d256's short calls (dispatch_causal); 4 and 5 are also compiled for bf16 under their own
// variant numbers so one benchmark run can compare shapes (benchmarks/NOTES.md).
//   d64:  192 x 128, 3 consumers (160 registers each), 2 stages.  4: 128 x 128, 2 consumers.  5: 192 x 128, 3 stages.
//   d128: 128 x 176, 2 stages (208 KB of smem).                    4: 128 x 128.               5: 128 x 160, 2 Q.
//   d256: 128 x 80, 2 stages (64 KB Q + 160 KB K/V = 224 KB).       4: 128 x 64.  5: 128 x 48, 2 Q (128 + 96 KB).
template <int D, int kVariant> struct Tiles;
// kQStages = 2 (Q double-buffered) wherever shared memory allows it.
template <> struct Tiles<64, 0> { static constexpr int kBlockN = 128, kStages = 2, kConsumers = 3, kQStages = 2; };
template <> struct Tiles<64, 4> { static constexpr int kBlockN = 128, kStages = 2, kConsumers = 2, kQStages = 2; };
template <> struct Tiles<64, 5> { static constexpr int kBlockN = 128, kStages = 3, kConsumers = 3, kQStages = 2; };
template <> struct Tiles<128, 0> { static constexpr int kBlockN = 176, kStages = 2, kConsumers = 2, kQStages = 1; };
template <> struct Tiles<128, 4> { static constexpr int kBlockN = 128, kStages = 2, kConsumers = 2, kQStages = 2; };
template <> struct Tiles<128, 5> { static constexpr int kBlockN = 160, kStages = 2, kConsumers = 2, kQStages = 2; };
template <> struct Tiles<256, 0> { static constexpr int kBlockN = 80, kStages = 2, kConsumers = 2, kQStages = 1; };
template <> struct Tiles<256, 4> { static constexpr int kBlockN = 64, kStages = 2, kConsumers = 2, kQStages = 1; };
template <> struct Tiles<256, 5> { static constexpr int kBlockN = 48, kStages = 2, kConsumers = 2, kQStages = 2; };

// Varlen calls given a tile counter (Problem::tile_counter) take the dynamic deal (FwdConfig::kDynamic), the rest the
// static one; the caller decides (fa3nn/backends/hopper.py varlen_deal_for, with the measurements: dynamic 1.06-1.45x
// static on mixed lengths, 0.89-1.01x with every sequence of one length).
template <class Cfg>
int launch(const Problem& pr) {
  if constexpr (Cfg::kCrossTile && !Cfg::kSkipKVLoads) {
    if (pr.tile_counter != nullptr && pr.cu_seqlens_q != nullptr) return launch_dealt<typename Cfg::Dynamic>(pr);
  }
  return launch_dealt<Cfg>(pr);
}

// kIntMax: see dispatch_causal. The variants that call launch_d directly (the ablations 1-3, the tile variants 4 / 5,
// no_cross_tile and skip_kv_loads) keep the float tree at every head dim, so at d128 they also differ from the
// default in its row max (+2-5% there, NOTES "s19b" / "s19c"); variants 7, 8, 10 and 11 go through dispatch_causal.
template <int D, bool kBF16, bool kCausal, int kVariant = 0, bool kPingpong = true, bool kOverlap = true,
          bool kSkipKVLoads = false, bool kCrossTile = true, bool kIntMax = false, bool kLocal = false,
          bool kSoftcap = false>
int launch_d(const Problem& pr) {
  using T = Tiles<D, kVariant>;
  return launch<FwdConfig<D, T::kBlockN, T::kStages, kBF16, kCausal, kPingpong, kOverlap, T::kConsumers,
                          kSkipKVLoads, T::kQStages, kCrossTile, kIntMax, kLocal, kSoftcap>>(pr);
}

// Short calls take narrower tiles (variant kShort: 4, or 5 at d256). A causal tile wastes up to one key block of
// work on its diagonal, and a key block past the end of a short sequence is mostly padding; below these lengths that
// waste outweighs the per-block overheads that wider blocks save. Thresholds from the H200 runs in benchmarks/NOTES.md
// (e.g. d128 causal 512: 0.63 -> 0.74 of cuDNN, 2048: 0.82 -> 0.85; d128 non-causal 512: 0.84 -> 0.89; at 16384
// the wide tiles win: d128 causal 1.05 vs 0.97). kNonCausalMid: non-causal calls up to this length (and past
// kNonCausal) take variant 5's tiles (d128: 128 x 160 with Q double-buffered). On the final kernels (2026-12-01,
// benchmarks/NOTES.md "Short-call tiles") d128 non-causal 1024 ran 602 TFLOP/s with 128 x 128 against 550 with
// the 176-wide tiles (cuDNN 619), 2048 627 with 128 x 160 against 582 (cuDNN 638), and 128 x 160 stayed ahead of
// 128 x 176 past that (4096 / 8192 / 16384: 639 / 626 / 634 against 615 / 625 / 630), so d128 non-causal calls never
// take the 176-wide tiles; causal ones past 2048 still do (16384: 603 against 597 for 128 x 160).
// kShort: the variant short calls take. d256's is variant 5, 128 x 48 with Q double-buffered (so the next tile's Q
// loads during this one and O leaves by TMA stores; the 80- and 64-wide tiles leave room for one Q stage only).
// Same run on the H200 (2026-12-01 fifth session, against 128 x 80 / 128 x 64): non-causal 512 522 vs 474 / 479
// TFLOP/s (cuDNN 540), causal 512 332 vs 304 / 304 (cuDNN 354), causal 1024 450 vs 439 / 438 (cuDNN 462); but
// non-causal 1024 589 vs 615 and every length from 2048 on 6-22% slower (the per-block costs over 48 keys).
template <int D> struct ShortCallSeqlen;
template <> struct ShortCallSeqlen<64> {
  static constexpr int kCausal = 1024, kNonCausal = 0, kNonCausalMid = 0, kShort = 4;
};
template <> struct ShortCallSeqlen<128> {
  static constexpr int kCausal = 2048, kNonCausal = 1024, kNonCausalMid = 1 << 30, kShort = 4;
};
template <> struct ShortCallSeqlen<256> {
  static constexpr int kCausal = 1024, kNonCausal = 512, kNonCausalMid = 0, kShort = 5;
};

// kIntMax: each row's max from 3-input integer maxes (OnlineSoftmax, softmax.cuh), d128's default: same run on the
// H200 against the float tree (s19b-h200-20261203-0821), bf16 at 2k / 8k / 16k: d128 +3.0 / +4.5 / +4.0% non-causal,
// +3.7 / +8.7 / +4.2% causal; d64 -8.2 / +2.4 / +4.0% and -2.9 / -0.3 / +1.8%; d256 within +-1%. So d64 and d256 keep
// the float tree.
template <int D, bool kBF16, bool kIntMax = D == 128>
int dispatch_causal(const Problem& pr, bool causal) {
  using T = ShortCallSeqlen<D>;
  constexpr bool I = kIntMax;
  if (causal) {
    return pr.max_seqlen_q <= T::kCausal ? launch_d<D, kBF16, true, T::kShort, true, true, false, true, I>(pr)
                                         : launch_d<D, kBF16, true, 0, true, true, false, true, I>(pr);
  }
  if constexpr (T::kNonCausal > 0) {
    if (pr.max_seqlen_q <= T::kNonCausal) return launch_d<D, kBF16, false, T::kShort, true, true, false, true, I>(pr);
  }
  if constexpr (T::kNonCausalMid > 0) {
    if (pr.max_seqlen_q <= T::kNonCausalMid) return launch_d<D, kBF16, false, 5, true, true, false, true, I>(pr);
  }
  return launch_d<D, kBF16, false, 0, true, true, false, true, I>(pr);
}

// Sliding windows (FwdConfig::kLocal). A window's tile walks about (window + 128) / kBlockN key blocks, like a causal
// call of the window's length, so the tiles follow the short causal calls': d128 128 x 128; d256 the default 128 x 80
// (the short calls' 128 x 48 lost 6-22% from 2048 keys on); d64 128 x 128 (2 consumers) for windows spanning up to
// kD64WideSpan keys and the default 192 x 128 (3 consumers) past that. Measured on the H200 (s31c, window_ab.py,
// causal windows (left, 0), same run): d64 192 x 128 against 128 x 128: left 1024 at 4k 0.90x, at 16k 1.02x; left
// 4096 at 16k 1.07x; at 2048 (s31d) 128 x 128 +16% at 4k, 192 x 128 +9% at 16k. The row max as the default's
// (integer maxes at d128). kSoftcap: the softcap kernels of the same tiles.
constexpr int kD64WideSpan = 2048;

template <int D, bool kBF16, int kVariant, bool kSoftcap = false, bool kIntMax = D == 128>
int launch_local(const Problem& pr) {
  return launch_d<D, kBF16, false, kVariant, true, true, false, true, kIntMax, true, kSoftcap>(pr);
}

template <int D, bool kBF16, bool kSoftcap = false>
int dispatch_local(const Problem& pr) {
#ifdef FA3NN_FWD_LOCAL_VARIANT  // measurement build (hopper_build --define FA3NN_FWD_LOCAL_VARIANT=v): every window on
  return launch_local<D, kBF16, FA3NN_FWD_LOCAL_VARIANT, kSoftcap>(pr);  // Tiles<D, v> (0, 4 or 5)
#endif
  if constexpr (D == 64 && kSoftcap) {
    return launch_local<64, kBF16, 4, true>(pr);  // dispatch_softcap: d64 softcap on 128 x 128 only
  } else if constexpr (D == 64) {
#ifdef FA3NN_FWD_LOCAL_D64_WIDE  // measurement build (hopper_build --define): every d64 window wide (s31c / s31d)
    const bool wide = true;
#else
    const WindowArgs& w = pr.window;
    const bool wide = w.left < 0 || w.right < 0 || w.left + w.right > kD64WideSpan;
#endif
    return wide ? launch_local<64, kBF16, 0, kSoftcap>(pr) : launch_local<64, kBF16, 4, kSoftcap>(pr);
  } else {
    return launch_local<D, kBF16, D == 128 ? 4 : 0, kSoftcap>(pr);
  }
}

template <int D, int kVariant>
int dispatch_experimental(const Problem& pr, bool causal) {
  return causal ? launch_d<D, true, true, kVariant>(pr) : launch_d<D, true, false, kVariant>(pr);
}

// The tile variant of long non-causal calls (what the ablations and diagnostics below take, so they differ from the
// default in the one technique they remove).
template <int D>
constexpr int long_non_causal_variant() {
  return ShortCallSeqlen<D>::kNonCausalMid > 0 ? 5 : 0;
}

template <int D>
int ablation(const Problem& pr, int variant) {
  constexpr int V = long_non_causal_variant<D>();
  if (variant == 1) return launch_d<D, true, false, V, false, true>(pr);
  if (variant == 2) return launch_d<D, true, false, V, true, false>(pr);
  return launch_d<D, true, false, V, false, false>(pr);
}

// Softcap (FwdConfig::kSoftcap; Gemma 2 caps its attention scores at 50, with and without windows): one tile per
// head dim and mask, the long calls' (causal: Tiles<D, 0>, non-causal: long_non_causal_variant), windows as
// dispatch_local; d64 on 128 x 128 (2 consumers) throughout: the 3-consumer 192 x 128 tiles (160 registers) spilled
// 4 B with the tanh (nvcc 13.0). Not tuned for short calls.
template <int D, bool kBF16, bool kIntMax = D == 128>
int dispatch_softcap(const Problem& pr, bool causal) {
  if (pr.window.local) return dispatch_local<D, kBF16, true>(pr);
  constexpr int kCausalTiles = D == 64 ? 4 : 0;
  constexpr int kNonCausalTiles = D == 64 ? 4 : long_non_causal_variant<D>();
  return causal ? launch_d<D, kBF16, true, kCausalTiles, true, true, false, true, kIntMax, false, true>(pr)
                : launch_d<D, kBF16, false, kNonCausalTiles, true, true, false, true, kIntMax, false, true>(pr);
}

// One head dim: the default dispatch (variant 0) and the benchmark-only variants documented at fa3nn_hopper_fwd.
template <int D>
int run_headdim(const Problem& pr, bool bf16, bool causal, int variant) {
  if (pr.softcap > 0.f) {
    if (variant != 0) return fail("%s", "the softcap forward is built for the default variant only");
    return bf16 ? dispatch_softcap<D, true>(pr, causal) : dispatch_softcap<D, false>(pr, causal);
  }
  if (pr.window.local) {
    if (variant != 0) return fail("%s", "the sliding-window forward is built for the default variant only");
    return bf16 ? dispatch_local<D, true>(pr) : dispatch_local<D, false>(pr);
  }
  switch (variant) {
    case 0:
      return bf16 ? dispatch_causal<D, true>(pr, causal) : dispatch_causal<D, false>(pr, causal);
    case 1:
    case 2:
    case 3:
      if (!bf16 || causal) return fail("%s", "ablation variants exist for bf16, non-causal");
      return ablation<D>(pr, variant);
    case 4:
      if (!bf16) return fail("%s", "experimental tile variants exist for bf16 only");
      return dispatch_experimental<D, 4>(pr, causal);
    case 5:
      if (!bf16) return fail("%s", "experimental tile variants exist for bf16 only");
      return dispatch_experimental<D, 5>(pr, causal);
    case 6:  // default tiles without the cross-tile pipeline
      if (!bf16) return fail("%s", "the no-cross-tile ablation exists for bf16 only");
      return causal ? launch_d<D, true, true, 0, true, true, false, false>(pr)
                    : launch_d<D, true, false, long_non_causal_variant<D>(), true, true, false, false>(pr);
    case 7:     // the default dispatch with the causal deal before 2026-12-01: L2-sized sections, round-robin
    case 12: {  // the same with one longest-first section over every tile at any length (as FP8 variant 56)
      Problem dealt = pr;
      dealt.causal_deal = variant == 7 ? 0 : 2;
      return bf16 ? dispatch_causal<D, true>(dealt, causal) : dispatch_causal<D, false>(dealt, causal);
    }
    case 8: {  // the default dispatch with O rescaled on every rise of a row maximum (Problem::rescale_log2 = 0)
      Problem eager = pr;
      eager.rescale_log2 = 0.f;
      return bf16 ? dispatch_causal<D, true>(eager, causal) : dispatch_causal<D, false>(eager, causal);
    }
    case 9:
      if constexpr (D == 128) {
        if (!bf16 || causal) return fail("%s", "the skip-loads diagnostic exists for bf16, non-causal");
        return launch_d<128, true, false, long_non_causal_variant<128>(), true, true, true>(pr);
      }
      return fail("%s", "the skip-loads diagnostic exists for d128 only");
    case 10:  // the default dispatch with each row's max from integer maxes (OnlineSoftmax kIntMax)
    case 11:  // the same with the float tree (FMNMX) at every head dim
      if (!bf16) return fail("%s", "the row max variants exist for bf16 only");
      return variant == 10 ? dispatch_causal<D, true, true>(pr, causal) : dispatch_causal<D, true, false>(pr, causal);
    default:
      return fail("%s", "unknown variant");
  }
}

int run_d64(const Problem& pr, bool bf16, bool causal, int variant);
int run_d128(const Problem& pr, bool bf16, bool causal, int variant);
int run_d256(const Problem& pr, bool bf16, bool causal, int variant);
int run_d192_128(const Problem& pr, bool bf16, bool causal, int variant);

}  // namespace fa3nn::hopper::host
