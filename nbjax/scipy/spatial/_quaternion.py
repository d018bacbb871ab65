"""Unit quaternions as rotations: the arithmetic behind ``Rotation``.

A quaternion is stored scalar-last, ``[x, y, z, w]`` (SciPy's order): the rotation by the
angle ``theta`` about the unit axis ``u`` is ``[sin(theta/2) u, cos(theta/2)]``, and ``q``
and ``-q`` are the same rotation. Every function works on stacks, along the last axis
(``(..., 4)`` quaternions, ``(..., 3)`` vectors, ``(..., 3, 3)`` matrices), so batches need
no ``vmap``.

Where a formula divides by the rotation angle, a Taylor series takes over for small angles;
the unused branch is fed a harmless angle (the "double where"), so that gradients stay
finite at the identity rotation.
"""

import numpy as np

from ... import numpy as jnp

SMALL_ANGLE = 1e-3  # below it, the series to the fourth power of the angle are exact


def _parts(quat):
    """``(x, y, z, w)``: the components of ``(..., 4)`` quaternions."""
    return tuple(quat[..., n] for n in range(4))


def normalize(quat):
    return quat / jnp.linalg.norm(quat, axis=-1, keepdims=True)


def compose(p, q):
    """The Hamilton product ``p q``: the rotation ``q`` followed by ``p``."""
    p_vector, q_vector = p[..., :3], q[..., :3]
    p_scalar, q_scalar = p[..., 3:], q[..., 3:]
    vector = p_scalar * q_vector + q_scalar * p_vector + jnp.cross(p_vector, q_vector)
    scalar = p_scalar * q_scalar - jnp.sum(p_vector * q_vector, axis=-1, keepdims=True)
    return jnp.concatenate([vector, scalar], axis=-1)


def conjugate(quat):
    """The inverse rotation of a unit quaternion: the vector part negated."""
    return jnp.concatenate([-quat[..., :3], quat[..., 3:]], axis=-1)


def canonical(quat):
    """The one of ``q`` and ``-q`` whose first non-zero component among ``w, x, y, z`` is
    positive."""
    x, y, z, w = _parts(quat)
    negative, zero_so_far = False, True
    for component in (w, x, y, z):
        negative = negative | (zero_so_far & (component < 0))
        zero_so_far = zero_so_far & (component == 0)
    return jnp.where(negative[..., None], -quat, quat)


def _nonnegative_scalar(quat):
    """The one of ``q`` and ``-q`` with ``w >= 0``: the rotation by an angle in [0, pi]."""
    return jnp.where(quat[..., 3:] < 0, -quat, quat)


# --- matrices ---------------------------------------------------------------------------------

def to_matrix(quat):
    x, y, z, w = _parts(quat)
    rows = [[w * w + x * x - y * y - z * z, 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), w * w - x * x + y * y - z * z, 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), w * w - x * x - y * y + z * z]]
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def from_matrix(matrix):
    """Shepperd's method: four formulas give ``4 c q`` for a component ``c`` of ``q``
    (``w`` from the trace, ``x``, ``y``, ``z`` from the diagonal); the one for the largest
    component divides by nothing small. Normalizing the result also maps a matrix that is
    not quite orthogonal to a nearby rotation."""
    m = matrix
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        candidate = [None] * 4
        candidate[i] = 1 - trace + 2 * m[..., i, i]
        candidate[j] = m[..., j, i] + m[..., i, j]
        candidate[k] = m[..., k, i] + m[..., i, k]
        candidate[3] = m[..., k, j] - m[..., j, k]
        candidates.append(jnp.stack(candidate, axis=-1))
    candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
    largest = jnp.argmax(jnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2], trace], -1), -1)
    chosen = jnp.take_along_axis(jnp.stack(candidates, axis=-2), largest[..., None, None],
                                 axis=-2)[..., 0, :]
    return normalize(chosen)


# --- rotation vectors and modified Rodrigues parameters ---------------------------------------

def from_rotvec(rotvec):
    """``[sin(theta/2) / theta * v, cos(theta/2)]`` with ``theta = |v|``."""
    angle_squared = jnp.sum(rotvec * rotvec, axis=-1, keepdims=True)
    small = angle_squared <= SMALL_ANGLE ** 2
    angle = jnp.sqrt(jnp.where(small, 1.0, angle_squared))
    fourth_power = angle_squared * angle_squared
    scale = jnp.where(small, 0.5 - angle_squared / 48 + fourth_power / 3840,
                      jnp.sin(angle / 2) / angle)
    scalar = jnp.where(small, 1 - angle_squared / 8 + fourth_power / 384, jnp.cos(angle / 2))
    return jnp.concatenate([scale * rotvec, scalar], axis=-1)


def to_rotvec(quat):
    """``theta / sin(theta/2)`` times the vector part ``v``, ``theta`` in [0, pi]. Near the
    identity it is a series in ``x = |v| / w = tan(theta/2)``: ``theta / sin(theta/2) =
    2 atan(x) sqrt(1 + x^2) / x = 2 + x^2/3 - 11 x^4/60``."""
    quat = _nonnegative_scalar(quat)
    vector, scalar = quat[..., :3], quat[..., 3:]
    sine_squared = jnp.sum(vector * vector, axis=-1, keepdims=True)
    small = sine_squared <= (SMALL_ANGLE / 2) ** 2
    x_squared = sine_squared / jnp.where(small, scalar * scalar, 1.0)
    angle = 2 * jnp.arctan2(jnp.sqrt(jnp.where(small, 1.0, sine_squared)), scalar)
    scale = jnp.where(small, 2 + x_squared / 3 - 11 * x_squared * x_squared / 60,
                      angle / jnp.sin(angle / 2))
    return scale * vector


def from_mrp(mrp):
    """``[2 p, 1 - |p|^2] / (1 + |p|^2)``: the inverse of ``to_mrp``."""
    norm_squared = jnp.sum(mrp * mrp, axis=-1, keepdims=True)
    return jnp.concatenate([2 * mrp, 1 - norm_squared], axis=-1) / (1 + norm_squared)


def to_mrp(quat):
    """``v / (1 + w)`` for the sign with ``w >= 0``: ``tan(theta/4)`` times the axis."""
    quat = _nonnegative_scalar(quat)
    return quat[..., :3] / (1 + quat[..., 3:])


def magnitude(quat):
    """The rotation angle in [0, pi]."""
    return 2 * jnp.arctan2(jnp.linalg.norm(quat[..., :3], axis=-1), jnp.abs(quat[..., 3]))


# --- Euler angles -----------------------------------------------------------------------------

def elementary(axis, angle):
    """Rotations by ``angle`` (any shape) about the coordinate axis ``axis`` (0, 1 or 2)."""
    half = angle / 2
    parts = [jnp.zeros_like(half)] * 3 + [jnp.cos(half)]
    parts[axis] = jnp.sin(half)
    return jnp.stack(parts, axis=-1)


def from_euler(axes, angles, intrinsic):
    """Compose the rotations by ``angles[..., n]`` about ``axes[n]``: each next one about a
    rotated (body) axis if ``intrinsic``, about a fixed axis otherwise."""
    quat = elementary(axes[0], angles[..., 0])
    for n in range(1, len(axes)):
        step = elementary(axes[n], angles[..., n])
        quat = compose(quat, step) if intrinsic else compose(step, quat)
    return quat


GIMBAL_LOCK = 1e-7  # a middle angle this close to 0 or pi leaves only a sum of the others


def to_euler(quat, axes, extrinsic):
    """Angles for the axes ``axes`` (three of 0, 1, 2; neighbours different), by the direct
    method of Bernardes and Viollet (2022), as SciPy.

    The quaternion's components are permuted (and for an asymmetric sequence such as xyz,
    combined) so that the sequence looks like the symmetric one i-j-i; the middle angle and
    the half sum and half difference of the outer ones are then arctangents. An intrinsic
    sequence is the extrinsic one read backwards. In gimbal lock only the sum (or the
    difference) of the outer angles is defined: the first angle takes it all and the third
    is zero, as in SciPy.
    """
    i, j, k = axes if extrinsic else axes[::-1]
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    parity = (i - j) * (j - k) * (k - i) // 2  # +1 for a cyclic order of (i, j, k), -1 otherwise
    x_i, x_j, x_k, w = quat[..., i], quat[..., j], parity * quat[..., k], quat[..., 3]
    if symmetric:
        a, b, c, d = w, x_i, x_j, x_k
    else:
        a, b, c, d = w - x_j, x_i + x_k, x_j + w, x_k - x_i
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    half_sum, half_difference = jnp.arctan2(b, a), jnp.arctan2(d, c)
    near_zero = jnp.abs(middle) <= GIMBAL_LOCK
    locked = near_zero | (jnp.abs(middle - np.pi) <= GIMBAL_LOCK)
    lock_angle = jnp.where(near_zero, 2 * half_sum,
                           (-2 if extrinsic else 2) * half_difference)
    first = jnp.where(locked, lock_angle if extrinsic else 0, half_sum - half_difference)
    third = jnp.where(locked, 0 if extrinsic else lock_angle, half_sum + half_difference)
    if not symmetric:
        third, middle = parity * third, middle - np.pi / 2
    angles = jnp.stack([first, middle, third] if extrinsic else [third, middle, first], axis=-1)
    return (angles + np.pi) % (2 * np.pi) - np.pi
