"""One small causal GQA varlen call of the native Hopper forward, checked against the reference: the case to run
under `compute-sanitizer --tool memcheck|racecheck python scripts/hopper_small_case.py`."""

import torch

import fa3nn
from fa3nn.testing import assert_error_ratio, attention_ref, random_padding_mask, random_qkv, unpad

torch.manual_seed(0)
q, k, v = random_qkv(3, 200, 200, 4, 2, 64, torch.bfloat16, device="cuda")
mask_q, mask_k = random_padding_mask(3, 200, device="cuda"), random_padding_mask(3, 200, device="cuda")
(qp, cu_q, max_q), (kp, cu_k, max_k), (vp, _, _) = unpad(q, mask_q), unpad(k, mask_k), unpad(v, mask_k)
out = fa3nn.flash_attn_varlen_func(qp, kp, vp, cu_q, cu_k, max_q, max_k, causal=True, backend="hopper")
full = torch.zeros_like(q)
full[mask_q] = out
ref, _ = attention_ref(q, k, v, mask_q, mask_k, causal=True)
pt, _ = attention_ref(q, k, v, mask_q, mask_k, causal=True, upcast=False, reorder_ops=True)
assert_error_ratio(full, ref, pt)
torch.cuda.synchronize()
print("small causal GQA varlen case: ok")
