"""nbjax's version: one place, read by the package, the build (pyproject's dynamic version),
``print_environment_info`` and the disk cache's keys."""

__version__ = "0.1.0"
