"""Optimizers: they *use* gradients; computing them was backward's job (``torch.optim``)."""
from __future__ import annotations

import numpy as np

from .engine import plugins
from .engine.guard import refusable
from .engine.tensor import changed_in_place


class Optimizer:
    def __init__(self, params, what: str):
        self.params = self._listed(params, what)
        if not self.params:
            raise ValueError(f"{what} got no parameters: did the model create any with requires_grad=True?")

    @staticmethod
    def _listed(params, what: str) -> list:
        """``params`` as a list, or a TypeError if it is one tensor (``list`` of it would give its rows)."""
        if hasattr(params, "grad"):
            raise TypeError(f"{what}: params must be a list of tensors (or model.parameters()), not one tensor: "
                            "write [w]")
        return list(params)

    @staticmethod
    def _check(what: str, **settings) -> None:
        """Refuse the settings PyTorch refuses: a negative rate or decay, a beta or momentum outside [0, 1)."""
        for name, value in settings.items():
            low, high = (0.0, 1.0) if name in ("beta1", "beta2", "momentum") else (0.0, None)
            if not isinstance(value, (int, float, np.floating, np.integer)) or not value >= low or (
                    high is not None and not value < high):
                where = f"from {low:g} up to (not including) {high:g}" if high is not None else f"at least {low:g}"
                raise ValueError(f"{what}: {name} = {value!r} is not valid; it must be a number {where}")

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @staticmethod
    def _update(p, new: np.ndarray) -> None:
        """Write the new values into the parameter in place, outside any graph, and bump its version:
        a graph that saved the old values will refuse to run backward with the new ones."""
        np.copyto(p.data, new, casting="unsafe")
        changed_in_place(p)


class SGD(Optimizer):
    """Gradient descent: p ← p − lr · g, where g is dL/dp (plus ``weight_decay`` · p), or with
    ``momentum`` its running sum b ← momentum · b + g, as in ``torch.optim.SGD``."""

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, "SGD")
        self._check("SGD", lr=lr, momentum=momentum, weight_decay=weight_decay)
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.buffers = [None] * len(self.params)

    def step(self) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:  # frozen parameters (requires_grad=False) never get one
                continue
            g = p.grad if not self.weight_decay else p.grad + self.weight_decay * p.data
            if self.momentum:
                b = self.buffers[i]
                self.buffers[i] = g = g.copy() if b is None else self.momentum * b + g
            if self.momentum or self.weight_decay:
                self._update(p, p.data - self.lr * g)
            else:  # the common case, without a temporary copy of the weights
                p.data -= self.lr * g
                changed_in_place(p)


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2014): each parameter moves by its gradient's running mean divided by the square
    root of its running mean square, so every parameter moves at a similar pace whatever the size of its
    gradient. Both running means start at 0, so early on they are too small; dividing by 1 − βᵗ (the *bias
    correction*) undoes that. It keeps two extra numbers per parameter (notebook 06's optimizer state)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(params, "Adam")
        self._check("Adam", lr=lr, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay)
        self.lr, (self.beta1, self.beta2), self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.m = [np.zeros_like(p.data) for p in self.params]
        self.v = [np.zeros_like(p.data) for p in self.params]
        self.steps = [0] * len(self.params)  # per parameter, as in PyTorch: a parameter counts only its own updates

    @refusable("optim.Adam.step", "the engine's Adam (haaw.optim.Adam)")
    def step(self) -> None:
        yours = plugins.override("adam")
        for i, (p, m, v) in enumerate(zip(self.params, self.m, self.v)):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            correction1, correction2 = 1 - self.beta1**t, 1 - self.beta2**t
            g = p.grad if not self.weight_decay else p.grad + self.weight_decay * p.data
            if yours:  # notebook 10: your adam_step in place of the lines below
                new, m[...], v[...] = yours(p.data.copy(), g, m.copy(), v.copy(), t, self.lr,
                                            self.beta1, self.beta2, self.eps)
                self._update(p, new)
                continue
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            v += (1 - self.beta2) * g * g
            self._update(p, p.data - self.lr * (m / correction1) / (np.sqrt(v / correction2) + self.eps))


plugins.slot("adam", "adam_step(p, g, m, v, t, lr, beta1, beta2, eps) -> (new p, new m, new v), t counting from 1",
             refuses=("optim.Adam.step", "torch.optim"))


class AdamW(Adam):
    """Adam with *decoupled* weight decay (Loshchilov & Hutter, 2019), as ``torch.optim.AdamW``: each step first
    shrinks every weight by lr · weight_decay of itself, then takes Adam's step on the gradient alone (Adam's own
    ``weight_decay`` adds the decay to the gradient, where the division by √v weakens it for large gradients).

    ``params`` is a list of tensors or, as in PyTorch, of *parameter groups*: dicts with ``"params"`` and any
    setting to override for them, e.g. no decay on biases and norms::

        AdamW([{"params": weights}, {"params": biases_and_norms, "weight_decay": 0.0}], lr=3e-4)

    ``param_groups`` holds the groups with every setting filled in; a schedule changes ``group["lr"]``."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2):
        params = self._listed(params, "AdamW")
        groups = params if params and all(isinstance(g, dict) for g in params) else [{"params": params}]
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        self.param_groups = []
        for group in groups:
            unknown = sorted(set(group) - set(defaults) - {"params"})
            if "params" not in group or unknown:
                raise ValueError(f"AdamW: a parameter group is a dict with 'params' and any of {sorted(defaults)}; "
                                 f"got the keys {sorted(group)}")
            listed = [group["params"]] if hasattr(group["params"], "grad") else list(group["params"])  # PyTorch's too
            filled = {**defaults, **group, "params": listed}
            self._check("AdamW", lr=filled["lr"], beta1=filled["betas"][0], beta2=filled["betas"][1],
                        eps=filled["eps"], weight_decay=filled["weight_decay"])
            self.param_groups.append(filled)
        super().__init__([p for g in self.param_groups for p in g["params"]], lr, betas, eps, 0.0)

    @refusable("optim.Adam.step", "the engine's Adam (haaw.optim.Adam)")
    def step(self) -> None:
        yours = plugins.override("adam")
        i = 0
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                m, v = self.m[i], self.v[i]
                i += 1
                if p.grad is None:
                    continue
                self.steps[i - 1] += 1
                t = self.steps[i - 1]
                start = p.data * (1 - lr * decay) if decay else p.data  # decoupled: the weight shrinks by itself
                if yours:  # your adam_step, on the gradient alone
                    new, m[...], v[...] = yours(start.copy(), p.grad, m.copy(), v.copy(), t, lr, beta1, beta2, eps)
                    self._update(p, new)
                    continue
                m *= beta1
                m += (1 - beta1) * p.grad
                v *= beta2
                v += (1 - beta2) * p.grad * p.grad
                self._update(p, start - lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps))
