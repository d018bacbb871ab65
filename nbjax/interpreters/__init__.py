"""Transformations as traces: staging (trace to jaxpr) now; jvp, transpose, batching next."""
