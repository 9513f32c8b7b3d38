"""haaw's one random generator, process-wide as PyTorch's default generator is: the layers draw their first
weights from it and dropout its masks; ``haaw.manual_seed`` makes both reproducible, and a checkpoint's
recomputation replays it (the engine's ``random_source``)."""
from __future__ import annotations

import numpy as np

from ..engine.function import random_source

_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Make every layer created afterwards start from reproducible weights, and every dropout mask drawn
    afterwards reproducible (``torch.manual_seed``)."""
    global _generator
    _generator = np.random.default_rng(seed)


def rng(seed=None) -> np.random.Generator:
    """haaw's generator, or a fresh one seeded with ``seed`` (a layer's own ``seed=``)."""
    return _generator if seed is None else np.random.default_rng(seed)


def _set_state(state) -> None:
    _generator.bit_generator.state = state


random_source(lambda: _generator.bit_generator.state, _set_state)  # a checkpoint's recompute replays it
