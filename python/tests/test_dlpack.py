"""DLPack capsules read by sluice (the parsing CudaSource builds on), from numpy's own
`__dlpack__`: versioned and unversioned capsules, strides, dtypes, the producer's deleter run
exactly once, consumed capsules refused, and host memory refused as not CUDA."""

import gc
import sys

import numpy as np
import pytest

from sluice import _sluice

describe = _sluice._dlpack_describe


class OnlyDlpack:
    """Exposes an array through DLPack alone (no buffer, no array interface)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_a_versioned_capsule_describes_the_array():
    a = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
    d = describe(a.__dlpack__(max_version=(1, 0)))
    assert d["version"] is not None and d["version"][0] == 1
    assert (d["device_type"], d["device_name"], d["device_id"]) == (1, "kDLCPU", 0)
    assert d["ptr"] == a.ctypes.data
    assert d["shape"] == [3, 5]
    assert d["strides"] == [20, 4], "byte strides"
    assert d["dtype"] == np.dtype(np.float32)
    assert d["read_only"] is False


def test_an_unversioned_capsule_and_a_strided_view():
    a = np.zeros((6, 8), dtype=np.uint16)
    view = a[1:, ::2].T  # shape (4, 5), element strides (2, 8), offset one row
    capsule = view.__dlpack__()  # no max_version: the pre-1.0 "dltensor" capsule
    d = describe(capsule)
    assert d["version"] is None
    assert d["shape"] == [4, 5]
    assert d["strides"] == [4, 16]
    assert d["ptr"] == a.ctypes.data + 16
    assert d["dtype"] == np.dtype(np.uint16)


def test_read_only_arrays_say_so():
    a = np.ones((2, 2), np.uint8)
    a.setflags(write=False)
    assert describe(a.__dlpack__(max_version=(1, 0)))["read_only"] is True


@pytest.mark.parametrize("dtype", ["u1", "i1", "u2", "i2", "u4", "i4", "f2", "f4", "f8"])
def test_every_element_type(dtype):
    assert describe(np.zeros(4, dtype))["dtype"] == np.dtype(dtype)


def test_unsupported_dtypes_name_the_dlpack_type():
    with pytest.raises(TypeError, match=r"DLPack dtype int \(code 0\) of 64 bits"):
        describe(np.zeros(4, np.int64))
    with pytest.raises(TypeError, match=r"DLPack dtype complex \(code 5\) of 64 bits"):
        describe(np.zeros(4, np.complex64))


def test_the_deleter_runs_once_and_keeps_the_array_alive_until_then():
    a = np.zeros((16, 16), np.float32)
    baseline = sys.getrefcount(a)
    capsule = a.__dlpack__(max_version=(1, 0))
    assert sys.getrefcount(a) == baseline + 1, "numpy's capsule references the array"
    describe(capsule)
    # sluice consumed the capsule and ran the deleter: the reference is gone, and the
    # capsule's own destructor (it is "used_" now) must not release it again.
    assert sys.getrefcount(a) == baseline
    del capsule
    gc.collect()
    assert sys.getrefcount(a) == baseline
    # An error after consumption releases the tensor too.
    b = np.zeros(4, np.int64)
    base_b = sys.getrefcount(b)
    with pytest.raises(TypeError):
        describe(b.__dlpack__())
    assert sys.getrefcount(b) == base_b


def test_a_consumed_capsule_is_refused():
    capsule = np.zeros(3, np.uint8).__dlpack__()
    describe(capsule)
    with pytest.raises(ValueError, match=r"consumed already; call __dlpack__\(\) again"):
        describe(capsule)


def test_the_protocol_through_an_object_with_only_dlpack():
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    d = describe(OnlyDlpack(a))
    assert d["shape"] == [3, 4] and d["ptr"] == a.ctypes.data


def test_host_memory_is_refused_as_not_cuda_naming_the_device_type():
    with pytest.raises(TypeError, match=r"OnlyDlpack.__dlpack_device__\(\) is \(1, 0\): device type 1 \(kDLCPU\), not 2 \(kDLCUDA\)"):
        describe(OnlyDlpack(np.zeros((4, 4), np.uint8)), cuda=True)


def test_objects_that_are_not_producers_are_refused():
    class NoDevice:
        def __dlpack__(self, **kwargs):
            raise AssertionError("not called")

    with pytest.raises(TypeError, match="NoDevice has no working __dlpack_device__"):
        describe(NoDevice())

    class NotACapsule(OnlyDlpack):
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(TypeError, match="__dlpack__ returned int, not a PyCapsule"):
        describe(NotACapsule(np.zeros(2)))
