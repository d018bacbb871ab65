"""How a jaxpr is laid out for display: node ids, printed params, sub-jaxprs.

The graph model and the coloured text both walk a jaxpr with these helpers, so an equation
has the same id in both (``e3`` at the top level, ``e3/branches1/e0`` inside the second
branch of the ``cond`` that is equation 3) and the notebook can link them.
"""

import numpy as np

from ..core.jaxpr import ClosedJaxpr, Jaxpr


def open_jaxpr(j):
    """(jaxpr, consts or None) of a Jaxpr or ClosedJaxpr."""
    if isinstance(j, ClosedJaxpr):
        return j.jaxpr, j.consts
    if isinstance(j, Jaxpr):
        return j, None
    raise TypeError(f"expected a Jaxpr or ClosedJaxpr, got {type(j).__name__}")


def is_jaxpr(value):
    return isinstance(value, (Jaxpr, ClosedJaxpr))


def printed_params(eqn):
    """The (key, value) params of ``eqn`` in the order the jaxpr printer shows them."""
    params = eqn.primitive.pp_params(eqn.params)
    return list(params) if isinstance(params, list) else sorted(params.items())


def param_text(value):
    """A non-jaxpr param as the printer writes it."""
    return value.name if isinstance(value, np.dtype) else str(value)


def is_jaxpr_tuple(value):
    return isinstance(value, tuple) and bool(value) and all(map(is_jaxpr, value))


def sub_jaxprs(eqn):
    """(path suffix, label, Jaxpr or ClosedJaxpr) for each printed sub-jaxpr of ``eqn``.

    ``cond``'s ``branches`` tuple gives ``("branches0", "branches[0]", ...)``; a single
    jaxpr param such as ``scan``'s ``jaxpr`` gives ``("jaxpr", "jaxpr", ...)``.
    """
    for key, value in printed_params(eqn):
        if is_jaxpr(value):
            yield key, key, value
        elif is_jaxpr_tuple(value):
            for i, sub in enumerate(value):
                yield f"{key}{i}", f"{key}[{i}]", sub


def eqn_id(prefix, i):
    return f"{prefix}e{i}"


def sub_prefix(owner_id, suffix):
    """The cluster id of a sub-jaxpr; its nodes' ids start with it and a slash."""
    return f"{owner_id}/{suffix}"


def eqn_source(eqn):
    """The SourceInfo of the user-level operation ``eqn`` came from (for a backward
    equation, the line it differentiates, not the line that called ``grad``), else the
    equation's own, or None."""
    p = eqn.provenance
    return p.source_info if p is not None and p.source_info is not None else eqn.source_info
