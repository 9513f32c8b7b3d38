"""Instruments that observe the engine without being part of it: gradient checks against finite
differences and PyTorch, FLOP and memory counters, graph drawing, the step-through, the audit.

Each module is imported by name where it is used (``from haaw.tools.flops import count_flops``);
the most common ones are also here: ``from haaw.tools import gradcheck, compare``.
"""
from .crosscheck import compare, optional_torch, torch_check
from .gradcheck import gradcheck

__all__ = ["compare", "gradcheck", "optional_torch", "torch_check"]
