"""Write haaw/course/data/torch_reference.json: numbers computed by PyTorch that the exercises of
notebooks 07 and 10 are checked against, so that they check the same way without PyTorch.

    python scripts/make_reference_data.py        # needs torch; rewrites the file

- ``gradscaler``: for several overflow patterns, the scale that ``torch.amp.GradScaler`` holds after
  each step (an overflowing step is one whose gradients contain inf);
- ``adam``: for several settings, the parameters ``torch.optim.Adam`` produces step by step from
  given gradients.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[1] / "haaw" / "course" / "data" / "torch_reference.json"


def scaler_sequence(init_scale, growth_factor, backoff_factor, growth_interval, found_inf):
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=growth_factor,
                                  backoff_factor=backoff_factor, growth_interval=growth_interval)
    p = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=0.0)
    scales = []
    for inf in found_inf:
        opt.zero_grad()
        scaler.scale((p * (float("inf") if inf else 1.0)).sum()).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(float(scaler.get_scale()))
    return scales


def adam_steps(p0, grads, lr, betas, eps):
    p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    opt = torch.optim.Adam([p], lr=lr, betas=betas, eps=eps)
    path = []
    for g in grads:
        opt.zero_grad()
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        path.append(p.detach().numpy().tolist())
    return path


def main():
    rng = np.random.default_rng(0)
    patterns = [
        ("clean steps: grows after every 3", dict(init_scale=8.0, growth_interval=3), [False] * 10),
        ("overflows at steps 3 and 4", dict(init_scale=8.0, growth_interval=3), [False] * 3 + [True, True] + [False] * 7),
        ("an overflow right before growth", dict(init_scale=1024.0, growth_interval=4), [False, False, False, True] * 3),
        ("every other step overflows", dict(init_scale=256.0, growth_interval=2), [True, False] * 6),
        ("other factors: ×4 up, ×0.25 down", dict(init_scale=64.0, growth_interval=2, growth_factor=4.0,
                                                   backoff_factor=0.25), [False, False, True, False, False, False]),
        ("PyTorch's defaults: 65536, interval 2000", dict(init_scale=65536.0, growth_interval=2000),
         [True, True] + [False] * 2001),
        ("overflows that take the scale below 1", dict(init_scale=2.0, growth_interval=3), [True] * 5 + [False] * 4),
    ]
    gradscaler = []
    for label, options, found_inf in patterns:
        settings = dict(growth_factor=2.0, backoff_factor=0.5) | options
        gradscaler.append(dict(label=label, **settings, found_inf=found_inf,
                               scales=scaler_sequence(found_inf=found_inf, **settings)))
    adam = []
    for label, lr, betas, eps, scale in (("the defaults", 1e-3, (0.9, 0.999), 1e-8, 1.0),
                                         ("a larger step, tiny gradients", 0.05, (0.9, 0.999), 1e-8, 1e-4),
                                         ("other betas and eps", 0.01, (0.8, 0.99), 1e-6, 3.0)):
        p0 = rng.standard_normal(4).tolist()
        grads = (rng.standard_normal((6, 4)) * scale).tolist()
        adam.append(dict(label=label, lr=lr, beta1=betas[0], beta2=betas[1], eps=eps, p0=p0, grads=grads,
                         params=adam_steps(p0, grads, lr, betas, eps)))
    OUT.write_text(json.dumps({"torch": torch.__version__, "gradscaler": gradscaler, "adam": adam},
                              separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes) with torch {torch.__version__}")


if __name__ == "__main__":
    main()
