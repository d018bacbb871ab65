"""The public names nbjax had when ``tools/api_coverage.py`` last ran are still there.

Reads ``tests/data/api_coverage.json`` (no JAX needed): a name recorded as present must still
be defined by its nbjax module (not a generic stub of ``nbjax.numpy.__getattr__``), and a
recorded stub must still say why it is missing. Re-run the tool after adding names.

Also: the functions beyond the array makers that take JAX's ``out_sharding`` keyword
(``jnp.reshape``, ``lax.broadcast_in_dim`` ...) accept None and refuse a sharding (nbjax
arrays have none), naming themselves.
"""

import importlib
import inspect
import json
import pathlib
import re

import numpy as np
import pytest

import nbjax.numpy as jnp
from nbjax import lax
from nbjax.sharding import P

DATA = json.loads((pathlib.Path(__file__).parent / "data" / "api_coverage.json").read_text())
MODULES = DATA["modules"]


def _target(nbjax_name):
    if nbjax_name == "nbjax.Array":
        return jnp.zeros((2, 2))
    return importlib.import_module(nbjax_name)


def _cases(kind):
    return [(row["nbjax"], name) for row in MODULES.values() for name in row[kind]]


def _defined(target, name):
    """The attribute, if the module (or array) defines it rather than a ``__getattr__``."""
    if hasattr(target, "__dict__") and isinstance(target, type(jnp)):
        assert name in vars(target), f"{target.__name__}.{name} is no longer defined"
    return getattr(target, name)


@pytest.mark.parametrize("module,name", _cases("present"))
def test_present_name_still_exists(module, name):
    value = _defined(_target(module), name)
    assert getattr(value, "not_implemented_reason", None) is None, f"{module}.{name} is a stub"


@pytest.mark.parametrize("module,name", _cases("not_implemented"))
def test_stub_still_gives_its_reason(module, name):
    value = _defined(_target(module), name)
    assert isinstance(value.not_implemented_reason, str)
    with pytest.raises(NotImplementedError, match="nbjax"):
        value()


def _keyword_cases():
    return [(row["nbjax"], name, wanted, row["keyword_gaps"].get(name, []))
            for row in MODULES.values() for name, wanted in row["keywords"].items()]


def _takes(fn, keyword):
    parameters = inspect.signature(fn).parameters.values()
    return any(p.kind is inspect.Parameter.VAR_KEYWORD or
               (p.name == keyword and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
               for p in parameters)


@pytest.mark.parametrize("module,name,wanted,gaps", _keyword_cases())
def test_keywords_jax_takes_are_still_taken(module, name, wanted, gaps):
    """Each keyword the JAX function takes (``jnp.std(x, mean=m)``) that nbjax's took when
    the record was made still is (the record's ``keyword_gaps`` are those it did not)."""
    fn = _defined(_target(module), name)
    try:
        inspect.signature(fn)
    except (TypeError, ValueError):
        pytest.skip("no readable signature")
    lost = [k for k in wanted if k not in gaps and not _takes(fn, k)]
    assert not lost, f"{module}.{name} no longer takes {lost} by keyword"


def test_the_record_covers_the_modules_asked_for():
    """The tool compares these modules; an empty record would make the tests above vacuous."""
    for module in ("jax", "jax.numpy", "jax.lax", "jax.nn", "jax.random", "jax.scipy.special",
                   "jax.scipy.linalg", "jax.scipy.stats", "jax.scipy.stats.norm",
                   "jax.tree_util", "jax.Array"):
        assert module in MODULES
    assert len(MODULES["jax.numpy"]["present"]) > 250


# --- JAX's out_sharding keyword on functions that are not array makers -------------------

_A, _B, _V = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4), np.arange(3.0)

# (how a user names the function, a call of it with the keywords given)
_OUT_SHARDING_CASES = [
    ("jnp.bincount", lambda **kw: jnp.bincount(np.array([0, 1, 1, 3]), **kw)),
    ("jnp.broadcast_to", lambda **kw: jnp.broadcast_to(_V, (2, 3), **kw)),
    ("jnp.dot", lambda **kw: jnp.dot(_A, _B, **kw)),
    ("jnp.einsum", lambda **kw: jnp.einsum("ij,jk->ik", _A, _B, **kw)),
    ("jnp.matmul", lambda **kw: jnp.matmul(_A, _B, **kw)),
    ("jnp.percentile", lambda **kw: jnp.percentile(_A, 40, axis=1, **kw)),
    ("jnp.ravel", lambda **kw: jnp.ravel(_A, **kw)),
    ("jnp.repeat", lambda **kw: jnp.repeat(_V, 2, **kw)),
    ("jnp.reshape", lambda **kw: jnp.reshape(_A, (3, 2), **kw)),
    ("jnp.tensordot", lambda **kw: jnp.tensordot(_A, _B, 1, **kw)),
    ("jnp.linalg.tensordot", lambda **kw: jnp.linalg.tensordot(_A, _B, axes=1, **kw)),
    ("lax.broadcast", lambda **kw: lax.broadcast(_V, (2,), **kw)),
    ("lax.broadcast_in_dim", lambda **kw: lax.broadcast_in_dim(_V, (3, 2), (0,), **kw)),
    ("lax.broadcasted_iota", lambda **kw: lax.broadcasted_iota(np.int32, (2, 3), 1, **kw)),
    ("lax.conv_general_dilated",
     lambda **kw: lax.conv_general_dilated(np.ones((1, 1, 5)), np.ones((1, 1, 2)), (1,),
                                           "VALID", **kw)),
    ("lax.reduce", lambda **kw: lax.reduce(_A, 0.0, lax.add, (1,), **kw)),
    ("lax.reshape", lambda **kw: lax.reshape(_A, (3, 2), **kw)),
    ("Array.reshape", lambda **kw: jnp.asarray(_A).reshape(3, 2, **kw)),
]


@pytest.mark.parametrize("what,call", _OUT_SHARDING_CASES, ids=[w for w, _ in
                                                                 _OUT_SHARDING_CASES])
def test_takes_jax_out_sharding_keyword(what, call):
    """``out_sharding=None`` changes nothing (an nbjax array is whole on one device); a
    sharding asked for is refused, naming the function the user called."""
    expected = call()
    np.testing.assert_array_equal(call(out_sharding=None), expected)
    with pytest.raises(NotImplementedError,
                       match=re.escape(what) + ": out_sharding is not supported"):
        call(out_sharding=P("x"))
