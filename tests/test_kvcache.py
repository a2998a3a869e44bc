"""flash_attn_with_kvcache (fa3nn.kvcache) against a float64 oracle written out per sequence: the cache's rows in
order, the new keys appended, rotary by explicit pair formulas, bottom-right causal / window masks, softcap; and the
cache's contents after the in-place write."""

import math

import numpy as np
import pytest
import torch

from fa3nn import flash_attn_with_kvcache

B, HQ, HK, D, DV = 3, 4, 2, 16, 16


def rotate_oracle(x, cos, sin, position, interleaved):
    """x (heads, d) at one position, float64."""
    out = x.clone()
    half = cos.shape[1]
    for i in range(half):
        c, s = float(cos[position, i]), float(sin[position, i])
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
        out[:, a] = x[:, a] * c - x[:, b] * s
        out[:, b] = x[:, a] * s + x[:, b] * c
    return out


def attention_oracle(q, keys, values, scale, causal, window, softcap):
    """q (n, hq, d), keys / values (L, hk, d): out (n, hq, dv) and lse (hq, n), float64, bottom-right masks."""
    n, length, group = q.shape[0], keys.shape[0], q.shape[1] // keys.shape[1]
    out = torch.zeros(n, q.shape[1], values.shape[2], dtype=torch.float64)
    lse = torch.full((q.shape[1], n), -math.inf, dtype=torch.float64)
    for h in range(q.shape[1]):
        scores = q[:, h] @ keys[:, h // group].T * scale
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        for i in range(n):
            diag = i + length - n
            for j in range(length):
                hidden = (causal and j > diag) or (window[0] >= 0 and j < diag - window[0]) or (
                    window[1] >= 0 and j > diag + window[1])
                if hidden:
                    scores[i, j] = -math.inf
        lse[h] = torch.logsumexp(scores, dim=1)
        probs = torch.softmax(scores, dim=1).nan_to_num(0.0)
        out[:, h] = probs @ values[:, h // group]
    return out, lse


def make_case(seed, capacity=24, new=2, seqlen_q=2, d=D, dv=DV):
    g = torch.Generator().manual_seed(seed)
    k_cache = torch.randn(B, capacity, HK, d, generator=g)
    v_cache = torch.randn(B, capacity, HK, dv, generator=g)
    q = torch.randn(B, seqlen_q, HQ, d, generator=g)
    k = torch.randn(B, new, HK, d, generator=g)
    v = torch.randn(B, new, HK, dv, generator=g)
    cos_sin = torch.randn(capacity + 8, d // 4, generator=g)  # rotary angles for every cache row
    return q, k_cache, v_cache, k, v, cos_sin.cos(), cos_sin.sin()


def check(out, lse, expected):
    for b, (want_out, want_lse) in enumerate(expected):
        torch.testing.assert_close(out[b].double(), want_out, atol=2e-5, rtol=2e-5)
        torch.testing.assert_close(lse[b].double(), want_lse, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("causal,window,softcap", [(False, (-1, -1), 0.0), (True, (-1, -1), 0.0),
                                                   (False, (3, 1), 0.0), (True, (-1, -1), 5.0)])
def test_plain_cache_appends_and_attends(causal, window, softcap):
    q, k_cache, v_cache, k, v, _, _ = make_case(0)
    before_k, before_v = k_cache.clone(), v_cache.clone()
    ends = torch.tensor([5, 0, 11], dtype=torch.int32)
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=ends, causal=causal,
                                       window_size=window, softcap=softcap, return_softmax_lse=True)
    expected = []
    for b in range(B):
        e = int(ends[b])
        keys = torch.cat([before_k[b, :e], k[b]]).double()
        values = torch.cat([before_v[b, :e], v[b]]).double()
        expected.append(attention_oracle(q[b].double(), keys, values, D**-0.5, causal, window, softcap))
        # the new rows written, every other row untouched
        torch.testing.assert_close(k_cache[b, e:e + 2], k[b], atol=0, rtol=0)
        torch.testing.assert_close(v_cache[b, e:e + 2], v[b], atol=0, rtol=0)
        assert torch.equal(k_cache[b, :e], before_k[b, :e]) and torch.equal(k_cache[b, e + 2:], before_k[b, e + 2:])
    check(out, lse, expected)
    assert out.shape == (B, 2, HQ, DV) and lse.shape == (B, HQ, 2) and not out.requires_grad


def test_dense_q_takes_a_max_seqlen_q_it_does_not_need():
    """FlashAttention-3 takes max_seqlen_q with dense q (a decode loop passes 1) and reads q's length instead: so
    does fa3nn, for any bound that holds q's seqlen (a helper's FA3-compat probe found it refused, s58)."""
    q, k_cache, v_cache, _, _, _, _ = make_case(1)
    expected = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=5, causal=True)
    for bound in (2, 7):
        got = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=5, causal=True, max_seqlen_q=bound)
        assert torch.equal(got, expected)


def test_without_new_keys_reads_the_cache_as_is():
    q, k_cache, v_cache, _, _, _, _ = make_case(1)
    before = k_cache.clone()
    ends = torch.tensor([3, 24, 1], dtype=torch.int32)
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=ends, causal=True, return_softmax_lse=True)
    expected = [attention_oracle(q[b].double(), k_cache[b, :int(ends[b])].double(),
                                 v_cache[b, :int(ends[b])].double(), D**-0.5, True, (-1, -1), 0.0) for b in range(B)]
    check(out, lse, expected)
    assert torch.equal(k_cache, before)
    # cache_seqlens as an int: every sequence the same length
    out_int = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=7)
    want = attention_oracle(q[2].double(), k_cache[2, :7].double(), v_cache[2, :7].double(), D**-0.5, False,
                            (-1, -1), 0.0)[0]
    torch.testing.assert_close(out_int[2].double(), want, atol=2e-5, rtol=2e-5)


def test_batch_index_and_left_padding():
    q, k_cache, v_cache, k, v, _, _ = make_case(2)
    k_cache, v_cache = torch.cat([k_cache, k_cache.flip(0)]), torch.cat([v_cache, v_cache.flip(0)])  # 6 rows
    before_k, before_v = k_cache.clone(), v_cache.clone()
    rows = torch.tensor([4, 0, 2], dtype=torch.int32)
    leftpad = torch.tensor([2, 0, 5], dtype=torch.int32)
    ends = torch.tensor([6, 3, 5], dtype=torch.int32)  # the third sequence has no history
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=ends, cache_batch_idx=rows,
                                       cache_leftpad=leftpad, causal=True, return_softmax_lse=True)
    expected = []
    for b in range(B):
        r, lo, e = int(rows[b]), int(leftpad[b]), int(ends[b])
        keys = torch.cat([before_k[r, lo:e], k[b]]).double()
        values = torch.cat([before_v[r, lo:e], v[b]]).double()
        expected.append(attention_oracle(q[b].double(), keys, values, D**-0.5, True, (-1, -1), 0.0))
        torch.testing.assert_close(k_cache[r, e:e + 2], k[b], atol=0, rtol=0)
    check(out, lse, expected)
    untouched = [r for r in range(6) if r not in rows.tolist()]
    assert torch.equal(k_cache[untouched], before_k[untouched])


def test_paged_cache_through_a_page_table():
    q, _, _, k, v, _, _ = make_case(3)
    g = torch.Generator().manual_seed(7)
    page_size, pages_per_seq, num_pages = 4, 5, 17
    k_pages = torch.randn(num_pages, page_size, HK, D, generator=g)
    v_pages = torch.randn(num_pages, page_size, HK, DV, generator=g)
    table = torch.randperm(num_pages, generator=g)[: B * pages_per_seq].view(B, pages_per_seq).to(torch.int32)
    ends = torch.tensor([7, 12, 0], dtype=torch.int32)
    logical_k = [torch.cat([k_pages[int(p)] for p in table[b]]) for b in range(B)]  # before the write
    logical_v = [torch.cat([v_pages[int(p)] for p in table[b]]) for b in range(B)]
    out, lse = flash_attn_with_kvcache(q, k_pages, v_pages, k, v, cache_seqlens=ends, page_table=table, causal=True,
                                       return_softmax_lse=True)
    expected = []
    for b in range(B):
        e = int(ends[b])
        keys = torch.cat([logical_k[b][:e], k[b]]).double()
        values = torch.cat([logical_v[b][:e], v[b]]).double()
        expected.append(attention_oracle(q[b].double(), keys, values, D**-0.5, True, (-1, -1), 0.0))
        for i in range(2):  # row e + i of sequence b sits in page table[b, (e + i) // 4], row (e + i) % 4
            page, row = int(table[b, (e + i) // page_size]), (e + i) % page_size
            torch.testing.assert_close(k_pages[page, row], k[b, i], atol=0, rtol=0)
            torch.testing.assert_close(v_pages[page, row], v[b, i], atol=0, rtol=0)
    check(out, lse, expected)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_rotary_on_new_keys_and_queries(interleaved, causal):
    q, k_cache, v_cache, k, v, cos, sin = make_case(4)
    before_k = k_cache.clone()
    ends = torch.tensor([4, 9, 2], dtype=torch.int32)
    leftpad = torch.tensor([1, 0, 2], dtype=torch.int32)
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, rotary_cos=cos, rotary_sin=sin, cache_seqlens=ends,
                                       cache_leftpad=leftpad, causal=causal, rotary_interleaved=interleaved,
                                       return_softmax_lse=True)
    expected = []
    for b in range(B):
        lo, e = int(leftpad[b]), int(ends[b])
        # rotary positions count cache rows from row 0, the left padding included (FlashAttention-3's convention):
        # the new keys sit at rows e, e + 1
        new_k = torch.stack([rotate_oracle(k[b, i].double(), cos.double(), sin.double(), e + i, interleaved)
                             for i in range(2)])
        q_pos = [e + i if causal else e for i in range(2)]
        qb = torch.stack([rotate_oracle(q[b, i].double(), cos.double(), sin.double(), q_pos[i], interleaved)
                          for i in range(2)])
        keys = torch.cat([before_k[b, lo:e].double(), new_k])
        values = torch.cat([v_cache[b, lo:e].double(), v[b].double()])
        expected.append(attention_oracle(qb, keys, values, D**-0.5, causal, (-1, -1), 0.0))
        torch.testing.assert_close(k_cache[b, e:e + 2].double(), new_k, atol=1e-6, rtol=1e-6)  # stored rotated
    check(out, lse, expected)


# (layout, seqlen_q or the packed max_seqlen_q, window, whether query i sits at cache_seqlens + i): FlashAttention-3's
# mha_fwd (hopper/flash_api.cpp) turns a left side >= seqlen_k - 1 (seqlen_k: the cache's capacity, 24 plain, 4 pages
# of 8 = 32 paged) and a right side >= seqlen_q - 1 into -1 before it decides is_causal / is_local, and rotates the
# queries at moving positions only for a causal or local call.
WINDOW_COVERS_ALL = [
    ("plain", 2, (23, -1), False), ("plain", 2, (22, -1), True), ("plain", 2, (-1, 1), False),
    ("plain", 3, (-1, 1), True), ("plain", 3, (-1, 2), False), ("plain", 2, (100, 5), False),
    ("plain", 2, (-1, 0), True), ("paged", 2, (23, -1), True), ("paged", 2, (30, -1), True),
    ("paged", 2, (31, -1), False), ("packed", 3, (-1, 2), False), ("packed", 3, (-1, 1), True),
    ("packed", 4, (-1, 2), True),  # max_seqlen_q 4 > the longest run (3): FlashAttention-3 reads max_seqlen_q
]


@pytest.mark.parametrize("layout,seqlen_q,window,moving", WINDOW_COVERS_ALL, ids=lambda x: "")
def test_rotary_positions_follow_fa3s_window_normalization(layout, seqlen_q, window, moving):
    """A non-causal window covering every key is no window to FlashAttention-3, whose rotary then puts every query
    at cache_seqlens; fa3nn rotated query i at cache_seqlens + i whenever window_size != (-1, -1) (window (23, -1)
    over a 24-row cache: out off by up to ~1 from FlashAttention-3's). The masks are the same either way."""
    q, k_cache, v_cache, k, v, cos, sin = make_case(12, seqlen_q=3)
    ends = torch.tensor([4, 9, 2], dtype=torch.int32)
    q_lens = [2, 0, 3] if layout == "packed" else [seqlen_q] * B
    extra = {}
    logical_k, logical_v = list(k_cache.clone()), list(v_cache.clone())
    if layout == "paged":  # the plain cache's rows as pages of 8, shuffled, and a fourth (unread) page per sequence
        perm = torch.randperm(B * 3, generator=torch.Generator().manual_seed(5))
        k_cache, v_cache = (c.reshape(B * 3, 8, *c.shape[2:])[perm.argsort()] for c in (k_cache, v_cache))
        extra = dict(page_table=torch.cat([perm.view(B, 3), perm.view(B, 3)[:, :1]], dim=1).to(torch.int32))
    if layout == "packed":
        extra = dict(cu_seqlens_q=torch.tensor([0, 2, 2, 5], dtype=torch.int32), max_seqlen_q=seqlen_q)
        q_in = torch.cat([q[b, :n] for b, n in enumerate(q_lens)])
    else:
        q_in = q[:, :seqlen_q]
    out, lse = flash_attn_with_kvcache(q_in, k_cache, v_cache, k, v, rotary_cos=cos, rotary_sin=sin,
                                       cache_seqlens=ends, window_size=window, return_softmax_lse=True, **extra)
    start = 0
    for b in range(B):
        e, n = int(ends[b]), q_lens[b]
        new_k = torch.stack([rotate_oracle(k[b, i].double(), cos.double(), sin.double(), e + i, True)
                             for i in range(2)])
        keys = torch.cat([logical_k[b][:e].double(), new_k])
        values = torch.cat([logical_v[b][:e].double(), v[b].double()])
        if n:
            qb = torch.stack([rotate_oracle(q[b, i].double(), cos.double(), sin.double(), e + i if moving else e, True)
                              for i in range(n)])
            want_out, want_lse = attention_oracle(qb, keys, values, D**-0.5, False, window, 0.0)
            got_out, got_lse = (out[start:start + n], lse[:, start:start + n]) if layout == "packed" else (out[b],
                                                                                                          lse[b])
            torch.testing.assert_close(got_out.double(), want_out, atol=2e-5, rtol=2e-5)
            torch.testing.assert_close(got_lse.double(), want_lse, atol=2e-5, rtol=2e-5)
        start += n


@pytest.mark.parametrize("paged", [False, True])
def test_packed_queries_and_new_keys(paged):
    """cu_seqlens_q / cu_seqlens_k_new: each sequence its own count of queries and new keys (0 included), rotary at
    the rows they land on, causal per sequence."""
    q, k_cache, v_cache, k, v, cos, sin = make_case(8, new=3, seqlen_q=3)
    q_lens, new_lens = [2, 0, 3], [1, 3, 0]
    cu_q = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    cu_k = torch.tensor([0, 1, 4, 4], dtype=torch.int32)
    q_packed = torch.cat([q[b, :n] for b, n in enumerate(q_lens)])
    k_packed = torch.cat([k[b, :n] for b, n in enumerate(new_lens)])
    v_packed = torch.cat([v[b, :n] for b, n in enumerate(new_lens)])
    ends = torch.tensor([6, 2, 9], dtype=torch.int32)
    extra = dict(cache_leftpad=torch.tensor([1, 0, 3], dtype=torch.int32))
    if paged:  # the plain cache's rows as pages of 8, shuffled
        perm = torch.randperm(B * 3, generator=torch.Generator().manual_seed(3))
        k_cache = k_cache.reshape(B * 3, 8, HK, D)[perm.argsort()]
        v_cache = v_cache.reshape(B * 3, 8, HK, DV)[perm.argsort()]
        extra = dict(page_table=perm.view(B, 3).to(torch.int32))
        logical_k = [k_cache[perm.view(B, 3)[b]].flatten(0, 1) for b in range(B)]
        logical_v = [v_cache[perm.view(B, 3)[b]].flatten(0, 1) for b in range(B)]
    else:
        logical_k, logical_v = list(k_cache.clone()), list(v_cache.clone())
    pads = extra["cache_leftpad"].tolist() if not paged else [0] * B
    out, lse = flash_attn_with_kvcache(q_packed, k_cache, v_cache, k_packed, v_packed, rotary_cos=cos, rotary_sin=sin,
                                       cache_seqlens=ends, cu_seqlens_q=cu_q, cu_seqlens_k_new=cu_k, max_seqlen_q=3,
                                       causal=True, return_softmax_lse=True, **extra)
    assert out.shape == (5, HQ, DV) and lse.shape == (HQ, 5)
    for b in range(B):
        lo, e, nq, nk = pads[b], int(ends[b]), q_lens[b], new_lens[b]
        k0, q0 = int(cu_k[b]), int(cu_q[b])
        new_k = [rotate_oracle(k_packed[k0 + i].double(), cos.double(), sin.double(), e + i, True) for i in range(nk)]
        keys = torch.cat([logical_k[b][lo:e].double(), *(x[None] for x in new_k)])
        values = torch.cat([logical_v[b][lo:e].double(), v_packed[k0:k0 + nk].double()])
        if nq:
            qb = torch.stack([rotate_oracle(q_packed[q0 + i].double(), cos.double(), sin.double(), e + i, True)
                              for i in range(nq)])
            want_out, want_lse = attention_oracle(qb, keys, values, D**-0.5, True, (-1, -1), 0.0)
            torch.testing.assert_close(out[q0:q0 + nq].double(), want_out, atol=2e-5, rtol=2e-5)
            torch.testing.assert_close(lse[:, q0:q0 + nq].double(), want_lse, atol=2e-5, rtol=2e-5)
        for i in range(nk):  # the written rows
            if paged:
                page, row = int(extra["page_table"][b, (e + i) // 8]), (e + i) % 8
                got = k_cache[page, row]
            else:
                got = k_cache[b, e + i]
            torch.testing.assert_close(got.double(), new_k[i], atol=1e-6, rtol=1e-6)


def test_bad_calls_name_the_argument(monkeypatch):
    monkeypatch.setattr("fa3nn.fa3_compat._warned_sm_margin", set())  # the warning comes once per backend
    q, k_cache, v_cache, k, v, cos, sin = make_case(5)
    with pytest.raises(ValueError, match="cache_seqlens"):  # 23 + 2 rows > 24
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=23)
    with pytest.raises(ValueError, match="cache_leftpad"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=2,
                                cache_leftpad=torch.full((B,), 3, dtype=torch.int32))
    for name in ("qv", "q_descale", "scheduler_metadata", "rotary_seqlens"):
        with pytest.raises(NotImplementedError, match=name):
            flash_attn_with_kvcache(q, k_cache, v_cache, **{name: torch.zeros(1)})
    with pytest.raises(NotImplementedError, match="attention_chunk"):
        flash_attn_with_kvcache(q, k_cache, v_cache, attention_chunk=8)
    with pytest.raises(TypeError, match="k and v come together"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k)
    with pytest.raises(TypeError, match="rotary_cos and rotary_sin"):
        flash_attn_with_kvcache(q, k_cache, v_cache, rotary_cos=cos)
    with pytest.raises(ValueError, match="rotary_dim"):
        flash_attn_with_kvcache(q, k_cache, v_cache, rotary_cos=torch.ones(8, D), rotary_sin=torch.ones(8, D))
    with pytest.raises(TypeError, match="pass k and v too"):
        flash_attn_with_kvcache(q, k_cache, v_cache, rotary_cos=cos, rotary_sin=sin)
    with pytest.raises(ValueError, match=r"cache_seqlens entries must be in \[0, 2\*\*31\)"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([2**32 + 3, 3, 3]))
    with pytest.raises(ValueError, match="cache_leftpad entries must be in"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_leftpad=-1)
    with pytest.raises(ValueError, match="batch 0"):
        flash_attn_with_kvcache(q[:0], k_cache[:0], v_cache[:0])
    with pytest.raises(ValueError, match="same page row"):  # two sequences share page 0
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=0,
                                page_table=torch.tensor([[0], [0], [1]], dtype=torch.int32))
    with pytest.raises(ValueError, match="rotary_cos / rotary_sin have 8 rows"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, rotary_cos=cos[:8], rotary_sin=sin[:8], cache_seqlens=7)
    with pytest.raises(ValueError, match="cache_batch_idx repeats"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=1,
                                cache_batch_idx=torch.tensor([0, 0, 1], dtype=torch.int32))
    with pytest.raises(ValueError, match="page_table"):
        flash_attn_with_kvcache(q, k_cache, v_cache, page_table=torch.zeros(B, 2, dtype=torch.int32),
                                cache_batch_idx=torch.arange(B, dtype=torch.int32))
    with pytest.raises(ValueError, match="page_table entries"):
        flash_attn_with_kvcache(q, k_cache, v_cache, page_table=torch.full((B, 2), 9, dtype=torch.int32))
    with pytest.raises(TypeError, match="page_table must be an int32"):
        flash_attn_with_kvcache(q, k_cache, v_cache, page_table=torch.zeros(B, 2))
    with pytest.raises(ValueError, match="cache_batch_idx"):  # 3 queries, 2 cache rows, no index
        flash_attn_with_kvcache(q, k_cache[:2], v_cache[:2])
    with pytest.raises(TypeError, match="k_cache must match q's dtype"):
        flash_attn_with_kvcache(q, k_cache.double(), v_cache)
    with pytest.raises(ValueError, match="k / v must be"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k[:, :, :1], v[:, :, :1])
    with pytest.raises(ValueError, match=r"max_seqlen_q \(1\) is smaller than dense q's seqlen_q \(2\)"):
        flash_attn_with_kvcache(q, k_cache, v_cache, max_seqlen_q=1)
    with pytest.raises(ValueError, match="cu_seqlens_k_new packs the new keys"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_k_new=torch.tensor([0, 1, 2, 3], dtype=torch.int32))
    before = k_cache.clone()
    with pytest.raises(ValueError, match="cu_seqlens_k_new must start at 0"):  # refused before anything is written
        flash_attn_with_kvcache(q, k_cache, v_cache, k.flatten(0, 1), v.flatten(0, 1), cache_seqlens=1,
                                cu_seqlens_k_new=torch.tensor([1, 2, 4, 6], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"cu_seqlens_k_new must have batch \+ 1 = 4 entries"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k.flatten(0, 1), v.flatten(0, 1), cache_seqlens=1,
                                cu_seqlens_k_new=torch.tensor([0, 2, 6], dtype=torch.int32))
    with pytest.raises(TypeError, match="cu_seqlens_q must have dtype torch.int32"):
        flash_attn_with_kvcache(q.flatten(0, 1), k_cache, v_cache, max_seqlen_q=2,
                                cu_seqlens_q=torch.tensor([0, 2, 4, 6]))
    with pytest.raises(ValueError, match=r"cu_seqlens_q\[-1\] \(7\) is past the packed tensor's 6 rows"):
        flash_attn_with_kvcache(q.flatten(0, 1), k_cache, v_cache, k, v, cache_seqlens=1, max_seqlen_q=3,
                                cu_seqlens_q=torch.tensor([0, 2, 4, 7], dtype=torch.int32))  # (ending at 5: valid)
    assert torch.equal(k_cache, before)
    with pytest.warns(UserWarning, match="sm_margin"):
        flash_attn_with_kvcache(q, k_cache, v_cache, sm_margin=4)


# FlashAttention-3's get_scheduler_metadata parameters in order (hopper/flash_attn_interface.py)
FA3_SCHEDULER_METADATA = ["batch_size", "max_seqlen_q", "max_seqlen_k", "num_heads_q", "num_heads_kv", "headdim",
                          "cache_seqlens", "qkv_dtype", "headdim_v", "cu_seqlens_q", "cu_seqlens_k_new",
                          "cache_leftpad", "page_size", "max_seqlen_k_new", "causal", "window_size", "attention_chunk",
                          "has_softcap", "num_splits", "pack_gqa", "sm_margin"]


def test_get_scheduler_metadata_is_a_hint_that_changes_nothing():
    """Decoding code written for FlashAttention-3 imports get_scheduler_metadata with flash_attn_with_kvcache and
    passes its result along: `from fa3nn import get_scheduler_metadata` raised ImportError. fa3nn's kernels schedule
    themselves, so it returns None (its hints checked as num_splits / pack_gqa / sm_margin are), which the call takes;
    a tensor from FlashAttention-3's own function is still refused."""
    import inspect

    import fa3nn

    assert [p.name for p in inspect.signature(fa3nn.get_scheduler_metadata).parameters.values()] == \
        FA3_SCHEDULER_METADATA
    q, k_cache, v_cache, k, v, _, _ = make_case(9)
    ends = torch.tensor([5, 0, 11], dtype=torch.int32)
    metadata = fa3nn.get_scheduler_metadata(B, q.shape[1], k_cache.shape[1], HQ, HK, D, ends, q.dtype, DV,
                                            max_seqlen_k_new=k.shape[1], causal=True)
    assert metadata is None
    want = flash_attn_with_kvcache(q, k_cache.clone(), v_cache.clone(), k, v, cache_seqlens=ends, causal=True)
    got = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=ends, causal=True,
                                  scheduler_metadata=metadata)
    assert torch.equal(got, want)
    with pytest.raises(TypeError, match=r"num_splits must be an int"):
        fa3nn.get_scheduler_metadata(B, 2, 24, HQ, HK, D, ends, num_splits=1.5)


def test_new_keys_without_cache_seqlens_are_refused_by_name():
    """k / v are written at each sequence's cache_seqlens; without it (FlashAttention-3: "If k_new is supplied,
    seqlens_k must also be passed in") the cache's end stood in and the message reported "cache_seqlens in [24, 24]",
    a value the caller never passed."""
    q, k_cache, v_cache, k, v, _, _ = make_case(8)
    before = k_cache.clone()
    with pytest.raises(ValueError, match=r"k / v are written at each sequence's cache_seqlens: pass cache_seqlens"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v)
    assert torch.equal(k_cache, before)


@pytest.mark.gpu
def test_cuda_graph_capture_is_refused_by_name():
    """FlashAttention-3's flash_attn_with_kvcache is captured into CUDA graphs by decoding loops; fa3nn's reads the
    lengths on the host, which failed inside torch under capture ("Cannot copy between CPU and CUDA tensors during
    CUDA graph capture unless the CPU tensor is pinned", H100), naming nothing of fa3nn. Refused by name, before the
    cache is written."""
    q, k_cache, v_cache, k, v, _, _ = make_case(7)
    q, k_cache, v_cache, k, v = (x.cuda() for x in (q, k_cache, v_cache, k, v))
    ends = torch.tensor([5, 0, 11], dtype=torch.int32, device="cuda")
    flash_attn_with_kvcache(q, k_cache.clone(), v_cache.clone(), k, v, cache_seqlens=ends)  # warm-up, eager
    before = k_cache.clone()
    torch.cuda.synchronize()
    with pytest.raises(RuntimeError, match=r"flash_attn_with_kvcache reads cache_seqlens .* on the host.*CUDA graph"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=ends)
    assert torch.equal(k_cache, before)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["auto", "triton", "reference"])
@pytest.mark.parametrize("layout", ["plain", "paged", "packed"])
def test_gpu_backends_match_the_cpu_call(backend, layout):
    """bf16 on the GPU (head dim 128: the native kernels under auto on Hopper) against the same call in float32 on
    the CPU, from the same bf16-rounded inputs: outputs, lse and the written (rotated) cache rows within bf16's
    rounding. packed: queries and new keys by cu_seqlens_q / cu_seqlens_k_new (2 / 0 / 3 queries, 1 / 3 / 0 keys)."""
    q, k_cache, v_cache, k, v, cos, sin = make_case(6, capacity=256, new=3, seqlen_q=3, d=128, dv=128)
    ends = torch.tensor([100, 7, 250], dtype=torch.int32)
    q, k_cache, v_cache, k, v = (x.to(torch.bfloat16) for x in (q, k_cache, v_cache, k, v))
    extra = {}
    if layout == "paged":  # the same rows as pages of 16, the table in order of a permutation
        perm = torch.randperm(B * 16, generator=torch.Generator().manual_seed(1))
        k_cache = k_cache.reshape(B * 16, 16, HK, 128)[perm.argsort()]
        v_cache = v_cache.reshape(B * 16, 16, HK, 128)[perm.argsort()]
        extra["page_table"] = perm.view(B, 16).to(torch.int32)
    if layout == "packed":
        q = torch.cat([q[0, :2], q[2]])
        k, v = torch.cat([k[0, :1], k[1]]), torch.cat([v[0, :1], v[1]])
        extra = dict(cu_seqlens_q=torch.tensor([0, 2, 2, 5], dtype=torch.int32), max_seqlen_q=3,
                     cu_seqlens_k_new=torch.tensor([0, 1, 4, 4], dtype=torch.int32))
    cpu = [x.float() for x in (q, k_cache, v_cache, k, v)]
    want, want_lse = flash_attn_with_kvcache(*cpu, rotary_cos=cos, rotary_sin=sin, cache_seqlens=ends, causal=True,
                                             return_softmax_lse=True, **extra)
    dev = [x.cuda() for x in (q, k_cache, v_cache, k, v)]
    gpu_extra = {name: t.cuda() if isinstance(t, torch.Tensor) else t for name, t in extra.items()}
    out, lse = flash_attn_with_kvcache(*dev, rotary_cos=cos.cuda(), rotary_sin=sin.cuda(), cache_seqlens=ends.cuda(),
                                       causal=True, return_softmax_lse=True, backend=backend, **gpu_extra)
    torch.testing.assert_close(out.float().cpu(), want, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(lse.float().cpu(), want_lse, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(dev[1].float().cpu(), cpu[1], atol=1e-2, rtol=1e-2)  # with the rotated new keys


@pytest.mark.parametrize("bad,error", [
    (dict(softcap=-1.0), "softcap must be >= 0"),
    (dict(softmax_scale=float("nan")), "softmax_scale must be finite"),
    (dict(backend="cuda"), "backend must be one of"),
    (dict(backend="hopper"), "backend='hopper' cannot run"),  # a CPU call
    (dict(q_headdim=D // 2), "headdim of k_cache must equal headdim of q"),
    (dict(q_heads=3), r"nheads of q \(3\) must be a multiple of nheads of k_cache/v_cache \(2\)"),
])
def test_a_refused_call_writes_nothing(bad, error):
    q, k_cache, v_cache, k, v, _, _ = make_case(6)
    bad = dict(bad)
    if "q_headdim" in bad:
        q = q[..., : bad.pop("q_headdim")]
    if "q_heads" in bad:
        q = q[:, :, : bad.pop("q_heads")]
    before_k, before_v = k_cache.clone(), v_cache.clone()
    with pytest.raises(ValueError, match=error):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=torch.tensor([5, 0, 11]), **bad)
    assert torch.equal(k_cache, before_k) and torch.equal(v_cache, before_v)


def test_packed_queries_take_a_numpy_max_seqlen_q():
    q, k_cache, v_cache, k, v, _, _ = make_case(7)
    cu_q = torch.tensor([0, 2, 4, 6], dtype=torch.int32)
    want = flash_attn_with_kvcache(q.flatten(0, 1), k_cache.clone(), v_cache.clone(), k, v, cache_seqlens=3,
                                   cu_seqlens_q=cu_q, max_seqlen_q=2)
    got = flash_attn_with_kvcache(q.flatten(0, 1), k_cache.clone(), v_cache.clone(), k, v, cache_seqlens=3,
                                  cu_seqlens_q=cu_q, max_seqlen_q=np.int64(2))
    assert torch.equal(got, want)
    with pytest.raises(TypeError, match=r"max_seqlen_q must be an int"):
        flash_attn_with_kvcache(q.flatten(0, 1), k_cache, v_cache, cu_seqlens_q=cu_q, max_seqlen_q=2.0)
    with pytest.raises(ValueError, match=r"max_seqlen_q must be a positive int"):
        flash_attn_with_kvcache(q.flatten(0, 1), k_cache, v_cache, cu_seqlens_q=cu_q, max_seqlen_q=0)


def test_an_int_cache_seqlens_may_be_a_numpy_integer():
    """cache_seqlens as an int stands for every sequence's length; a numpy integer (np.int64(5)) is that int, as for
    the call's other int arguments (fa3nn.checks.as_int); it was refused ('must be an int or an int32 tensor')."""
    q, k_cache, v_cache, k, v, _, _ = make_case(7)
    want = flash_attn_with_kvcache(q, k_cache.clone(), v_cache.clone(), k, v, cache_seqlens=5, causal=True)
    got = flash_attn_with_kvcache(q, k_cache.clone(), v_cache.clone(), k, v, cache_seqlens=np.int64(5), causal=True)
    assert torch.equal(got, want)
    for bad in (5.0, np.float32(5), True):
        with pytest.raises(TypeError, match=r"cache_seqlens must be an int or an int32 tensor"):
            flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=bad)


def test_page_table_padding_past_the_pages_read_is_ignored():
    """A sequence reads pages ceil((cache_seqlens + new keys) / page_size) of its row (3, 4 and 1 here); the rest is
    padding, which FlashAttention-3 ignores and fa3nn refused (-1 or 99: "must index k_cache's 17 pages")."""
    q, _, _, k, v, _, _ = make_case(3)
    g = torch.Generator().manual_seed(7)
    page_size, num_pages = 4, 17
    k_pages = torch.randn(num_pages, page_size, HK, D, generator=g)
    v_pages = torch.randn(num_pages, page_size, HK, DV, generator=g)
    table = torch.randperm(num_pages, generator=g)[: B * 5].view(B, 5).to(torch.int32)
    ends = torch.tensor([7, 12, 0], dtype=torch.int32)
    padded = table.clone()
    padded[0, 3:], padded[1, 4], padded[2, 1:] = -1, 99, torch.tensor([-1, 2**31 - 1, 99, -7], dtype=torch.int32)
    want = flash_attn_with_kvcache(q, k_pages.clone(), v_pages.clone(), k, v, cache_seqlens=ends, page_table=table,
                                   causal=True, return_softmax_lse=True)
    got_k, got_v = k_pages.clone(), v_pages.clone()
    got = flash_attn_with_kvcache(q, got_k, got_v, k, v, cache_seqlens=ends, page_table=padded, causal=True,
                                  return_softmax_lse=True)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    padded[1, 3] = 17  # read by sequence 1 (rows 12, 13): out of range
    before = k_pages.clone()
    with pytest.raises(ValueError, match=r"page_table entries a sequence reads .* must index k_cache's 17 pages, got "
                                         r"values in \[\d+, 17\]"):
        flash_attn_with_kvcache(q, k_pages, v_pages, k, v, cache_seqlens=ends, page_table=padded)
    padded[1, 3] = -1
    with pytest.raises(ValueError, match=r"got values in \[-1, \d+\]"):
        flash_attn_with_kvcache(q, k_pages, v_pages, k, v, cache_seqlens=ends, page_table=padded)
    assert torch.equal(k_pages, before)


def test_float64_rotary_keeps_float64_precision():
    """The rotation of float64 keys and queries is computed in float64: it ran in float32 (6e-8 off at unit scale,
    where the rest of the float64 call agrees with the oracle to 1e-15)."""
    q, k_cache, v_cache, k, v, cos, sin = (t.double() for t in make_case(7))
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, rotary_cos=cos, rotary_sin=sin, cache_seqlens=5,
                                       causal=True, return_softmax_lse=True, backend="reference")
    expected = []
    for b in range(B):
        new_k = torch.stack([rotate_oracle(k[b, i], cos, sin, 5 + i, True) for i in range(2)])
        torch.testing.assert_close(k_cache[b, 5:7], new_k, atol=1e-13, rtol=0)
        qb = torch.stack([rotate_oracle(q[b, i], cos, sin, 5 + i, True) for i in range(2)])
        keys = torch.cat([k_cache[b, :5], new_k])
        expected.append(attention_oracle(qb, keys, v_cache[b, :7], D**-0.5, True, (-1, -1), 0.0))
    for b, (want_out, want_lse) in enumerate(expected):
        torch.testing.assert_close(out[b], want_out, atol=1e-12, rtol=0)
        torch.testing.assert_close(lse[b], want_lse, atol=1e-12, rtol=0)


def test_cache_errors_name_k_cache_and_v_cache():
    """The attention call's shared checks, run on the caches, name them (they said k, v and pointed FP8 q at
    q_descale, which this function refuses)."""
    q, k_cache, v_cache, _, _, _, _ = make_case(8)
    with pytest.raises(ValueError, match=r"nheads of q \(4\) must be a multiple of nheads of k_cache/v_cache \(3\)"):
        flash_attn_with_kvcache(q, k_cache[:, :, :1].repeat(1, 1, 3, 1), v_cache[:, :, :1].repeat(1, 1, 3, 1))
    with pytest.raises(ValueError, match=r"headdim of k_cache must equal headdim of q: q has 16, k_cache has 8"):
        flash_attn_with_kvcache(q, k_cache[..., :8], v_cache)
    with pytest.raises(ValueError, match=r"headdim must be positive, got q 16, v_cache 0"):
        flash_attn_with_kvcache(q, k_cache, v_cache[..., :0])
    e4m3 = torch.float8_e4m3fn
    with pytest.raises(NotImplementedError, match=r"flash_attn_with_kvcache: FP8 \(torch.float8_e4m3fn\) q and caches "
                                                  r"are not supported by fa3nn; FP8 caches are not read here"):
        flash_attn_with_kvcache(q.to(e4m3), k_cache.to(e4m3), v_cache.to(e4m3))


def test_empty_caches_read_nothing_and_zero_row_pages_are_refused():
    """A plain cache of 0 rows read through cache_batch_idx / cache_leftpad, or a paged cache of 0 pages that no
    sequence reads (cache_seqlens 0, no new keys), attends no key: zeros and lse -inf, as the plain cache of 0 rows
    gives. Both raised a bare IndexError ('index is out of bounds for dimension with size 0') from the gather. A
    paged cache with pages of 0 rows raised 'RuntimeError: ZeroDivisionError', naming nothing: refused by name."""
    q = torch.randn(B, 2, HQ, D, generator=torch.Generator().manual_seed(11))
    calls = [
        dict(k_cache=torch.randn(4, 0, HK, D), v_cache=torch.randn(4, 0, HK, DV),
             cache_batch_idx=torch.tensor([3, 0, 1], dtype=torch.int32)),
        dict(k_cache=torch.randn(B, 0, HK, D), v_cache=torch.randn(B, 0, HK, DV),
             cache_leftpad=torch.zeros(B, dtype=torch.int32)),
        dict(k_cache=torch.randn(0, 4, HK, D), v_cache=torch.randn(0, 4, HK, DV), cache_seqlens=0,
             page_table=torch.zeros(B, 2, dtype=torch.int32)),
    ]
    for call in calls:
        out, lse = flash_attn_with_kvcache(q, return_softmax_lse=True, **call)
        assert out.shape == (B, 2, HQ, DV) and torch.equal(out, torch.zeros_like(out))
        assert torch.equal(lse, torch.full((B, HQ, 2), -math.inf))
    k_pages, v_pages = torch.randn(4, 0, HK, D), torch.randn(4, 0, HK, DV)
    k, v = torch.randn(B, 1, HK, D), torch.randn(B, 1, HK, DV)
    for extra in (dict(), dict(cache_seqlens=0), dict(k=k, v=v, cache_seqlens=0)):
        with pytest.raises(ValueError, match=r"k_cache's pages must hold at least one row \(page_size = k_cache"
                                             r".shape\[1\]\), got shape \(4, 0, 2, 16\)"):
            flash_attn_with_kvcache(q, k_pages, v_pages, page_table=torch.zeros(B, 2, dtype=torch.int32), **extra)


@pytest.mark.parametrize("name,value", [("cache_seqlens", 2**70), ("cache_leftpad", -2**70),
                                        ("cache_batch_idx", 2**64)])
def test_python_ints_beyond_int64_are_refused_by_name(name, value):
    """cache_seqlens / cache_leftpad / cache_batch_idx given as Python ints beyond int64 raised torch's bare
    'OverflowError: int too big to convert' (or 'can't convert negative int to unsigned'), naming no argument; they
    get the range error a tensor's values get."""
    q, k_cache, v_cache, _, _, _, _ = make_case(10)
    with pytest.raises(ValueError, match=rf"{name} entries must be in \[0, 2\*\*31\), got values in \[{value}, "
                                         rf"{value}\]"):
        flash_attn_with_kvcache(q, k_cache, v_cache, **{name: value})
