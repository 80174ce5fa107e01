"""Bad input to torch_ragged.pad raises numpy's exception type, with a message naming the argument."""

import numpy as np
import pytest
import torch
import torch_ragged
from expect import raises

ops = torch.ops.torch_ragged
x = torch.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("call,exception,message", [
    (lambda: torch_ragged.pad(x, -1), ValueError, "pad_width can't contain negative values"),
    (lambda: torch_ragged.pad(x, ((1, 2), (0, -3))), ValueError, "pad_width can't contain negative values"),
    (lambda: torch_ragged.pad(x, 1.5), TypeError, "`pad_width` must be of integral type."),
    (lambda: torch_ragged.pad(x, True), TypeError, "`pad_width` must be of integral type."),
    (lambda: torch_ragged.pad(x, np.array([1], dtype=np.uint8)), TypeError, "`pad_width` must be of integral type."),
    (lambda: torch_ragged.pad(x, ((1, 2), (3, 4), (5, 6))), ValueError, "pad_width must broadcast"),
    (lambda: torch_ragged.pad(x, 1, "nearest"), ValueError, "mode 'nearest' is not supported"),
    (lambda: torch_ragged.pad(x, 1, "edge", constant_values=3), ValueError,
     "unsupported keyword arguments for mode 'edge'"),
    (lambda: torch_ragged.pad(x, 1, "constant", reflect_type="odd"), ValueError,
     "unsupported keyword arguments for mode 'constant'"),
    (lambda: torch_ragged.pad(x, 1, "maximum", stat_length=0), ValueError, "stat_length of 0 yields no value"),
    (lambda: torch_ragged.pad(x, 1, "minimum", stat_length=((1, 0),)), ValueError, "stat_length of 0"),
    (lambda: torch_ragged.pad(x, 1, "mean", stat_length=-2), ValueError, "stat_length can't contain negative"),
    (lambda: torch_ragged.pad(torch.zeros(0, 3), ((1, 0), (0, 0)), "reflect"), ValueError,
     "can't extend empty axis 0"),
    (lambda: torch_ragged.pad(x, 1, constant_values=((1, 2, 3),)), ValueError, "constant_values must broadcast"),
    (lambda: torch_ragged.pad(torch.zeros(2, 3, dtype=torch.complex64), 1, "median"), TypeError,
     "complex inputs"),
])
def test_numpy_failures_raise_the_same_exception(call, exception, message):
    with pytest.raises(exception, match=message):
        call()


def test_numpy_raises_the_same_exceptions():
    """The table above mirrors numpy.pad: check numpy agrees on the exception types."""
    a = np.arange(6.0).reshape(2, 3)
    for call, exception in [(lambda: np.pad(a, -1), ValueError), (lambda: np.pad(a, 1.5), TypeError),
                            (lambda: np.pad(a, 1, "nearest"), ValueError),
                            (lambda: np.pad(a, 1, "edge", constant_values=3), ValueError),
                            (lambda: np.pad(a, 1, "maximum", stat_length=0), ValueError),
                            (lambda: np.pad(np.zeros((0, 3)), ((1, 0), (0, 0)), "reflect"), ValueError)]:
        with pytest.raises(exception):
            call()


@pytest.mark.parametrize("call,exception,message", [
    (lambda: ops.pad(x, [1, 1], "constant"), ValueError, "pad_width must hold one \\(before, after\\) pair per axis"),
    (lambda: ops.pad(x, [1, 1, 1, 1], "median", stat_length=[1, 1]), ValueError, "stat_length must hold one"),
    (lambda: ops.pad(x, [1, 1, 1, 1], "linear_ramp", end_values=torch.zeros(3, 2)), ValueError,
     "end_values must broadcast"),
    (lambda: ops.pad_index(x, [1, 1, 1, 1], "mean"), ValueError, "torch_ragged.pad_index: mode must be constant"),
    (lambda: ops.pad_index(x, [1, 1, 1, 1], "edge", torch.zeros(2, 2)), ValueError,
     "constant_values is only for mode 'constant'"),
    (lambda: ops.pad_index_backward(x, [2, 1, 0, 0], "edge"), ValueError, "smaller than its padding"),
    (lambda: ops.pad_index_backward(x, [-1, 0, 0, 0], "edge"), ValueError, "can't contain negative values"),
])
def test_raw_op_checks_its_arguments(call, exception, message):
    with pytest.raises(exception, match=message):
        call()


def test_pad_widths_whose_padded_size_overflows_raise_instead_of_crashing():
    # issue 16, item 12: these segfaulted (edge / wrap / reflect / symmetric) or wrote out of bounds (empty)
    for mode in ("constant", "empty", "edge", "wrap", "reflect", "symmetric", "mean", "linear_ramp"):
        with pytest.raises(ValueError, match="torch_ragged.pad: axis 0 padded by .* would have more than 2\\^63 - 1"):
            torch_ragged.pad(torch.arange(5.0), (2**63 - 1, 2**63 - 1), mode)
    with pytest.raises(ValueError, match="torch_ragged.pad: the padded output would have more than 2\\^63 - 1"):
        torch_ragged.pad(torch.zeros(2, 2), ((2**40, 2**40), (2**40, 0)))
    with pytest.raises(ValueError, match=r"torch_ragged.pad_index_backward: axis 0 of grad_output \(size 5\)"):
        torch.ops.torch_ragged.pad_index_backward(torch.zeros(5), [2**62, 2**62], "edge")


def test_numpy_2_3_dict_pad_width_and_numpy_scalars():
    # issue 16, items 1 and 2 (numpy >= 2.3 is the contract)
    x = np.zeros((3, 4, 5))
    for pad_width in ({1: 5}, {-1: (1, 2)}, {0: 1, 2: (0, 3)}, {}):
        assert tuple(torch_ragged.pad(torch.from_numpy(x), pad_width).shape) == np.pad(x, pad_width).shape
    values = np.arange(5.0)
    expected = np.pad(values, (np.int64(1), np.int64(2)), "reflect")
    actual = torch_ragged.pad(torch.from_numpy(values), (np.int64(1), np.int64(2)), "reflect")
    assert np.array_equal(actual.numpy(), expected)
    actual = torch_ragged.pad(torch.from_numpy(values), (torch.tensor(1), np.int32(2)), "mean",
                              stat_length=(np.uint8(2), 3))
    assert np.allclose(actual.numpy(), np.pad(values, (1, 2), "mean", stat_length=(2, 3)))
    with pytest.raises(ValueError, match="torch_ragged.pad: pad_width's axis 3 is out of bounds for a 3-d input"):
        torch_ragged.pad(torch.zeros(3, 4, 5), {3: 1})


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_maximum_and_minimum_on_wide_unsigned_dtypes(dtype):
    # issue 16, item 8: torch has no max / min kernels for these ("max_cpu" not implemented)
    values = np.array([[3, np.iinfo(dtype).max, 7], [2**15, 0, 9]], dtype=dtype)
    for mode in ("maximum", "minimum"):
        actual = torch_ragged.pad(torch.from_numpy(values), ((1, 1), (2, 1)), mode, stat_length=2)
        assert np.array_equal(actual.numpy(), np.pad(values, ((1, 1), (2, 1)), mode, stat_length=2))


def test_messages_carry_numpys_key_phrases():
    # issue 16, item 9: code matching numpy's messages keeps working
    x = torch.zeros(3, 3)
    with pytest.raises(ValueError, match="torch_ragged.pad: index can't contain negative values"):
        torch_ragged.pad(x, -1)
    with pytest.raises(ValueError, match="torch_ragged.pad: operands could not be broadcast"):
        torch_ragged.pad(x, ((1, 2), (3, 4), (5, 6)))
    with pytest.raises(ValueError, match="operands could not be broadcast"):
        torch.ops.torch_ragged.pad(x, [1, 1, 1, 1], "constant", torch.zeros(3, 3))
    with pytest.raises(ValueError, match="torch_ragged.pad: unsupported keyword arguments for mode 'edge'"):
        torch_ragged.pad(x, 1, "edge", constant_values=1)


def test_empty_input_skips_mode_keywords_as_numpy():
    """Issue 16, item 4: an empty array's padding never reads stat_length / end_values / reflect_type."""
    cases = [((0,), 0, "maximum", {"stat_length": -1}), ((0, 3), ((0, 0), (1, 1)), "reflect", {"reflect_type": "bad"}),
             ((0,), 0, "linear_ramp", {"end_values": "x"}),
             ((0, 3), ((0, 0), (2, 2)), "mean", {"stat_length": ((1, 2), (3, 4), (5, 6))})]
    for shape, width, mode, keywords in cases:
        expected = np.pad(np.zeros(shape), width, mode, **keywords)
        assert tuple(torch_ragged.pad(torch.zeros(shape), width, mode, **keywords).shape) == expected.shape
    with pytest.raises(ValueError):  # padding the empty axis itself stays an error, as numpy's
        np.pad(np.zeros((0, 3)), 1, "maximum")
    with pytest.raises(ValueError, match="torch_ragged.pad"):
        torch_ragged.pad(torch.zeros(0, 3), 1, "maximum")


def test_a_0d_input_uses_none_of_the_values_as_numpy():
    """numpy pads no axis of a 0-d array and never reads constant_values / end_values / reflect_type (found by a
    reliability fuzz: ours refused end_values='x' where numpy returned the array); stat_length is still checked."""
    x = np.array(40, dtype=np.uint8)
    for mode, keywords in (("linear_ramp", {"end_values": "x"}), ("constant", {"constant_values": "x"}),
                           ("reflect", {"reflect_type": 3}), ("maximum", {"stat_length": 2}), ("edge", {})):
        expected = np.pad(x, (1, 2), mode, **keywords)
        got = torch_ragged.pad(torch.from_numpy(x), (1, 2), mode, **keywords)
        assert got.dtype == torch.uint8 and got.tolist() == expected.tolist()
    for keywords in ({"stat_length": -1}, {"constant_values": ((1, 2, 3),)}, {"constant_values": [[1, 2], [3, 4]]}):
        mode = "maximum" if "stat_length" in keywords else "constant"
        with pytest.raises(ValueError):
            np.pad(x, 1, mode, **keywords)
        with pytest.raises(ValueError, match="torch_ragged.pad: (index can't contain negative|operands could not be "
                                             "broadcast)"):
            torch_ragged.pad(torch.from_numpy(x), 1, mode, **keywords)


@pytest.mark.parametrize("dtype,value", [(np.bool_, ""), (np.bool_, "odd"), (np.bool_, "False"), (np.int64, " 7 "),
                                         (np.int8, "-128"), (np.uint8, "300"), (np.uint8, "-1"), (np.int64, "odd"),
                                         (np.float64, "2.5"), (np.float32, "nan"), (np.complex64, "1+2j"),
                                         (np.int64, ("5", "7")), (np.float64, ("x", "1"))])
def test_string_constant_values_are_read_as_numpy_reads_them(dtype, value):
    """numpy writes a string constant into the array by parsing it for the array's dtype (a bool: non-empty), even
    where no side is padded (found by a reliability fuzz: ours refused every string): the same result or the same
    exception type."""
    x = np.arange(4).astype(dtype).reshape(2, 2)
    for width in (1, 0, ((1, 0), (0, 2))):
        try:
            expected = np.pad(x, width, "constant", constant_values=value)
        except (ValueError, OverflowError) as error:
            with pytest.raises(type(error), match="torch_ragged.pad"):
                torch_ragged.pad(torch.from_numpy(x), width, "constant", constant_values=value)
            continue
        got = torch_ragged.pad(torch.from_numpy(x), width, "constant", constant_values=value)
        np.testing.assert_array_equal(got.numpy(), expected)


def test_errors_name_the_op_called():
    """Issue 16 item 17: pad_index's own errors say pad_index (they said pad), pad's say pad even when raised by the
    pad_index kernel underneath, a None input is named."""
    x = torch.ones(3, 4)
    with raises(ValueError, "torch_ragged.pad_index: operands could not be broadcast", "constant_values"):
        torch.ops.torch_ragged.pad_index(x, [1, 1, 1, 1], "constant", torch.ones(3, 2))
    with raises(ValueError, "torch_ragged.pad: operands could not be broadcast", "(from torch_ragged.pad_index)"):
        torch.ops.torch_ragged.pad(x, [1, 1, 1, 1], "constant", torch.ones(3, 2))
    for call in (lambda: torch.ops.torch_ragged.pad(None, [1, 1], "edge"),
                 lambda: torch.ops.torch_ragged.pad_index(None, [1, 1], "edge")):
        with raises(TypeError, "torch_ragged.pad", "self must be a tensor, got None"):
            call()


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # numpy's NaN -> intp
def test_odd_keyword_values_follow_numpy():
    """numpy reads any reflect_type other than "odd" as "even" (strings or not), and a NaN stat_length as a negative
    index."""
    array = np.arange(5.0)
    for reflect_type in (1.5, None, "x", ("odd",)):
        np.testing.assert_array_equal(
            torch_ragged.pad(torch.from_numpy(array), 3, "reflect", reflect_type=reflect_type).numpy(),
            np.pad(array, 3, "reflect", reflect_type=reflect_type))
    with pytest.raises(ValueError, match="index can't contain negative values"):
        np.pad(array, 2, "mean", stat_length=float("nan"))
    with raises(ValueError, "torch_ragged.pad: index can't contain negative values"):
        torch_ragged.pad(torch.from_numpy(array), 2, "mean", stat_length=float("nan"))


def test_end_and_constant_values_are_read_as_numpy_reads_them_even_without_padding():
    """numpy converts end_values / constant_values whatever the widths: a string end value fails its dtype promotion
    (a TypeError), a complex value for a real input warns and keeps the real part."""
    a = np.zeros(3, dtype=np.float32)
    for widths in (0, 1):
        with pytest.raises(TypeError):
            np.pad(a, widths, "linear_ramp", end_values="x")
        with pytest.raises(TypeError, match="torch_ragged.pad: end_values must be numbers"):
            torch_ragged.pad(torch.from_numpy(a), widths, "linear_ramp", end_values="x")
        for mode, key in (("linear_ramp", "end_values"), ("constant", "constant_values")):
            with pytest.warns(np.exceptions.ComplexWarning):
                expected = np.pad(a, widths, mode, **{key: 1 + 2j})
            with pytest.warns(UserWarning, match="Casting complex values to real discards the imaginary part"):
                actual = torch_ragged.pad(torch.from_numpy(a), widths, mode, **{key: 1 + 2j})
            assert np.array_equal(actual.numpy(), expected)


def test_python_ints_beyond_int64_on_float_inputs_as_numpy():
    a = np.zeros(2, dtype=np.float32)
    for mode, key in (("constant", "constant_values"), ("linear_ramp", "end_values")):
        expected = np.pad(a, 1, mode, **{key: 2**64})
        assert np.array_equal(torch_ragged.pad(torch.from_numpy(a), 1, mode, **{key: 2**64}).numpy(), expected)


def test_numpy_legacy_vector_function_mode():
    def pad_with(vector, pad_width, iaxis, kwargs):
        vector[:pad_width[0]] = kwargs.get("padder", 10)
        vector[vector.shape[0] - pad_width[1]:] = kwargs.get("padder", 10)

    a = np.arange(6).reshape(2, 3)
    for widths, kwargs in ((2, {}), (((1, 0), (2, 3)), {"padder": -7})):
        expected = np.pad(a, widths, pad_with, **kwargs)
        assert np.array_equal(torch_ragged.pad(torch.from_numpy(a), widths, pad_with, **kwargs).numpy(), expected)
