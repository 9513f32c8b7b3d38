"""Layers (``haaw.nn``), the functions they are made of (``haaw.nn.functional``, imported as F) and
gradient utilities (``haaw.nn.utils``), named after their PyTorch counterparts."""
from . import functional, utils
from .generator import manual_seed
from .modules import MLP, Dropout, FeedForward, LayerNorm, Linear, Module, SelfAttention, TransformerBlock

__all__ = ["Dropout", "FeedForward", "LayerNorm", "Linear", "MLP", "Module", "SelfAttention", "TransformerBlock",
           "functional", "manual_seed", "utils"]
