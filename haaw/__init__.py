"""haaw: backpropagation, built from scratch to be read, run and checked.

- ``haaw.engine``: the engine itself (``Value``, ``Tensor``, the table of operations, backward);
- ``haaw.nn`` (with ``haaw.nn.functional``), ``haaw.optim``, ``haaw.amp``: built on the engine,
  named after their PyTorch counterparts;
- ``haaw.tools``: instruments that observe the engine (gradient checks, FLOP and memory counters,
  graph drawing, the training-step audit), imported by name: ``from haaw.tools.flops import ...``;
- ``haaw.course``: each notebook's props, exercises and explorers.

Importing haaw loads NumPy only; torch, matplotlib and ipywidgets are imported by the functions
that use them, so the course starts fast and runs without the optional ones.
"""
from . import amp, nn, optim
from .engine import (Function, Tensor, Value, cat, checkpoint, detect_anomaly, enable_grad, from_numpy, no_grad,
                     saved_tensors_hooks, stack, tensor, where)
from .engine.plugins import use
from .nn import manual_seed

__all__ = ["Function", "Tensor", "Value", "amp", "cat", "checkpoint", "detect_anomaly", "enable_grad", "from_numpy",
           "manual_seed", "nn", "no_grad", "optim", "saved_tensors_hooks", "stack", "tensor", "use",
           "where"]


def __getattr__(name: str):
    """``haaw.__version__``, looked up when first asked for, so that ``import haaw`` reads no metadata."""
    if name == "__version__":
        return _version()
    if name in _PYTORCH_ONLY:
        raise AttributeError(f"haaw.{name}: PyTorch has torch.{name}, haaw does not. {_PYTORCH_ONLY[name]}")
    raise AttributeError(f"module 'haaw' has no attribute {name!r}")


_LIKE = "haaw.tensor(np.{}(x.data))"  # NumPy makes the array; x.data keeps x's shape and format
# torch's names a learner reaches for that haaw leaves out, and what to write in haaw instead
_PYTORCH_ONLY = {
    **{f"{kind}_like": f"Write {_LIKE.format(kind + '_like')}" for kind in ("zeros", "ones", "empty")},
    "full_like": "Write haaw.tensor(np.full_like(x.data, value))",
    "randn_like": "Write haaw.tensor(np.random.default_rng().standard_normal(x.shape).astype(x.dtype))",
    "zeros": "Write haaw.tensor(np.zeros(shape)), or x.new_zeros(shape) in x's format",
    "ones": "Write haaw.tensor(np.ones(shape)), or x.new_ones(shape) in x's format",
    "full": "Write haaw.tensor(np.full(shape, value)), or x.new_full(shape, value)",
    "arange": "Write haaw.tensor(np.arange(n))",
    "randn": "Write haaw.tensor(np.random.default_rng(seed).standard_normal(shape))",
    **{name: f"haaw's formats are NumPy's: write np.{name}" for name in ("float16", "float32", "float64", "int8",
                                                                         "int16", "int32", "int64", "uint8")},
    "bool": "haaw's formats are NumPy's: write np.bool_",
    "bfloat16": 'write the format\'s name, "bfloat16" (x.to("bfloat16"), haaw.tensor(a, dtype="bfloat16"))',
    "set_grad_enabled": "Write `with haaw.no_grad():` for False, and nothing for True",
    "inference_mode": "Write `with haaw.no_grad():`",
    "maximum": "Write haaw.where(a > b, a, b)",
    "minimum": "Write haaw.where(a < b, a, b)",
}


def _version() -> str:
    """The version, written once, in pyproject.toml: the installed package's metadata, or pyproject.toml itself
    when haaw runs from a source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("haaw")
    except PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    try:
        with (Path(__file__).resolve().parent.parent / "pyproject.toml").open("rb") as file:
            project = tomllib.load(file).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        project = {}
    return project.get("version", "unknown") if project.get("name") == "haaw" else "unknown"
