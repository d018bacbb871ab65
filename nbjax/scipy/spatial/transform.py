"""``nbjax.scipy.spatial.transform``: rotations in 3-D and their interpolation, as
``jax.scipy.spatial.transform``.

A ``Rotation`` holds unit quaternions (``quat``, shape ``(4,)`` for a single rotation or
``(N, 4)`` for a stack) and converts them to and from matrices, rotation vectors, modified
Rodrigues parameters and Euler angles (``_quaternion`` has the formulas). Like JAX's,
``Rotation`` and ``Slerp`` are NamedTuples: pytrees whose leaves are arrays, so they pass
through ``jit`` and come out of ``vmap``.

Where JAX gives no answer, this module follows SciPy: ``identity(num)`` stacks ``num``
identities, ``random`` draws uniform rotations (from a key), ``concatenate`` accepts single
rotations, and inputs of the wrong shape raise ValueError.
"""

import re
import typing

import numpy as np

from ... import numpy as jnp
from ... import random as jrandom
from ...numpy.util import promote_dtypes_inexact
from . import _quaternion as quaternion

__all__ = ["Rotation", "Slerp"]


def _inexact(x):
    """``x`` as an array of an inexact dtype (integers become the default float), never
    weakly typed: a rotation made from Python numbers has a definite dtype, as in JAX."""
    x, = promote_dtypes_inexact(jnp.asarray(x))
    return jnp.asarray(x, dtype=x.dtype)


def _checked(name, x, trailing):
    """``x`` as an inexact array whose last axes are ``trailing``."""
    x = _inexact(x)
    if x.ndim < len(trailing) or x.shape[x.ndim - len(trailing):] != trailing:
        raise ValueError(f"Expected `{name}` to have shape {trailing} or "
                         f"(N, {', '.join(map(str, trailing))}), got {x.shape}.")
    return x


def _euler_axes(seq):
    """``(axes, extrinsic)`` of an Euler sequence such as ``"xyz"`` (extrinsic: about fixed
    axes) or ``"XYZ"`` (intrinsic: about the rotating body's axes)."""
    extrinsic = re.fullmatch(r"[xyz]+", seq) is not None
    if not (extrinsic or re.fullmatch(r"[XYZ]+", seq)):
        raise ValueError("Expected axes from `seq` to be from ['x', 'y', 'z'] or "
                         f"['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return tuple("xyz".index(axis) for axis in seq.lower()), extrinsic


class Rotation(typing.NamedTuple):
    """Rotations in 3-D, as :class:`scipy.spatial.transform.Rotation`. Build one with the
    ``from_*`` class methods, not from a quaternion directly (they normalize it)."""

    quat: typing.Any

    # --- construction --------------------------------------------------------------------------

    @classmethod
    def from_quat(cls, quat):
        """From quaternions ``[x, y, z, w]`` (scalar last), normalized to unit length."""
        return cls(quaternion.normalize(_checked("quat", quat, (4,))))

    @classmethod
    def from_matrix(cls, matrix):
        """From rotation matrices (a nearby rotation, if not quite orthogonal)."""
        return cls(quaternion.from_matrix(_checked("matrix", matrix, (3, 3))))

    @classmethod
    def from_rotvec(cls, rotvec, degrees=False):
        """From rotation vectors: the axis scaled by the angle (in degrees if ``degrees``)."""
        rotvec = _checked("rotvec", rotvec, (3,))
        return cls(quaternion.from_rotvec(jnp.deg2rad(rotvec) if degrees else rotvec))

    @classmethod
    def from_mrp(cls, mrp):
        """From modified Rodrigues parameters: the axis scaled by ``tan(angle / 4)``."""
        return cls(quaternion.from_mrp(_checked("mrp", mrp, (3,))))

    @classmethod
    def from_euler(cls, seq, angles, degrees=False):
        """From Euler angles about one to three axes ``seq`` (lower case: extrinsic, fixed
        axes; upper case: intrinsic, the body's axes); ``angles[..., n]`` turns about
        ``seq[n]``."""
        if not 1 <= len(seq) <= 3:
            raise ValueError("Expected axis specification to be a non-empty string of upto 3 "
                             f"characters, got {seq}")
        axes, extrinsic = _euler_axes(seq)
        angles = jnp.atleast_1d(_inexact(angles))
        if angles.shape[-1] != len(seq):
            raise ValueError(f"Expected `angles` to have shape ({len(seq)},) or "
                             f"(N, {len(seq)}) for the sequence {seq}, got {angles.shape}.")
        angles = jnp.deg2rad(angles) if degrees else angles
        return cls(quaternion.from_euler(axes, angles, intrinsic=not extrinsic))

    @classmethod
    def identity(cls, num=None, dtype=float):
        """The identity rotation, or a stack of ``num`` of them."""
        quat = jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype)
        return cls(quat if num is None else jnp.tile(quat, (num, 1)))

    @classmethod
    def random(cls, random_key, num=None):
        """Rotations drawn uniformly: a standard normal vector in 4-D, normalized, is
        uniform on the unit sphere of quaternions, which covers each rotation twice."""
        shape = (4,) if num is None else (num, 4)
        return cls.from_quat(jrandom.normal(random_key, shape))

    @classmethod
    def concatenate(cls, rotations):
        """One stack of the rotations of a sequence of ``Rotation`` objects."""
        return cls(jnp.concatenate([jnp.atleast_2d(r.quat) for r in rotations]))

    # --- representations -----------------------------------------------------------------------

    def as_quat(self, canonical=False, scalar_first=False):
        """Quaternions ``[x, y, z, w]``, or ``[w, x, y, z]`` if ``scalar_first``;
        ``canonical`` picks the sign of the quaternion (``q`` and ``-q`` are the same
        rotation) whose ``w`` is positive (the first non-zero component, if ``w`` is 0)."""
        quat = quaternion.canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, 1, axis=-1) if scalar_first else quat

    def as_matrix(self):
        return quaternion.to_matrix(self.quat)

    def as_rotvec(self, degrees=False):
        """Rotation vectors, with angles in [0, pi] (or [0, 180] ``degrees``)."""
        rotvec = quaternion.to_rotvec(self.quat)
        return jnp.rad2deg(rotvec) if degrees else rotvec

    def as_mrp(self):
        """Modified Rodrigues parameters, for angles in [0, pi] (norm at most 1)."""
        return quaternion.to_mrp(self.quat)

    def as_euler(self, seq, degrees=False):
        """Euler angles about the three axes ``seq`` (as in ``from_euler``), each in
        [-pi, pi), the middle one in [0, pi] (symmetric sequences such as ``"zxz"``) or
        [-pi/2, pi/2]."""
        if len(seq) != 3:
            raise ValueError(f"Expected 3 axes, got {seq}.")
        axes, extrinsic = _euler_axes(seq)
        angles = quaternion.to_euler(self.quat, axes, extrinsic)
        return jnp.rad2deg(angles) if degrees else angles

    # --- operations ----------------------------------------------------------------------------

    def apply(self, vectors, inverse=False):
        """Rotate ``vectors`` (``(3,)`` or ``(P, 3)``; a stack of rotations and a stack of
        vectors pair up, one of either is applied to all of the other)."""
        vectors = _checked("vectors", vectors, (3,))
        try:
            np.broadcast_shapes(self.quat.shape[:-1], vectors.shape[:-1])
        except ValueError:
            raise ValueError("Expected equal numbers of rotations and vectors, or a single "
                             f"rotation, or a single vector, got {self.quat.shape[:-1]} "
                             f"rotations and {vectors.shape[:-1]} vectors.") from None
        matrix = self.as_matrix()
        if inverse:
            matrix = jnp.swapaxes(matrix, -1, -2)
        return jnp.matmul(matrix, vectors[..., None])[..., 0]

    def inv(self):
        return Rotation(quaternion.conjugate(self.quat))

    def magnitude(self):
        """The angle of each rotation, in [0, pi]."""
        return quaternion.magnitude(self.quat)

    def mean(self, weights=None):
        """The rotation that minimizes the weighted sum of squared chordal distances
        (Frobenius norms of matrix differences) to these: the eigenvector of the largest
        eigenvalue of ``sum_i w_i q_i q_i^T`` (Markley et al., 2007), which does not care
        about the sign of each ``q_i``."""
        count = len(self)
        if weights is None:
            weights = jnp.ones(count, self.quat.dtype)
        else:
            weights = jnp.asarray(weights, dtype=self.quat.dtype)
        if weights.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape "
                             f"{weights.shape}.")
        if weights.shape[0] != count:
            raise ValueError("Expected `weights` to have number of values equal to number of "
                             f"rotations, got {weights.shape[0]} values and {count} "
                             "rotations.")
        scatter = jnp.matmul(self.quat.T * weights, self.quat)
        _, eigenvectors = jnp.linalg.eigh(scatter)
        return Rotation(eigenvectors[:, -1])

    def __mul__(self, other):
        """The composition ``self * other``: ``other`` first, then ``self``."""
        if not isinstance(other, Rotation):
            return NotImplemented
        return Rotation.from_quat(quaternion.compose(self.quat, other.quat))

    def __getitem__(self, indexer):
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self):
        if self.quat.ndim < 2:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    @property
    def single(self):
        """Whether this holds one rotation rather than a stack."""
        return self.quat.ndim == 1


class Slerp(typing.NamedTuple):
    """Spherical linear interpolation between key rotations at increasing key times, as
    :class:`scipy.spatial.transform.Slerp`; build it with ``Slerp.init(times, rotations)``.

    Between the keys ``r_n`` and ``r_{n+1}`` it turns at constant angular speed about a
    fixed axis: ``r_n * exp(alpha * v_n)``, where ``v_n`` is the rotation vector of
    ``r_n^-1 r_{n+1}`` and ``alpha`` the fraction of the time step gone by. Times before the
    first key (after the last) continue the first (last) step, as SciPy cannot raise under
    ``jit``.
    """

    times: typing.Any
    timedelta: typing.Any
    rotations: Rotation
    rotvecs: typing.Any

    @classmethod
    def init(cls, times, rotations):
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError("Expected times to be specified in a 1 dimensional array, got "
                             f"{times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError("Expected number of rotations to be equal to number of "
                             f"timestamps given, got {len(rotations)} rotations and "
                             f"{times.shape[0]} timestamps.")
        starts = rotations[:-1]
        steps = starts.inv() * rotations[1:]
        return cls(times, jnp.diff(times), starts, steps.as_rotvec())

    def __call__(self, times):
        """The interpolated rotations at ``times`` (a scalar gives a single rotation)."""
        times = jnp.asarray(times, dtype=self.times.dtype)
        if times.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = times.ndim == 0
        times = jnp.atleast_1d(times)
        step = jnp.clip(jnp.searchsorted(self.times, times) - 1, 0, self.timedelta.shape[0] - 1)
        fraction = (times - self.times[step]) / self.timedelta[step]
        result = self.rotations[step] * Rotation.from_rotvec(self.rotvecs[step] *
                                                             fraction[:, None])
        return result[0] if single else result
