"""Array API standard additions (being written)."""

__all__ = []
