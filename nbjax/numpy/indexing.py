"""TODO: being written."""

__all__ = []


def _getitem(x, idx):
    raise NotImplementedError("indexing is being written")


class _IndexUpdateHelper:
    def __init__(self, x):
        raise NotImplementedError(".at is being written")
