"""nbjax.teach: every exercise's checker accepts a right answer, rejects a wrong one (saying
where it is wrong without giving the expected value away), and reports the notebook's
placeholder as not attempted. The right answers live here, not in the notebooks."""

from dataclasses import dataclass

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import random
from nbjax.tree_util import tree_leaves, tree_map
from nbjax.teach import EXERCISES, NOT_ATTEMPTED, RIGHT, WRONG, Verdict, check


@dataclass
class Dual:
    """The notebook's dual numbers, reduced to what division needs."""
    value: float
    tangent: float


def dual_right(self, other):
    return Dual(self.value / other.value,
                (self.tangent * other.value - self.value * other.tangent) / other.value ** 2)


def dual_wrong(self, other):   # the numerator's terms swapped: a sign error
    return Dual(self.value / other.value,
                (self.value * other.tangent - self.tangent * other.value) / other.value ** 2)


class RightDual(Dual):
    __truediv__ = dual_right


class WrongDual(Dual):
    __truediv__ = dual_wrong


class UnfinishedDual(Dual):
    def __truediv__(self, other):
        ...


def count_right(counts, idx):
    return counts.at[idx].add(1)


def count_numpy_style(counts, idx):
    counts = np.array(counts)
    counts[idx] += 1
    return counts


def two_samples_right(key):
    k1, k2 = random.split(key)
    return random.normal(k1, (3,)), random.normal(k2, (3,))


def two_samples_reused(key):
    _, k2 = random.split(key)
    return random.normal(key, (3,)), random.normal(k2, (3,))


@nbjax.custom_jvp
def log1pexp_right(x):
    return jnp.logaddexp(0.0, x)


@log1pexp_right.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp_right(x), t * nbjax.nn.sigmoid(x)


@nbjax.custom_vjp
def clip_right(x):
    return x


clip_right.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


def hvp_right(f, x, v):
    return nbjax.jvp(nbjax.grad(f), (x,), (v,))[1]


def jacobian_right(f, x):
    y, pullback = nbjax.vjp(f, x)
    return jnp.stack([pullback(e)[0] for e in jnp.eye(y.shape[0], dtype=y.dtype)])


def collatz_right(n):
    def body(state):
        n, steps = state
        return nbjax.lax.cond(n % 2 == 0, lambda: n // 2, lambda: 3 * n + 1), steps + 1

    return nbjax.lax.while_loop(lambda s: s[0] != 1, body, (n, 0))[1]


def collatz_off_by_one(n):
    return collatz_right(n) + 1


def running_sum_right(xs):
    return nbjax.lax.scan(lambda total, x: (total + x, total + x), 0.0, xs)[1]


def running_sum_exclusive(xs):   # the sums before each element, not including it
    return nbjax.lax.scan(lambda total, x: (total + x, total), 0.0, xs)[1]


def pairwise_right(xs, ys):
    def distance(x, y):
        return jnp.sqrt(jnp.sum((x - y) ** 2))

    return nbjax.vmap(nbjax.vmap(distance, in_axes=(None, 0)), in_axes=(0, None))(xs, ys)


def clipped_mean_right(loss, w, xs, ys, max_norm):
    grads = nbjax.vmap(nbjax.grad(loss), in_axes=(None, 0, 0))(w, xs, ys)
    norms = jnp.linalg.norm(grads, axis=1, keepdims=True)
    return jnp.mean(grads * jnp.minimum(1.0, max_norm / norms), axis=0)


def clipped_mean_after_averaging(loss, w, xs, ys, max_norm):
    mean = jnp.mean(nbjax.vmap(nbjax.grad(loss), in_axes=(None, 0, 0))(w, xs, ys), axis=0)
    return mean * jnp.minimum(1.0, max_norm / jnp.linalg.norm(mean))


def nesterov(lr, beta, look_ahead=True):
    """Nesterov momentum (look_ahead) or plain momentum (not: the mistake to spot)."""
    def update(params, grads, velocity):
        velocity = tree_map(lambda v, g: beta * v + g, velocity, grads)
        step = (lambda g, v: g + beta * v) if look_ahead else (lambda g, v: v)
        return tree_map(lambda p, g, v: p - lr * step(g, v), params, grads, velocity), velocity

    return (lambda params: tree_map(jnp.zeros_like, params)), update


def adagrad(lr, eps, root=jnp.sqrt):
    """AdaGrad, or with ``root`` the identity, the mistake of dividing by the squares' sum."""
    def update(params, grads, sums):
        sums = tree_map(lambda s, g: s + g ** 2, sums, grads)
        return tree_map(lambda p, g, s: p - lr * g / (root(s) + eps), params, grads, sums), sums

    return (lambda params: tree_map(jnp.zeros_like, params)), update


def clip_global_right(grads, max_norm):
    norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in tree_leaves(grads)))
    return tree_map(lambda g: g * jnp.minimum(1.0, max_norm / norm), grads)


def clip_each_leaf(grads, max_norm):
    return tree_map(lambda g: g * jnp.minimum(1.0, max_norm / jnp.linalg.norm(g)), grads)


def gru(p, h, x, swapped=False):
    """The GRU of the notebook; ``swapped`` weighs the old state by 1 - z instead of z."""
    z = nbjax.nn.sigmoid(x @ p["Wz"] + h @ p["Uz"] + p["bz"])
    r = nbjax.nn.sigmoid(x @ p["Wr"] + h @ p["Ur"] + p["br"])
    n = jnp.tanh(x @ p["Wn"] + (r * h) @ p["Un"] + p["bn"])
    return z * n + (1 - z) * h if swapped else (1 - z) * n + z * h


def generate_right(step, carry, x0, n):
    def feed_back(state, _):
        carry, x = state
        carry, y = step(carry, x)
        return (carry, y), y

    return nbjax.lax.scan(feed_back, (carry, x0), None, length=n)[1]


def generate_teacher_forced(step, carry, x0, n):   # keeps feeding x0 instead of the outputs
    return nbjax.lax.scan(lambda c, _: step(c, x0), carry, None, length=n)[1]


PROMOTIONS_RIGHT = {"int8 + uint8": "int16", "int32 + float16": jnp.float16,
                    "uint8 + 1": np.uint8, "float16 + 1.0": "float16",
                    "bfloat16 + float16": "float32"}

# exercise -> (a right answer, a wrong answer, words the wrong answer's message contains)
ANSWERS = {
    "ch01.central_difference": (lambda f, x, h: (f(x + h) - f(x - h)) / (2 * h),
                                lambda f, x, h: (f(x + h) - f(x)) / h, "relative error"),
    "ch01.dual_division": (RightDual, WrongDual, "wrong sign"),
    "ch01.derivative_by_hand": (lambda x: np.exp(-x ** 2) * (1 - 2 * x ** 2),
                                lambda x: np.exp(-x ** 2) * (1 - x ** 2), "derivative at x ="),
    "ch02.div_backward": (lambda x1, x2, g: (g / x2, -g * x1 / x2 ** 2),
                          lambda x1, x2, g: (g / x2, g * x1 / x2 ** 2), "wrong sign"),
    "ch02.cheaper_mode": (("reverse", 3), ("reverse", 1000), "number of passes"),
    "ch02.jacobian_by_vjp": (jacobian_right, lambda f, x: jacobian_right(f, x).T,
                             "should have shape (2, 3)"),
    "ch03.count_indices": (count_right, count_numpy_style, "every time it appears"),
    "ch03.promotion": (PROMOTIONS_RIGHT, {**PROMOTIONS_RIGHT, "uint8 + 1": "int32"},
                       "4 of 5 right; look again at 'uint8 + 1'"),
    "ch03.two_samples": (two_samples_right, two_samples_reused, "after a split"),
    "ch04.log1pexp": (log1pexp_right, lambda x: jnp.log1p(jnp.exp(x)),
                      "gradient of log1pexp at x = 100.0 is wrong: it is nan"),
    "ch04.clip_gradient": (clip_right, lambda x: x, "the gradient of 3.0 * clip_gradient(x)"),
    "ch04.safe_log": (lambda x: jnp.where(x > 0, jnp.log(jnp.where(x > 0, x, 1.0)), 0.0),
                      lambda x: jnp.where(x > 0, jnp.log(x), 0.0), "is nan"),
    "ch05.collatz_steps": (collatz_right, collatz_off_by_one, "jit(collatz_steps)(1) is wrong"),
    "ch05.running_sum": (running_sum_right, running_sum_exclusive, "is wrong at index (0,)"),
    "ch05.scale_tree": (lambda t, f: nbjax.tree_util.tree_map(lambda x: f * x, t),
                        lambda t, f: [f * x for x in nbjax.tree_util.tree_leaves(t)],
                        "another structure"),
    "ch04.hvp": (hvp_right, lambda f, x, v: nbjax.hessian(f)(x) @ (2 * v), "constant multiple"),
    "ch06.pairwise_distances": (pairwise_right, lambda xs, ys: pairwise_right(ys, xs),
                                "should have shape (4, 5)"),
    "ch06.clipped_mean_gradient": (clipped_mean_right, clipped_mean_after_averaging,
                                   "clip each example's gradient before averaging"),
    "ch06.global_centre": (lambda x: x - nbjax.lax.pmean(jnp.mean(x), "devices"),
                           lambda x: x - jnp.mean(x), "each shard subtracted its own mean"),
    "ch07.nesterov": (nesterov, lambda lr, beta: nesterov(lr, beta, look_ahead=False),
                      "leaf 'b' of the parameters after 1 update is wrong"),
    "ch07.adagrad": (adagrad, lambda lr, eps: adagrad(lr, eps, root=lambda s: s),
                     "leaf 'b' of the parameters after 1 update is wrong"),
    "ch07.clip_by_global_norm": (clip_global_right, clip_each_leaf,
                                 "each leaf was clipped by its own norm"),
    "ch08.gru_cell": (gru, lambda p, h, x: gru(p, h, x, swapped=True),
                      "the result of gru_cell(params, h, x) is wrong"),
    "ch08.generate": (generate_right, generate_teacher_forced, "is wrong at index (1,)"),
}


def standardize_right(x_train, x_test):
    mean, std = jnp.mean(x_train, axis=0), jnp.std(x_train, axis=0)
    std = jnp.where(std > 0, std, 1.0)
    return (x_train - mean) / std, (x_test - mean) / std


def standardize_each_own(x_train, x_test):   # the test set scaled with its own statistics
    return standardize_right(x_train, x_train)[0], standardize_right(x_test, x_test)[0]


def l2_with_biases(params):
    return sum(jnp.sum(p ** 2) for p in nbjax.tree_util.tree_leaves(params))


def recall_right(confusion):
    rows = jnp.sum(confusion, axis=1)
    return jnp.where(rows > 0, jnp.diag(confusion) / jnp.maximum(rows, 1), 0.0)


def spring_kinetic(q, q_dot):
    return 0.5 * (q_dot[0] ** 2 + q[0] ** 2 * q_dot[1] ** 2)


def spring_potential(q):
    return -9.81 * q[0] * jnp.cos(q[1]) + 0.5 * 20.0 * (q[0] - 1.0) ** 2


def verlet_right(accel, q, v, dt):
    v = v + dt / 2 * accel(q)
    q = q + dt * v
    return q, v + dt / 2 * accel(q)


def count_spikes_right(v):
    return jnp.sum((v[:-1] < 0) & (v[1:] >= 0))


ANSWERS.update({   # chapters 9 and 10
    "ch09.standardize": (standardize_right, standardize_each_own, "its own mean"),
    "ch09.l2_penalty": (lambda params: sum(jnp.sum(w ** 2) for w, _ in params),
                        l2_with_biases, "includes the biases"),
    "ch09.recall_per_class": (recall_right,
                              lambda c: jnp.diag(c) / jnp.sum(c, axis=0), "(that is precision)"),
    "ch10.spring_pendulum": (lambda q, q_dot: spring_kinetic(q, q_dot) - spring_potential(q),
                             lambda q, q_dot: spring_kinetic(q, q_dot) + spring_potential(q),
                             "(r'', theta'') your Lagrangian gives"),
    "ch10.verlet_step": (verlet_right, lambda accel, q, v, dt: (q + dt * v, v + dt * accel(q)),
                         "the new q of verlet_step(accel, q, v, 0.1)"),
    "ch10.count_spikes": (count_spikes_right, lambda v: jnp.sum(v >= 0),
                          "counts the samples above 0 mV"),
})


def test_every_exercise_is_tested():
    assert sorted(ANSWERS) == sorted(EXERCISES)


@pytest.mark.parametrize("exercise", sorted(ANSWERS))
def test_right_answer(exercise):
    verdict = check(exercise, ANSWERS[exercise][0])
    assert verdict.status == RIGHT and verdict, verdict


@pytest.mark.parametrize("exercise", sorted(ANSWERS))
def test_wrong_answer(exercise):
    _, wrong, words = ANSWERS[exercise]
    verdict = check(exercise, wrong)
    assert verdict.status == WRONG and not verdict, verdict
    assert words in verdict.why


@pytest.mark.parametrize("exercise", sorted(ANSWERS))
def test_placeholder_is_not_attempted(exercise):
    verdict = check(exercise, ...)
    assert verdict.status == NOT_ATTEMPTED and not verdict, verdict


def test_a_function_still_returning_the_placeholder_is_not_attempted():
    def unfinished(f, x, h):
        ...

    assert check("ch01.central_difference", unfinished).status == NOT_ATTEMPTED
    assert check("ch01.dual_division", UnfinishedDual).status == NOT_ATTEMPTED
    assert check("ch05.running_sum", lambda xs: None).status == NOT_ATTEMPTED

    def optimiser_skeleton(lr, beta):
        def init(params):
            ...

        def update(params, grads, state):
            ...

        return init, update

    assert check("ch07.nesterov", optimiser_skeleton).status == NOT_ATTEMPTED
    init, _ = nesterov(0.1, 0.9)
    started = check("ch07.nesterov", lambda lr, beta: (init, optimiser_skeleton(lr, beta)[1]))
    assert started.status == NOT_ATTEMPTED
    half = {**PROMOTIONS_RIGHT, "uint8 + 1": ...}
    verdict = check("ch03.promotion", half)
    assert verdict.status == NOT_ATTEMPTED and "'uint8 + 1'" in verdict.why


def test_python_control_flow_under_jit_is_reported():
    def collatz_python(n):
        steps = 0
        while n != 1:
            n, steps = (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1
        return steps

    verdict = check("ch05.collatz_steps", collatz_python)
    assert verdict.status == WRONG and "TracerBoolConversionError" in verdict.why
    verdict = check("ch05.running_sum", lambda xs: jnp.cumsum(xs))
    assert verdict.status == WRONG and "lax.scan" in verdict.why


def test_an_exception_in_the_answer_is_reported_not_raised():
    verdict = check("ch01.derivative_by_hand", lambda x: 1 / 0)
    assert verdict.status == WRONG and "ZeroDivisionError" in verdict.why


def test_messages_do_not_give_the_answer_away():
    verdict = check("ch01.derivative_by_hand", lambda x: np.exp(-x ** 2) * (1 - x ** 2))
    x = float(verdict.why.split("x = ")[1].split(" ")[0])
    expected = np.exp(-x ** 2) * (1 - 2 * x ** 2)
    assert f"{expected:.2f}" not in verdict.why and f"{expected:.3g}" not in verdict.why


def test_unknown_exercise_lists_the_known_ones():
    with pytest.raises(KeyError, match="ch01.central_difference"):
        check("ch99.nothing", 1)


def test_verdicts_display_as_text_and_html():
    right = Verdict("ch01.x", RIGHT, "well done")
    wrong = Verdict("ch01.x", WRONG, "a < b")
    assert str(right) == "✔ ch01.x: right: well done"
    assert "a &lt; b" in wrong._repr_html_() and "✘" in wrong._repr_html_()


def test_the_case_study_and_physics_hints():
    """The other mistakes chapters 9 and 10 name: a nan from a constant feature, a recall of
    nan for an absent class, a spike counted at the start of a trace, a Lagrangian with no
    kinetic energy, Python control flow where jit needs nbjax's."""
    def standardize_no_guard(x_train, x_test):
        mean, std = jnp.mean(x_train, axis=0), jnp.std(x_train, axis=0)
        return (x_train - mean) / std, (x_test - mean) / std

    def count_from_the_start(v):
        return count_spikes_right(v) + (v[0] >= 0)

    mistakes = [("ch09.standardize", standardize_no_guard, "standard deviation of 0"),
                ("ch09.recall_per_class", lambda c: jnp.diag(c) / jnp.sum(c, axis=1),
                 "class with no example"),
                ("ch10.count_spikes", count_from_the_start, "starts above 0 mV"),
                ("ch10.count_spikes", lambda v: int(np.sum(v >= 0)), "TracerArrayConversion"),
                ("ch10.spring_pendulum", lambda q, q_dot: -spring_potential(q), "singular"),
                ("ch10.spring_pendulum", lambda q, q_dot: jnp.stack([q[0], q_dot[0]]),
                 "should be a number")]
    for exercise, answer, words in mistakes:
        verdict = check(exercise, answer)
        assert verdict.status == WRONG and words in verdict.why, (exercise, verdict)
