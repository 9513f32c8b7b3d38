"""Number formats by name, in one place: NumPy's own, and the 16- and 8-bit floats of ml_dtypes (bfloat16,
float8_e4m3fn, ...), which NumPy sees as kind 'V'. ml_dtypes is imported only when one of them is asked for."""
from __future__ import annotations

import numpy as np

ML_FLOATS = {"bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz"}


def is_float(dtype) -> bool:
    """float16/32/64, or one of ml_dtypes' formats (bfloat16, float8...), which NumPy sees as 'V'."""
    return dtype.kind == "f" or dtype.name in ML_FLOATS


def as_dtype(name, what: str = "to()") -> np.dtype:
    """A NumPy dtype from a dtype or a name; bfloat16 and the float8 formats come from ml_"""
    if isinstance(name, str) and name in ML_FLOATS:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    try:
        return np.dtype(name)
    except TypeError:
        raise TypeError(f"{what}: {name!r} is not a number format (try np.float32, np.float16 or 'bfloat16')") from None
