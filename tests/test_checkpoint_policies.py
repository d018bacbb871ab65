"""Checkpoint policies and names (``jax.checkpoint_policies``, ``jax.ad_checkpoint``): the
values a policy keeps are the ones reverse mode carries to the backward pass (read with
``saved_residuals``), every policy gives the same derivatives as no checkpoint, to second
order, and ``checkpoint_name`` is the identity under every transformation."""

import pickle

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import ad_checkpoint, checkpoint_policies as cp
from nbjax.test_util import check_grads

from helpers import assert_close, random_array

try:
    import jax
except ImportError:  # JAX is a test reference only
    jax = None

RNG = np.random.default_rng(11)


def layer(lib, checkpoint_name):
    """A small network step: products, element-wise work, a named value."""
    def f(x, w):
        h = lib.numpy.sin(x @ w)
        named = checkpoint_name(lib.numpy.cos(h), "hidden")
        return lib.numpy.sum(lib.numpy.tanh(named) @ w)
    return f


f = layer(nbjax, ad_checkpoint.checkpoint_name)

POLICIES = {
    "none": None,
    "everything": cp.everything_saveable,
    "nothing": cp.nothing_saveable,
    "dots": cp.dots_saveable,
    "dots, no batch dims": cp.dots_with_no_batch_dims_saveable,
    "only hidden": cp.save_only_these_names("hidden"),
    "names but hidden": cp.save_any_names_but_these("hidden"),
    "all but hidden": cp.save_anything_except_these_names("hidden"),
    "both": cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("hidden")),
    "offload dots": cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
    "save and offload": cp.save_and_offload_only_these_names(
        names_which_can_be_saved=["hidden"], names_which_can_be_offloaded=[],
        offload_src="device", offload_dst="pinned_host"),
    "custom": lambda prim, *avals, **params: prim is nbjax.lax.dot_general_p,
}


def _operands(n=4):
    return random_array(RNG, (n, n)), random_array(RNG, (n, n))


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_gives_the_derivatives_without_checkpoint(name):
    x, w = _operands()
    g = nbjax.checkpoint(f, policy=POLICIES[name])
    expected = nbjax.grad(f, argnums=(0, 1))(x, w)
    for derivative in (nbjax.grad(g, argnums=(0, 1)), nbjax.jit(nbjax.grad(g, argnums=(0, 1)))):
        for got, want in zip(derivative(x, w), expected):
            assert_close(got, want, rtol=1e-5, scale=np.abs(want).max())
    check_grads(g, (x.astype(np.float64) / 4, w.astype(np.float64) / 4), order=2,
                eps=1e-3, rtol=2e-2, atol=2e-2)
    batched = nbjax.vmap(nbjax.grad(g), in_axes=(0, None))(np.stack([x, x * 2]), w)
    for row, xi in zip(batched, (x, x * 2)):
        assert_close(row, nbjax.grad(f)(xi, w), rtol=1e-5, scale=4)


def _kinds(f, *args):
    """What each saved value is, without its line: "from the argument x", "output of cos"."""
    return sorted(description.split(" from /")[0].split(" from <")[0]
                  for _, description in ad_checkpoint.saved_residuals(f, *args))


def test_the_policy_decides_what_the_backward_pass_receives():
    x, w = _operands()
    args = ["from the argument w", "from the argument x"]
    assert _kinds(nbjax.checkpoint(f), x, w) == args
    assert _kinds(nbjax.checkpoint(f, policy=cp.nothing_saveable), x, w) == args
    assert _kinds(nbjax.checkpoint(f, policy=cp.dots_saveable), x, w) == \
        sorted(args + ["output of dot_general"])
    assert _kinds(nbjax.checkpoint(f, policy=cp.save_only_these_names("hidden")), x, w) == \
        sorted(args + ["named 'hidden'"])
    assert _kinds(nbjax.checkpoint(f, policy=cp.save_any_names_but_these("other")), x, w) == \
        sorted(args + ["named 'hidden'"])
    # Keeping everything keeps what reverse mode keeps without a checkpoint.
    assert len(ad_checkpoint.saved_residuals(
        nbjax.checkpoint(f, policy=cp.everything_saveable), x, w)) == \
        len(ad_checkpoint.saved_residuals(f, x, w))


def test_saved_values_are_not_recomputed():
    """With the products saved, the backward pass computes no product of the forward pass:
    only the two transposed products per forward product that every gradient needs."""
    x, w = _operands()

    def dots(policy):
        closed = nbjax.make_jaxpr(nbjax.grad(nbjax.checkpoint(f, policy=policy)))(x, w)
        outside = [e for e in closed.eqns if e.primitive.name != "checkpoint"]
        return sum(e.primitive.name == "dot_general" for e in outside)
    assert dots(cp.dots_saveable) == dots(None) - 1  # x @ w is not computed again


def test_print_saved_residuals_names_arguments_and_lines(capsys):
    x, w = _operands()

    def step(x, params):
        return f(x, params["w"])
    ad_checkpoint.print_saved_residuals(
        nbjax.checkpoint(step, policy=cp.save_only_these_names("hidden")), x, {"w": w})
    lines = capsys.readouterr().out.splitlines()
    assert "f32[4,4] from the argument x" in lines
    assert "f32[4,4] from the argument params['w']" in lines
    named = [line for line in lines if "named 'hidden'" in line]
    assert len(named) == 1 and __file__ in named[0] and "(f)" in named[0]


def test_print_saved_residuals_without_checkpoint(capsys):
    ad_checkpoint.print_saved_residuals(lambda x: jnp.sum(jnp.sin(x)), 1.0)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("f32[] output of cos from ")


@pytest.mark.skipif(jax is None, reason="JAX is a test reference only")
@pytest.mark.parametrize("name", ["none", "dots", "only hidden", "names but hidden"])
def test_the_saved_values_are_jaxs(name):
    """The same kinds of value as ``jax.ad_checkpoint.saved_residuals``, for the same policy."""
    from jax._src.ad_checkpoint import saved_residuals
    from jax.ad_checkpoint import checkpoint_name
    jax_policy = {"none": None, "dots": jax.checkpoint_policies.dots_saveable,
                  "only hidden": jax.checkpoint_policies.save_only_these_names("hidden"),
                  "names but hidden": jax.checkpoint_policies.save_any_names_but_these(
                      "hidden")}[name]
    x, w = _operands()
    jax_f = jax.checkpoint(layer(jax, checkpoint_name), policy=jax_policy)
    theirs = sorted(d.split(" from <")[0].split(" from /")[0]
                    for _, d in saved_residuals(jax_f, x, w))
    assert _kinds(nbjax.checkpoint(f, policy=POLICIES[name]), x, w) == theirs


def test_checkpoint_name_is_the_identity_everywhere():
    x = random_array(RNG, (5,))
    name = ad_checkpoint.checkpoint_name
    assert_close(name(x, "a"), x, rtol=0)
    tree = name({"p": x, "q": (x, 2.0)}, "a")
    assert_close(tree["q"][0], x, rtol=0) and float(tree["q"][1]) == 2.0
    g = lambda v: jnp.sum(name(jnp.sin(v), "s") ** 2)  # noqa: E731
    assert_close(nbjax.grad(g)(x), 2 * np.sin(x) * np.cos(x), rtol=1e-5)
    assert_close(nbjax.jit(g)(x), np.sum(np.sin(x) ** 2), rtol=1e-5)
    assert_close(nbjax.vmap(lambda v: name(v * 2, "t"))(x), 2 * x, rtol=0)
    check_grads(g, (x.astype(np.float64),), order=2)
    text = str(nbjax.make_jaxpr(g)(x))
    assert "name[name=s]" in text


def test_policies_print_and_pickle_as_values():
    """A policy is a param of the checkpoint equation: printed in jaxprs, part of a compiled
    program's cache key."""
    assert repr(cp.dots_saveable) == "DotsSaveable(only_if_no_batch_dims=False)"
    assert cp.save_only_these_names("a", "b") == cp.save_only_these_names("b", "a")
    for policy in (cp.dots_saveable, cp.save_only_these_names("a"),
                   cp.save_from_both_policies(cp.dots_saveable, cp.nothing_saveable)):
        assert pickle.loads(pickle.dumps(policy)) == policy
    x, w = _operands()
    text = str(nbjax.make_jaxpr(nbjax.checkpoint(f, policy=cp.dots_saveable))(x, w))
    assert "policy=DotsSaveable(only_if_no_batch_dims=False)" in text


def test_dots_with_batch_dimensions_are_recomputed_by_the_no_batch_dims_policy():
    xs, ws = random_array(RNG, (2, 3, 3)), random_array(RNG, (2, 3, 3))

    def batched(x, w):
        return jnp.sum(jnp.sin(jnp.einsum("bij,bjk->bik", x, w)))
    saved = _kinds(nbjax.checkpoint(batched, policy=cp.dots_with_no_batch_dims_saveable),
                   xs, ws)
    assert "output of dot_general" not in saved
    assert "output of dot_general" in _kinds(
        nbjax.checkpoint(batched, policy=cp.dots_saveable), xs, ws)


def test_checkpoint_static_argnames():
    def g(x, *, power):
        return jnp.sin(x) ** power
    x = random_array(RNG, (3,))
    h = nbjax.checkpoint(g, static_argnames="power")
    assert_close(nbjax.grad(lambda v: h(v, power=3).sum())(x),
                 3 * np.sin(x) ** 2 * np.cos(x), rtol=1e-5)


def test_a_scan_s_saved_values_are_named_by_the_step_that_adds_them():
    """Backpropagation through a scan keeps values stacked over its steps; each is named by
    what one step computes, and checkpointing the step keeps only the carries."""
    w = random_array(RNG, (4, 4))
    xs = random_array(RNG, (6, 4))

    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, jnp.sum(h)

    def loss(h0, xs, step=step):
        return jnp.sum(nbjax.lax.scan(step, h0, xs)[1])
    h0 = random_array(RNG, (4,))
    stacked = [(str(v.aval.str_short()), v.origin) for v in ad_checkpoint.saved_values(loss, h0, xs)
               if v.aval.shape[:1] == (6,)]
    assert ("float32[6,4]", "output of tanh, one per step of a scan") in stacked
    remat = [v.origin for v in ad_checkpoint.saved_values(
        lambda h0, xs: loss(h0, xs, nbjax.checkpoint(step)), h0, xs) if v.aval.shape[:1] == (6,)]
    assert "the carry of a scan, one per step" in remat
    assert not any("tanh" in origin for origin in remat)
    assert_close(nbjax.grad(lambda h: loss(h, xs, nbjax.checkpoint(step)))(h0),
                 nbjax.grad(loss)(h0, xs), rtol=1e-5, scale=1)


def test_saved_arguments_are_named_in_the_order_they_flatten():
    """Keyword arguments flatten by name, not in the signature's order: each saved
    argument still gets its own name (told apart here by their shapes)."""
    def f(x, *, z, b):
        return jnp.sum(x) * jnp.sum(z) + jnp.sum(b * b)
    saved = {(v.aval.shape, v.origin) for v in ad_checkpoint.saved_values(
        f, np.ones(2, np.float32), z=np.ones(3, np.float32), b=np.ones(4, np.float32))
        if v.origin.startswith("the argument")}
    assert saved == {((4,), "the argument b")}
