"""nbjax.scipy.spatial.transform (Rotation, Slerp) and nbjax.scipy.cluster.vq, against SciPy
in float64 (and JAX's values when JAX is importable), with jit, vmap and gradients."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.cluster.vq
from scipy.spatial import transform as scipy_transform

import nbjax
import nbjax.numpy as jnp
import nbjax.random
from nbjax.scipy.cluster.vq import vq
from nbjax.scipy.spatial.transform import Rotation, Slerp
from nbjax.test_util import check_grads
from tests.helpers import assert_close, check_vmap

try:
    import jax
    import jax.scipy.cluster.vq
    import jax.scipy.spatial.transform
except ImportError:  # JAX is a test reference only
    jax = None

RNG = np.random.default_rng(11)
# The twelve Euler sequences: six symmetric (zxz...), six asymmetric (xyz...).
SEQUENCES = ["".join(axes) for axes in itertools.product("xyz", repeat=3)
             if axes[0] != axes[1] and axes[1] != axes[2]]


def random_quats(count):
    return RNG.standard_normal((count, 4))


def wrapped(angles):
    """Angles in [-pi, pi): an angle at the boundary may come out as either end."""
    return (np.asarray(angles) + np.pi) % (2 * np.pi) - np.pi


def assert_same_angles(actual, expected, rtol):
    difference = wrapped(np.asarray(actual, np.float64) - expected)
    assert_close(difference, np.zeros_like(difference), rtol=rtol, scale=np.pi)


# --- Rotation against SciPy ------------------------------------------------------------------

def test_representations_match_scipy(x64):
    quats = random_quats(30)
    ours, theirs = Rotation.from_quat(quats), scipy_transform.Rotation.from_quat(quats)
    assert ours.quat.dtype == np.float64 and len(ours) == 30 and not ours.single
    assert_close(ours.as_quat(), theirs.as_quat(), rtol=1e-14)
    for canonical, scalar_first in itertools.product((False, True), repeat=2):
        assert_close(ours.as_quat(canonical=canonical, scalar_first=scalar_first),
                     theirs.as_quat(canonical=canonical, scalar_first=scalar_first), rtol=1e-14)
    # The canonical sign where w is 0: the first non-zero of x, y, z decides.
    edges = np.array([[0.0, 0, -1, 0], [0, -1, 2, 0], [-1, 2, 0, 0], [0, 0, 0, -1]])
    assert_close(Rotation.from_quat(edges).as_quat(canonical=True),
                 scipy_transform.Rotation.from_quat(edges).as_quat(canonical=True), rtol=1e-15)
    assert_close(ours.as_matrix(), theirs.as_matrix(), rtol=1e-14)
    assert_close(ours.as_rotvec(), theirs.as_rotvec(), rtol=1e-13)
    assert_close(ours.as_rotvec(degrees=True), theirs.as_rotvec(degrees=True), rtol=1e-13)
    assert_close(ours.as_mrp(), theirs.as_mrp(), rtol=1e-13)
    assert_close(ours.magnitude(), theirs.magnitude(), rtol=1e-13)
    assert_close(ours.inv().as_matrix(), theirs.inv().as_matrix(), rtol=1e-14)


def test_constructors_round_trip_and_match_scipy(x64):
    theirs = scipy_transform.Rotation.from_quat(random_quats(30))
    matrices = theirs.as_matrix()
    for ours in (Rotation.from_matrix(matrices), Rotation.from_rotvec(theirs.as_rotvec()),
                 Rotation.from_rotvec(theirs.as_rotvec(degrees=True), degrees=True),
                 Rotation.from_mrp(theirs.as_mrp())):
        assert_close(ours.as_matrix(), matrices, rtol=1e-13)
    # Near-identity rotations use the series of from_rotvec/as_rotvec.
    small = RNG.standard_normal((5, 3)) * 1e-5
    assert_close(Rotation.from_rotvec(small).as_quat(),
                 scipy_transform.Rotation.from_rotvec(small).as_quat(), rtol=1e-15)
    assert_close(Rotation.from_rotvec(small).as_rotvec(), small, rtol=1e-12)
    # A matrix that is not quite orthogonal gives a nearby rotation (JAX's, not SciPy's,
    # which orthogonalizes by an SVD first).
    noisy = matrices + 1e-4 * RNG.standard_normal(matrices.shape)
    assert_close(Rotation.from_matrix(noisy).as_matrix(), matrices, rtol=1e-3)


@pytest.mark.parametrize("seq", SEQUENCES)
def test_euler_angles_match_scipy(x64, seq):
    theirs = scipy_transform.Rotation.from_quat(random_quats(20))
    ours = Rotation.from_quat(theirs.as_quat())
    for sequence in (seq, seq.upper()):  # extrinsic, intrinsic
        angles = theirs.as_euler(sequence)
        assert_same_angles(ours.as_euler(sequence), angles, rtol=1e-12)
        assert_same_angles(ours.as_euler(sequence, degrees=True) * np.pi / 180, angles,
                           rtol=1e-12)
        assert_close(Rotation.from_euler(sequence, angles).as_matrix(),
                     scipy_transform.Rotation.from_euler(sequence, angles).as_matrix(),
                     rtol=1e-13)
        assert_close(Rotation.from_euler(sequence, np.rad2deg(angles), degrees=True).as_quat(),
                     scipy_transform.Rotation.from_euler(sequence, angles).as_quat(),
                     rtol=1e-13)


@pytest.mark.parametrize("seq", ["xyz", "ZYX", "zxz", "XZX"])
def test_euler_angles_in_gimbal_lock_match_scipy(x64, seq):
    """With the middle angle at 0 or +-pi/2 (asymmetric) / pi (symmetric) only a sum or
    difference of the outer angles is defined; the third angle is set to zero, as SciPy."""
    middles = [np.pi / 2, -np.pi / 2] if seq.lower()[0] != seq.lower()[2] else [0.0, np.pi]
    angles = np.array([[0.4, middle, -1.1] for middle in middles])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns of gimbal lock
        expected = scipy_transform.Rotation.from_euler(seq, angles).as_euler(seq)
    ours = Rotation.from_euler(seq, angles).as_euler(seq)
    assert_same_angles(ours, expected, rtol=1e-12)
    assert np.all(np.asarray(ours)[:, 2] == 0)


def test_euler_with_fewer_axes_and_shapes():
    quat = Rotation.from_euler("z", 0.3).quat
    assert quat.shape == (4,) and quat.dtype == np.float32 and not quat.weak_type
    assert_close(quat, scipy_transform.Rotation.from_euler("z", 0.3).as_quat(), rtol=1e-6)
    angles = RNG.uniform(-3, 3, (5, 2))
    for seq in ("xz", "XZ"):
        assert_close(Rotation.from_euler(seq, angles).as_matrix(),
                     scipy_transform.Rotation.from_euler(seq, angles).as_matrix(), rtol=1e-5)
    assert Rotation.from_euler("xyz", np.ones((2, 5, 3))).quat.shape == (2, 5, 4)
    assert Rotation.from_euler("xyz", np.array([1, 2, 3])).quat.dtype == np.float32


def test_composition_application_and_mean_match_scipy(x64):
    a, b = random_quats(8), random_quats(8)
    ours_a, ours_b = Rotation.from_quat(a), Rotation.from_quat(b)
    theirs_a, theirs_b = (scipy_transform.Rotation.from_quat(a),
                          scipy_transform.Rotation.from_quat(b))
    assert_close((ours_a * ours_b).as_matrix(), (theirs_a * theirs_b).as_matrix(), rtol=1e-13)
    assert_close((ours_a * ours_b[2]).as_matrix(), (theirs_a * theirs_b[2]).as_matrix(),
                 rtol=1e-13)
    vectors = RNG.standard_normal((8, 3))
    for inverse in (False, True):
        for rotations, ours_rotations, points in ((theirs_a, ours_a, vectors),
                                                  (theirs_a, ours_a, vectors[0]),
                                                  (theirs_a[3], ours_a[3], vectors)):
            assert_close(ours_rotations.apply(points, inverse=inverse),
                         rotations.apply(points, inverse=inverse), rtol=1e-13, scale=3.0)
    weights = RNG.uniform(0.1, 1.0, 8)
    for w in (None, weights):  # the mean's quaternion has an arbitrary sign: compare matrices
        assert_close(ours_a.mean(w).as_matrix(), theirs_a.mean(w).as_matrix(), rtol=1e-12)


def test_slerp_matches_scipy(x64):
    times = np.cumsum(RNG.uniform(0.5, 2.0, 6))
    keys = scipy_transform.Rotation.from_quat(random_quats(6))
    ours = Slerp.init(times, Rotation.from_quat(keys.as_quat()))
    queries = np.concatenate([times, RNG.uniform(times[0], times[-1], 20)])
    expected = scipy_transform.Slerp(times, keys)(queries).as_matrix()
    assert_close(ours(queries).as_matrix(), expected, rtol=1e-12)
    single = ours(queries[7])
    assert single.single and single.quat.shape == (4,)
    assert_close(single.as_matrix(), expected[7], rtol=1e-12)


def test_slerp_extrapolates_the_end_steps():
    """Outside the key times Slerp continues the first (last) step at its constant speed:
    the turn between one key time and the next repeats one step further."""
    times = np.array([0.0, 1.0, 3.0])
    keys = Rotation.from_quat(random_quats(3).astype(np.float32))
    slerp = Slerp.init(times, keys)
    before = (keys[0] * keys[1].inv()) * keys[0]  # one step before the first key
    assert_close(slerp(-1.0).as_matrix(), before.as_matrix(), rtol=1e-5)
    after = keys[2] * (keys[1].inv() * keys[2])  # one step after the last key
    assert_close(slerp(5.0).as_matrix(), after.as_matrix(), rtol=1e-5)


# --- Rotation as a container, under transformations, and its errors --------------------------

def test_rotation_containers():
    rotations = Rotation.from_quat(random_quats(4).astype(np.float32))
    assert len(rotations) == 4 and rotations[1].single and len(rotations[1:3]) == 2
    assert_close(rotations[jnp.array([2, 0])].quat, np.asarray(rotations.quat)[[2, 0]])
    both = Rotation.concatenate([rotations, rotations[0]])
    assert both.quat.shape == (5, 4)
    assert_close(both[4].quat, rotations[0].quat)
    identity = Rotation.identity()
    assert identity.quat.dtype == np.float32
    assert_close(identity.as_matrix(), np.eye(3))
    assert Rotation.identity(3, dtype=jnp.float16).quat.shape == (3, 4)
    assert Rotation.identity(3, dtype=jnp.float16).quat.dtype == np.float16
    with pytest.raises(TypeError, match="no len"):
        len(rotations[0])
    with pytest.raises(TypeError, match="not subscriptable"):
        rotations[0][0]
    with pytest.raises(TypeError):
        rotations * 2


def test_random_rotations_are_uniform():
    """Uniform rotations average to the zero matrix, and their angles have the density
    (1 - cos(theta)) / pi on [0, pi], whose mean is pi/2 + 2/pi."""
    key = nbjax.random.PRNGKey(0)
    rotations = Rotation.random(key, 4000)
    assert rotations.quat.shape == (4000, 4) and rotations.quat.dtype == np.float32
    assert_close(Rotation.random(key, 4000).quat, rotations.quat)  # a function of the key
    assert_close(np.linalg.norm(np.asarray(rotations.quat), axis=-1), np.ones(4000),
                 rtol=1e-6)
    assert np.abs(np.asarray(rotations.as_matrix()).mean(0)).max() < 0.05
    assert float(rotations.magnitude().mean()) == pytest.approx(np.pi / 2 + 2 / np.pi,
                                                                abs=0.03)
    assert Rotation.random(key).single


def test_rotations_under_jit_and_vmap():
    quats = random_quats(5).astype(np.float32)
    vectors = RNG.standard_normal((5, 3)).astype(np.float32)

    def describe(quat, vector):
        rotation = Rotation.from_quat(quat)
        return rotation.as_euler("zyx"), rotation.as_rotvec(), rotation.apply(vector)

    eager = describe(quats, vectors)
    for got, want in zip(nbjax.jit(describe)(quats, vectors), eager, strict=True):
        assert_close(got, want, rtol=1e-5, scale=np.pi)
    check_vmap(describe, (quats, vectors), (0, 0), rtol=1e-5)
    # A Rotation is a pytree: it passes into and out of jit and vmap.
    inverse = nbjax.jit(lambda r: r.inv())(Rotation.from_quat(quats))
    assert isinstance(inverse, Rotation)
    assert_close(inverse.quat, Rotation.from_quat(quats).inv().quat, rtol=1e-6)
    batched = nbjax.vmap(Rotation.from_quat)(quats)
    assert isinstance(batched, Rotation)
    assert_close(batched.quat, Rotation.from_quat(quats).quat, rtol=1e-6)


def test_rotation_gradients():
    quat = RNG.standard_normal(4).astype(np.float32)
    rotvec = RNG.standard_normal(3).astype(np.float32)
    vector = RNG.standard_normal(3).astype(np.float32)
    check_grads(lambda q, v: Rotation.from_quat(q).apply(v), (quat, vector), order=1,
                eps=1e-3, rtol=2e-2, atol=2e-2)
    check_grads(lambda r: Rotation.from_rotvec(r).as_euler("XYZ"), (rotvec,), order=1,
                eps=1e-3, rtol=2e-2, atol=2e-2)
    # At the identity the derivatives of from_rotvec and as_rotvec are [I / 2; 0] and
    # [2 I, 0], finite (the series take over there).
    jacobian = nbjax.jacfwd(lambda r: Rotation.from_rotvec(r).quat)(jnp.zeros(3))
    assert_close(jacobian, np.vstack([np.eye(3) / 2, np.zeros((1, 3))]), rtol=1e-6)
    jacobian = nbjax.jacrev(lambda q: Rotation.from_quat(q).as_rotvec())(
        jnp.array([0.0, 0.0, 0.0, 1.0]))
    assert_close(jacobian, np.hstack([2 * np.eye(3), np.zeros((3, 1))]), rtol=1e-6)


def test_rotation_rejects_bad_arguments():
    rotations = Rotation.from_quat(random_quats(2))
    with pytest.raises(ValueError, match="consecutive axes"):
        Rotation.from_euler("xx", [1.0, 2.0])
    with pytest.raises(ValueError, match="Expected axes"):
        Rotation.from_euler("xY", [1.0, 2.0])
    with pytest.raises(ValueError, match="upto 3"):
        Rotation.from_euler("xyzx", [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="angles"):
        Rotation.from_euler("xyz", [1.0, 2.0])
    with pytest.raises(ValueError, match="Expected 3 axes"):
        rotations.as_euler("xy")
    with pytest.raises(ValueError, match="quat"):
        Rotation.from_quat(np.ones(3))
    with pytest.raises(ValueError, match="matrix"):
        Rotation.from_matrix(np.eye(4))
    with pytest.raises(ValueError, match="rotations and"):
        rotations.apply(np.ones((5, 3)))
    with pytest.raises(ValueError, match="1 dimensional"):
        rotations.mean(np.ones((2, 1)))
    with pytest.raises(ValueError, match="number of values"):
        rotations.mean(np.ones(3))
    with pytest.raises(TypeError, match="Rotation"):
        Slerp.init([0, 1], rotations.quat)
    with pytest.raises(ValueError, match="at least 2"):
        Slerp.init([0], rotations[:1])
    with pytest.raises(ValueError, match="timestamps"):
        Slerp.init([0, 1, 2], rotations)
    with pytest.raises(ValueError, match="at most 1-dimensional"):
        Slerp.init([0, 1], rotations)(np.ones((2, 2)))


@pytest.mark.skipif(jax is None, reason="jax is not installed (a cross-check only)")
def test_rotation_agrees_with_jax():
    quats = random_quats(10).astype(np.float32)
    ours = Rotation.from_quat(quats)
    theirs = jax.scipy.spatial.transform.Rotation.from_quat(quats)
    for method, args in (("as_matrix", ()), ("as_rotvec", ()), ("as_mrp", ()),
                         ("magnitude", ()), ("as_euler", ("xyz",)), ("as_euler", ("ZXZ",)),
                         ("apply", (np.ones(3, np.float32),))):
        got, want = getattr(ours, method)(*args), getattr(theirs, method)(*args)
        assert got.dtype == want.dtype
        if method == "as_euler":
            assert_same_angles(got, np.asarray(want), rtol=1e-5)
        else:
            assert_close(got, np.asarray(want), rtol=1e-5, scale=np.pi)
    noisy = (ours.as_matrix() + 1e-2 * RNG.standard_normal((10, 3, 3))).astype(np.float32)
    assert_close(Rotation.from_matrix(noisy).quat,
                 np.asarray(jax.scipy.spatial.transform.Rotation.from_matrix(noisy).quat),
                 rtol=1e-5, scale=1.0)
    times = np.array([0.0, 1.0, 2.5], np.float32)
    queries = np.linspace(0, 2.5, 7, dtype=np.float32)
    assert_close(Slerp.init(times, ours[:3])(queries).as_matrix(),
                 jax.scipy.spatial.transform.Slerp.init(times, theirs[:3])(queries)
                 .as_matrix(), rtol=1e-5, scale=1.0)


# --- cluster.vq ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(7, 3), (9,)])
def test_vq_matches_scipy(shape):
    observations = RNG.standard_normal(shape).astype(np.float32)
    code_book = RNG.standard_normal((4,) + shape[1:]).astype(np.float32)
    codes, distances = vq(observations, code_book)
    want_codes, want_distances = scipy.cluster.vq.vq(observations.astype(np.float64),
                                                     code_book.astype(np.float64))
    assert codes.dtype == np.int32 and distances.dtype == np.float32
    np.testing.assert_array_equal(codes, want_codes)
    assert_close(distances, want_distances, rtol=1e-6)
    if jax is not None:
        theirs = jax.scipy.cluster.vq.vq(observations, code_book)
        np.testing.assert_array_equal(codes, np.asarray(theirs[0]))
        assert_close(distances, np.asarray(theirs[1]), rtol=1e-6)


def test_vq_dtypes_jit_and_vmap(x64):
    observations = RNG.integers(-5, 5, (6, 2))
    code_book = RNG.integers(-5, 5, (3, 2))
    codes, distances = vq(observations, code_book)
    assert distances.dtype == np.float64 and codes.dtype == np.int64
    want = scipy.cluster.vq.vq(observations.astype(float), code_book.astype(float))
    np.testing.assert_array_equal(codes, want[0])
    assert_close(distances, want[1], rtol=1e-14)
    jitted = nbjax.jit(vq)(observations.astype(float), code_book.astype(float))
    np.testing.assert_array_equal(jitted[0], codes)
    assert_close(jitted[1], distances, rtol=1e-14)
    batches = RNG.standard_normal((3, 6, 2))
    check_vmap(vq, (batches, code_book.astype(float)), (0, None))


def test_vq_rejects_bad_arguments():
    with pytest.raises(ValueError, match="same rank"):
        vq(np.ones((3, 2)), np.ones(2))
    with pytest.raises(ValueError, match="ndim"):
        vq(np.ones((1, 3, 2)), np.ones((1, 3, 2)))
    with pytest.raises(TypeError):
        vq([1.0, 2.0], [1.0])
    with pytest.raises(TypeError):
        vq(np.ones((3, 2)), np.ones((4, 3)))
