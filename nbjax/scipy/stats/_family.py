"""The pattern shared by SciPy's distributions: each is written once in standard form and
shifted (and, for continuous ones, scaled) by ``loc`` and ``scale``.

``continuous(name, shape, **standard)`` and ``discrete(name, shape, **standard)`` turn the
standard-form functions of a distribution (``logpdf(z, *shape)``, ``cdf(z, *shape)``,
``ppf(q, *shape)``...) into the public functions of its module, with SciPy's signatures
(``logpdf(x, *shape, loc=0, scale=1)``, ``logpmf(k, *shape, loc=0)``). Every argument is
promoted to a common inexact dtype first, as JAX does, so that integer parameters work and
float32 stays float32.
"""

import inspect

from ... import numpy as jnp
from ...numpy.util import promote_args_inexact

_X = inspect.Parameter.POSITIONAL_OR_KEYWORD


def _signature(first, shape, extra):
    params = [inspect.Parameter(first, _X)] + [inspect.Parameter(s, _X) for s in shape]
    params += [inspect.Parameter(name, _X, default=value) for name, value in extra]
    return inspect.Signature(params)


# How a standard-form function becomes a located (and scaled) one: ``z`` is the standardised
# point, ``std`` the standard-form function, ``shape`` the shape parameters.
def _density(std, z, loc, scale, shape):
    return std(z, *shape) - jnp.log(scale)


def _probability(std, z, loc, scale, shape):
    return std(z, *shape)


def _quantile(std, q, loc, scale, shape):
    """NaN for ``q`` outside [0, 1], as in SciPy."""
    out = loc + scale * std(q, *shape)
    return jnp.where((q >= 0) & (q <= 1), out, jnp.nan)


def _open_quantile(std, q, loc, scale, shape):
    """NaN for ``q`` outside (0, 1), as JAX's ``gumbel_l``/``gumbel_r`` (SciPy: the
    support's ends at 0 and 1)."""
    return jnp.where((q > 0) & (q < 1), _quantile(std, q, loc, scale, shape), jnp.nan)


_CONTINUOUS = {"logpdf": _density, "cdf": _probability, "logcdf": _probability,
               "sf": _probability, "logsf": _probability, "ppf": _quantile, "isf": _quantile}


def _make(module, kind, std, rule, shape, extra, standardize, positive_scale=False,
          quantile_arg="q"):
    first = quantile_arg if kind in ("ppf", "isf") else ("k" if extra[-1][0] == "loc" else "x")
    sig = _signature(first, shape, extra)
    name = f"{module}.{kind}"

    def fn(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        x, *values = promote_args_inexact(name, *bound.args)
        *shape_values, loc, scale = values if len(extra) == 2 else (*values, None)
        z = x if rule in (_quantile, _open_quantile) else standardize(x, loc, scale)
        out = rule(std, z, loc, scale, shape_values)
        checked = positive_scale and rule is not _open_quantile
        return jnp.where(scale > 0, out, jnp.nan) if checked else out
    fn.__name__ = fn.__qualname__ = kind
    fn.__signature__ = sig
    fn.__doc__ = std.__doc__
    return fn


def located(module, kind, shape, fn, discrete=False):
    """The public function ``kind`` of ``module`` from ``fn(x, *shape, loc, scale)`` (or
    ``fn(k, *shape, loc)`` when ``discrete``), which sees the promoted arguments themselves.

    For the rules that JAX writes in terms of ``x`` and ``loc`` rather than of the
    standardised point: a support test ``x < loc`` and a test ``(x - loc) / scale < 0`` part
    ways at a negative ``scale``, and a test written as "outside the support" lets NaN through
    where "inside the support" would turn it into the outside value."""
    extra = (("loc", 0),) if discrete else (("loc", 0), ("scale", 1))
    first = "q" if kind in ("ppf", "isf") else ("k" if discrete else "x")
    sig = _signature(first, shape, extra)
    name = f"{module}.{kind}"

    def public(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return fn(*promote_args_inexact(name, *bound.args))
    public.__name__ = public.__qualname__ = kind
    public.__signature__ = sig
    public.__doc__ = fn.__doc__
    return public


def located_family(module, shape, logpdf, cdf, sf):
    """The six functions of ``module`` from ``logpdf``, ``cdf`` and ``sf`` written for
    ``located`` (``pdf`` their ``exp``, ``logcdf`` and ``logsf`` the ``log`` of theirs)."""
    rules = {"logpdf": logpdf, "pdf": lambda *args: jnp.exp(logpdf(*args)), "cdf": cdf,
             "logcdf": lambda *args: jnp.log(cdf(*args)), "sf": sf,
             "logsf": lambda *args: jnp.log(sf(*args))}
    return {kind: located(module, kind, shape, rule) for kind, rule in rules.items()}


def located_discrete(module, shape, logpmf, **more):
    """``logpmf`` and ``pmf`` (its ``exp``) of ``module`` from ``logpmf(k, *shape, loc)``
    written for ``located``, and the functions in ``more`` (``cdf=...``) likewise."""
    rules = {"logpmf": logpmf, "pmf": lambda *args: jnp.exp(logpmf(*args)), **more}
    return {kind: located(module, kind, shape, rule, discrete=True)
            for kind, rule in rules.items()}


def _exp_of(log_fn, kind):
    """``pdf``/``pmf`` as ``exp`` of ``logpdf``/``logpmf``."""
    def fn(*args, **kwargs):
        return jnp.exp(log_fn(*args, **kwargs))
    fn.__name__ = fn.__qualname__ = kind
    fn.__signature__ = log_fn.__signature__
    fn.__doc__ = f"``exp({log_fn.__name__})``."
    return fn


def continuous(module, shape=(), positive_scale=False, quantile_arg="q", **standard):
    """The functions of a location-scale family: ``logpdf(x, *shape, loc=0, scale=1)`` is
    ``standard['logpdf']((x - loc) / scale, *shape) - log(scale)``, the probabilities
    (``cdf``, ``sf`` and their logs) are the standard ones at ``(x - loc) / scale``, the
    quantiles (``ppf``, ``isf``) ``loc + scale * standard[...](q, *shape)``. ``pdf`` comes with
    ``logpdf``. With ``positive_scale`` (JAX's Gumbel distributions) every function but the
    quantiles is NaN unless ``scale > 0``, and the quantiles are NaN unless ``0 < q < 1``.
    ``quantile_arg``: the name JAX gives the quantiles' argument (``q``; ``p`` for the Gumbel
    distributions, ``x`` for the logistic)."""
    rules = dict(_CONTINUOUS, ppf=_open_quantile, isf=_open_quantile) if positive_scale \
        else _CONTINUOUS
    out = {kind: _make(module, kind, std, rules[kind], shape, (("loc", 0), ("scale", 1)),
                       lambda x, loc, scale: (x - loc) / scale, positive_scale, quantile_arg)
           for kind, std in standard.items()}
    if "logpdf" in out:
        out["pdf"] = _exp_of(out["logpdf"], "pdf")
    return out


def discrete(module, shape=(), **standard):
    """The functions of a distribution on the integers shifted by ``loc``:
    ``logpmf(k, *shape, loc=0)`` is ``standard['logpmf'](k - loc, *shape)``, likewise ``cdf``.
    ``pmf`` comes with ``logpmf``."""
    out = {kind: _make(module, kind, std, _probability, shape, (("loc", 0),),
                       lambda k, loc, scale: k - loc)
           for kind, std in standard.items()}
    if "logpmf" in out:
        out["pmf"] = _exp_of(out["logpmf"], "pmf")
    return out

