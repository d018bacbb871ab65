"""``nbjax.Array``, the type that arrays are instances of, as ``jax.Array`` is.

The arrays a program holds are of the concrete ``core.array.Array``, which the library's
own code tells apart from a ``Tracer``, the stand-in for an array inside a transformation.
A user's ``isinstance(x, nbjax.Array)`` (or ``jnp.ndarray``), though, must answer the same
inside ``jit``, ``grad`` or ``vmap`` as outside, or code branching on it changes behaviour
once transformed: so the public type is this abstract class, of which both (and typed PRNG
key arrays) are virtual subclasses. Like ``jax.Array``, it makes no arrays itself.
"""

import abc


class Array(abc.ABC):
    """The type of nbjax's arrays, traced or not, for ``isinstance`` and annotations."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        raise TypeError("nbjax.Array cannot be instantiated: make arrays with "
                        "nbjax.numpy.asarray (or array, zeros...)")
