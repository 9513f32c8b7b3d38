"""haaw/engine/dtypes.py: number formats by name, NumPy's and ml_dtypes'."""
import ml_dtypes
import numpy as np
import pytest

from haaw import Tensor


@pytest.mark.parametrize("name, expected", [("float32", np.float32), (np.float16, np.float16),
                                            ("bfloat16", ml_dtypes.bfloat16), ("float8_e4m3fn", ml_dtypes.float8_e4m3fn)])
def test_a_format_is_found_by_name_or_by_numpy_type(name, expected):
    assert Tensor([1.5]).to(name).dtype == np.dtype(expected)


def test_a_name_that_is_no_format_is_refused_by_the_method_that_was_given_it():
    with pytest.raises(TypeError) as err:
        Tensor([1.0]).to("float99")
    assert str(err.value) == "to(): 'float99' is not a number format (try np.float32, np.float16 or 'bfloat16')"
