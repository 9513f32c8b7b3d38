import numpy as np

from haaw.tools.gradcheck import GradcheckReport, Row, gradcheck


def test_a_report_reads_the_same_whatever_the_last_bits():
    """Finite differences on another CPU are off by other rounding errors: the printed report must not show them."""
    def report(wobble):
        return str(GradcheckReport([Row("w", np.array([36.0]), np.array([36.0 * (1 + wobble)]), True),
                                    Row("X", np.ones((2, 3)), np.ones((2, 3)) * (1 - wobble), True)], 1e-5, 1e-8))
    assert report(1e-10) == report(3e-10) == report(2e-9)
    assert report(1e-10).splitlines() == [
        "gradcheck: 2 input(s), all agree (test: |backward - finite diff.| <= 1e-08 + 1e-05·|finite diff.|)",
        "  input           backward    finite diff.",
        "  w                     36              36  ok",
        "  X            (6 entries)                  ok"]


def test_a_wrong_gradient_is_reported_with_its_error():
    report = gradcheck(lambda w: w * w, 3.0)
    assert report.ok and report.worst < 1e-8
    bad = GradcheckReport([Row("w", np.array([5.0]), np.array([6.0]), False)], 1e-5, 1e-8)
    assert not bad.ok and str(bad).splitlines()[-1] == "  w                      5               6  WRONG (relative error 0.17)"
    assert "MISMATCH" in str(bad).splitlines()[0]
