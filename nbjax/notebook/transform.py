"""The stages of ``%transform f(x) --with grad,vmap,jit``: ``f``, ``grad(f)``,
``vmap(grad(f))`` traced to jaxprs at the call's arguments, and what ``jit`` compiles of the
last of them (``nbjax.viz.pipeline`` links and draws them).

``vmap`` needs a batch axis the call does not have: from a ``vmap`` on, every array
argument gets a new leading axis of ``batch`` copies (so ``f(x)`` is traced as
``vmap(grad(f))(xs)`` with ``xs`` of shape ``(batch, *x.shape)``), or, given ``in_axes``
(one per positional argument), a new axis where it says and none where it says None (so
``loss(params, x, y)`` with ``(None, 0, 0)`` gives per-example gradients, the parameters
shared).
"""

from .. import api
from .. import numpy as jnp
from ..api import make_jaxpr
from ..core import pytree
from ..jit import jit
from ..viz.pipeline import PipelineView, Stage
from .panes import location, new_prefix
from .tracebacks import call_user_function

# The transformations a stage may apply (each maps a function to a function); jit is last.
TRANSFORMS = {name: getattr(api, name) for name in (
    "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "vmap")}
TRANSFORM_NAMES = (*TRANSFORMS, "jit")


def check_transforms(names):
    """A usage message for a bad ``--with`` list, or None."""
    unknown = [n for n in names if n not in TRANSFORM_NAMES]
    if unknown:
        return (f"unknown transformation {', '.join(map(repr, unknown))}; choose from "
                f"{', '.join(TRANSFORM_NAMES)}")
    if "jit" in names[:-1]:
        return "jit must come last (its stage shows the compiled kernels of the one before)"
    return None


def batched(tree, size, axis=0):
    """Every leaf of ``tree`` with a new axis ``axis`` of ``size`` copies (None: as is)."""
    if axis is None:
        return tree

    def stack(leaf):
        leaf = jnp.asarray(leaf)
        return jnp.moveaxis(jnp.broadcast_to(leaf, (size, *leaf.shape)), 0, axis)
    return pytree.tree_map(stack, tree)


def _vmapped(fn, label, in_axes):
    if in_axes is None:
        return api.vmap(fn), f"vmap({label})"
    return api.vmap(fn, in_axes=in_axes), f"vmap({label}, in_axes={in_axes!r})"


def pipeline(fn, label, args, kwargs, transforms, *, batch=4, backend=None, in_axes=None):
    """A ``PipelineView`` of ``fn`` called with ``args``/``kwargs`` under ``transforms``
    (names from ``TRANSFORM_NAMES``), applied in order; each ``vmap`` maps the positional
    arguments over ``in_axes`` (default: axis 0 of every one)."""
    __tracebackhide__ = True  # noqa: F841
    stages = [Stage(label, None, _trace(fn, args, kwargs))]
    for name in transforms:
        if name == "vmap":
            axes = in_axes if in_axes is not None else (0,) * len(args)
            args = tuple(batched(a, batch, axis) for a, axis in zip(args, axes, strict=True))
            kwargs = batched(kwargs, batch)
        if name == "jit":
            stages.append(_compiled(fn, label, args, kwargs, backend))
            break
        if name == "vmap":
            fn, label = _vmapped(fn, label, in_axes)
        else:
            fn, label = TRANSFORMS[name](fn), f"{name}({label})"
        stages.append(Stage(label, name, _trace(fn, args, kwargs)))
    return PipelineView(stages, prefix=new_prefix(), locate=location)


def _trace(fn, args, kwargs):
    __tracebackhide__ = True  # noqa: F841
    return call_user_function(make_jaxpr(fn), args, kwargs)


def _compiled(fn, label, args, kwargs, backend):
    """The ``jit`` stage: the optimised jaxpr and the plan of its compiled steps."""
    __tracebackhide__ = True  # noqa: F841
    lowered = call_user_function(jit(fn).lower, args, kwargs)
    executable = lowered.compile(backend).executable
    label = f"jit({label}) on {executable.target}"
    if executable.plan is None:
        return Stage(label, "jit", lowered.optimized,
                     note=f"the {executable.target} backend runs equation by equation: "
                          "nothing is fused (use --backend cpu)")
    return Stage(label, "jit", executable.jaxpr, plan=executable.plan)
