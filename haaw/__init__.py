"""haaw: backpropagation, built from scratch to be read, run and checked.

Importing haaw loads NumPy only; torch, matplotlib and ipywidgets are imported by the
functions that use them, so the course starts fast and runs without the optional ones.
"""
from .value import Value
from .gradcheck import gradcheck

__all__ = ["Value", "gradcheck"]
__version__ = "0.1.0"
