"""LSE: score text with GGUF language models.

``lse.conditional_perplexity(logits, target_ids, response_mask)`` computes the masked (conditional)
perplexity of SPEC §6 from logits you already have; ``lse.Engine`` loads a GGUF model and runs the
same perplexity / KL-divergence scoring as ``lse-server --perplexity``.
"""

from __future__ import annotations

import numpy as _np

from . import _lse
from ._engine import Engine, merge_shards, read_pairs

__all__ = ["conditional_perplexity", "Engine", "merge_shards", "read_pairs"]

_INT64_MAX = _np.iinfo(_np.int64).max


def _as_array(value, name):
    """numpy.asarray that turns every failure into a ValueError naming the argument."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name}: expected an array of numbers, got {type(value).__name__}")
    try:
        arr = _np.asarray(value)
    except Exception as e:  # ragged lists, failing __array__, ...
        raise ValueError(f"{name}: cannot be read as an array: {e}") from None
    if not isinstance(arr, _np.ndarray):
        raise ValueError(f"{name}: cannot be read as an array")
    return arr


def _shape_error(name, expected, arr):
    return ValueError(f"{name}: expected {expected}, got shape {tuple(arr.shape)}")


def _logits_array(value):
    arr = _as_array(value, "logits")
    if arr.dtype.name == "bfloat16":  # ml_dtypes / JAX: widening to float32 is exact
        arr = arr.astype(_np.float32)
    kind = arr.dtype.kind
    if arr.size == 0 and kind not in "fiu":
        arr = arr.astype(_np.float64)
    elif kind == "f":
        if arr.dtype == _np.float16 or arr.dtype == _np.float32:
            # float16 -> float32 is exact; the math is done in float64 either way.
            arr = arr.astype(_np.float32, copy=False)
        else:
            arr = arr.astype(_np.float64, copy=False)
    elif kind in "iu":
        arr = arr.astype(_np.float64)
    else:
        raise ValueError(f"logits: expected floating-point numbers, got dtype {arr.dtype}")
    return arr


def _ids_array(value):
    arr = _as_array(value, "target_ids")
    kind = arr.dtype.kind
    if arr.size == 0 and kind not in "iu":
        return arr.astype(_np.int64)
    if kind == "u":
        if arr.dtype.itemsize >= 8 and arr.size and int(arr.max()) > _INT64_MAX:
            raise ValueError(f"target_ids: id {int(arr.max())} is outside [0, V)")
        return arr.astype(_np.int64)
    if kind == "i":
        return arr.astype(_np.int64, copy=False)
    raise ValueError(f"target_ids: expected integer token ids, got dtype {arr.dtype}")


def _mask_array(value):
    arr = _as_array(value, "response_mask")
    kind = arr.dtype.kind
    if kind == "b":
        return arr.astype(_np.int64)
    if arr.size == 0 and kind not in "iu":
        return arr.astype(_np.int64)
    if kind == "i":
        return arr.astype(_np.int64, copy=False)
    if kind == "u":
        bad = arr > 1
        if bad.any():
            raise ValueError(f"response_mask: value {arr[bad].flat[0]} is not 0/1 (or false/true)")
        return arr.astype(_np.int64)
    if kind == "f":
        ok = (arr == 0) | (arr == 1)
        if not ok.all():
            raise ValueError(f"response_mask: value {arr[~ok].flat[0]} is not 0/1 (or false/true)")
        return arr.astype(_np.int64)
    raise ValueError(f"response_mask: expected booleans or 0/1 integers, got dtype {arr.dtype}")


def conditional_perplexity(logits, target_ids, response_mask):
    """Conditional (masked) perplexity, SPEC §6.

    ``logits[B][T][V]``, ``target_ids[B][T]``, ``response_mask[B][T]`` (true/1 = scored), already
    aligned (no shift). ``[T][V]``, ``[T]``, ``[T]`` is accepted as ``B = 1``. Accepts numpy arrays
    (float16/32/64), nested lists, and anything with ``__array__``; masks of bool or 0/1 integers.

    ``NLL = -(1/M) * sum_i m_i * log softmax(logits_i)[x_i]`` with ``M = sum_i m_i`` (an average over
    selected tokens, not over sequences), computed with a stable log-sum-exp in float64.
    Returns ``{"negative_log_likelihood": float, "perplexity": float, "selected_token_count": int}``;
    nothing selected gives 0, 1, 0; an NLL above ~709 gives perplexity ``inf``.

    Raises ``ValueError`` naming the argument for shape mismatches, ids outside ``[0, V)``,
    non-finite logits in selected rows, mask values other than 0/1, and non-numeric input.
    """
    logits = _logits_array(logits)
    ids = _ids_array(target_ids)
    mask = _mask_array(response_mask)
    if logits.ndim == 2 and ids.ndim == 1 and mask.ndim == 1:
        logits, ids, mask = logits[None], ids[None], mask[None]
    if logits.ndim != 3:
        raise _shape_error("logits", "a 3-D array [B, T, V]", logits)
    bt = tuple(logits.shape[:2])
    if ids.ndim != 2 or tuple(ids.shape) != bt:
        raise _shape_error("target_ids", f"shape [B, T] = {bt} to match logits {tuple(logits.shape)}", ids)
    if mask.ndim != 2 or tuple(mask.shape) != bt:
        raise _shape_error("response_mask", f"shape [B, T] = {bt} to match logits {tuple(logits.shape)}", mask)
    logits = _np.ascontiguousarray(logits)
    ids = _np.ascontiguousarray(ids)
    mask = _np.ascontiguousarray(mask)
    if logits.dtype == _np.float32:
        nll, ppl, n = _lse.conditional_perplexity_f32(logits, ids, mask)
    else:
        nll, ppl, n = _lse.conditional_perplexity_f64(logits, ids, mask)
    return {
        "negative_log_likelihood": float(nll),
        "perplexity": float(ppl),
        "selected_token_count": int(n),
    }

