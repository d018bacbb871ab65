"""The tools the exercise checkers are written with.

A checker calls the student's answer on inputs it makes up, compares with what is expected
and, at the first difference, raises ``Wrong`` with a message that says *where* the answer
goes wrong (which input, which element, a wrong sign, a wrong shape) but not what the right
value is: the student should find that out. ``NotAttempted`` is raised for the placeholders
that the notebooks' exercise cells start with (``...`` or a function whose body is ``...``).
"""

import numpy as np

EXERCISES = {}   # id -> checker: a function of the answer that raises Wrong or NotAttempted


def exercise(exercise_id):
    """Register the decorated function as the checker of ``exercise_id``."""
    def register(checker):
        assert exercise_id not in EXERCISES, f"two checkers for {exercise_id}"
        EXERCISES[exercise_id] = checker
        return checker
    return register


class Wrong(Exception):
    """The answer is wrong; the message says where."""


class NotAttempted(Exception):
    """The answer is still the exercise's placeholder."""


def is_placeholder(value):
    """``...`` and ``None``: what an exercise cell holds, or a ``...`` function returns,
    before the student writes anything."""
    return value is None or value is Ellipsis


def require(condition, message):
    """Raise ``Wrong(message)`` unless ``condition``."""
    if not condition:
        raise Wrong(message)


def attempt(answer, what="the answer"):
    """``answer``, unless it is the placeholder."""
    if is_placeholder(answer):
        shown = "..." if answer is Ellipsis else "None"
        raise NotAttempted(f"{what} is still {shown}: replace it with your code")
    return answer


def call(fn, *args, what="your function"):
    """``fn(*args)``; an exception raised by the student's code becomes ``Wrong``, and a
    ``None`` or ``...`` result (a body still ``...``) means the exercise is not attempted."""
    require(callable(attempt(fn)), f"the answer should be a function, not a {type(fn).__name__}")
    try:
        result = fn(*args)
    except (Wrong, NotAttempted):
        raise
    except Exception as error:   # the student's bug: report it, do not crash the notebook
        raise Wrong(f"{what} raised {type(error).__name__}: {error}") from None
    if is_placeholder(result):
        raise NotAttempted(f"{what} returns {result!r}: replace the ... with your code "
                           "(or is a return missing?)")
    return result


def as_array(value, what):
    """``value`` as a NumPy array (nbjax arrays, Python numbers, lists...)."""
    try:
        return np.asarray(value)
    except Exception:
        raise Wrong(f"{what} should be a number or an array, not a "
                    f"{type(value).__name__}") from None


def compare(got, want, what, rtol=1e-5, atol=1e-8):
    """``got`` equals ``want`` within the tolerances, in shape and every element; the message
    of a difference names the element and the kind of mistake, never the expected value."""
    got, want = as_array(got, what), np.asarray(want)
    require(got.shape == want.shape,
            f"{what} has shape {got.shape}, but it should have shape {want.shape}")
    if want.dtype == bool or np.issubdtype(want.dtype, np.integer):
        bad = got != want
    else:
        got = got.astype(np.float64)
        want = want.astype(np.float64)
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return
    where = "" if want.ndim == 0 else f" at index {tuple(int(i) for i in np.argwhere(bad)[0])}"
    raise Wrong(f"{what} is wrong{where}: {_kind_of_mistake(got, want, rtol, atol)}")


def _kind_of_mistake(got, want, rtol, atol):
    """A hint on how ``got`` differs from ``want``, revealing no expected value."""
    if not np.isfinite(got).all() and np.isfinite(want).all():
        return "it is nan or infinite where the answer is finite"
    if got.dtype == bool or not np.issubdtype(got.dtype, np.inexact):
        return f"{int((got != want).sum())} of {want.size} values differ"
    if np.allclose(got, -want, rtol=rtol, atol=atol):
        return "it has the wrong sign"
    if _is_multiple(got, want, atol):
        return "it is a constant multiple of the answer (a factor is missing or extra)"
    error = np.max(np.abs(got - want) / np.maximum(np.abs(want), atol))
    return f"its relative error is {error:.1e}"


def _is_multiple(got, want, atol):
    """``got`` is ``want`` times one factor: several elements share it, or it is a whole
    number or the inverse of one (a single number is always some multiple of another)."""
    nonzero = np.abs(want) > atol
    if not nonzero.any() or np.any(np.abs(got[~nonzero]) > atol):
        return False
    ratio = got[nonzero] / want[nonzero]
    if not np.allclose(ratio, ratio.flat[0], rtol=1e-3):
        return False
    r = abs(ratio.flat[0])
    whole = any(abs(v - round(v)) < 1e-3 * v and round(v) > 1 for v in (r, 1 / max(r, 1e-300)))
    return ratio.size > 1 or whole


def finite_difference(f, x, h=1e-6):
    """The central difference of a float64 function of one number: the checkers' way to know a
    derivative without storing its formula."""
    return (f(x + h) - f(x - h)) / (2 * h)


def random_points(seed, n, low=-2.0, high=2.0):
    """``n`` reproducible random numbers in [low, high): the inputs a checker tries."""
    return np.random.default_rng(seed).uniform(low, high, n)
