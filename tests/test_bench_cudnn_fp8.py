"""scripts/bench_cudnn_fp8.py's host-side helpers on CPU: the per-tensor quantization that feeds both kernels (one
scale per tensor, in fa3nn's (batch, nheads, 1) descale layout and as cuDNN's scalars) and the head-chunked fp32
reference. The cuDNN graph and the timing need a Hopper GPU and cudnn-frontend; the script has not run there yet."""

from __future__ import annotations

import pytest
import torch
from script_module import load_script

from fa3nn.fp8.scaling import E4M3_MAX
from fa3nn.testing.reference import attention_ref


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_cudnn_fp8")


def _qkv(batch=2, seqlen=48, nheads=3, d=16):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, seqlen, nheads, d, generator=gen) for _ in range(3))
    return q, k * 3, v * 0.25  # different amaxes, so a mixed-up scale shows


def test_per_tensor_scales_one_value_in_both_layouts(bench):
    q, k, v = _qkv()
    quantized = bench.per_tensor_quantize(q, k, v)
    scalars = bench.tensor_descales(quantized)
    assert quantized.block_q == quantized.block_k == q.shape[1]  # one tile per (batch, head): fp8_forward's rule
    for x, x8, descale, scalar in zip((q, k, v), (quantized.q, quantized.k, quantized.v),
                                      (quantized.q_descale, quantized.k_descale, quantized.v_descale), scalars):
        assert descale.shape == (q.shape[0], q.shape[2], 1)
        assert scalar.shape == (1, 1, 1, 1) and scalar.dtype == torch.float32
        torch.testing.assert_close(descale, scalar.reshape(1, 1, 1).expand_as(descale), rtol=0, atol=0)
        torch.testing.assert_close(scalar.reshape(()), x.abs().amax() / E4M3_MAX, rtol=1e-6, atol=0)
        assert x8.float().abs().amax().item() == E4M3_MAX  # the tensor's largest |x| lands on e4m3's max


def test_dequantize_is_x8_times_its_tensor_descale(bench):
    quantized = bench.per_tensor_quantize(*_qkv())
    for x8, descale, deq in zip((quantized.q, quantized.k, quantized.v),
                                (quantized.q_descale, quantized.k_descale, quantized.v_descale),
                                bench.dequantize(quantized)):
        torch.testing.assert_close(deq, x8.float() * descale[0, 0, 0], rtol=0, atol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_chunked_reference_matches_whole_tensor(bench, causal):
    q, k, v = _qkv()
    scale = 0.3
    whole = attention_ref(q, k, v, causal=causal, softmax_scale=scale, upcast=False)[0]
    # max_bytes below one head's scores: one (batch, head) slice at a time
    chunked = bench.reference_out(q, k, v, causal, scale, max_bytes=1)
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-6)
    assert not torch.equal(chunked, bench.reference_out(q, k, v, not causal, scale, max_bytes=1))


class _FakeTensor:
    def __init__(self, name="", dim=None, stride=None, data_type=None):
        self.name, self.dim, self.stride, self.data_type, self.output = name, dim, stride, data_type, False

    def set_output(self, value):
        self.output = value
        return self

    def set_dim(self, dim):
        self.dim = dim
        return self

    def set_stride(self, stride):
        self.stride = stride
        return self

    def set_data_type(self, data_type):
        self.data_type = data_type
        return self


class _FakeGraph:
    """Records what CudnnFP8 declares (cudnn-frontend's pygraph surface it uses); builds and executes nothing."""

    def __init__(self, **kwargs):
        self.tensors, self.sdpa_kwargs, self.outputs = [], None, []

    def tensor(self, name, dim, stride, data_type):
        self.tensors.append(_FakeTensor(name, dim, stride, data_type))
        return self.tensors[-1]

    def sdpa_fp8(self, **kwargs):
        self.sdpa_kwargs = kwargs
        # as cudnn-frontend 1.32: always four, Stats None without generate_stats
        self.outputs = [_FakeTensor(n) if n != "Stats" or kwargs["generate_stats"] else None
                        for n in ("O", "Stats", "Amax_S", "Amax_O")]
        return self.outputs

    def build(self, heuristics):
        pass

    def get_workspace_size(self):
        return 0


class _FakeCudnn:
    class data_type:
        FP8_E4M3, BFLOAT16, FLOAT = "fp8_e4m3", "bf16", "float"

    class diagonal_alignment:
        TOP_LEFT = "top_left"

    class heur_mode:
        A, FALLBACK = "a", "fallback"

    def __init__(self):
        self.graphs = []

    def pygraph(self, **kwargs):
        self.graphs.append(_FakeGraph(**kwargs))
        return self.graphs[-1]


@pytest.mark.parametrize("causal,out,stats", [(False, "e4m3", False), (True, "bf16", True)])
def test_cudnn_graph_binds_every_io_tensor_with_matching_strides(bench, causal, out, stats):
    quantized = bench.per_tensor_quantize(*_qkv())
    fake = _FakeCudnn()
    runner = bench.CudnnFP8(fake, None, quantized, 0.25, causal, out, stats)
    graph = fake.graphs[0]
    kw = graph.sdpa_kwargs
    assert kw["attn_scale"] == 0.25 and kw["generate_stats"] is stats
    assert (kw.get("right_bound"), kw.get("diagonal_alignment")) == ((0, "top_left") if causal else (None, None))
    o, stats_t, amax_s, amax_o = graph.outputs
    assert not amax_s.output and amax_o.output and o.output and (stats_t.output if stats else stats_t is None)
    io = [*graph.tensors, o, amax_o] + ([stats_t] if stats else [])
    assert set(map(id, runner.buffers)) == set(map(id, io))  # every declared I/O tensor has a buffer, nothing else
    for t in io:
        buf = runner.buffers[t]
        # cuDNN's (batch, heads, seqlen, d) dims over the buffer: the same memory as the buffer viewed that way
        view = buf.permute(0, 2, 1, 3) if buf.dim() == 4 and t.dim[1] == buf.shape[2] != buf.shape[1] else buf
        assert list(view.shape) == t.dim and list(view.stride()) == t.stride, t.name
    assert runner.buffers[o].dtype == (torch.float8_e4m3fn if out == "e4m3" else torch.bfloat16)
    by_name = {t.name: runner.buffers[t].reshape(()) for t in graph.tensors if t.dim == [1, 1, 1, 1]}
    assert by_name["scale_s"] * by_name["descale_s"] == pytest.approx(1.0)
    expected_scale_o = 1 / by_name["descale_v"] if out == "e4m3" else torch.tensor(1.0)
    torch.testing.assert_close(by_name["scale_o"], expected_scale_o)
    assert runner.buffers[kw["q"]] is quantized.q and runner.buffers[kw["v"]] is quantized.v
