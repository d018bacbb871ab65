"""Chapter 3, arrays: updates with ``.at[]``, type promotion, random keys."""

import numpy as np

from .. import numpy as jnp
from .. import random
from .checking import (NotAttempted, Wrong, as_array, call, compare, exercise, is_placeholder,
                       require)


@exercise("ch03.count_indices")
def count_indices(answer):
    """``answer(counts, idx)``: ``counts`` with one added at every index of ``idx``, repeated
    indices counting once per occurrence."""
    rng = np.random.default_rng(6)
    counts = rng.integers(0, 3, 6).astype(np.int32)
    idx = np.array([1, 4, 1, 0, 4, 1], np.int32)
    want = counts.copy()
    np.add.at(want, idx, 1)
    what = "count_indices(counts, idx) with repeated indices"
    got = as_array(call(answer, jnp.asarray(counts), jnp.asarray(idx), what=what), what)
    once = counts.copy()
    once[idx] += 1   # NumPy's fancy assignment: a repeated index counts once
    if got.shape == want.shape and np.array_equal(got, once):
        raise Wrong(f"{what}: where an index repeats, it should count every time it appears")
    compare(got, want, f"the result of {what}")


# The promotion quiz: an expression -> (left dtype, right dtype or a Python scalar).
PROMOTIONS = {
    "int8 + uint8": ("int8", "uint8"),
    "int32 + float16": ("int32", "float16"),
    "uint8 + 1": ("uint8", 1),
    "float16 + 1.0": ("float16", 1.0),
    "bfloat16 + float16": ("bfloat16", "float16"),
}


def _promoted(left, right):
    """The dtype nbjax gives ``left + right`` (the truth the quiz is checked against)."""
    right = right if isinstance(right, (int, float)) else jnp.ones(2, right)
    return np.dtype((jnp.ones(2, left) + right).dtype).name


def _dtype_name(value):
    try:
        return np.dtype(value).name
    except TypeError:
        return None


@exercise("ch03.promotion")
def promotion(answer):
    """``answer``: a dict from each expression of ``PROMOTIONS`` to the dtype it gives."""
    require(isinstance(answer, dict), "the answer should be a dict: expression -> dtype")
    missing = [e for e in PROMOTIONS if e not in answer]
    require(not missing, f"the answer has no entry for {', '.join(map(repr, missing))}")
    unanswered = [e for e in PROMOTIONS if is_placeholder(answer[e])]
    if unanswered:
        raise NotAttempted(f"fill in the entries for {', '.join(map(repr, unanswered))}")
    wrong = [e for e, (left, right) in PROMOTIONS.items()
             if _dtype_name(answer[e]) != _promoted(left, right)]
    require(not wrong, f"{len(PROMOTIONS) - len(wrong)} of {len(PROMOTIONS)} right; look "
                       f"again at {', '.join(map(repr, wrong))}")


@exercise("ch03.two_samples")
def two_samples(answer):
    """``answer(key)``: two independent standard normal samples of shape (3,)."""
    key = random.PRNGKey(7)
    what = "two_samples(key)"
    first = call(answer, key, what=what)
    require(isinstance(first, tuple) and len(first) == 2, f"{what} should return a pair")
    a, b = (as_array(s, f"a sample of {what}") for s in first)
    require(a.shape == b.shape == (3,), f"the samples of {what} should both have shape (3,)")
    again = tuple(np.asarray(s) for s in call(answer, key, what=what))
    require(np.array_equal(a, again[0]) and np.array_equal(b, again[1]),
            "calling it twice with the same key gives different samples: use only the key "
            "you are given")
    other = tuple(np.asarray(s) for s in call(answer, random.PRNGKey(8), what=what))
    require(not np.array_equal(a, other[0]), "another key gives the same samples: the "
                                             "samples should come from the key")
    require(not np.array_equal(a, b), "your two samples are equal: one key gives one set of "
                                      "numbers, so make two keys")
    reused = np.asarray(random.normal(key, (3,)))
    require(not (np.array_equal(a, reused) or np.array_equal(b, reused)),
            "one sample is drawn with the key you were given, which you also split: after a "
            "split, use only the new keys")
