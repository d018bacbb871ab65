"""Chapter 9, a case study (a digit classifier): scaling features with the training set's
statistics only, a weight penalty over a pytree of parameters, per-class recall read from a
confusion matrix."""

import numpy as np

from .. import numpy as jnp
from .checking import Wrong, as_array, call, compare, exercise, require


def _features(seed, n):
    """``n`` rows of 5 features on different scales, the last one constant (like the digits'
    always-blank corner pixels)."""
    rng = np.random.default_rng(seed)
    x = rng.normal([0.0, 3.0, -1.0, 10.0, 0.0], [1.0, 0.5, 4.0, 2.0, 1.0], (n, 5))
    x[:, -1] = 2.0
    return x.astype(np.float32)


@exercise("ch09.standardize")
def standardize(answer):
    """``answer(x_train, x_test)``: both sets scaled with the *training* set's per-feature mean
    and standard deviation; a constant feature becomes 0, not nan."""
    x_train, x_test = _features(20, 40), _features(21, 15)
    what = "standardize(x_train, x_test)"
    got = call(answer, jnp.asarray(x_train), jnp.asarray(x_test), what=what)
    require(isinstance(got, tuple) and len(got) == 2,
            f"{what} should return a pair: (scaled x_train, scaled x_test)")
    train, test = (as_array(g, f"a result of {what}") for g in got)
    mean, std = x_train.mean(0), x_train.std(0)
    scale = np.where(std > 0, std, 1.0)
    for name, got_x, x in (("x_train", train, x_train), ("x_test", test, x_test)):
        require(np.isfinite(got_x).all(),
                f"the scaled {name} has nan or infinite values: a constant feature has a "
                "standard deviation of 0")
        if name == "x_test" and got_x.shape == x.shape:
            own = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1.0)
            require(not np.allclose(got_x[:, :-1], own[:, :-1], atol=1e-4),
                    "x_test is scaled with its own mean and standard deviation: use the "
                    "training set's, as a model in use sees one example at a time")
        compare(got_x, (x - mean) / scale, f"the scaled {name}", rtol=1e-4, atol=1e-4)


def _params(seed):
    rng = np.random.default_rng(seed)
    shapes = [((6, 4), (4,)), ((4, 3), (3,))]
    return [tuple(jnp.asarray(rng.normal(size=s), jnp.float32) for s in layer)
            for layer in shapes]


@exercise("ch09.l2_penalty")
def l2_penalty(answer):
    """``answer(params)``: the sum of the squares of every weight matrix of ``params`` (a list
    of ``(w, b)`` layers), biases left out."""
    for seed in (22, 23):
        params = _params(seed)
        what = "l2_penalty(params)"
        got = as_array(call(answer, params, what=what), f"the result of {what}")
        weights = sum(float(np.sum(np.asarray(w, np.float64) ** 2)) for w, _ in params)
        biases = sum(float(np.sum(np.asarray(b, np.float64) ** 2)) for _, b in params)
        require(got.shape == (), f"{what} should be a number, not an array of shape {got.shape}")
        require(not np.isclose(got, weights + biases, rtol=1e-4),
                f"{what} includes the biases: penalise the weight matrices only")
        compare(got, weights, f"the result of {what}", rtol=1e-4)


@exercise("ch09.recall_per_class")
def recall_per_class(answer):
    """``answer(confusion)``: for each true class (a row of ``confusion``), the fraction of
    its examples predicted right; 0 for a class with no example."""
    rng = np.random.default_rng(24)
    confusion = rng.integers(0, 6, (4, 4)) + np.diag(rng.integers(10, 30, 4))
    confusion[2] = 0   # a class absent from the test set
    what = "recall_per_class(confusion)"
    got = as_array(call(answer, jnp.asarray(confusion, jnp.int32), what=what),
                   f"the result of {what}")
    diagonal = np.diag(confusion).astype(np.float64)
    rows, columns = confusion.sum(1), confusion.sum(0)
    want = np.where(rows > 0, diagonal / np.maximum(rows, 1), 0.0)
    if got.shape == want.shape and np.allclose(got, diagonal / columns, rtol=1e-4):
        raise Wrong(f"{what} divides by the column sums, the counts of each *predicted* "
                    "class (that is precision): the rows are the true classes")
    require(got.shape != want.shape or np.isfinite(got).all(),
            f"{what} is nan or infinite for a class with no example: make it 0")
    compare(got, want, f"the result of {what}", rtol=1e-4)

