"""Donated inputs (``jit(f, donate_argnums=...)``): which output each one can become.

A jitted call that donates an input gives its buffer away: the caller's Array is deleted,
and the program may write one of its outputs into that memory instead of a new buffer.
``match`` pairs each donated input with the first output of the same shape and dtype not
taken by an earlier one (as JAX's lowering pairs them); an input that no output matches is
"not usable": JAX warns and leaves the array alone, and so does ``jit``.

Which output (of those that fit) really is written into a donated input's buffer, and when
that is safe, is the target's business (the CPU's: ``backends.cpu.buffer_plan.donations``); any target
may ignore donation and allocate as usual, which never changes a result.
"""


def fits(in_aval, out_aval):
    """Whether an output of ``out_aval`` can take the buffer of an input of ``in_aval``."""
    return tuple(in_aval.shape) == tuple(out_aval.shape) and in_aval.dtype == out_aval.dtype


def match(in_avals, donated, out_avals):
    """{input position: output position} for the positions in ``donated`` that an output
    of the same shape and dtype can take, each output taken once, inputs in order."""
    free = list(range(len(out_avals)))
    pairs = {}
    for i in sorted(donated):
        k = next((k for k in free if fits(in_avals[i], out_avals[k])), None)
        if k is not None:
            pairs[i] = k
            free.remove(k)
    return pairs
