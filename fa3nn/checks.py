"""Input validation for the public API.

Every bad input raises before any kernel runs, naming the argument and giving expected vs actual. Shape, dtype and
device checks run in the Python wrappers (torch.compile traces them); checks that must read tensor values
(cu_seqlens) run inside the custom op, just before the backend is called.
"""

from __future__ import annotations

import numbers
import sys

import torch

from fa3nn.backends.base import AttnParams
from fa3nn.fp8.config import as_recipe
from fa3nn.masks import Window
from fa3nn.memo import TensorMemo

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
FP8_INPUT_DTYPES = (torch.float8_e4m3fn,)  # FlashAttention-3's FP8 inputs (fa3nn.fp8.inputs), forward only


def _describe(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}, dtype {t.dtype}, device {t.device}"


def check_tensor(name: str, t, ndim: int, layout: str, dtypes=SUPPORTED_DTYPES) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of layout {layout}, got {type(t).__name__}")
    if t.is_nested:  # SDPA takes them; here they passed every check and failed inside a backend without a name
        raise TypeError(
            f"{name} is a nested tensor; fa3nn takes dense ones: pass a jagged batch as flash_attn_varlen_func's "
            f"packed rows, {name}.values() (total_rows, nheads, headdim), with cu_seqlens {name}.offsets().int()"
        )
    if t.layout != torch.strided:
        raise TypeError(f"{name} must be a dense (strided) tensor, got layout {t.layout}; call {name}.to_dense() first")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions {layout}, got {t.dim()} ({_describe(t)})")
    if t.dtype not in dtypes:
        fp8 = " (e4m3 inputs come with q_descale / k_descale / v_descale)" if t.dtype in FP8_INPUT_DTYPES else ""
        raise TypeError(
            f"{name} must be a floating tensor ({', '.join(str(d) for d in dtypes)}), got {t.dtype}{fp8}"
        )
    if t.numel() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:  # a size-1 dim's stride addresses nothing
        raise ValueError(
            f"{name} must be contiguous in its last dimension (stride 1), got strides {tuple(t.stride())}; "
            f"call {name}.contiguous() first"
        )


def check_qkv_consistency(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, batch_dims: int,
                          names: tuple[str, str, str] = ("q", "k", "v")) -> None:
    """Checks shared by the dense and varlen layouts; heads sit at dim batch_dims + 1 - 1 from the end. `names`: the
    three arguments as the caller's signature calls them (flash_attn_with_kvcache's k_cache and v_cache)."""
    nq, nk, nv = names
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"{nq}, {nk} and {nv} must share one dtype, got {nq} {q.dtype}, {nk} {k.dtype}, {nv} {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"{nq}, {nk} and {nv} must be on one device, got {nq} {q.device}, {nk} {k.device}, "
                         f"{nv} {v.device}")
    if batch_dims and (k.shape[0] != q.shape[0] or v.shape[0] != q.shape[0]):
        raise ValueError(
            f"batch must match: {nq} has {q.shape[0]}, {nk} has {k.shape[0]}, {nv} has {v.shape[0]}"
        )
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"{nk} and {nv} must match in every dimension but headdim: {nk} {tuple(k.shape)}, {nv} {tuple(v.shape)}"
        )
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"headdim of {nk} must equal headdim of {nq}: {nq} has {q.shape[-1]}, {nk} has {k.shape[-1]}")
    nheads, nheads_kv = q.shape[-2], k.shape[-2]
    if nheads_kv == 0:
        raise ValueError(f"nheads of {nk}/{nv} must be positive, got {nk} {tuple(k.shape)}, {nv} {tuple(v.shape)}")
    if nheads % nheads_kv != 0:
        raise ValueError(
            f"nheads of {nq} ({nheads}) must be a multiple of nheads of {nk}/{nv} ({nheads_kv}) for MHA/GQA/MQA"
        )
    if q.shape[-1] == 0 or v.shape[-1] == 0:
        raise ValueError(f"headdim must be positive, got {nq} {q.shape[-1]}, {nv} {v.shape[-1]}")


def check_dense(q, k, v, dtypes=SUPPORTED_DTYPES) -> None:
    layout = "(batch, seqlen, nheads, headdim)"
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, 4, layout, dtypes)
    check_qkv_consistency(q, k, v, batch_dims=1)


def check_cu_seqlens_tensor(name: str, cu, device: torch.device, owner: str = "q") -> None:
    """cu_seqlens as a tensor: int32, 1-D (batch + 1,), contiguous, on `owner`'s device (its values:
    check_cu_seqlens_values)."""
    if not isinstance(cu, torch.Tensor):
        raise TypeError(f"{name} must be an int32 torch.Tensor of shape (batch + 1,), got {type(cu).__name__}")
    if cu.dtype != torch.int32:
        raise TypeError(f"{name} must have dtype torch.int32, got {cu.dtype}")
    if cu.dim() != 1 or cu.shape[0] < 1:
        raise ValueError(f"{name} must be 1-D of shape (batch + 1,), got shape {tuple(cu.shape)}")
    if cu.shape[0] > 1 and cu.stride(0) != 1:  # the kernels read it as consecutive int32s
        raise ValueError(f"{name} must be contiguous (stride 1), got stride {cu.stride(0)}; call {name}.contiguous() "
                         "first")
    if cu.device != device:
        raise ValueError(f"{name} must be on {owner}'s device {device}, got {cu.device}")


def check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dtypes=SUPPORTED_DTYPES) -> None:
    layout = "(total_tokens, nheads, headdim)"
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, 3, layout, dtypes)
    check_qkv_consistency(q, k, v, batch_dims=0)
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        check_cu_seqlens_tensor(name, cu, q.device)
    if cu_seqlens_q.shape[0] != cu_seqlens_k.shape[0]:
        raise ValueError(
            f"cu_seqlens_q and cu_seqlens_k must both have batch + 1 entries, got {cu_seqlens_q.shape[0]} "
            f"and {cu_seqlens_k.shape[0]}"
        )
    for name, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(m, bool) or not isinstance(m, int) or m < 0:
            raise ValueError(f"{name} must be a non-negative int, got {m!r}")


def _python_number(value, integral: bool):
    """`value` as the Python number it holds, or None when it holds none of the kind asked for. FlashAttention-3's op
    takes its `int` and `float` arguments through torch's schema, which converts numpy scalars and 0-d tensors (a
    setting read from a numpy array of per-layer values): an int is an int, a numpy integer or a 0-d integer CPU
    tensor; a float (integral=False) any of those, a float, a numpy floating scalar or a 0-d floating CPU tensor.
    Refused: bools (the schema takes True as 1), non-integers where an int is required (it truncates
    np.float32(2.5) to 2), and tensors off the CPU (reading one is a host sync per call); as_int / as_real also
    refuse tensors that require grad (_refuse_learnable). A Python int or float
    comes back as it is: under torch.compile(dynamic=True) it is symbolic and stays so."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (not integral and isinstance(value, float)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if not integral and isinstance(value, numbers.Real):
        return float(value)
    if (isinstance(value, torch.Tensor) and value.dim() == 0 and value.device.type == "cpu"
            and value.dtype != torch.bool and not value.is_complex() and not (integral and value.is_floating_point())):
        return value.item()
    return None


def _described(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {value.dtype}, shape {tuple(value.shape)}, device {value.device}"
    return f"{type_name(value)} {value!r}"


def _refuse_learnable(name: str, value) -> None:
    """A 0-d tensor that requires grad (a learnable temperature or cap, an nn.Parameter) would be read as the number
    it holds and get no gradient, silently: refused."""
    if isinstance(value, torch.Tensor) and value.requires_grad:
        raise TypeError(
            f"{name} is a tensor that requires grad; fa3nn reads it as the number it holds, so it would get no "
            f"gradient: pass float({name}) for a fixed value (a learnable softmax scale: multiply q by it and pass "
            "softmax_scale=1.0)"
        )


def as_int(name: str, value, expected: str) -> int:
    """`value` as a Python int (_python_number says what counts as one); else a TypeError: `name` must be
    `expected`."""
    _refuse_learnable(name, value)
    number = _python_number(value, integral=True)
    if number is None:
        raise TypeError(f"{name} must be {expected}, got {_described(value)}; pass an int, e.g. int({name})")
    return number


def as_real(name: str, value, expected: str) -> int | float:
    """`value` as a Python int or float (_python_number says what counts as one); else a TypeError: `name` must be
    `expected`."""
    _refuse_learnable(name, value)
    number = _python_number(value, integral=False)
    if number is None:
        raise TypeError(f"{name} must be {expected}, got {_described(value)}; pass a float, e.g. float({name})")
    return number


def as_max_seqlen(name: str, value) -> int | None:
    """max_seqlen_q / max_seqlen_k as a Python int (as_int; None stays None). Its range is checked where it is
    used."""
    return None if value is None else as_int(name, value, "an int (the longest sequence's length)")


def as_max_seqlens(max_seqlen_q, max_seqlen_k) -> tuple[int | None, int | None]:
    """as_max_seqlen of both, each named."""
    return as_max_seqlen("max_seqlen_q", max_seqlen_q), as_max_seqlen("max_seqlen_k", max_seqlen_k)


def check_has_values(name: str, t: torch.Tensor) -> None:
    """Before a read on the host: a meta tensor holds no values (its read failed with 'Cannot copy out of meta
    tensor; no data!'). Plain packed calls need no read there (the ops' fake implementation gives the shapes)."""
    if t.device.type == "meta":
        raise ValueError(f"{name} is on the meta device, which holds no values, and this call reads it on the host "
                         "(attention_chunk, seqused_q / seqused_k or a dense side of flash_attn_varlen_func, explain "
                         "of a packed call); run it on tensors with values, or without those arguments")


# cu_seqlens read and validated once per device tensor (fa3nn.memo, which says what edits it cannot see), not per
# layer call; a CPU tensor's at every call.
_validated = TensorMemo(remember_cpu=False)


def check_cu_seqlens_values(
    name: str, cu: torch.Tensor, total: int, max_seqlen_name: str, max_seqlen: int | None, *, within: bool = False
) -> tuple[int, ...]:
    """Checks cu_seqlens' values (reading them is a host sync, done once per device tensor) and returns them as a tuple;
    max_seqlen None: no bound on the lengths (fa3nn.slots bounds the used ones). The sequences cover the packed
    tensor's rows 0 .. total exactly, or with within=True any rows of it (FlashAttention-3's attention calls take
    cu_seqlens that start after row 0 or end before the last row: fa3nn.spans). The values are remembered alone,
    both rules checked on them at every call."""

    def read() -> tuple[tuple[int, ...], int, int | None]:  # (the values alone: one entry per tensor, both rules)
        check_has_values(name, cu)
        values = tuple(cu.tolist())
        lengths = [b - a for a, b in zip(values[:-1], values[1:])]
        return values, max(lengths, default=0), next((i for i, n in enumerate(lengths) if n < 0), None)

    values, longest, bad = _validated.get(cu, "values", read)
    if values[0] != 0 and not (within and values[0] > 0):
        raise ValueError(f"{name} must start at 0, got {values[0]}" if not within else
                         f"{name}[0] must be >= 0 (the first sequence's first row), got {values[0]}")
    if bad is not None:
        raise ValueError(f"{name} must be non-decreasing, but {name}[{bad + 1}] = {values[bad + 1]} < {values[bad]}")
    if values[-1] != total and not (within and values[-1] < total):
        raise ValueError(
            f"{name}[-1] must equal the total tokens of the packed tensor ({total}), got {values[-1]}" if not within
            else f"{name}[-1] ({values[-1]}) is past the packed tensor's {total} rows: it must be <= {total}"
        )
    if max_seqlen is not None and longest > max_seqlen:
        raise ValueError(f"{max_seqlen_name} ({max_seqlen}) is smaller than the longest sequence ({longest}) in {name}")
    return values


# The largest window side: the kernels and the masks take window sizes as int32 (a larger Python int wrapped around
# in the masks' int64 arithmetic and the C ABI's int, a silently wrong window); -1 says "unbounded" for any length.
WINDOW_MAX = 2**31 - 1


def check_window_size(window_size) -> tuple[int, int]:
    """(left, right) ints in [-1, WINDOW_MAX] (-1 = unbounded): the API's and the native launchers' check. Returns
    the pair as Python ints: each side may be a numpy integer or a 0-d integer CPU tensor, as an int argument of
    FlashAttention-3's op may (_python_number)."""
    sides = tuple(window_size) if isinstance(window_size, (tuple, list)) else ()
    sides = tuple(_python_number(w, integral=True) for w in sides)
    if len(sides) != 2 or None in sides:
        raise TypeError(f"window_size must be a pair of ints (left, right), got {window_size!r}")
    if sides[0] < -1 or sides[1] < -1:
        raise ValueError(f"window_size entries must be >= -1 (-1 = unbounded), got {sides}")
    if max(sides) > WINDOW_MAX:
        raise ValueError(f"window_size entries must be at most {WINDOW_MAX} (int32); use -1 for an unbounded side, "
                         f"got {sides}")
    return sides


def type_name(value) -> str:
    """A value's type as an error message should name it: `float`, `numpy.bool`, `torch.Tensor`."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def check_bool(name: str, value) -> None:
    """A Python bool, nothing merely truthy (a string "no" is truthy; numpy's bool is not a bool)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool (True or False), got {type_name(value)} {value!r}")


FLOAT64_MAX = sys.float_info.max


def _finite(value) -> bool:
    """math.isfinite of an int or float, False for an int beyond float range (math.isfinite's OverflowError), and
    symbolic-safe: under torch.compile(dynamic=True) a float argument (softmax_scale, softcap, even a function's
    default softcap=0.0) is a SymFloat, which Dynamo cannot pass to math.isfinite (Unsupported "torch.* op returned
    non-Tensor"), while it traces comparisons (each a guard). x - x is 0 for every finite float and NaN for NaN and
    +-inf."""
    if isinstance(value, int):
        return abs(value) <= FLOAT64_MAX
    return value - value == 0


def _shown(value):
    """A number as an error message shows it. Under torch.compile(dynamic=True) a float or int argument is symbolic
    and Dynamo cannot format it into a string ("BUILD_STRING type error"); float() / int() make it concrete (a guard,
    taken only on the way to raising)."""
    if isinstance(value, float):
        return float(value)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else value


# float32's largest finite and smallest normal values: the native kernels take softcap and softmax_scale / softcap as
# float32 (a smaller positive cap would round to 0, i.e. no cap, or leave the quotient infinite).
FLOAT32_MAX, FLOAT32_MIN_NORMAL = 3.4028234663852886e38, 1.1754943508222875e-38
# ... as the messages show them, formatted once: Dynamo cannot trace an f-string that puts a format spec and a
# symbolic number (_shown's) side by side ("BUILD_STRING type error").
_FLOAT32_MAX_TEXT, _FLOAT32_MIN_NORMAL_TEXT = f"{FLOAT32_MAX:.4g}", f"{FLOAT32_MIN_NORMAL:.4g}"
# The smallest softmax_scale / softcap the kernels take: below it a score times that quotient reaches float32's
# subnormals, which the kernels flush to zero (every capped score 0: uniform attention, silently). Such a cap is
# > 2^100 times the scale, so cap * tanh(s / cap) equals s for any score the inputs can produce.
SOFTCAP_PRE_MIN = 2.0**-100


def check_softcap(softcap, softmax_scale: float | None = None) -> int | float:
    """A finite number >= 0 (0 disables it), and a positive one at least float32's smallest normal; with
    `softmax_scale`, also small enough a quotient softmax_scale / softcap for float32 (the native launchers fold it
    into the kernels' tanh argument). The API's and the native launchers' check. Returns softcap as a Python number
    (as_real: a numpy scalar or 0-d CPU tensor is one)."""
    softcap = as_real("softcap", softcap, "a finite float")
    if not _finite(softcap):
        raise TypeError(f"softcap must be a finite float, got {_shown(softcap)!r}")
    if softcap < 0:
        raise ValueError(f"softcap must be >= 0 (0 disables it), got {_shown(softcap)}")
    if 0 < softcap < FLOAT32_MIN_NORMAL:
        raise ValueError(f"softcap must be 0 or at least {_FLOAT32_MIN_NORMAL_TEXT} (float32's smallest normal), "
                         f"got {_shown(softcap)}")
    if softcap > FLOAT32_MAX:
        raise ValueError(f"softcap must be at most {_FLOAT32_MAX_TEXT} (float32's largest finite value), "
                         f"got {_shown(softcap)}")
    if softcap > 0 and softmax_scale is not None and abs(softmax_scale) / softcap > FLOAT32_MAX:
        raise ValueError(f"softcap {_shown(softcap)} is too small for softmax_scale {_shown(softmax_scale)}: their "
                         "quotient overflows float32")
    if softcap > 0 and softmax_scale and abs(softmax_scale) / softcap < SOFTCAP_PRE_MIN:
        raise ValueError(f"softcap {_shown(softcap)} is so large against softmax_scale {_shown(softmax_scale)} that "
                         "the kernels' tanh argument (softmax_scale / softcap times a score) underflows float32; a cap "
                         "that large changes no score: pass softcap=0")
    return softcap


def check_native_softcap(softcap, softmax_scale: float) -> None:
    """check_softcap, plus what the native launchers need: a cap comes with softmax_scale > 0 (the kernels choose
    their tanh on max |s| * softmax_scale / cap, which bounds |s * softmax_scale / cap| only for a positive scale;
    HopperBackend sends scales <= 0 to the reference backend, this guards direct launches of the forward; the
    backward's launcher refuses any scale <= 0)."""
    check_softcap(softcap, softmax_scale)
    if softcap > 0 and not softmax_scale > 0:
        raise ValueError(f"softcap {softcap} with softmax_scale {softmax_scale}: the native softcap kernels need "
                         "softmax_scale > 0; run such a call on backend='reference'")


def check_options(softmax_scale, causal, window_size, softcap, deterministic, fp8, backend):
    """The options an attention call or layer takes, checked; returns (softmax_scale, window_size, softcap) as Python
    numbers (each may be given as a numpy scalar or 0-d CPU tensor: _python_number)."""
    if softmax_scale is not None:
        softmax_scale = as_real("softmax_scale", softmax_scale, "a float or None")
        if not _finite(softmax_scale):
            raise ValueError(f"softmax_scale must be finite, got {_shown(softmax_scale)}")
        if abs(softmax_scale) > FLOAT32_MAX:  # the kernels take it as float32: inf there, NaN scores
            raise ValueError(f"softmax_scale must be at most {_FLOAT32_MAX_TEXT} in magnitude (float32's largest "
                             f"finite value), got {_shown(softmax_scale)}")
    check_bool("causal", causal)
    check_bool("deterministic", deterministic)
    window_size = check_window_size(window_size)
    # With a scale given, the quotient the forward would refuse is refused here, at a module's construction, not
    # at its every forward; with None the scale depends on headdim and the forward checks it.
    softcap = check_softcap(softcap, softmax_scale)
    as_recipe(fp8)  # raises on an unknown recipe name or a value that is no recipe
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string, got {type(backend).__name__}")
    return softmax_scale, window_size, softcap


def wants_deterministic(deterministic: bool) -> bool:
    """deterministic=True, or torch.use_deterministic_algorithms(True) (warn_only too), which asks every op for a
    run-to-run identical result: the native backward's fp32-atomic dQ must not run under it. Read where AttnParams
    are made, inside the ops at run time, so a compiled graph follows the flag as eager calls do."""
    return bool(deterministic) or torch.are_deterministic_algorithms_enabled()


def attention_params(q: torch.Tensor, softmax_scale, causal, window_size, softcap, deterministic, fp8, backend,
                     sm_margin: int = 0) -> AttnParams:
    """An attention call's options checked (check_options, the backend's name, softcap against the scale the call
    will use) and normalized as the backends take them: softmax_scale resolved from q's headdim, causal folded into
    the window. Every public entry point runs it before any kernel, flash_attn_with_kvcache before it writes the
    cache."""
    from fa3nn.dispatch import check_backend_name  # here: fa3nn.dispatch imports the backends, which import this

    softmax_scale, window_size, softcap = check_options(softmax_scale, causal, window_size, softcap, deterministic,
                                                        fp8, backend)
    check_backend_name(backend)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    check_softcap(softcap, scale)
    return AttnParams(scale, Window.from_args(causal, window_size), float(softcap), wants_deterministic(deterministic),
                      sm_margin)
