"""Donated inputs (``jit(f, donate_argnums=...)``): which output each one can become.

A jitted call that donates an input gives its buffer away: the caller's Array is deleted,
and the program may write one of its outputs into that memory instead of a new buffer.
``match`` pairs each donated input with the first output of the same shape and dtype not
taken by an earlier one (as JAX's lowering pairs them); an input that no output matches is
"not usable": JAX warns and leaves the array alone, and so does ``jit``.

Whether an output really is written into its donated input's buffer, and when that is safe,
is the target's business (the CPU's: ``backends.cpu.buffer_plan.donations``); any target
may ignore donation and allocate as usual, which never changes a result.
"""


def match(in_avals, donated, out_avals):
    """{input position: output position} for the positions in ``donated`` that an output
    of the same shape and dtype can take, each output taken once, inputs in order."""
    free = list(range(len(out_avals)))
    pairs = {}
    for i in sorted(donated):
        want = (tuple(in_avals[i].shape), in_avals[i].dtype)
        k = next((k for k in free if (tuple(out_avals[k].shape), out_avals[k].dtype) == want),
                 None)
        if k is not None:
            pairs[i] = k
            free.remove(k)
    return pairs
