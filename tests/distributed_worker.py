"""Run under ``mpirun`` by tests/test_distributed.py: ``python distributed_worker.py CASE
OUTDIR``. Each process initialises nbjax.distributed, runs CASE and writes what it got to
OUTDIR/rank<r>.npz (arrays) or OUTDIR/rank<r>.json (the error a fault case raised); the test
compares them with NumPy and with a single-process run.

The global inputs come from a fixed seed, so the test can rebuild them; each process takes
its own block of shards, as a multi-process pmap expects.
"""

import json
import os
import signal
import sys
import time

import numpy as np

import nbjax
import nbjax.numpy as jnp
from nbjax import lax

SEED = 19


def global_input(shards, shape=(3,), dtype=np.float32, seed=SEED):
    return np.random.default_rng(seed).standard_normal((shards,) + shape).astype(dtype)


def collectives(x):
    """Every collective on one shard's value ``x`` (over axis "i" of the global devices)."""
    size = lax.psum(1, "i")
    return {"psum": lax.psum(x, "i"), "pmean": lax.pmean(x, "i"), "pmax": lax.pmax(x, "i"),
            "pmin": lax.pmin(x, "i"), "axis_index": lax.axis_index("i"),
            "all_gather": lax.all_gather(x, "i"), "all_gather_tiled":
            lax.all_gather(x, "i", tiled=True), "size": size,
            "ppermute": lax.ppermute(x, "i", shift_perm()),
            "psum_scatter": lax.psum_scatter(jnp.outer(jnp.arange(nbjax.device_count(),
                                                                   dtype=x.dtype), x), "i"),
            "psum_int": lax.psum(x.astype(jnp.int32), "i"), "pmax_scalar": lax.pmax(x[0], "i"),
            "psum_f16": lax.psum(x.astype(jnp.float16), "i")}


def shift_perm():
    return shift_perm_for(nbjax.device_count())


def shift_perm_for(n):
    """Each shard sends to the next but one (crossing the processes), the last sends none."""
    return [(j, (j + 2) % n) for j in range(n - 1)]


# --- the data-parallel MLP -------------------------------------------------------------------

def init_mlp(seed=SEED, sizes=(4, 8, 1)):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((m, n)).astype(np.float32) / np.sqrt(m),
             np.zeros(n, np.float32)) for m, n in zip(sizes[:-1], sizes[1:])]


def loss(params, x, y):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return jnp.mean((x @ w + b - y) ** 2)


def train_step(params, x, y):
    """One SGD step on this shard's batch, the gradients averaged over every shard."""
    grads = lax.pmean(nbjax.grad(loss)(params, x, y), "i")
    return nbjax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


def training_data(shards, batch=5):
    rng = np.random.default_rng(SEED + 1)
    x = rng.standard_normal((shards, batch, 4)).astype(np.float32)
    return x, np.sin(x.sum(-1, keepdims=True))


def train(x, y, steps=3):
    """A few data-parallel SGD steps on ``x, y`` (this process's shards); the final
    parameters (replicated on every shard: shard 0's)."""
    params = init_mlp()
    step = nbjax.pmap(train_step, "i", in_axes=(None, 0, 0))
    for _ in range(steps):
        params = nbjax.tree_util.tree_map(lambda p: p[0], step(params, x, y))
    return params


# --- grad through the collectives ------------------------------------------------------------

def grads(x):
    """Gradients (outside pmap) of this process's summed outputs through each collective."""
    n = nbjax.device_count()
    weights = jnp.arange(1.0, n + 1, dtype=x.dtype)

    def through(collective):
        return nbjax.grad(lambda v: jnp.sum(nbjax.pmap(collective, "i")(v)))(x)
    return {"grad_psum": through(lambda v: lax.psum(v * v, "i")),
            "grad_pmean": through(lambda v: lax.pmean(v * v, "i")),
            "grad_all_gather": through(lambda v: lax.all_gather(v, "i") * weights[:, None]),
            "grad_ppermute": through(lambda v: lax.ppermute(v, "i", shift_perm())
                                     * weights[lax.axis_index("i")])}


# --- the cases ----------------------------------------------------------------------------

def local_block(a):
    local = nbjax.local_device_count()
    return a[nbjax.process_index() * local:(nbjax.process_index() + 1) * local]


def case_main(out):
    n = nbjax.device_count()
    x = local_block(global_input(n))
    results = {k: np.asarray(v) for k, v in nbjax.pmap(collectives, "i")(x).items()}
    results.update({k: np.asarray(v) for k, v in grads(x).items()})
    large = nbjax.pmap(lambda v: lax.psum(jnp.tile(v, 300), "i"), "i")  # (met, then moved)
    for scale in (3, 1, 2):  # the last two held while the next runs
        results[f"psum_large{scale}"] = large(x * scale)
    results = {k: np.asarray(v) for k, v in results.items()}
    data = training_data(n)
    params = train(*map(local_block, data))
    results.update({f"param{i}": np.asarray(p)
                    for i, p in enumerate(nbjax.tree_util.tree_leaves(params))})
    results["devices"] = np.array([d.id for d in nbjax.local_devices()])
    results["gathered"] = nbjax.distributed.process_allgather(np.float32(nbjax.process_index()))
    results["broadcast"] = nbjax.distributed.broadcast_one_to_all(
        np.full(2, nbjax.process_index(), np.int64))
    np.savez(out, **results)


def fail_here(v):
    """A host callback that raises on process 1 (inside its shards' program)."""
    def check(v):
        if nbjax.process_index() == 1:
            raise ValueError("process 1's shard failed on purpose")
        return v
    return nbjax.pure_callback(check, nbjax.ShapeDtypeStruct(v.shape, v.dtype), v)


# What process 1 runs instead of process 0's psum(float32[3]), in the mismatch cases.
MISMATCHES = {"mismatch": lambda v: lax.pmax(v, "i"),
              "mismatch_shape": lambda v: lax.psum(jnp.tile(v, 100), "i"),
              "mismatch_kind": lambda v: lax.all_gather(v, "i"),
              "mismatch_large": lambda v: lax.psum(jnp.tile(v, 2000), "i")}


def case_fault(kind):
    x = local_block(global_input(nbjax.device_count()))
    psum = nbjax.pmap(lambda v: lax.psum(v, "i"), "i")
    psum(x)  # one collective that every process completes
    if nbjax.process_index() == 1:
        if kind == "exit":
            sys.exit(0)
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "exit_abruptly":  # no atexit handlers, no notice, no MPI_Finalize
            os._exit(0)
        if kind == "stuck":
            time.sleep(float(os.environ["NBJAX_COLLECTIVE_TIMEOUT"]) + 1)
            return
        if kind in MISMATCHES:
            return nbjax.pmap(MISMATCHES[kind], "i")(x)
    if kind == "raise":
        return nbjax.pmap(lambda v: lax.psum(fail_here(v), "i"), "i")(x)
    return psum(x)


def main(case, outdir):
    nbjax.distributed.initialize()
    path = os.path.join(outdir, f"rank{nbjax.process_index()}")
    if case == "main":
        return case_main(path + ".npz")
    start = time.monotonic()
    try:
        case_fault(case)
        report = {"error": None}
    except Exception as error:  # noqa: BLE001  (what each process saw is the result)
        report = {"error": type(error).__name__, "message": str(error)}
    report["seconds"] = time.monotonic() - start
    with open(path + ".json", "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
