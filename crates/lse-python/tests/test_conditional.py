"""lse.conditional_perplexity: SPEC §6 examples, an independent numpy float64 reference, bad input."""

import math
import zlib

import numpy as np
import pytest

import lse


def reference(logits, ids, mask):
    """Independent float64 reference: NLL = mean over selected tokens of -log softmax(row)[target].

    Written directly from the SPEC §6 formula with numpy; the logits are the (already rounded)
    values the function under test receives, widened to float64.
    """
    x = np.asarray(logits, dtype=np.float64)
    ids = np.asarray(ids, dtype=np.int64)
    sel = np.asarray(mask).astype(bool)
    m = sel.sum()
    if m == 0:
        return 0.0, 1.0, 0
    rows = x[sel]  # [M, V]
    tgt = ids[sel]  # [M]
    shift = rows.max(axis=1)
    log_z = shift + np.log(np.exp(rows - shift[:, None]).sum(axis=1))
    nll = float(np.sum(log_z - rows[np.arange(len(tgt)), tgt]) / m)
    with np.errstate(over="ignore"):
        ppl = float(np.exp(nll))
    return nll, ppl, int(m)


def check(result, expected, tol):
    nll, ppl, n = expected
    assert set(result) == {"negative_log_likelihood", "perplexity", "selected_token_count"}
    assert type(result["negative_log_likelihood"]) is float
    assert type(result["perplexity"]) is float
    assert type(result["selected_token_count"]) is int
    assert result["selected_token_count"] == n
    assert abs(result["negative_log_likelihood"] - nll) <= tol * max(1.0, abs(nll)), (result, expected)
    if math.isinf(ppl):
        assert math.isinf(result["perplexity"]) and result["perplexity"] > 0
    else:
        assert abs(result["perplexity"] - ppl) <= tol * max(1.0, abs(ppl)), (result, expected)


# ---------------------------------------------------------------- SPEC §6 examples


def test_spec_example_1():
    r = lse.conditional_perplexity([[[0, 0], [0, 0], [0, 0]]], [[0, 1, 0]], [[False, True, True]])
    assert r["negative_log_likelihood"] == pytest.approx(0.693147, abs=1e-6)
    assert r["perplexity"] == pytest.approx(2.0, abs=1e-6)
    assert r["selected_token_count"] == 2


def test_spec_example_2():
    r = lse.conditional_perplexity(
        [[[4, 0], [0, 4], [9, -9], [-9, 9]]], [[0, 1, 1, 0]], [[False, True, False, False]]
    )
    assert r["negative_log_likelihood"] == pytest.approx(0.01815, abs=1e-6)
    assert r["perplexity"] == pytest.approx(1.018316, abs=1e-6)
    assert r["selected_token_count"] == 1


def test_spec_example_3():
    r = lse.conditional_perplexity([[[1, -1], [2, -2]]], [[0, 1]], [[False, False]])
    assert r == {"negative_log_likelihood": 0.0, "perplexity": 1.0, "selected_token_count": 0}
    assert type(r["selected_token_count"]) is int


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_spec_examples_every_dtype_and_int_mask(dtype):
    r = lse.conditional_perplexity(
        np.zeros((1, 3, 2), dtype=dtype), np.array([[0, 1, 0]], dtype=np.int32), np.array([[0, 1, 1]])
    )
    assert r["negative_log_likelihood"] == pytest.approx(math.log(2), abs=1e-12)
    assert r["perplexity"] == pytest.approx(2.0, abs=1e-12)


# ---------------------------------------------------------------- random cases vs the reference

SHAPES = [(1, 1, 2), (1, 7, 5), (3, 4, 11), (2, 16, 97), (4, 33, 300), (1, 64, 1000)]
SCALES = [1.0, 10.0, 100.0, 3000.0]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("mask_kind", ["bool", "int64", "int8", "uint8"])
def test_random_matches_reference(shape, dtype, scale, mask_kind):
    seed = zlib.crc32(repr((shape, np.dtype(dtype).name, scale, mask_kind)).encode())
    rng = np.random.default_rng(seed)
    b, t, v = shape
    logits = (rng.standard_normal(shape) * scale).astype(dtype)
    ids = rng.integers(0, v, size=(b, t))
    mask = rng.random((b, t)) < 0.6
    mask = mask if mask_kind == "bool" else mask.astype(mask_kind)
    r = lse.conditional_perplexity(logits, ids, mask)
    # The reference sees exactly the rounded values the function got.
    tol = 1e-9 if dtype == np.float64 else 1e-5
    check(r, reference(logits, ids, mask), tol)


def test_large_logits_stable_and_inf_perplexity():
    logits = np.array([[[3000.0, -3000.0, 0.0], [2999.0, 3000.0, -5.0]]])
    r = lse.conditional_perplexity(logits, [[1, 0]], [[1, 1]])
    expected = reference(logits, [[1, 0]], [[1, 1]])
    check(r, expected, 1e-12)
    assert r["negative_log_likelihood"] > 709
    assert r["perplexity"] == math.inf


def test_average_is_over_tokens_not_sequences():
    # sequence 0: one selected token with NLL ln 2; sequence 1: two tokens with NLL ln 4 each.
    logits = np.zeros((2, 2, 4))
    logits[0, 0] = [math.log(3), 0, 0, 0]
    r = lse.conditional_perplexity(logits, [[0, 0], [2, 3]], [[1, 0], [1, 1]])
    assert r["negative_log_likelihood"] == pytest.approx((math.log(2) + 2 * math.log(4)) / 3, abs=1e-12)
    assert r["selected_token_count"] == 3


def test_nonfinite_in_unselected_rows_is_ignored():
    logits = np.array([[[0.0, 0.0], [np.nan, np.inf]]])
    r = lse.conditional_perplexity(logits, [[1, 0]], [[True, False]])
    assert r["negative_log_likelihood"] == pytest.approx(math.log(2), abs=1e-12)


# ---------------------------------------------------------------- input forms


class ArrayLike:
    """Not a list, not an ndarray: only the __array__ protocol (like a CPU torch tensor)."""

    def __init__(self, data, dtype):
        self._data = np.asarray(data, dtype=dtype)

    def __array__(self, dtype=None, copy=None):
        a = self._data
        return a if dtype is None else a.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_array_protocol_objects(dtype):
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((2, 5, 9)).astype(dtype)
    ids = rng.integers(0, 9, size=(2, 5))
    mask = rng.random((2, 5)) < 0.5
    mask[0, 0] = True
    r = lse.conditional_perplexity(ArrayLike(logits, dtype), ArrayLike(ids, np.int64), ArrayLike(mask, bool))
    check(r, reference(logits, ids, mask), 1e-9)


def test_bfloat16_when_available():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(5)
    logits = (rng.standard_normal((2, 4, 6)) * 30).astype(ml_dtypes.bfloat16)
    ids = rng.integers(0, 6, size=(2, 4))
    mask = np.ones((2, 4), dtype=bool)
    check(lse.conditional_perplexity(logits, ids, mask), reference(logits.astype(np.float32), ids, mask), 1e-9)


def test_nested_lists_and_tuples():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((2, 3, 4)) * 5
    ids = rng.integers(0, 4, size=(2, 3))
    mask = [[1, 0, 1], [0, 1, 1]]
    r = lse.conditional_perplexity(logits.tolist(), tuple(map(tuple, ids.tolist())), mask)
    check(r, reference(logits, ids, mask), 1e-12)


def test_non_contiguous_views():
    rng = np.random.default_rng(11)
    big = rng.standard_normal((4, 10, 12)) * 20
    logits = big[::2, ::3, :]  # strided view
    ids = rng.integers(0, 12, size=(4, 10))[::2, ::3]
    mask = (rng.random((4, 10)) < 0.7)[::2, ::3]
    check(lse.conditional_perplexity(logits, ids, mask), reference(logits, ids, mask), 1e-12)


def test_two_dimensional_is_one_sequence():
    logits = np.array([[0.0, 0.0], [4.0, 0.0]])
    r = lse.conditional_perplexity(logits, [1, 0], [True, True])
    check(r, reference(logits[None], [[1, 0]], [[1, 1]]), 1e-12)


def test_unsigned_ids_and_float_mask():
    logits = np.zeros((1, 2, 3))
    r = lse.conditional_perplexity(logits, np.array([[2, 1]], dtype=np.uint64), np.array([[1.0, 0.0]]))
    assert r["negative_log_likelihood"] == pytest.approx(math.log(3), abs=1e-12)
    assert r["selected_token_count"] == 1


def test_empty_batch():
    r = lse.conditional_perplexity(np.zeros((0, 3, 5)), np.zeros((0, 3), dtype=np.int64), np.zeros((0, 3), bool))
    assert r == {"negative_log_likelihood": 0.0, "perplexity": 1.0, "selected_token_count": 0}


# ---------------------------------------------------------------- bad arguments → ValueError naming it

GOOD_LOGITS = [[[0.0, 1.0, 2.0], [0.5, 0.5, 0.5]]]
GOOD_IDS = [[0, 2]]
GOOD_MASK = [[True, True]]

BAD_CASES = [
    # (argument name, logits, target_ids, response_mask)
    ("logits", [[0.0, 1.0, 2.0]], [[0]], [[True]]),  # 2-D logits with 2-D ids
    ("logits", [0.0, 1.0], [[0]], [[True]]),  # 1-D
    ("logits", np.zeros((1, 1, 1, 3)), [[0]], [[True]]),  # 4-D
    ("target_ids", GOOD_LOGITS, [[0, 2, 1]], GOOD_MASK),  # T mismatch
    ("target_ids", GOOD_LOGITS, [[0], [2]], GOOD_MASK),  # B/T mismatch
    ("target_ids", GOOD_LOGITS, [0, 2], GOOD_MASK),  # 1-D ids with 3-D logits
    ("response_mask", GOOD_LOGITS, GOOD_IDS, [[True]]),  # mask shape
    ("response_mask", GOOD_LOGITS, GOOD_IDS, [[True, True, False]]),
    ("target_ids", GOOD_LOGITS, [[0, 3]], GOOD_MASK),  # id == V
    ("target_ids", GOOD_LOGITS, [[-1, 2]], GOOD_MASK),  # negative id
    ("target_ids", GOOD_LOGITS, [[0, 3]], [[True, False]]),  # bad id in an unselected position
    ("target_ids", GOOD_LOGITS, np.array([[0, 2**64 - 1]], dtype=np.uint64), GOOD_MASK),
    ("target_ids", GOOD_LOGITS, [[0.0, 2.0]], GOOD_MASK),  # float ids
    ("target_ids", GOOD_LOGITS, [["a", "b"]], GOOD_MASK),  # string ids
    ("logits", [[[0.0, np.nan, 2.0], [0.5, 0.5, 0.5]]], GOOD_IDS, GOOD_MASK),
    ("logits", [[[0.0, 1.0, 2.0], [0.5, np.inf, 0.5]]], GOOD_IDS, GOOD_MASK),
    ("logits", np.array([[[0.0, 1.0, 2.0], [0.5, -np.inf, 0.5]]], dtype=np.float16), GOOD_IDS, GOOD_MASK),
    ("logits", np.full((1, 2, 3), np.inf, dtype=np.float16), GOOD_IDS, GOOD_MASK),
    ("response_mask", GOOD_LOGITS, GOOD_IDS, [[1, 2]]),
    ("response_mask", GOOD_LOGITS, GOOD_IDS, [[-1, 0]]),
    ("response_mask", GOOD_LOGITS, GOOD_IDS, np.array([[1, 255]], dtype=np.uint8)),
    ("response_mask", GOOD_LOGITS, GOOD_IDS, [[0.5, 1.0]]),
    ("response_mask", GOOD_LOGITS, GOOD_IDS, [["yes", "no"]]),
    ("logits", "not an array", GOOD_IDS, GOOD_MASK),  # a string
    ("logits", [[["a", "b", "c"], ["d", "e", "f"]]], GOOD_IDS, GOOD_MASK),  # strings inside
    ("logits", [[[0.0, 1.0], [0.5, 0.5, 0.5]]], GOOD_IDS, GOOD_MASK),  # ragged
    ("logits", None, GOOD_IDS, GOOD_MASK),
    ("logits", {"a": 1}, GOOD_IDS, GOOD_MASK),
    ("logits", np.ones((1, 2, 3), dtype=np.complex128), GOOD_IDS, GOOD_MASK),
    ("target_ids", GOOD_LOGITS, "01", GOOD_MASK),
    ("response_mask", GOOD_LOGITS, GOOD_IDS, None),
    ("response_mask", GOOD_LOGITS, GOOD_IDS, b"\x01\x01"),
]


@pytest.mark.parametrize("name,logits,ids,mask", BAD_CASES)
def test_bad_arguments_raise_value_error_naming_them(name, logits, ids, mask):
    with pytest.raises(ValueError) as info:
        lse.conditional_perplexity(logits, ids, mask)
    assert type(info.value) is ValueError
    assert name in str(info.value), str(info.value)


def test_failing_array_protocol_is_value_error():
    class Broken:
        def __array__(self, dtype=None, copy=None):
            raise TypeError("cannot convert")

    with pytest.raises(ValueError, match="logits"):
        lse.conditional_perplexity(Broken(), GOOD_IDS, GOOD_MASK)


def test_keyword_arguments():
    r = lse.conditional_perplexity(logits=GOOD_LOGITS, target_ids=GOOD_IDS, response_mask=GOOD_MASK)
    check(r, reference(GOOD_LOGITS, GOOD_IDS, GOOD_MASK), 1e-12)
