"""The reference backend on CUDA (`pytest -m gpu`): the same oracle checks as on the CPU, in bf16 and fp16."""

import pytest
import torch
from test_reference_numerics import check_against_ref

from fa3nn.testing import random_qkv

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("causal,window_size,softcap", [(False, (-1, -1), 0.0), (True, (64, -1), 20.0)])
@pytest.mark.parametrize("seqlens", [(239, 1), (113, 203), (1024, 1024)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_reference_on_cuda(dtype, causal, window_size, softcap, seqlens):
    q, k, v = random_qkv(2, *seqlens, 8, 2, 128, dtype, device="cuda", requires_grad=True)
    check_against_ref(q, k, v, causal=causal, window_size=window_size, softcap=softcap)
