"""Element-wise ``jnp`` functions: NumPy's ufuncs with JAX's promotion rules."""

from .. import lax
from .util import promote_args, promote_args_inexact

__all__ = ["add", "subtract", "multiply", "negative", "sin", "cos"]


def _binary(name, lax_fn, inexact=False):
    promote = promote_args_inexact if inexact else promote_args

    def fn(x, y, /):
        return lax_fn(*promote(name, x, y))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise ``{name}`` with NumPy broadcasting and JAX type promotion."
    return fn


def _unary(name, lax_fn, inexact=False):
    promote = promote_args_inexact if inexact else promote_args

    def fn(x, /):
        return lax_fn(*promote(name, x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise ``{name}``" + (" (integers become floats)." if inexact else ".")
    return fn


add = _binary("add", lax.add)
subtract = _binary("subtract", lax.sub)
multiply = _binary("multiply", lax.mul)
negative = _unary("negative", lax.neg)
sin = _unary("sin", lax.sin, inexact=True)
cos = _unary("cos", lax.cos, inexact=True)
