"""Checked exercises for the book notebooks (notebooks/ch*.ipynb).

An exercise cell ends with ``check("ch01.central_difference", central_difference)``: the
checker registered under that id tries the answer on inputs of its own and says whether it is
right and, if not, where it goes wrong, without printing the solution::

    >>> from nbjax.teach import check
    >>> check("ch04.clip_gradient", clip_gradient)
    ✘ ch04.clip_gradient: the gradient of 3 * clip_gradient(x) is wrong: its relative error ...

``check`` never raises for a wrong or missing answer (a notebook with unsolved exercises still
runs from top to bottom); it returns a ``Verdict``, true when the answer is right.

The checkers live in one module per chapter (``ch01_derivatives.py``...; importing them
registers them with ``@exercise(id)``); ``checking.py`` has the tools they are written with.
"""

import html
from dataclasses import dataclass

from . import (ch01_derivatives, ch02_autodiff, ch03_arrays, ch04_differentiation,  # noqa: F401
               ch05_jit, ch06_vmap_pmap, ch07_optimisers, ch08_rnn, ch09_case_study,
               ch10_physics)
from .checking import EXERCISES, NotAttempted, Wrong, attempt

RIGHT, WRONG, NOT_ATTEMPTED = "right", "wrong", "not attempted yet"
_MARKS = {RIGHT: ("✔", "#15803d"), WRONG: ("✘", "#b91c1c"), NOT_ATTEMPTED: ("…", "#6b7280")}


@dataclass(frozen=True)
class Verdict:
    """What ``check`` says about an answer: ``status`` (right, wrong, not attempted yet) and
    ``why``. True only when right, so a test can ``assert check(...)``."""
    exercise: str
    status: str
    why: str = ""

    def __bool__(self):
        return self.status == RIGHT

    def __str__(self):
        mark = _MARKS[self.status][0]
        return f"{mark} {self.exercise}: {self.status}" + (f": {self.why}" if self.why else "")

    __repr__ = __str__

    def _repr_html_(self):
        mark, colour = _MARKS[self.status]
        why = f": {html.escape(self.why)}" if self.why else ""
        return (f'<div style="color:{colour}"><b>{mark} {html.escape(self.exercise)}: '
                f'{self.status}</b>{why}</div>')


def check(exercise_id, answer):
    """The ``Verdict`` on ``answer`` to the exercise ``exercise_id``."""
    if exercise_id not in EXERCISES:
        raise KeyError(f"no exercise {exercise_id!r}; the exercises are: "
                       f"{', '.join(sorted(EXERCISES))}")
    try:
        EXERCISES[exercise_id](attempt(answer))
    except NotAttempted as why:
        return Verdict(exercise_id, NOT_ATTEMPTED, str(why))
    except Wrong as why:
        return Verdict(exercise_id, WRONG, str(why))
    return Verdict(exercise_id, RIGHT, "well done")

