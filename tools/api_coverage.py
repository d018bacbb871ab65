"""Measure how much of JAX's public surface nbjax provides.

For every public name of a JAX module (its functions, classes and objects such as
``jnp.mgrid``) and every public attribute of ``jax.Array``, the tool looks up the nbjax
counterpart and files the name under one of:

- ``present``: nbjax defines it;
- ``not_implemented``: nbjax defines a stand-in that raises ``NotImplementedError`` and says
  why (an object with a ``not_implemented_reason`` attribute, see
  ``nbjax.numpy.util.not_implemented``);
- ``missing``: nbjax has no such name. The generic stubs that ``nbjax.numpy.__getattr__``
  hands out for any NumPy name count as missing: nbjax does not define them.

For each present function it also compares the parameters JAX's takes by keyword
(``jnp.std(x, mean=m)``, ``random.t(key, df=3)``) with those nbjax's takes: the ones nbjax's
lacks are listed as *keyword gaps*.

It writes ``docs/api_coverage.md`` (per module: counts, percentage, missing names, keyword
gaps) and ``tests/data/api_coverage.json`` (what nbjax has, and the keywords each JAX
function takes, read by ``tests/test_api_surface.py``).
JAX is imported here only, as the reference; nbjax never imports it.

    python tools/api_coverage.py          # from the repository root
"""

import importlib
import inspect
import json
import pathlib
import sys
import types
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (JAX module, nbjax module). "Array" rows compare the attributes of an array instance.
MODULES = [
    ("jax", "nbjax"),
    ("jax.tree", "nbjax.tree"),
    ("jax.tree_util", "nbjax.tree_util"),
    ("jax.debug", "nbjax.debug"),
    ("jax.numpy", "nbjax.numpy"),
    ("jax.numpy.linalg", "nbjax.numpy.linalg"),
    ("jax.numpy.fft", "nbjax.numpy.fft"),
    ("jax.lax", "nbjax.lax"),
    ("jax.lax.linalg", "nbjax.lax.linalg"),
    ("jax.nn", "nbjax.nn"),
    ("jax.random", "nbjax.random"),
    ("jax.scipy.special", "nbjax.scipy.special"),
    ("jax.scipy.linalg", "nbjax.scipy.linalg"),
    ("jax.scipy.stats", "nbjax.scipy.stats"),
    ("jax.scipy.signal", "nbjax.scipy.signal"),
    ("jax.scipy.fft", "nbjax.scipy.fft"),
    ("jax.scipy.integrate", "nbjax.scipy.integrate"),
    ("jax.scipy.ndimage", "nbjax.scipy.ndimage"),
    ("jax.scipy.interpolate", "nbjax.scipy.interpolate"),
    ("jax.scipy.optimize", "nbjax.scipy.optimize"),
    ("jax.scipy.spatial.transform", "nbjax.scipy.spatial.transform"),
    ("jax.scipy.cluster.vq", "nbjax.scipy.cluster.vq"),
    ("jax.nn.initializers", "nbjax.nn.initializers"),
    ("jax.image", "nbjax.image"),
    ("jax.flatten_util", "nbjax.flatten_util"),
    ("jax.dtypes", "nbjax.dtypes"),
    ("jax.errors", "nbjax.errors"),
    ("jax.custom_batching", "nbjax.custom_batching"),
    ("jax.custom_derivatives", "nbjax.custom_derivatives"),
    ("jax.stages", "nbjax.stages"),
    ("jax.profiler", "nbjax.profiler"),
    ("jax.typing", "nbjax.typing"),
    ("jax.checkpoint_policies", "nbjax.checkpoint_policies"),
    ("jax.ad_checkpoint", "nbjax.ad_checkpoint"),
    ("jax.ops", "nbjax.ops"),
    ("jax.scipy.sparse.linalg", "nbjax.scipy.sparse.linalg"),
    ("jax.example_libraries.optimizers", "nbjax.example_libraries.optimizers"),
    ("jax.example_libraries.stax", "nbjax.example_libraries.stax"),
    ("jax.experimental", "nbjax.experimental"),
    ("jax.experimental.ode", "nbjax.experimental.ode"),
    ("jax.experimental.jet", "nbjax.experimental.jet"),
    ("jax.experimental.checkify", "nbjax.experimental.checkify"),
    ("jax.Array", "nbjax.Array"),
]


def import_quietly(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(name)


def public_names(obj):
    """Public attributes of a module (functions, classes and objects such as ``jnp.mgrid``
    or ``jax.float0``; submodules excluded), or of a class (methods and properties alike)."""
    names = []
    for name in sorted(dir(obj)):
        if name.startswith("_"):
            continue
        if isinstance(obj, type):
            names.append(name)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                value = getattr(obj, name)
            except Exception:  # deprecated names that raise on access are not public
                continue
        if not isinstance(value, types.ModuleType):
            names.append(name)
    return names


def jax_modules():
    """The (JAX, nbjax) pairs, with each distribution module of jax.scipy.stats added."""
    pairs = list(MODULES)
    stats = import_quietly("jax.scipy.stats")
    for name in sorted(dir(stats)):
        if isinstance(getattr(stats, name), types.ModuleType) and not name.startswith("_"):
            pairs.append((f"jax.scipy.stats.{name}", f"nbjax.scipy.stats.{name}"))
    return pairs


def resolve_jax(name):
    """The JAX module, or a namespace that is an attribute (``jax.checkpoint_policies``)."""
    if name == "jax.Array":
        return import_quietly("jax").Array
    try:
        return import_quietly(name)
    except ModuleNotFoundError:
        parent, _, attribute = name.rpartition(".")
        return getattr(import_quietly(parent), attribute)


def nbjax_target(name):
    """The nbjax module, or an array instance for the Array row; None if it does not exist."""
    if name == "nbjax.Array":
        return import_quietly("nbjax.numpy").zeros((2, 2))
    try:
        return import_quietly(name)
    except ImportError:
        return None


def classify(target, name):
    """``("present"|"not_implemented"|"missing", reason)`` for ``name`` on ``target``."""
    if target is None:
        return "missing", None
    if isinstance(target, types.ModuleType) and name not in vars(target):
        return "missing", None  # absent, or only a generic stub from __getattr__
    try:
        value = getattr(target, name)
    except NotImplementedError as e:  # a property that says why it is missing
        return "not_implemented", str(e)
    except AttributeError:
        return "missing", None
    reason = getattr(value, "not_implemented_reason", None)
    if isinstance(reason, str):
        return "not_implemented", reason
    return "present", None


def keywords(fn):
    """The public parameters ``fn`` takes by keyword, or None: not a function, or one whose
    signature cannot be read."""
    if isinstance(fn, type) or not callable(fn):
        return None
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return [p.name for p in parameters if not p.name.startswith("_") and p.name != "self" and
            p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]


def keyword_gaps(fn, wanted):
    """Those of the keywords ``wanted`` that ``fn`` does not take."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return []
    taken = {p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    return [k for k in wanted if k not in taken]


def survey():
    """``{jax module: {"nbjax": ..., "present": [...], "not_implemented": {...},
    "missing": [...], "keywords": {name: [...]}, "keyword_gaps": {name: [...]}}}``."""
    result = {}
    for jax_name, nb_name in jax_modules():
        target = nbjax_target(nb_name)
        jax_module = resolve_jax(jax_name)
        row = {"nbjax": nb_name, "present": [], "not_implemented": {}, "missing": [],
               "keywords": {}, "keyword_gaps": {}}
        for name in public_names(jax_module):
            status, reason = classify(target, name)
            if status == "not_implemented":
                row["not_implemented"][name] = reason
            else:
                row[status].append(name)
            wanted = keywords(getattr(jax_module, name)) if status == "present" else None
            if wanted:
                row["keywords"][name] = wanted
                gaps = keyword_gaps(getattr(target, name), wanted)
                if gaps:
                    row["keyword_gaps"][name] = gaps
        result[jax_name] = row
    return result


def percent(part, whole):
    return 100.0 * part / whole if whole else 100.0


def markdown(result, jax_version):
    lines = [
        "# nbjax's coverage of JAX's public API",
        "",
        f"Generated by `python tools/api_coverage.py` against JAX {jax_version}. A name counts",
        "as present when nbjax defines it; *stub* names exist but raise `NotImplementedError`",
        "with a reason; everything else is missing. `jax.Array` compares the public methods and",
        "properties of an array.",
        "",
        "| JAX module | nbjax | names | present | stub | missing | coverage |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for jax_name, row in result.items():
        n_present, n_stub, n_missing = (len(row["present"]), len(row["not_implemented"]),
                                         len(row["missing"]))
        total = n_present + n_stub + n_missing
        lines.append(f"| `{jax_name}` | `{row['nbjax']}` | {total} | {n_present} | {n_stub} "
                     f"| {n_missing} | {percent(n_present, total):.1f}% |")
    for jax_name, row in result.items():
        if not row["missing"] and not row["not_implemented"] and not row["keyword_gaps"]:
            continue
        lines += ["", f"## `{jax_name}`", ""]
        if row["not_implemented"]:
            lines.append("Stubs (raise `NotImplementedError`):")
            lines.append("")
            lines += [f"- `{n}`: {r}" for n, r in sorted(row["not_implemented"].items())]
            lines.append("")
        if row["missing"]:
            lines.append("Missing: " + ", ".join(f"`{n}`" for n in row["missing"]))
        if row["keyword_gaps"]:
            lines += ["", "Keywords JAX takes that nbjax does not:", ""]
            lines += [f"- `{n}`: " + ", ".join(f"`{k}`" for k in gaps)
                      for n, gaps in sorted(row["keyword_gaps"].items())]
    return "\n".join(lines) + "\n"


def main():
    jax = import_quietly("jax")
    result = survey()
    (ROOT / "docs" / "api_coverage.md").write_text(markdown(result, jax.__version__))
    names = {jax_name: {"nbjax": row["nbjax"], "present": row["present"],
                        "not_implemented": sorted(row["not_implemented"]),
                        "keywords": row["keywords"], "keyword_gaps": row["keyword_gaps"]}
             for jax_name, row in result.items()}
    data = {"jax_version": jax.__version__, "modules": names}
    path = ROOT / "tests" / "data" / "api_coverage.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    for jax_name, row in result.items():
        total = len(row["present"]) + len(row["not_implemented"]) + len(row["missing"])
        print(f"{jax_name:28s} {len(row['present']):4d}/{total:<4d} "
              f"{percent(len(row['present']), total):5.1f}%")


if __name__ == "__main__":
    main()
