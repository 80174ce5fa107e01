"""torch_ragged.pad against numpy.pad (numpy >= 2.1 is the oracle): literal cases, then properties."""

import warnings

import numpy as np
import pytest
import torch
import torch_ragged
from devices import DEVICES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

assert tuple(int(v) for v in np.__version__.split(".")[:2]) >= (2, 1), "the oracle needs numpy >= 2.1"

MODES = ["constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum", "reflect", "symmetric", "wrap",
         "empty"]
NUMPY_DTYPES = {torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
                torch.int32: np.int32, torch.int64: np.int64, torch.float16: np.float16, torch.float32: np.float32,
                torch.float64: np.float64}


def numpy_of(tensor):
    return tensor.cpu().numpy()


# ---- literal cases (pad_semantics notes; the multi-period and odd-reflection rules) ----

LITERAL_CASES = [
    ([0, 1, 2], (1, 8), "reflect", {}, [1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2]),
    ([0, 1], (1, 8), "symmetric", {}, [0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1]),
    ([0, 1, 2, 3], (5, 2), "wrap", {}, [3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1]),
    ([1, 2, 4], 5, "reflect", {"reflect_type": "odd"}, [-6, -5, -4, -2, 0, 1, 2, 4, 6, 7, 8, 10, 12]),
    ([1, 2, 4], 5, "symmetric", {"reflect_type": "odd"}, [-4, -2, -2, 0, 1, 1, 2, 4, 4, 6, 7, 7, 8]),
    ([7], 3, "reflect", {}, [7, 7, 7, 7, 7, 7, 7]),
    ([1, 2], 1, "mean", {}, [2, 1, 2, 2]),
    ([10], 4, "linear_ramp", {"end_values": (0, -1)}, [0, 2, 5, 7, 10, 7, 4, 1, -1]),
    ([1, 2, 3, 4], 1, "median", {}, [2, 1, 2, 3, 4, 2]),  # int median of 2, 3 -> 2.5 -> rounds to even 2
    ([5, 1, 9], (2, 1), "maximum", {"stat_length": 2}, [5, 5, 5, 1, 9, 9]),
    ([0, 1, 2, 3], (2, 2), "circular", {}, [2, 3, 0, 1, 2, 3, 0, 1]),
    ([0, 1, 2, 3], (2, 2), "replicate", {}, [0, 0, 0, 1, 2, 3, 3, 3]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("values,width,mode,kwargs,expected", LITERAL_CASES)
def test_literal_cases(device, values, width, mode, kwargs, expected):
    actual = torch_ragged.pad(torch.tensor(values, device=device), width, mode, **kwargs)
    assert actual.tolist() == expected


@pytest.mark.parametrize("device", DEVICES)
def test_constant_corners_take_the_last_axis_value(device):
    actual = torch_ragged.pad(torch.zeros(1, 1, device=device), 1, constant_values=((1, 2), (3, 4)))
    assert actual.tolist() == [[3, 1, 4], [3, 0, 4], [3, 2, 4]]


@pytest.mark.parametrize("device", DEVICES)
def test_zero_dim_input_is_returned_as_a_copy(device):
    x = torch.tensor(3.5, device=device)
    y = torch_ragged.pad(x, 2, "reflect")
    assert y.shape == () and y.item() == 3.5 and y.data_ptr() != x.data_ptr()


# ---- properties against numpy ----

def pairs_form(draw, ndim, values):
    """One of numpy's forms for a (ndim, 2) argument, drawn from `values`."""
    form = draw(st.sampled_from(["scalar", "pair", "nested_pair", "per_axis", "per_axis_single"]))
    if form == "scalar":
        return draw(values)
    if form == "pair":
        return (draw(values), draw(values))
    if form == "nested_pair":
        return ((draw(values), draw(values)),)
    if form == "per_axis_single":
        return tuple((draw(values),) for _ in range(ndim))
    return tuple((draw(values), draw(values)) for _ in range(ndim))


@st.composite
def pad_cases(draw, modes=tuple(MODES)):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(0, 7)) for _ in range(ndim))
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.uint8,
                                  torch.int8, torch.bool]))
    mode = draw(st.sampled_from(modes))
    widths = pairs_form(draw, ndim, st.integers(0, 12))
    kwargs = {}
    small = st.integers(0, 100)
    if mode == "constant" and draw(st.booleans()):
        kwargs["constant_values"] = pairs_form(draw, ndim, small)
    if mode == "linear_ramp" and draw(st.booleans()):
        kwargs["end_values"] = pairs_form(draw, ndim, st.one_of(small, st.floats(-1e3, 1e3)))
    if mode in ("maximum", "minimum", "mean", "median") and draw(st.booleans()):
        kwargs["stat_length"] = pairs_form(draw, ndim, st.integers(0, 9))
    if mode in ("reflect", "symmetric") and draw(st.booleans()):
        kwargs["reflect_type"] = draw(st.sampled_from(["even", "odd"]))
    seed = draw(st.integers(0, 2**31 - 1))
    return shape, dtype, widths, mode, kwargs, seed


def random_array(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == torch.bool:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype.is_floating_point:
        return rng.standard_normal(shape).astype(NUMPY_DTYPES[dtype])
    low = 0 if dtype == torch.uint8 else -100
    return rng.integers(low, 100, shape).astype(NUMPY_DTYPES[dtype])


def numpy_pad(array, widths, mode, kwargs):
    """numpy.pad, or the exception it raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mean / median of an empty slice
        try:
            return np.pad(array, widths, mode, **kwargs)
        except Exception as error:  # noqa: BLE001 (the exception is the expected result)
            return error


def undefined_in_numpy(array, mode, kwargs):
    """numpy's result is undefined where a NaN statistic (of 0 values) is cast to an integer."""
    stat_length = kwargs.get("stat_length")
    return (mode in ("mean", "median") and stat_length is not None and array.dtype.kind in "biu"
            and 0 in np.asarray(stat_length).reshape(-1))


def assert_matches_numpy(array, widths, mode, kwargs, device):
    expected = numpy_pad(array, widths, mode, kwargs)
    tensor = torch.from_numpy(array).to(device)
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)):
            torch_ragged.pad(tensor, widths, mode, **kwargs)
        return
    actual = numpy_of(torch_ragged.pad(tensor, widths, mode, **kwargs))
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    if mode == "empty":  # padding values are undefined; the input must sit in the interior
        befores = np.broadcast_to(widths, (array.ndim, 2))[:, 0]
        interior = tuple(slice(b, b + n) for b, n in zip(befores, array.shape, strict=True))
        np.testing.assert_array_equal(actual[interior], array)
        return
    if undefined_in_numpy(array, mode, kwargs):
        return
    if array.dtype.kind == "f" and mode == "mean":  # float rounding order differs (numpy: pairwise sums)
        scale = 1 + np.abs(expected[np.isfinite(expected)]).max(initial=0)
        tolerance = 2e-3 if array.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance * scale)
    else:
        np.testing.assert_array_equal(actual, expected)  # bit for bit (NaNs in the same places)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pad_cases())
def test_matches_numpy(device, case):
    shape, dtype, widths, mode, kwargs, seed = case
    assert_matches_numpy(random_array(shape, dtype, seed), widths, mode, kwargs, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.float16])
def test_six_dims_match_numpy(device, mode, dtype):
    array = random_array((3, 1, 4, 2, 3, 2), dtype, seed=6)
    widths = ((1, 2), (0, 3), (2, 0), (0, 0), (5, 1), (1, 1))
    kwargs = {"stat_length": ((1, 2),)} if mode in ("maximum", "minimum", "mean", "median") else {}
    assert_matches_numpy(array, widths, mode, kwargs, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["reflect", "symmetric", "wrap", "edge"])
def test_pads_many_periods_wide(device, mode):
    array = np.arange(1, 4, dtype=np.int64)
    for width in (0, 1, 2, 3, 5, 8, 13, 40):
        assert_matches_numpy(array, (width, 40 - width), mode, {}, device)
        if mode in ("reflect", "symmetric"):
            assert_matches_numpy(array, (width, 40 - width), mode, {"reflect_type": "odd"}, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_odd_reflections_are_bit_identical_to_numpy(device, dtype):
    """Issue 16 item 7: numpy reflects period by period about values it already rounded; a closed form drifted by up
    to 8 ulp. Wide pads (many periods) on 1-3 axes of random data, compared bit for bit."""
    rng = np.random.default_rng(7)
    for _ in range(30):
        shape = tuple(int(n) for n in rng.integers(2, 7, size=rng.integers(1, 4)))
        array = (rng.standard_normal(shape) * rng.choice([1.0, 1e3])).astype(dtype)
        widths = [(int(rng.integers(0, 25)), int(rng.integers(0, 25))) for _ in shape]
        for mode in ("reflect", "symmetric"):
            assert_matches_numpy(array, widths, mode, {"reflect_type": "odd"}, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_linear_ramp_is_bit_identical_to_numpy(device, dtype):
    """Issue 16 item 6: numpy ramps float16 / float32 in float64 (end values read as numpy float64 / int64 scalars,
    and the default 0) and casts once, except for one pair per axis of Python numbers, which take the input's type
    (NEP 50). Every form, random data, bit for bit."""
    rng = np.random.default_rng(6)
    for _ in range(30):
        shape = tuple(int(n) for n in rng.integers(1, 6, size=rng.integers(1, 4)))
        array = (rng.standard_normal(shape) * rng.choice([1.0, 100.0])).astype(dtype)
        widths = [(int(rng.integers(0, 12)), int(rng.integers(0, 12))) for _ in shape]
        per_axis = [(float(rng.standard_normal() * 50), float(rng.standard_normal())) for _ in shape]
        for end_values in (None, float(rng.standard_normal() * 10), per_axis[0], per_axis, [per_axis[0]],
                           int(rng.integers(-50, 50))):
            kwargs = {} if end_values is None else {"end_values": end_values}
            assert_matches_numpy(array, widths, "linear_ramp", kwargs, device)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_ramp_overflowing_ends_match_numpy(device):
    """Issue 16 item 18: an end value beyond the input's type (inf for a per-axis pair, or in float64 then cast) and
    the float16 case ((5, 7), (4, 9)) that was 0.008 off."""
    half = (np.arange(6, dtype=np.float16).reshape(2, 3) * 7.3).astype(np.float16)
    assert_matches_numpy(half, ((5, 7), (4, 9)), "linear_ramp", {}, device)
    assert_matches_numpy(half, ((5, 7), (4, 9)), "linear_ramp", {"end_values": ((0.3, 1000.7), (-3, 5.5))}, device)
    assert_matches_numpy(half, 3, "linear_ramp", {"end_values": ((7e4, -1.0),)}, device)
    ones = np.ones((2, 3), np.float32)
    assert_matches_numpy(ones, 3, "linear_ramp", {"end_values": 1e300}, device)
    assert_matches_numpy(ones, 3, "linear_ramp", {"end_values": ((1e300, 1e300), (1e300, 2.0))}, device)
    assert_matches_numpy(ones[0], (3, 4), "linear_ramp", {"end_values": ((1e300, 1e300),)}, device)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_odd_reflection_wraps_around_like_numpy(device):
    array = np.array([0, 250, 3], dtype=np.uint8)
    assert_matches_numpy(array, 9, "reflect", {"reflect_type": "odd"}, device)
    assert_matches_numpy(np.array([-128, 127], dtype=np.int8), 7, "symmetric", {"reflect_type": "odd"}, device)


@pytest.mark.parametrize("device", DEVICES)
def test_statistics_round_half_to_even_per_axis_step(device):
    array = np.array([[1, 2], [4, 7]], dtype=np.int32)  # row means 1.5 -> 2, 5.5 -> 6
    for mode in ("mean", "median"):
        assert_matches_numpy(array, 2, mode, {}, device)
        assert_matches_numpy(array, ((1, 0), (3, 1)), mode, {"stat_length": 1}, device)


@pytest.mark.parametrize("device", DEVICES)
def test_nan_propagates_like_numpy(device):
    array = np.array([[1.0, np.nan, 3.0, 4.0], [2.0, 5.0, 1.0, 0.5]])
    for mode in ("maximum", "minimum", "mean", "median"):
        assert_matches_numpy(array, 2, mode, {}, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.complex64])
def test_other_dtypes_against_a_float64_run(device, dtype):
    x = torch.randn(3, 4, dtype=torch.float64).to(dtype).to(device)
    for mode in ("constant", "edge", "reflect", "symmetric", "wrap", "mean", "linear_ramp"):
        actual = torch_ragged.pad(x, ((2, 1), (3, 5)), mode)
        reference = torch_ragged.pad(x.cpu().to(torch.complex128 if dtype.is_complex else torch.float64),
                                     ((2, 1), (3, 5)), mode)
        assert actual.dtype == dtype
        torch.testing.assert_close(actual.cpu(), reference.to(dtype), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_constant_values_cast_into_the_dtype_like_numpy(device):
    array = np.arange(4, dtype=np.int32)
    assert_matches_numpy(array, 2, "constant", {"constant_values": (1.7, -2.9)}, device)
    assert_matches_numpy(array.astype(np.bool_), 1, "constant", {"constant_values": 2}, device)


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_input(device):
    x = torch.arange(60.0, device=device).reshape(3, 4, 5).transpose(0, 2)[::2]
    for mode in ("constant", "reflect", "mean"):
        expected = np.pad(numpy_of(x), ((1, 2), (0, 3), (2, 2)), mode)
        np.testing.assert_allclose(numpy_of(torch_ragged.pad(x, ((1, 2), (0, 3), (2, 2)), mode)), expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
def test_output_keeps_the_input_memory_layout(device, mode):
    # Issue 16 item 5: numpy keeps Fortran order, torch.empty_like keeps channels_last; a constant corner still takes
    # the latest axis's value (the kernel walks the axes in memory order).
    widths = ((1, 2), (2, 1), (3, 1), (0, 2))
    kwargs = {"constant_values": ((1, 2), (3, 4), (5, 6), (7, 8))} if mode == "constant" else {}
    image = torch.randn(2, 3, 4, 5, dtype=torch.float64, device=device).to(memory_format=torch.channels_last)
    fortran = torch.randn(5, 4, 3, 2, dtype=torch.float64, device=device).permute(3, 2, 1, 0)
    for x, layout_kept in ((image, lambda y: y.is_contiguous(memory_format=torch.channels_last)),
                           (fortran, lambda y: y.permute(3, 2, 1, 0).is_contiguous())):
        y = torch_ragged.pad(x, widths, mode, **kwargs)
        assert layout_kept(y) and not y.is_contiguous()
        if mode != "empty":
            np.testing.assert_allclose(numpy_of(y), np.pad(numpy_of(x), widths, mode, **kwargs), rtol=1e-12)
    gapped = image[:, :, ::2]  # not dense: a contiguous output, as before
    assert torch_ragged.pad(gapped, widths, mode, **kwargs).is_contiguous()


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_through_a_channels_last_input(device):
    x = torch.randn(1, 2, 3, 2, dtype=torch.float64, device=device).to(memory_format=torch.channels_last)
    for mode in ("reflect", "constant", "wrap"):
        torch.autograd.gradcheck(lambda t, mode=mode: torch_ragged.pad(t, ((0, 1), (1, 0), (2, 1), (1, 1)), mode),
                                 (x.requires_grad_(),))


NAN, INF = float("nan"), float("inf")
INTEGER_CONSTANTS = [  # issue 16 item 3: numpy's irregular rule, value by value (numpy 2.4 is the reference)
    (np.uint8, [-1, 300, 2.5, np.int64(300), NAN, 300.7, -1.5, INF, (3, -4), ((1, 2), (257, -2)),
                ((1, 2), (300.7, -1.5)), ((1, 2), (NAN, 2)), np.uint8(7)]),
    (np.int8, [200, -129, np.int64(200), 1000.5, -2.7, INF, 5, ((1, 2), (200.5, 2))]),
    (np.int32, [NAN, 2**40, 2**63, 7]),
    (np.int64, [2**63, NAN, 1e19, -5, np.uint64(2**63)]),
    (np.uint64, [2**63, -1, NAN, 2**64, np.uint64(2**63), 1e19, -1.0, ((1, 2), (-1, 2)), ((1, 2), (2**63, 1))]),
    (np.bool_, [2, 0.5, NAN, 0, ((1, 2), (NAN, 0))]),
    (np.uint16, [70000, -1]), (np.int16, [40000]), (np.uint32, [2**32 + 5, -3]),
]


@pytest.mark.parametrize("dtype,value", [(d, v) for d, values in INTEGER_CONSTANTS for v in values],
                         ids=lambda v: repr(v) if not isinstance(v, type) else v.__name__)
def test_integer_constant_values_wrap_or_raise_as_numpy(dtype, value):
    a = np.arange(4, dtype=dtype).reshape(2, 2) if dtype != np.bool_ else np.array([[True, False], [False, True]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns on its NaN / inf casts
        try:
            expected = np.pad(a, 1, constant_values=value)
        except (OverflowError, ValueError) as error:
            with pytest.raises(type(error), match="torch_ragged.pad: .*(out of bounds|cannot convert)"):
                torch_ragged.pad(torch.from_numpy(a), 1, constant_values=value)
            return
    got = torch_ragged.pad(torch.from_numpy(a), 1, constant_values=value)
    assert got.dtype == torch.from_numpy(a).dtype
    np.testing.assert_array_equal(got.numpy(), expected)


@pytest.mark.parametrize("shape", [(5, 6), (5, 7), (4, 1), (3, 4, 2)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.uint8], ids=str)
def test_median_matches_numpy_for_odd_and_even_lines_and_nan(shape, dtype):
    """median by selection (lower middle from torch.median, upper from kthvalue): numpy.pad's values for odd and
    even lines, windows (stat_length), NaN lines (NaN border) and integer dtypes (the mean of the two, cast back)."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    if np.issubdtype(dtype, np.floating) and x.size:
        x.flat[3] = np.nan
    for width, stat_length in ((((1, 2), (2, 1)) + ((0, 0),) * (len(shape) - 2), None),
                               (((2, 2),) * len(shape), 2), (((0, 0),) * (len(shape) - 1) + ((3, 3),), None)):
        expected = np.pad(x, width, mode="median", **({} if stat_length is None else {"stat_length": stat_length}))
        got = torch_ragged.pad(torch.from_numpy(x), width, mode="median", stat_length=stat_length).numpy()
        np.testing.assert_array_equal(got, expected)
