"""The engine, to be read top to bottom: ``autograd`` (the one backward algorithm), ``value`` (the
scalar engine), ``ops`` (every tensor operation beside its vector-Jacobian products), ``tensor``
(the array that runs them), ``function`` (operations written outside the table, checkpointing),
``forward_mode`` (for comparison). Beside them: ``modes`` (no_grad, detect_anomaly), ``dtypes``
(number formats by name), ``checks`` (what the engine refuses, and the messages that say why),
``plugins`` (your code in the engine's slots), ``hooks`` (where instruments plug in) and ``graph``
(what they may read of a node). It imports nothing from the rest of haaw.
"""
from .function import Function, checkpoint
from .hooks import saved_tensors_hooks
from .modes import detect_anomaly, enable_grad, no_grad
from .tensor import Tensor, cat, from_numpy, stack, tensor, where
from .value import Value

__all__ = ["Function", "Tensor", "Value", "cat", "checkpoint", "detect_anomaly", "enable_grad", "from_numpy",
           "no_grad", "saved_tensors_hooks", "stack", "tensor", "where"]
