"""Fidelity to JAX 0.10.2, round six (a sweep of user programs against jax): operators
refuse list operands as JAX does, ``random.choice`` takes arrays only, ``where`` with one
of ``x``/``y`` is JAX's TypeError, ``lax.top_k`` returns a list, ``make_jaxpr`` with
``return_shape`` gives ``ShapeDtypeStruct``s, ``searchsorted`` counts in int32 under x64
too, ``unravel_index`` of a Python int is weakly typed, and ``lax.cond`` takes JAX's old
five-argument form."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax, random


@pytest.mark.parametrize("make, words", [
    (lambda: [1, 2] * jnp.asarray(2), "'list' and 'Array'"),
    (lambda: jnp.asarray(2) * [1, 2], "'Array' and 'list'"),
    (lambda: (1, 2) * jnp.asarray(2), "'tuple' and 'Array'"),
])
def test_a_list_times_an_array_is_a_type_error_not_a_repeated_list(make, words):
    with pytest.raises(TypeError, match=rf"unsupported operand type\(s\) for \*: {words}"):
        make()
    assert int(jnp.asarray(2) * 3) == 6 and int(3 * jnp.asarray(2)) == 6


def test_choice_takes_arrays_and_ints_only():
    with pytest.raises(TypeError, match="choice requires ndarray or scalar arguments, got "
                                        "<class 'list'> at position 0"):
        random.choice(random.key(0), [1, 2, 3])
    assert random.choice(random.key(0), 5, (3,)).shape == (3,)


@pytest.mark.parametrize("args, position", [((jnp.ones(2),), 2), ((None, jnp.ones(2)), 1)])
def test_where_with_one_of_x_and_y_names_the_missing_one(args, position):
    with pytest.raises(TypeError, match=f"where requires ndarray or scalar arguments, got "
                                        f"<class 'NoneType'> at position {position}"):
        jnp.where(jnp.ones(2) > 0, *args)


def test_top_k_returns_a_list_and_return_shape_shape_dtype_structs():
    values, indices = out = lax.top_k(jnp.arange(5.0), 2)
    assert isinstance(out, list) and values.tolist() == [4.0, 3.0]
    assert indices.tolist() == [4, 3]
    _, shape = nbjax.make_jaxpr(lambda x: (x * 2, x > 0), return_shape=True)(1.0)
    assert all(isinstance(s, nbjax.ShapeDtypeStruct) for s in shape)
    assert shape[0].dtype == np.float32 and shape[0].weak_type and shape[1].dtype == bool


@pytest.mark.parametrize("method", ["scan", "compare_all"])
def test_searchsorted_counts_in_int32_under_x64(x64, method):
    out = jnp.searchsorted(jnp.arange(5.0), jnp.array([2.5, -1.0, 9.0]), method=method)
    assert out.dtype == np.int32 and out.tolist() == [3, 0, 5]
    assert jnp.digitize(jnp.arange(3.0), jnp.arange(2.0)).dtype == np.int32


def test_unravel_index_of_a_python_int_is_weakly_typed():
    rows, cols = jnp.unravel_index(9, (2, 4))
    assert rows.weak_type and cols.weak_type and (int(rows), int(cols)) == (1, 3)
    rows, cols = jnp.unravel_index(np.int32(5), (2, 4))
    assert not rows.weak_type and (int(rows), int(cols)) == (1, 1)
    rows, cols = jnp.unravel_index(jnp.array([1, 7, -1]), (2, 4))
    assert rows.tolist() == [0, 1, 1] and cols.tolist() == [1, 3, 3] and not rows.weak_type


def test_cond_in_jax_s_old_five_argument_form():
    """``cond(pred, true_operand, true_fun, false_operand, false_fun)``, which JAX 0.10
    still takes: each branch gets its own operand, under transformations too."""
    def f(p, a):
        return lax.cond(p, a, lambda x: x * 3, 5.0, lambda x: x - 1)
    assert float(f(True, 2.0)) == 6.0 and float(f(False, 2.0)) == 4.0
    assert float(nbjax.jit(f)(False, 2.0)) == 4.0
    assert float(nbjax.grad(f, argnums=1)(True, 2.0)) == 3.0
    with pytest.raises(TypeError, match="should be callable"):
        lax.cond(True, 2.0, lambda x: x, 5.0)


def test_determinants_of_a_weakly_typed_matrix_are_weakly_typed():
    """As JAX's: ``det`` and ``slogdet`` keep the weak type of their matrix (a broadcast
    Python float), so that they promote with float16 arrays as a Python scalar would."""
    w = jnp.broadcast_to(jnp.asarray(2.0), (2, 2)).at[0, 0].set(5.0)   # [[5, 2], [2, 2]]
    assert w.weak_type
    assert jnp.linalg.det(w).weak_type and nbjax.jit(jnp.linalg.det)(w).weak_type
    assert all(r.weak_type for r in jnp.linalg.slogdet(w))
    assert all(r.weak_type for r in jnp.linalg.slogdet(w, method="qr"))
    np.testing.assert_allclose(float(jnp.linalg.det(w)), 6.0, rtol=1e-6)
    strong = jnp.asarray(np.eye(2, dtype=np.float32) * 3)
    assert not jnp.linalg.det(strong).weak_type
    assert (jnp.linalg.det(w) * jnp.ones(2, jnp.float16)).dtype == jnp.float16
