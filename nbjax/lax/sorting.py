"""TODO: being written."""

__all__ = []
