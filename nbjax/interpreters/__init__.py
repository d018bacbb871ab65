"""Transformations as traces: staging (trace to jaxpr), batching (vmap), ad (JVP),
partial_eval (linearize) and transpose (reverse mode)."""
