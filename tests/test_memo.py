"""fa3nn.memo: values derived from a tensor are computed once per (tensor, version, key), and per forward, not per
layer, in the Hugging Face path."""

import gc

import pytest
import torch

from fa3nn.memo import TensorMemo


def counting(value):
    calls = []

    def compute():
        calls.append(1)
        return value

    return compute, calls


def test_same_tensor_same_key_computes_once():
    memo, t = TensorMemo(), torch.arange(4)
    compute, calls = counting("v")
    assert [memo.get(t, 1, compute) for _ in range(3)] == ["v"] * 3
    assert len(calls) == 1


def test_in_place_change_new_key_or_new_tensor_recompute():
    memo, t = TensorMemo(), torch.arange(4)
    compute, calls = counting(0)
    memo.get(t, 1, compute)
    t.add_(1)  # bumps the version counter
    memo.get(t, 1, compute)
    memo.get(t, 2, compute)
    memo.get(torch.arange(4), 2, compute)  # equal values, another tensor
    assert len(calls) == 4


def test_dead_tensor_at_recycled_id_misses():
    memo = TensorMemo()
    compute, calls = counting(0)
    t = torch.arange(4)
    memo.get(t, 0, compute)
    del t
    gc.collect()
    for _ in range(50):  # whatever tensor lands at the old id now, the weakref is dead and the entry cannot match
        memo.get(torch.arange(4), 0, compute)
    assert len(calls) == 51


def test_bounded():
    memo = TensorMemo(max_entries=3)
    keep = [torch.zeros(1) for _ in range(10)]
    for t in keep:
        memo.get(t, 0, lambda: 0)
    assert len(memo._entries) <= 3


def test_inference_tensors_are_not_remembered():
    memo = TensorMemo()
    with torch.inference_mode():
        t = torch.arange(3)
    compute, calls = counting(0)
    memo.get(t, 0, compute)
    memo.get(t, 0, compute)
    assert len(calls) == 2


@pytest.mark.parametrize("packed", [False, True])
def test_hf_forward_reads_position_ids_once_per_forward(monkeypatch, packed):
    transformers = pytest.importorskip("transformers")
    import fa3nn
    from fa3nn.integrations import hf_padding

    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    fa3nn.patch_hf(model)
    calls = []
    original = hf_padding._position_boundaries
    monkeypatch.setattr(hf_padding, "_position_boundaries", lambda p: calls.append(1) or original(p))
    ids = torch.randint(0, 64, (2, 12))
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6]] * 2) if packed else None
    model(ids, position_ids=position_ids)
    assert len(calls) == 1  # three layers, one read
    model(ids, position_ids=position_ids)
    # Without position_ids transformers builds a new tensor per forward (read again); the caller's own tensor, passed
    # again unchanged, is not.
    assert len(calls) == (1 if packed else 2)


def test_import_does_not_load_dynamo_or_triton():
    """`import fa3nn` stays light: torch.compiler.disable (which imports dynamo, and dynamo triton) is only called
    while compiling. As an import-time decorator it broke the Triton interpreter tests, which must set
    TRITON_INTERPRET before triton's first import."""
    import subprocess
    import sys

    code = "import sys, fa3nn; print('triton' in sys.modules, 'torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_compiled_callers_do_not_recompile_per_tensor():
    """Under torch.compile the lookup runs eagerly: a new tensor per call (each training step's position_ids) must
    not make dynamo recompile (traced, it guarded on id(tensor) and recompiled until its limit)."""
    import torch._dynamo

    memo = TensorMemo()
    compute, calls = counting(2.0)

    def f(x):
        return x * memo.get(x, "k", compute)

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="eager")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(4):
            x = torch.randn(8)
            assert torch.equal(compiled(x), x * 2.0)
    assert len(calls) == 4  # one lookup per new tensor, none repeated


def test_remember_cpu_false_computes_every_cpu_call_and_remembers_device_tensors():
    """The cu_seqlens / seqused memos: a CPU tensor's value is read afresh (an edit through shared numpy memory does
    not bump the version counter), a device tensor's is remembered (stood in for by a meta tensor)."""
    memo = TensorMemo(remember_cpu=False)
    compute, calls = counting(0)
    cpu, device = torch.arange(4), torch.empty(4, device="meta")
    for _ in range(3):
        memo.get(cpu, 0, compute)
    assert len(calls) == 3
    for _ in range(3):
        memo.get(device, 0, compute)
    assert len(calls) == 4
