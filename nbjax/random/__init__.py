"""``nbjax.random``: explicit-key pseudo-random numbers, the same numbers as JAX.

The streams match JAX 0.10.2 in its default configuration: ``jax_default_prng_impl =
"threefry2x32"`` and ``jax_threefry_partitionable = True`` (the default since JAX 0.5), so
``uniform(PRNGKey(0), (3,))`` gives JAX's values. So do JAX's two other implementations,
``rbg`` and ``unsafe_rbg`` (``key(0, impl="rbg")``, or config ``jax_default_prng_impl``),
whose bits are those JAX makes on the CPU. Keys, ``split``, ``fold_in`` and ``bits`` (and so
every integer sampler) agree bit for bit; float samplers agree exactly where they use only
exact operations (uniform, bernoulli, ...) and to a few ulps where they go through a
transcendental function (erf_inv, log, tan, pow, lgamma...) whose implementation differs from
XLA's; a rejection sampler (gamma, poisson) can then, rarely, accept a different proposal.

Keys are either raw ``uint32[2]`` arrays (``PRNGKey``; ``uint32[4]`` for the rbg ones) or
typed keys (``key``, dtype ``key<fry>``, ``key<rbg>`` or ``key<urbg>``); a key is never
consumed implicitly: derive new ones with ``split`` or ``fold_in``. Samplers take a single
key; ``vmap`` over a batch of keys.

The modules: ``threefry`` (the hash primitive and key derivation), ``impls`` (the PRNG
implementations: seeding, splitting, folding in and bits), ``keys`` (key types),
``floats`` (bits to uniform/normal/exponential floats), ``gamma`` (the gamma primitive and
its implicit gradient), ``distributions`` (the samplers), ``binomial`` (binomial and
multinomial counts).
"""

from .distributions import (ball, bernoulli, beta, bits, categorical, cauchy,  # noqa: F401
                            chisquare, choice, dirichlet, exponential, gamma,
                            generalized_normal, gumbel, laplace, loggamma, logistic,
                            multivariate_normal, normal, orthogonal, pareto, permutation,
                            poisson, rademacher, randint, shuffle, t, truncated_normal, uniform)
from .gamma import random_gamma_grad, random_gamma_p  # noqa: F401
from .keys import (PRNGKey, PRNGKeyArray, clone, fold_in, key, key_data,  # noqa: F401
                   key_dtype, key_impl, split, wrap_key_data)
from .threefry import threefry2x32_p, threefry_2x32  # noqa: F401

__all__ = ["PRNGKey", "PRNGKeyArray", "key", "key_data", "key_impl", "key_dtype",
           "wrap_key_data", "split", "fold_in", "clone", "bits", "uniform", "normal",
           "truncated_normal", "randint", "bernoulli", "rademacher", "categorical", "choice",
           "permutation", "shuffle", "gumbel", "exponential", "laplace", "logistic",
           "cauchy", "gamma", "loggamma", "beta", "dirichlet", "t", "chisquare", "pareto",
           "poisson", "multivariate_normal", "orthogonal", "generalized_normal", "ball",
           "random_gamma_grad", "threefry_2x32", "threefry2x32_p", "random_gamma_p"]
from .more_distributions import (double_sided_maxwell, f, geometric, lognormal,  # noqa: F401
                                 maxwell, rayleigh, triangular, wald, weibull_min)

__all__ += ["lognormal", "maxwell", "double_sided_maxwell", "rayleigh", "wald", "geometric",
            "triangular", "weibull_min", "f"]
from .binomial import binomial, multinomial  # noqa: F401,E402

__all__ += ["binomial", "multinomial"]

from ..sharding import takes_out_sharding  # noqa: E402

# The samplers take JAX's keyword ``out_sharding`` (None: an array is whole on one device).
for _name in ["ball", "bernoulli", "beta", "bits", "categorical", "cauchy", "chisquare",
              "dirichlet", "exponential", "f", "gamma", "generalized_normal", "geometric",
              "gumbel", "laplace", "loggamma", "logistic", "lognormal", "maxwell",
              "multivariate_normal", "normal", "orthogonal", "pareto", "permutation",
              "poisson", "rademacher", "randint", "rayleigh", "t", "triangular",
              "truncated_normal", "uniform", "wald"]:
    globals()[_name] = takes_out_sharding(globals()[_name], f"random.{_name}")
del _name
