"""Record JAX's random streams for tests/test_random.py (NEEDS JAX; the tests do not run it).

    /path/to/python-with-jax tests/data/record_random_reference.py

The reference is JAX 0.10.2 on CPU in its default configuration (threefry2x32 with
jax_threefry_partitionable=True). Every case is a call ``nbjax.random.<fn>(key, *args,
**kwargs)`` described by a JSON spec; the file stores the specs and JAX's outputs, so the
test replays the same calls without knowing JAX. Arrays in specs are ``{"array": values,
"dtype": name}``; a ``"key"`` of ``{"seed": s}`` is ``PRNGKey(s)``; ``"x64"`` cases run
with 64-bit types enabled. A ``"grad"`` case records d(sum of samples)/d(argument 0).
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np

SEEDS = [0, 1, 42, 2 ** 31 - 1, -1]
SHAPES = [(), (3,), (2, 3), (1000,)]


def arr(values, dtype):
    return {"array": values, "dtype": dtype}


def cases():
    out = []

    def add(name, fn, key=0, args=(), kwargs=None, x64=False, grad=False):
        out.append(dict(name=name, fn=fn, key=None if key is None else {"seed": key},
                        args=list(args), kwargs=kwargs or {}, x64=x64, grad=grad))

    for seed in SEEDS + [2 ** 40, 2 ** 32 + 5]:
        add(f"PRNGKey/{seed}", "PRNGKey", None, [seed])
    for seed in [-1, 2 ** 40, 2 ** 32 + 5, 2 ** 63 - 1]:
        add(f"PRNGKey/{seed}/x64", "PRNGKey", None, [seed], x64=True)
    for seed in SEEDS:
        for num in [2, 3, [2, 3]]:
            add(f"split/{seed}/{num}", "split", seed, [num])
        for data in [0, 1, 7, 2 ** 32 - 1]:
            add(f"fold_in/{seed}/{data}", "fold_in", seed, [data])
        for shape in SHAPES:
            add(f"bits/{seed}/{shape}", "bits", seed, [list(shape)])
            add(f"uniform/{seed}/{shape}", "uniform", seed, [list(shape)])
            add(f"normal/{seed}/{shape}", "normal", seed, [list(shape)])
            add(f"randint/{seed}/{shape}", "randint", seed, [list(shape), -5, 17])
    for dtype in ["uint8", "uint16", "uint32"]:
        add(f"bits/{dtype}", "bits", 3, [[100]], {"dtype": dtype})
    add("bits/uint64/x64", "bits", 3, [[100]], {"dtype": "uint64"}, x64=True)
    for dtype in ["float16", "float32"]:
        add(f"uniform/{dtype}", "uniform", 5, [[1000]], {"dtype": dtype})
        add(f"uniform/range/{dtype}", "uniform", 5, [[2, 3]],
            {"dtype": dtype, "minval": -2.5, "maxval": arr([1.0, 2.0, 30.0], dtype)})
        add(f"normal/{dtype}", "normal", 6, [[1000]], {"dtype": dtype})
    add("uniform/float64/x64", "uniform", 5, [[1000]], {"dtype": "float64"}, x64=True)
    add("normal/float64/x64", "normal", 6, [[1000]], {"dtype": "float64"}, x64=True)
    for dtype, lo, hi in [("int32", 0, 10), ("uint32", 0, 100), ("int8", -128, 128),
                          ("uint8", 0, 256), ("int16", -7, 3), ("int32", -2 ** 31, 2 ** 31 - 1),
                          ("int32", 5, 5), ("int32", 9, 2)]:
        add(f"randint/{dtype}/{lo}/{hi}", "randint", 8, [[1000], lo, hi], {"dtype": dtype})
    add("randint/arrays", "randint", 8, [[2, 3], arr([0, -10, 100], "int32"), 200])
    add("randint/int64/x64", "randint", 8, [[1000], -2 ** 40, 2 ** 40], {"dtype": "int64"},
        x64=True)
    add("bernoulli/scalar", "bernoulli", 9, [0.3, [1000]])
    add("bernoulli/array", "bernoulli", 9, [arr([0.1, 0.5, 0.9], "float32")])
    add("bernoulli/high", "bernoulli", 9, [0.3, [100]], {"mode": "high"})
    logits = arr([[0.1, 2.0, -1.0, 0.5, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0],
                  [-3.0, 0.0, 3.0, 0.2, 0.1]], "float32")
    add("categorical/last", "categorical", 10, [logits])
    add("categorical/axis0", "categorical", 10, [logits], {"axis": 0})
    add("categorical/shape", "categorical", 10, [logits], {"shape": [200, 3]})
    add("categorical/noreplace", "categorical", 10, [logits], {"shape": [4, 3],
                                                              "replace": False})
    add("categorical/high", "categorical", 10, [logits], {"shape": [50, 3], "mode": "high"})
    add("choice/int", "choice", 11, [10, [5]])
    add("choice/noreplace", "choice", 11, [10, [5]], {"replace": False})
    add("choice/p", "choice", 11, [4, [100]], {"p": arr([0.1, 0.2, 0.3, 0.4], "float32")})
    add("choice/p/noreplace", "choice", 11, [4, [3]],
        {"p": arr([0.1, 0.2, 0.3, 0.4], "float32"), "replace": False})
    add("choice/array/axis1", "choice", 11, [arr([[1, 2, 3], [4, 5, 6]], "int32"), [2]],
        {"axis": 1})
    add("permutation/int", "permutation", 12, [10])
    add("permutation/large", "permutation", 12, [1000])
    matrix = arr(np.arange(12).reshape(4, 3).tolist(), "int32")
    add("permutation/axis0", "permutation", 12, [matrix])
    add("permutation/axis1", "permutation", 12, [matrix], {"axis": 1})
    add("permutation/independent", "permutation", 12, [matrix], {"independent": True})
    for fn in ["gumbel", "exponential", "laplace", "logistic", "cauchy"]:
        add(f"{fn}", fn, 13, [[1000]])
        add(f"{fn}/scalar", fn, 1, [[]])
        add(f"{fn}/float64/x64", fn, 13, [[100]], {"dtype": "float64"}, x64=True)
    add("gumbel/high", "gumbel", 13, [[100]], {"mode": "high"})
    alphas = arr([0.3, 1.0, 2.5, 10.0], "float32")
    add("gamma", "gamma", 14, [alphas, [250, 4]])
    add("gamma/scalar", "gamma", 14, [0.7])
    add("gamma/float64/x64", "gamma", 14, [arr([0.3, 1.0, 2.5, 10.0], "float64"), [25, 4]],
        {"dtype": "float64"}, x64=True)
    add("gamma/grad", "gamma", 14, [alphas, [25, 4]], grad=True)
    add("loggamma", "loggamma", 14, [alphas, [25, 4]])
    add("beta", "beta", 15, [0.5, 2.0, [500]])
    add("dirichlet", "dirichlet", 16, [arr([0.5, 1.0, 2.0], "float32"), [100]])
    add("poisson/small", "poisson", 17, [3.0, [500]])
    add("poisson/large", "poisson", 17, [50.0, [500]])
    add("poisson/mixed", "poisson", 17, [arr([0.0, 0.5, 5.0, 20.0, 100.0], "float32")])
    add("truncated_normal", "truncated_normal", 18, [-1.0, 2.0, [1000]])
    add("truncated_normal/tail", "truncated_normal", 18, [0.5, 3.0, [100]])
    add("t", "t", 19, [3.0, [200]])
    add("chisquare", "chisquare", 19, [4.0, [200]])
    add("pareto", "pareto", 19, [2.0, [200]])
    add("rademacher", "rademacher", 19, [[100]])
    add("generalized_normal", "generalized_normal", 20, [1.5, [200]])
    add("ball", "ball", 20, [3], {"shape": [50]})
    add("ball/p1", "ball", 20, [2], {"p": 1.0, "shape": [20]})
    cov = arr([[2.0, 0.6, 0.0], [0.6, 1.0, 0.3], [0.0, 0.3, 0.5]], "float32")
    add("multivariate_normal", "multivariate_normal", 22,
        [arr([1.0, -1.0, 0.0], "float32"), cov], {"shape": [50]})
    add("orthogonal", "orthogonal", 23, [4])
    add("orthogonal/batched", "orthogonal", 23, [3], {"shape": [2], "m": 5})
    return out


def decode(value):
    if isinstance(value, dict) and "array" in value:
        return jnp.asarray(np.array(value["array"], value["dtype"]))
    return value


def run(case):
    fn = getattr(jax.random, case["fn"])
    args = [decode(a) for a in case["args"]]
    kwargs = {k: decode(v) for k, v in case["kwargs"].items()}
    if "shape" in kwargs:
        kwargs["shape"] = tuple(kwargs["shape"])
    if case["fn"] in ("split",) and isinstance(args[0], list):
        args[0] = tuple(args[0])
    if case["key"] is None:
        return fn(*args, **kwargs)
    key = jax.random.PRNGKey(case["key"]["seed"])
    if case["grad"]:
        return jax.grad(lambda a: fn(key, a, *args[1:], **kwargs).sum())(args[0])
    return fn(key, *args, **kwargs)


def main():
    specs, values = [], {}
    for i, case in enumerate(cases()):
        jax.config.update("jax_enable_x64", case["x64"])
        values[f"case{i}"] = np.asarray(run(case))
        specs.append(case)
    jax.config.update("jax_enable_x64", False)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "random_jax_reference.npz")
    np.savez_compressed(path, specs=np.array(json.dumps(specs)),
                        jax_version=np.array(jax.__version__), **values)
    print(f"wrote {len(specs)} cases to {path}")


if __name__ == "__main__":
    main()
