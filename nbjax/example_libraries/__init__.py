"""``nbjax.example_libraries``: the two tiny libraries JAX ships as worked examples, and that
classroom notebooks still use, as in ``jax.example_libraries``.

* ``optimizers``: gradient-descent optimizers as ``(init_fun, update_fun, get_params)`` triples
  of pure functions, whose state is a pytree that ``jit`` and ``grad`` see through.
* ``stax``: neural-network layers as ``(init_fun, apply_fun)`` pairs, composed with
  ``serial`` and ``parallel``.

As in JAX, import the submodules explicitly (``from nbjax.example_libraries import stax``):
they are examples of how to build such libraries on the core, not part of the core.
"""
