"""The policies ``checkpoint`` takes (``jax.checkpoint_policies``): which intermediate values
of a checkpointed function the forward pass keeps for the backward pass instead of leaving
them to be recomputed.

A policy is called on each equation the forward pass computes, as
``policy(primitive, *operand_types, **params)``, and answers True (or ``Saveable``, or an
``Offloadable``) to keep its results, False (or ``Recompute``) to recompute them.
Parameterised policies are frozen dataclasses, so a jaxpr prints them readably and a
compiled program's cache key can hold them.
"""

from dataclasses import dataclass

from .checkpoint import Offloadable, Recompute, Saveable, name_p
from .lax.dot import dot_general_p

__all__ = ["everything_saveable", "nothing_saveable", "dots_saveable", "checkpoint_dots",
           "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims",
           "save_only_these_names", "save_any_names_but_these",
           "save_anything_except_these_names", "save_from_both_policies",
           "offload_dot_with_no_batch_dims", "save_and_offload_only_these_names"]


def everything_saveable(*_, **__):
    """Keep everything: no recomputation (checkpoint changes nothing)."""
    return True


def nothing_saveable(*_, **__):
    """Keep nothing but the inputs: recompute everything (checkpoint's default)."""
    return False


def _is_dot(prim, only_if_no_batch_dims, params):
    if prim is not dot_general_p:
        return False
    (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
    return not (only_if_no_batch_dims and (lhs_batch or rhs_batch))


@dataclass(frozen=True)
class DotsSaveable:
    """Keep matrix products (the expensive values), recompute the element-wise rest."""
    only_if_no_batch_dims: bool = False

    def __call__(self, prim, *_, **params):
        return _is_dot(prim, self.only_if_no_batch_dims, params)


dots_saveable = checkpoint_dots = DotsSaveable()
dots_with_no_batch_dims_saveable = checkpoint_dots_with_no_batch_dims = DotsSaveable(True)


def _tag(prim, params):
    """The name ``checkpoint_name`` gave the value, or None for other equations."""
    return params["name"] if prim is name_p else None


@dataclass(frozen=True)
class SaveOnlyTheseNames:
    """Keep the values named by ``checkpoint_name`` with one of these names, nothing else."""
    saveable_names: frozenset

    def __call__(self, prim, *_, **params):
        return _tag(prim, params) in self.saveable_names


@dataclass(frozen=True)
class SaveAnyNamesButThese:
    """Keep every named value except those with these names; nothing unnamed."""
    names_not_to_save: frozenset

    def __call__(self, prim, *_, **params):
        name = _tag(prim, params)
        return name is not None and name not in self.names_not_to_save


@dataclass(frozen=True)
class SaveAnythingExceptTheseNames:
    """Keep everything except the values named with these names."""
    names_not_to_save: frozenset

    def __call__(self, prim, *_, **params):
        return _tag(prim, params) not in self.names_not_to_save


def save_only_these_names(*names_which_can_be_saved):
    return SaveOnlyTheseNames(frozenset(names_which_can_be_saved))


def save_any_names_but_these(*names_not_to_save):
    return SaveAnyNamesButThese(frozenset(names_not_to_save))


def save_anything_except_these_names(*names_not_to_save):
    return SaveAnythingExceptTheseNames(frozenset(names_not_to_save))


@dataclass(frozen=True)
class SaveFromBothPolicies:
    """Keep what either policy keeps."""
    policy_1: object
    policy_2: object

    def __call__(self, prim, *avals, **params):
        first = self.policy_1(prim, *avals, **params)
        if first is not Recompute and first:
            return first
        return self.policy_2(prim, *avals, **params)


def save_from_both_policies(policy_1, policy_2):
    return SaveFromBothPolicies(policy_1, policy_2)


@dataclass(frozen=True)
class OffloadDotWithNoBatchDims:
    """Move products without batch dimensions to ``offload_dst`` memory (one memory on the
    CPU: they are kept)."""
    offload_src: str
    offload_dst: str

    def __call__(self, prim, *_, **params):
        if _is_dot(prim, True, params):
            return Offloadable(self.offload_src, self.offload_dst)
        return Recompute


def offload_dot_with_no_batch_dims(offload_src, offload_dst):
    return OffloadDotWithNoBatchDims(offload_src, offload_dst)


@dataclass(frozen=True)
class SaveAndOffloadOnlyTheseNames:
    """Keep the values with the first names, move those with the second ones (kept too, in
    one memory), recompute the rest."""
    names_which_can_be_saved: frozenset
    names_which_can_be_offloaded: frozenset
    offload_src: str
    offload_dst: str

    def __call__(self, prim, *_, **params):
        name = _tag(prim, params)
        if name in self.names_which_can_be_saved:
            return Saveable
        if name in self.names_which_can_be_offloaded:
            return Offloadable(self.offload_src, self.offload_dst)
        return Recompute


def save_and_offload_only_these_names(*, names_which_can_be_saved,
                                      names_which_can_be_offloaded, offload_src, offload_dst):
    return SaveAndOffloadOnlyTheseNames(frozenset(names_which_can_be_saved),
                                        frozenset(names_which_can_be_offloaded),
                                        offload_src, offload_dst)
