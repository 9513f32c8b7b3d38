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
from .engine import (Function, Tensor, Value, cat, checkpoint, detect_anomaly, from_numpy, no_grad,
                     saved_tensors_hooks, stack, tensor, where)
from .engine.plugins import use
from .nn import manual_seed

__all__ = ["Function", "Tensor", "Value", "amp", "cat", "checkpoint", "detect_anomaly", "from_numpy",
           "manual_seed", "nn", "no_grad", "optim", "saved_tensors_hooks", "stack", "tensor", "use",
           "where"]


def __getattr__(name: str):
    """``haaw.__version__``, looked up when first asked for, so that ``import haaw`` reads no metadata."""
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'haaw' has no attribute {name!r}")


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
