"""scripts/cpu_profiles.py makes this machine compute as other CPUs do, and a last-bit output fails under it."""
import importlib.util
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("cpu_profiles", ROOT / "scripts" / "cpu_profiles.py")
profiles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(profiles)

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64")
                                or not sys.platform.startswith("linux"), reason="the profiles force x86-64 kernels")

# a matrix product's sum printed to the last bit: OpenBLAS's generic kernel adds in another order than AVX2's
LAST_BITS = ("import numpy as np\nrng = np.random.default_rng(0)\n"
             "A, B = rng.standard_normal((64, 256)), rng.standard_normal((256, 64))\nprint(repr(float((A @ B).sum())))")
VERDICT = ("from haaw.tools import compare\nrng = np.random.default_rng(0)\n"
           "A, B = rng.standard_normal((64, 256)), rng.standard_normal((256, 64))\n"
           "compare('sum', (A @ B).sum(), sum(A[i] @ B[:, j] for i in range(64) for j in range(64)))")


def run_here(code: str, env: dict) -> str:
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                          check=True).stdout


def notebook(cells) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": i + 1, "id": f"c{i}", "metadata": {},
                                  "outputs": [{"name": "stdout", "output_type": "stream", "text": out}],
                                  "source": src} for i, (src, out) in enumerate(cells)],
                       "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


def test_each_profile_keeps_numpy_to_its_own_instruction_sets():
    generic, avx2 = profiles.environment("generic"), profiles.environment("avx2")
    assert generic["OPENBLAS_CORETYPE"] == "Prescott" and generic["ATEN_CPU_CAPABILITY"] == "default"
    code = "from numpy._core._multiarray_umath import __cpu_features__ as f; print(f.get('X86_V3'), f.get('X86_V4'))"
    found = run_here(code, {}).split()  # NumPy's groups: x86-64-v3 is AVX2 and FMA, v4 is AVX-512
    if found[0] == "True":
        assert "X86_V3" in generic["NPY_DISABLE_CPU_FEATURES"].split()
        assert "X86_V3" not in avx2["NPY_DISABLE_CPU_FEATURES"].split()
    off = run_here(code, {"NPY_DISABLE_CPU_FEATURES": generic["NPY_DISABLE_CPU_FEATURES"]})
    assert off.split() == ["False", "False"]  # NumPy itself agrees it may not use them


def test_an_output_that_prints_last_bits_fails_under_another_profile_and_a_verdict_does_not(pytester, monkeypatch):
    pytest.importorskip("nbval")  # the test extra: it runs the planted notebook
    if "avx2" not in profiles.cpu_flags():
        pytest.skip("this CPU's own kernels are the generic ones: no other profile to compare with")
    # another profile than the one this run is under (the whole suite may itself run under the generic one)
    other = profiles.environment("avx2" if os.environ.get("OPENBLAS_CORETYPE") == "Prescott" else "generic")
    here, there = run_here(LAST_BITS, {}), run_here(LAST_BITS, other)
    assert here != there  # the profile changed the kernels, as another CPU would
    verdict = run_here(LAST_BITS + "\n" + VERDICT, {}).splitlines()[-1] + "\n"
    assert verdict == "sum          agrees (rtol 1e-07)\n"
    (pytester.path / "planted.ipynb").write_text(notebook([(LAST_BITS, here), (VERDICT, verdict)]))
    for name, value in other.items():
        monkeypatch.setenv(name, value)  # the kernel nbval starts inherits them, as under the script
    result = pytester.runpytest_inprocess("--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
                                          "-p", "no:benchmark", "planted.ipynb")
    result.assert_outcomes(passed=1, failed=1)  # the last bits differ; the verdict reads the same
    result.stdout.fnmatch_lines(["*planted.ipynb::Cell 0*", f"*{there.strip()}*"])
