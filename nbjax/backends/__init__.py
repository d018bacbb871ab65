"""Backends that execute jaxprs: the reference interpreter (CPU llvmlite and GPU CuPy next)."""
