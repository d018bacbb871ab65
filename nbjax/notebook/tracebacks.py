"""Tracebacks that end in the user's code: nbjax's own frames are dropped, as JAX does.

An exception raised while a jitted or differentiated function runs passes through many
frames of tracing machinery; what the user needs is the line of *their* cell. The notebook
wrappers re-raise with ``filtered``'s traceback and mark their own frame with
``__tracebackhide__`` (which IPython hides). ``NBJAX_TRACEBACK_FILTERING=off`` keeps every
frame, for debugging nbjax itself.
"""

import os
import types

from ..core.source_info import is_internal


def filtering_enabled():
    return os.environ.get("NBJAX_TRACEBACK_FILTERING", "on").lower() not in ("off", "0", "no")


def filtered(tb):
    """``tb`` without the frames in nbjax's package (unchanged if that leaves none)."""
    if not filtering_enabled():
        return tb
    kept = []
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    if not kept:
        return None
    chain = None
    for t in reversed(kept):
        chain = types.TracebackType(chain, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return chain


def call_user_function(fn, args, kwargs):
    """``fn(*args, **kwargs)``, re-raising any exception with a filtered traceback."""
    __tracebackhide__ = True  # noqa: F841 (read by IPython)
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        tb = filtered(e.__traceback__)
        if tb is None:
            raise
        raise e.with_traceback(tb)
