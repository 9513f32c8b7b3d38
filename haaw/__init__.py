"""haaw: backpropagation, built from scratch to be read, run and checked.

Importing haaw loads NumPy only; torch, matplotlib and ipywidgets are imported by the
functions that use them, so the course starts fast and runs without the optional ones.
"""
from .value import Value
from .tensor import Tensor, concatenate, detect_anomaly, no_grad
from .gradcheck import gradcheck
from .flops import count_flops

__all__ = ["Value", "Tensor", "concatenate", "detect_anomaly", "no_grad", "gradcheck", "count_flops"]
__version__ = "0.1.0"
