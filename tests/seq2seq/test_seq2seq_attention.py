"""Masked multi-head attention: every mask case, SDPA vs the reference path, and nn.MultiheadAttention parity."""

from __future__ import annotations

import warnings
from functools import partial

import pytest
import torch
from torch import nn

from zoo.seq2seq.attention import (
    MultiHeadAttention,
    attention,
    causal_mask,
    combine_masks,
    reference_attention,
)

B, H, T, S, D = 2, 4, 5, 7, 16


def _mha(impl="sdpa", seed=0):
    torch.manual_seed(seed)
    m = MultiHeadAttention(D, H, dropout=0.0, impl=impl)
    with torch.no_grad():  # non-zero biases so that a wrong bias slice would show
        m.in_proj.bias.normal_()
        m.out_proj.bias.normal_()
    return m


def _pair(seed=0):
    a, r = _mha("sdpa", seed), _mha("reference", seed)
    r.load_state_dict(a.state_dict())
    return a, r


def test_causal_mask_is_aligned_to_the_end_of_the_keys():
    m = causal_mask(2, 4)
    assert m.tolist() == [[True, True, True, False], [True, True, True, True]]
    assert torch.equal(causal_mask(3, 3), torch.ones(3, 3, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="q_len <= k_len"):
        causal_mask(4, 3)


def test_combine_causal_and_padding_gives_one_broadcastable_bool_mask():
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, -2:] = True
    m = combine_masks((B, H, S, S), key_padding_mask=pad, causal=True)
    assert m.dtype == torch.bool and m.shape == (B, 1, S, S)
    expected = torch.ones(S, S, dtype=torch.bool).tril()
    assert torch.equal(m[0, 0], expected)
    assert torch.equal(m[1, 0], expected & ~pad[1][None])


def test_additive_mask_is_combined_with_padding_as_minus_inf():
    add = torch.zeros(T, S)
    add[:, 0] = -1.5
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[0, 3] = True
    m = combine_masks((B, H, T, S), attn_mask=add, key_padding_mask=pad)
    assert m.dtype == torch.float32 and m.shape == (B, 1, T, S)
    assert torch.isneginf(m[0, 0, :, 3]).all() and torch.isfinite(m[1, 0, :, 3]).all()
    assert (m[:, 0, :, 0] == -1.5).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"attn_mask": torch.ones(3, 7, dtype=torch.bool)}, r"\(3, 7\).*\(2, 4, 5, 7\)"),
        ({"attn_mask": torch.ones(2, 4, 5, 6, dtype=torch.bool)}, r"\(2, 4, 5, 6\).*\(2, 4, 5, 7\)"),
        ({"attn_mask": torch.ones(5, dtype=torch.bool)}, r"2, 3 or 4 dims.*\(5,\)"),
        ({"attn_mask": torch.ones(4, 1, 5, 7, dtype=torch.bool)}, r"\(4, 1, 5, 7\)"),
        ({"key_padding_mask": torch.zeros(2, 6, dtype=torch.bool)}, r"\(2, 7\).*\(2, 6\)"),
    ],
)
def test_bad_mask_shapes_name_both_shapes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        combine_masks((B, H, T, S), **kwargs)


def test_bad_mask_dtypes_are_errors():
    with pytest.raises(TypeError, match="bool.*float"):
        combine_masks((B, H, T, S), attn_mask=torch.ones(T, S, dtype=torch.long))
    with pytest.raises(TypeError, match="key_padding_mask must be bool"):
        combine_masks((B, H, T, S), key_padding_mask=torch.zeros(B, S))


def test_no_mask_gives_none():
    assert combine_masks((B, H, T, S)) is None


@pytest.mark.parametrize("impl", ["sdpa", "reference"])
@pytest.mark.parametrize("kind", ["bool", "additive", "padding"])
def test_fully_masked_rows_give_zeros_not_nan(impl, kind):
    torch.manual_seed(0)
    q = torch.randn(B, H, T, 8, requires_grad=True)
    k, v = torch.randn(B, H, S, 8), torch.randn(B, H, S, 8)
    if kind == "bool":
        m = torch.ones(B, 1, T, S, dtype=torch.bool)
        m[0, :, 2] = False
    elif kind == "additive":
        m = torch.zeros(B, 1, T, S)
        m[0, :, 2] = float("-inf")
    else:
        pad = torch.zeros(B, S, dtype=torch.bool)
        pad[0] = True  # a sentence that is all padding
        m = combine_masks((B, H, T, S), key_padding_mask=pad)
    out = attention(q, k, v, m, impl=impl)
    assert torch.isfinite(out).all()
    assert (out[0, :, 2] == 0).all()
    assert out[1].abs().sum() > 0
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_module_fully_padded_sentence_is_zero_before_out_proj():
    a, _ = _pair()
    x = torch.randn(B, T, D)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1] = True
    y = a(x, key_padding_mask=pad)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y[1], a.out_proj.bias.expand(T, D))  # zero attention -> only the bias


def _random_masks():
    g = torch.Generator().manual_seed(1)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[0, -3:] = True
    boolm = torch.rand(B, T, S, generator=g) > 0.3
    boolm[:, :, 0] = True
    add = torch.randn(T, S, generator=g)
    return [
        {},
        {"key_padding_mask": pad},
        {"attn_mask": boolm},
        {"attn_mask": add},
        {"attn_mask": add, "key_padding_mask": pad},
        {"attn_mask": boolm, "key_padding_mask": pad},
    ]


@pytest.mark.parametrize("case", range(6))
def test_sdpa_equals_reference_cross_attention_with_grads(case):
    a, r = _pair()
    kw = _random_masks()[case]
    x = torch.randn(B, T, D)
    mem = torch.randn(B, S, D)
    xa, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yr = a(xa, mem, **kw), r(xr, mem, **kw)
    torch.testing.assert_close(ya, yr, atol=1e-5, rtol=1e-5)
    ya.square().sum().backward()
    yr.square().sum().backward()
    torch.testing.assert_close(xa.grad, xr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(a.in_proj.weight.grad, r.in_proj.weight.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("with_pad", [False, True])
def test_sdpa_equals_reference_causal_self_attention(with_pad):
    a, r = _pair()
    x = torch.randn(B, S, D)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, -2:] = True
    kw = {"key_padding_mask": pad} if with_pad else {}
    torch.testing.assert_close(a(x, causal=True, **kw), r(x, causal=True, **kw), atol=1e-5, rtol=1e-5)


def test_causal_means_no_information_from_the_future():
    a, _ = _pair()
    x = torch.randn(1, S, D)
    y = a(x, causal=True)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, S - 4, D)  # change only positions >= 4
    y2 = a(x2, causal=True)
    torch.testing.assert_close(y[:, :4], y2[:, :4])
    assert not torch.allclose(y[:, 4:], y2[:, 4:])


@pytest.mark.parametrize("masks", ["none", "padding", "causal"])
def test_matches_torch_multihead_attention_with_the_same_weights(masks):
    """Same weights as nn.MultiheadAttention -> same output: the heads are really split."""
    ours, _ = _pair()
    ref = nn.MultiheadAttention(D, H, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj.weight)
        ref.in_proj_bias.copy_(ours.in_proj.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    x = torch.randn(B, S, D)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[0, -2:] = True
    if masks == "none":
        y, (y_ref, _) = ours(x), ref(x, x, x)
    elif masks == "padding":
        y, (y_ref, _) = ours(x, key_padding_mask=pad), ref(x, x, x, key_padding_mask=pad)
    else:
        y = ours(x, causal=True)
        y_ref, _ = ref(x, x, x, attn_mask=~torch.ones(S, S, dtype=torch.bool).tril())  # True = masked there
    torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-5)
    # and one head count is not another: n_heads changes the function
    other = MultiHeadAttention(D, 2)
    other.load_state_dict(ours.state_dict())
    assert not torch.allclose(other(x), ours(x), atol=1e-4)


def test_dropout_only_in_training():
    m = MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(B, T, D)
    m.eval()
    torch.testing.assert_close(m(x), m(x))
    m.train()
    torch.manual_seed(0)
    y1 = m(x)
    torch.manual_seed(1)
    y2 = m(x)
    assert not torch.allclose(y1, y2)


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"\(B, T, 16\)"):
        MultiHeadAttention(D, H)(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="impl"):
        attention(torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4), impl="flash")


def test_bf16_training_takes_the_explicit_path_only_at_short_lengths():
    from zoo.seq2seq.attention import _sdpa_backward_is_slow

    def q(t, dtype=torch.bfloat16, grad=True):
        return torch.zeros(1, 2, t, 8, dtype=dtype, requires_grad=grad)

    assert _sdpa_backward_is_slow(q(64))  # translation lengths: explicit bf16 GEMMs win
    assert not _sdpa_backward_is_slow(q(512))  # long: SDPA (O(T) memory, faster from ~512 on)
    assert not _sdpa_backward_is_slow(q(64, torch.float32)) and not _sdpa_backward_is_slow(q(64, grad=False))
    with torch.no_grad():
        assert not _sdpa_backward_is_slow(q(64))


def test_long_sequence_sdpa_equals_reference_with_gradients():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 300, 16, requires_grad=True) for _ in range(3))
    pad = torch.zeros(2, 300, dtype=torch.bool)
    pad[1, 200:] = True
    mask = combine_masks((2, 2, 300, 300), key_padding_mask=pad, causal=True)
    outs, grads = [], []
    for impl in ("sdpa", "reference"):
        out = attention(q, k, v, mask, impl=impl)
        g = torch.autograd.grad(out.square().sum(), (q, k, v))
        outs.append(out.detach())
        grads.append(g)
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-4, atol=1e-5)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def _nn_causal(t):
    return torch.ones(t, t, dtype=torch.bool).triu(1)  # nn.MultiheadAttention's: True = masked


def test_nn_multihead_attention_causal_mask_passed_unchanged_warns_at_the_callers_line():
    """Before: nn.MultiheadAttention's bool causal mask (True = masked) passed as attn_mask was read as
    True = may attend, silently: each query saw only later keys and the last one none (output = the bias)."""
    m = _mha()
    x = torch.randn(B, S, D)
    with pytest.warns(UserWarning, match=r"nn\.MultiheadAttention's causal mask.*causal=True.*~mask") as seen:
        m(x, attn_mask=_nn_causal(S))
    assert seen[0].filename == __file__  # the caller's own line, not a torch or zoo internal
    with pytest.warns(UserWarning, match="triu"):
        combine_masks((B, H, S, S), attn_mask=_nn_causal(S))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # what the warning recommends, and other bool masks, stay silent
        torch.testing.assert_close(m(x, attn_mask=~_nn_causal(S)), m(x, causal=True))
        m(x, attn_mask=_nn_causal(S).T)
        m(x[:, :T], x, attn_mask=torch.ones(T, S, dtype=torch.bool).triu(1))  # not square: not that mask


def test_docs_say_a_bool_attn_mask_is_the_opposite_of_nn_multihead_attention():
    """Before: the module docstring said a user of nn.MultiheadAttention "needs nothing new", though its
    bool attn_mask means the opposite (True = masked) while key_padding_mask means the same."""
    import zoo.seq2seq.attention as module

    for doc in (module.__doc__, MultiHeadAttention.forward.__doc__):
        flat = " ".join(doc.split())
        assert "opposite of" in flat and "~mask" in flat and "key_padding_mask" in flat
    assert "needs nothing new" not in module.__doc__


@pytest.mark.parametrize("fn", ["sdpa", "reference", "reference_attention"])
def test_is_causal_with_unequal_lengths_or_a_mask_is_refused_on_every_path(fn):
    """Before: is_causal=True with T != S aligned the causal mask top-left on the SDPA path and to the end
    of the keys on the reference path, and attention() chose the reference path itself for bf16 training
    on CPU, so one call gave different outputs with and without autograd; with a mask, SDPA raised its
    own RuntimeError while the reference path applied both."""
    call = reference_attention if fn == "reference_attention" else partial(attention, impl=fn)
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 2, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match=r"\(1, 2, 2, 8\).*\(1, 2, 4, 8\).*causal_mask\(2, 4\)"):
        call(q, k, v, is_causal=True)
    with pytest.raises(ValueError, match=r"mask of shape \(1, 1, 4, 4\).*causal_mask\(4, 4\)"):
        call(k, k, v, torch.ones(1, 1, 4, 4, dtype=torch.bool), is_causal=True)
    # what the error recommends, and is_causal where it is allowed, agree on every path
    want = reference_attention(q, k, v, causal_mask(2, 4))
    torch.testing.assert_close(call(q, k, v, causal_mask(2, 4)), want)
    torch.testing.assert_close(call(k, k, v, is_causal=True), reference_attention(k, k, v, causal_mask(4, 4)))


def test_bf16_is_causal_gives_the_same_result_with_and_without_autograd():
    """Before: with T != S, bf16 + autograd on CPU took the end-aligned reference path and inference the
    top-left SDPA path (max diff 2.4); now T != S is refused and T == S agrees on both."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    trained = attention(q, k, v, is_causal=True)
    with torch.no_grad():
        inferred = attention(q, k, v, is_causal=True)
    torch.testing.assert_close(trained.detach().float(), inferred.float(), atol=2e-2, rtol=2e-2)
    with pytest.raises(ValueError, match="causal_mask"), torch.no_grad():
        attention(q[:, :, :2], k, v, is_causal=True)
    with pytest.raises(ValueError, match="causal_mask"):
        attention(q[:, :, :2], k, v, is_causal=True)


@pytest.mark.parametrize(
    "context, match",
    [
        pytest.param({"memory": torch.randn(B, S, 8)},
                     r"memory must be \(B or 1, S, d_model\) = \(2 or 1, S, 16\).*\(2, 7, 8\)", id="memory-width"),
        pytest.param({"memory": torch.randn(S, D)}, r"memory must be.*got \(7, 16\).*memory\[None\]", id="memory-2d"),
        pytest.param({"memory": torch.randn(3, S, D)}, r"memory must be.*query \(2, 5, 16\).*got \(3, 7, 16\)",
                     id="memory-batch"),
        pytest.param({"kv": (torch.randn(B, H, S, 4),)}, r"kv must be a \(keys, values\) pair.*tuple of length 1",
                     id="kv-not-a-pair"),
        pytest.param({"kv": (torch.randn(B, 2, S, 8), torch.randn(B, 2, S, 8))},
                     r"kv must be.*\(2 or 1, 4, S, 4\).*\(2, 2, 7, 8\)", id="kv-heads"),
        pytest.param({"kv": (torch.randn(3, H, S, 4), torch.randn(3, H, S, 4))}, r"kv must be.*keys \(3, 4, 7, 4\)",
                     id="kv-batch"),
        pytest.param({"kv": (torch.randn(B, H, S, 4), torch.randn(B, H, 6, 4))}, r"kv must be.*values \(2, 4, 6, 4\)",
                     id="kv-values-differ"),
        pytest.param({"kv": (torch.randn(S, 4), torch.randn(S, 4))}, r"kv must be.*keys \(7, 4\)", id="kv-2d"),
        # before: kv was used and the memory, of other sentences maybe, went unread without a word
        pytest.param({"memory": torch.randn(B, S, D), "kv": (torch.randn(B, H, S, 4), torch.randn(B, H, S, 4))},
                     r"takes memory or its projection kv=project_kv\(memory\), not both", id="memory-and-kv"),
    ],
)
def test_wrong_memory_or_kv_shapes_are_clear_errors(context, match):
    """Before: a memory of the wrong width failed with "mat1 and mat2 shapes cannot be multiplied", a 2-D
    one with "not enough values to unpack", a batch mismatch with a broadcasting error naming no argument."""
    m = _mha()
    x = torch.randn(B, T, D)
    with pytest.raises(ValueError, match=match):
        m(x, **context)
    mem = torch.randn(1, S, D)  # one memory shared by every query row stays allowed
    torch.testing.assert_close(m(x, kv=m.project_kv(mem)), m(x, mem.expand(B, S, D)))


@pytest.mark.parametrize("batch", [B, 1])
def test_nn_multihead_attention_3d_mask_layout_is_refused_with_its_reshape(batch):
    """Before: nn.MultiheadAttention's (B * n_heads, T, S) float mask was refused as "cannot broadcast" (or,
    for one sentence, "would enlarge it"), not saying that 3-D means (B, T, S) here nor how to pass it."""
    m = _mha().eval()
    q, mem = torch.randn(batch, T, D), torch.randn(batch, S, D)
    mask = torch.randn(batch * H, T, S)
    with pytest.raises(ValueError, match=rf"\(B, T, S\) here.*mask\.view\({batch}, {H}, {T}, {S}\)"):
        m(q, mem, attn_mask=mask)
    t = nn.MultiheadAttention(D, H, batch_first=True).eval()
    with torch.no_grad():
        t.in_proj_weight.copy_(m.in_proj.weight)
        t.in_proj_bias.copy_(m.in_proj.bias)
        t.out_proj.weight.copy_(m.out_proj.weight)
        t.out_proj.bias.copy_(m.out_proj.bias)
        torch.testing.assert_close(m(q, mem, attn_mask=mask.view(batch, H, T, S)), t(q, mem, mem, attn_mask=mask)[0])
