"""Chapter 1, derivatives: finite differences, dual numbers, a derivative by hand."""

import numpy as np

from .checking import call, compare, exercise, finite_difference, random_points, require

# Functions of one number the finite-difference exercise is tried on: (name, function).
SMOOTH = (("sin", np.sin), ("exp", np.exp), ("x**3 - 2*x", lambda x: x ** 3 - 2 * x))


@exercise("ch01.central_difference")
def central_difference(answer):
    """``answer(f, x, h)``: the central difference of ``f`` at ``x`` with step ``h``. Large
    steps make a forward difference visibly different from a central one."""
    for (name, f), x in zip(SMOOTH, random_points(1, len(SMOOTH))):
        for h in (0.1, 0.01):
            what = f"central_difference({name}, x={x:.3f}, h={h})"
            compare(call(answer, f, x, h, what=what), (f(x + h) - f(x - h)) / (2 * h), what,
                    rtol=1e-7)


@exercise("ch01.dual_division")
def dual_division(dual):
    """``dual``: the notebook's class ``Dual(value, tangent)``, now with ``__truediv__``."""
    rng = np.random.default_rng(2)
    for a, da, db in rng.uniform(-2, 2, (4, 3)):
        b = rng.choice([-1, 1]) * rng.uniform(0.5, 2)
        what = f"Dual({a:.3f}, {da:.3f}) / Dual({b:.3f}, {db:.3f})"
        quotient = call(lambda: dual(a, da) / dual(b, db), what=what)
        require(hasattr(quotient, "value") and hasattr(quotient, "tangent"),
                f"{what} should be a Dual, not a {type(quotient).__name__}")
        compare(quotient.value, a / b, f"the value of {what}")
        compare(quotient.tangent, (da * b - a * db) / b ** 2, f"the tangent of {what}")


def bump(x):
    """The function whose derivative the student writes by hand: x e^(-x^2)."""
    return x * np.exp(-x ** 2)


@exercise("ch01.derivative_by_hand")
def derivative_by_hand(answer):
    """``answer(x)``: the derivative of ``bump``, checked against finite differences."""
    for x in random_points(3, 6):
        what = f"your derivative at x = {x:.3f}"
        compare(call(answer, x, what=what), finite_difference(bump, x), what,
                rtol=1e-5, atol=1e-6)
