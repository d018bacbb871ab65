"""Benchmarks for nbjax: ``python -m benchmarks.run`` (``make bench``).

``workloads`` defines what is measured (the seed documents' workloads and a few more),
``contenders`` how each library runs a workload (NumPy, nbjax on a chosen backend, ``jax.jit``
when jax is installed), ``timing`` how a time and the memory bandwidth are measured, and
``run`` puts them together into a table and a JSON file. Nothing here runs in the tests except
a smoke test of the machinery on tiny sizes.
"""
