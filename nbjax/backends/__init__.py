"""Backends that execute jaxprs: ``reference`` (the NumPy interpreter that defines the
semantics) and ``cpu`` (the llvmlite compiler); a GPU backend (CUDA C through CuPy) is next."""
