"""Run every notebook under strict nbval as other learners' CPUs would run it.

NumPy, OpenBLAS, PyTorch (and the MKL and oneDNN inside it) each pick their arithmetic kernels at run
time from the instruction sets the CPU has, and kernels of different widths add in different orders:
the last bits of a sum, an exp or a matrix product differ between a laptop and a cloud VM. A stored
output that prints those bits passes on the machine that stored it and fails on the next one. Each
kernel choice can be forced with an environment variable, so one x86-64 machine can play several:

    generic  no vector extensions beyond x86-64-v2 (SSE4.2): an old or minimal CPU, some VMs
    avx2     AVX2 and FMA, no AVX-512: most laptops and desktops of the last ten years
    avx512   AVX-512: many servers and cloud machines (only where this CPU has it)

    python scripts/cpu_profiles.py              # every profile this CPU can play, one after another
    python scripts/cpu_profiles.py generic      # one profile
    python scripts/cpu_profiles.py --list       # the profiles and their settings, without running them

Extra arguments after ``--`` go to pytest. The exit code is pytest's first non-zero one.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# For each profile: the widest instruction set each library may use.
PROFILES = {
    "generic": {"ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Prescott",
                "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41", "numpy": "X86_V2"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "numpy": "X86_V3"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "OPENBLAS_CORETYPE": "SkylakeX",
               "MKL_ENABLE_INSTRUCTIONS": "AVX512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "numpy": "X86_V4"},
}
NEEDS = {"generic": set(), "avx2": {"avx2", "fma"}, "avx512": {"avx512f", "avx512bw", "avx512dq", "avx512vl"}}
# NumPy's dispatched feature groups from the narrowest up; a profile keeps those up to its own
NUMPY_ORDER = ["X86_V2", "X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"]


def cpu_flags() -> set:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def numpy_disabled(widest: str) -> str:
    """NPY_DISABLE_CPU_FEATURES: every feature group NumPy dispatches to that is wider than ``widest``."""
    code = ("from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__;"
            "print(' '.join(f for f in __cpu_dispatch__ if __cpu_features__.get(f)))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}).stdout.split()
    keep = NUMPY_ORDER[: NUMPY_ORDER.index(widest) + 1]
    return " ".join(f for f in found if f not in keep)


def environment(name: str) -> dict:
    settings = dict(PROFILES[name])
    settings["NPY_DISABLE_CPU_FEATURES"] = numpy_disabled(settings.pop("numpy"))
    return settings


def main(argv: list) -> int:
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    listing = "--list" in argv
    names = [a for a in argv if a != "--list"] or list(PROFILES)
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        print(f"unknown profile(s) {unknown}; known: {', '.join(PROFILES)}")
        return 2
    if platform.machine().lower() not in ("x86_64", "amd64") or not sys.platform.startswith("linux"):
        print(f"the profiles force x86-64 kernels on Linux; this is {platform.machine()} on {sys.platform}: nothing run")
        return 0
    flags = cpu_flags()
    status = 0
    for name in names:
        if not NEEDS[name] <= flags:
            print(f"== {name}: skipped, this CPU lacks {' '.join(sorted(NEEDS[name] - flags))}")
            continue
        settings = environment(name)
        print(f"== {name}: " + " ".join(f"{k}={v!r}" if " " in v else f"{k}={v}" for k, v in settings.items()),
              flush=True)
        if listing:
            continue
        # the stored outputs are what a CPU changes; running every cell again (tests/plugins/haaw_notebooks.py)
        # checks the notebook's code, which the full suite does once
        result = subprocess.run([sys.executable, "-m", "pytest", "notebooks", "--nbval", "-n", "auto", "-q",
                                 "-k", "not again", *extra], cwd=ROOT, env={**os.environ, **settings})
        status = status or result.returncode
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
