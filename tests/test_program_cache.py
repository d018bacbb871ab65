"""The CPU backend's disk cache of whole programs: a program compiled before (in this process
or another) is loaded with no pass, planning or code generation, computes what it computed,
points at the source lines of the new trace, and is rebuilt when its entry is damaged or was
made for another environment; programs that cannot be keyed are compiled as before."""

import builtins

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends import compile
from nbjax.backends.cpu import cache, program_cache
from helpers import assert_close, new_process_json

RNG = np.random.default_rng(11)
pytestmark = pytest.mark.cpu_compiler


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "nbjax-cache"
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(path))
    monkeypatch.delenv("NBJAX_DISABLE_DISK_CACHE", raising=False)
    return path


def _loop(w, xs):
    """A scan whose body holds a BLAS product, a host step (an FFT: a host callback would make
    a program that the cache cannot key) and kernels (and ``xs * 1.0``, which the passes
    rewrite: the program has a passes' log)."""
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, jnp.fft.rfft(h)
    return lax.scan(step, jnp.zeros((xs.shape[1], w.shape[0]), w.dtype), xs * 1.0)


def _loop_numpy(w, xs):
    h, ys = np.zeros((xs.shape[1], w.shape[0]), w.dtype), []
    for x in xs:
        h = np.tanh(h @ w + x)
        ys.append(np.fft.rfft(h))
    return h, np.stack(ys)


def _inputs():
    return (RNG.standard_normal((6, 6)).astype(np.float32) * 0.5,
            RNG.standard_normal((5, 3, 6)).astype(np.float32))


def _compiled(f, *args):
    return compile(nbjax.make_jaxpr(f)(*args), "cpu", f.__name__)


def _program_entries(path):
    return sorted(p for p in path.iterdir() if p.name.endswith(program_cache.SUFFIX))


def test_second_compilation_loads_the_program_and_computes_the_same():
    w, xs = _inputs()
    first = _compiled(_loop, w, xs)
    assert "codegen" in first.compile_times and cache.stats["program store"] >= 1
    hits = cache.stats["program hit"]
    second = _compiled(_loop, w, xs)
    assert cache.stats["program hit"] == hits + 1
    assert set(second.compile_times) == {"program_cache"}  # no pass, plan, codegen, LLVM
    assert second.runs_as == first.runs_as
    for got, want in zip(second.run(w, xs), _loop_numpy(w, xs)):
        assert_close(got, want, rtol=1e-5)
    assert [k.texts for k in second.kernels] == [k.texts for k in first.kernels]
    assert second.jit_module.optimised_ir == first.jit_module.optimised_ir
    assert str(second.jaxpr) == str(first.jaxpr)
    assert len(second.plan.groups) == len(first.plan.groups)


def test_loaded_program_times_its_steps_and_reports():
    w, xs = _inputs()
    _compiled(_loop, w, xs)
    loaded = _compiled(_loop, w, xs)
    assert set(loaded.compile_times) == {"program_cache"}
    loaded.enable_timing()
    for got, want in zip(loaded.run(w, xs), _loop_numpy(w, xs)):
        assert_close(got, want, rtol=1e-5)
    assert loaded.step_times and all(len(t) == 1 for t in loaded.step_times.values())
    compiled = nbjax.jit(_loop).lower(w, xs).compile()
    assert "scan" in compiled.as_text()


def _plans(plan):
    """A plan and the plans of its compiled control flow, recursively."""
    yield plan
    for g in plan.groups:
        for sub in g.subprograms:
            yield from _plans(sub.plan)


def test_what_only_reports_read_is_loaded_when_first_read_and_equals_a_fresh_compile():
    """A loaded program runs without unpickling its report-only part (the plans' decisions,
    the kernels' bodies, the passes' log); the first read of ``plan``, ``rewrites`` or
    ``kernels`` loads it, and the reports then say what a fresh compile's say."""
    from nbjax.compiler import report
    w, xs = _inputs()
    fresh = _compiled(_loop, w, xs)
    assert fresh.rewrites and any(g.subprograms for g in fresh.plan.groups)
    for read in ("plan", "rewrites", "kernels"):
        loaded = _compiled(_loop, w, xs)
        assert set(loaded.compile_times) == {"program_cache"}
        for got, want in zip(loaded.run(w, xs), _loop_numpy(w, xs)):
            assert_close(got, want, rtol=1e-5)
        assert loaded._report is not None  # not loaded by running it
        getattr(loaded, read)
        assert loaded._report is None
    assert report.compiled_text(loaded) == report.compiled_text(fresh)
    assert [str(r) for r in loaded.rewrites] == [str(r) for r in fresh.rewrites]
    assert [[str(d) for d in p.decisions] for p in _plans(loaded.plan)] == \
        [[str(d) for d in p.decisions] for p in _plans(fresh.plan)]
    assert [k.loop.pretty() for k in loaded.kernels] == [k.loop.pretty() for k in fresh.kernels]
    assert [k.texts for k in loaded.kernels] == [k.texts for k in fresh.kernels]


def test_a_loaded_program_reads_its_optimised_ir_when_first_asked(monkeypatch):
    """The module's optimised IR (megabytes for a large program, which only reports and
    tests read) stays in the entry until ``optimised_ir`` is first read; it is then the
    fresh compile's."""
    w, xs = _inputs()
    fresh = _compiled(_loop, w, xs)
    reads = []
    read_detail = cache.read_detail
    monkeypatch.setattr(cache, "read_detail", lambda *a: reads.append(a) or read_detail(*a))
    loaded = _compiled(_loop, w, xs)
    assert set(loaded.compile_times) == {"program_cache"}
    loaded.run(w, xs)
    assert reads == []
    assert loaded.jit_module.optimised_ir == fresh.jit_module.optimised_ir
    assert "define" in loaded.jit_module.optimised_ir and len(reads) == 1
    for path in _program_entries(program_cache._directory()):  # gone: the IR says so
        path.unlink()
    again = _compiled(_loop, w, xs)  # (compiled afresh, stored again, then loaded)
    loaded = _compiled(_loop, w, xs)
    for path in _program_entries(program_cache._directory()):
        path.unlink()
    assert "no longer in the disk cache" in loaded.jit_module.optimised_ir
    assert again.jit_module.optimised_ir == fresh.jit_module.optimised_ir


def _mlp(w, b, x):
    """Products, kernels and a reduction: a program of several steps, so one native call."""
    h = jnp.tanh(x @ w + b)
    return jnp.sum(h * h, axis=0), h @ w.T


def _mlp_numpy(w, b, x):
    h = np.tanh(x @ w + b)
    return np.sum(h * h, axis=0), h @ w.T


@pytest.mark.parametrize("read", ["jaxpr", "plan", "layout", "rewrites", "kernels"])
def test_a_loaded_native_program_unpickles_only_its_call_until_a_report_reads(read):
    """A program that is one native call is loaded as its ``ProgramCall``: running it needs
    neither its jaxpr, nor its plan, nor its layout, which stay unpickled until any one of
    them (or the passes' log, or the kernels) is read; then all of them are there, and the
    reports say what a fresh compile's say."""
    from nbjax.compiler import report
    w, b, x = (RNG.standard_normal(s).astype(np.float32) for s in ((8, 8), (8,), (5, 8)))
    fresh = _compiled(_mlp, w, b, x)
    assert fresh.runs_as.startswith("one native call") and fresh.program_call is not None
    loaded = _compiled(_mlp, w, b, x)
    assert set(loaded.compile_times) == {"program_cache"}
    assert loaded.runs_as == fresh.runs_as
    for got, want in zip(loaded.run(w, b, x), _mlp_numpy(w, b, x)):
        assert_close(got, want, rtol=1e-5)
    assert (loaded._jaxpr, loaded._plan, loaded._layout, loaded._kernels) == (None, None, None, [])
    getattr(loaded, read)
    assert loaded._report is None and loaded._jaxpr is not None and loaded._layout is not None
    assert str(loaded.jaxpr) == str(fresh.jaxpr)
    assert loaded.layout.flows["program"].scratch_bytes == \
        fresh.layout.flows["program"].scratch_bytes
    assert report.compiled_text(loaded) == report.compiled_text(fresh)
    assert [k.texts for k in loaded.kernels] == [k.texts for k in fresh.kernels]
    assert [str(d) for d in loaded.plan.decisions] == [str(d) for d in fresh.plan.decisions]
    loaded.enable_timing()
    loaded.run(w, b, x)
    assert sorted(loaded.step_times) == list(range(len(fresh.plan.groups)))


@pytest.mark.parametrize("collecting", [True, False])
def test_compiling_leaves_the_garbage_collector_as_it_was(collecting):
    """Compiling pauses the cyclic collector, and leaves it on or off as it found it, for
    a program loaded from the disk cache and for one compiled afresh alike."""
    import gc
    w, xs = _inputs()
    _compiled(_loop, w, xs)
    seen = []
    real_read = cache.read

    def read(*args, **kwargs):
        seen.append(gc.isenabled())
        return real_read(*args, **kwargs)

    def other(w, xs):
        return _loop(w, xs * 2.0)
    was = gc.isenabled()
    try:
        (gc.enable if collecting else gc.disable)()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cache, "read", read)
            for f in (_loop, other):  # a hit, then a miss
                hits = cache.stats["program hit"]
                _compiled(f, w, xs)
                assert gc.isenabled() == collecting
                assert (cache.stats["program hit"] > hits) == (f is _loop)
        assert seen and not any(seen)
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("collecting", [True, False])
def test_tracing_for_jit_leaves_the_garbage_collector_as_it_was(collecting):
    """jit's trace runs with the cyclic collector paused (what it makes lives on in the
    trace cache), and leaves it as it found it, also when the function raises."""
    import gc
    seen = []

    def traced(x):
        seen.append(gc.isenabled())
        return jnp.sin(x) * 2.0

    def failing(x):
        seen.append(gc.isenabled())
        raise ValueError("no")
    was = gc.isenabled()
    try:
        (gc.enable if collecting else gc.disable)()
        nbjax.jit(traced)(np.float32(1.0))
        assert gc.isenabled() == collecting
        with pytest.raises(ValueError):
            nbjax.jit(failing)(np.float32(1.0))
        assert gc.isenabled() == collecting
        assert seen == [False, False]
    finally:
        (gc.enable if was else gc.disable)()


_TWICE = """
import nbjax.numpy as jnp
import nbjax
{padding}
def scaled_sin(x):
    return jnp.sin(x) * 2.0

jitted_sin = nbjax.jit(scaled_sin)

def twice(x):
    return jnp.sum(jitted_sin(jitted_sin(jnp.exp(x))))
"""


def _twice(padding):
    """``twice``, calling a jitted function twice, defined ``padding`` lines further down."""
    namespace = {}
    code = builtins.compile(_TWICE.format(padding="\n" * padding), "<twice>", "exec")
    exec(code, namespace)
    return namespace["twice"]


def test_a_loaded_program_s_inlined_calls_nest_in_the_new_trace_s_calls():
    """The optimised jaxpr inlines both calls of the jitted function; loaded from disk (for
    the same code 3 lines further down), its equations are at the new lines and their call
    paths go through the new trace's frames, each call its own."""
    from nbjax import viz
    x = np.linspace(-1, 1, 5).astype(np.float32)
    first, moved = _twice(0), _twice(3)
    stored = _compiled(first, x)
    loaded = _compiled(moved, x)
    assert set(loaded.compile_times) == {"program_cache"}
    eqns = loaded.jaxpr.jaxpr.eqns
    assert [e.primitive.name for e in eqns] == ["exp", "sin", "mul", "sin", "mul", "reduce_sum"]
    assert [e.source_info.line for e in eqns] == \
        [e.source_info.line + 3 for e in stored.jaxpr.jaxpr.eqns]
    paths = [e.source_info.call_path for e in eqns]
    assert [[f.function for f in p] for p in paths] == \
        [["twice"]] + [["twice", "scaled_sin"]] * 4 + [["twice"]]
    assert all(p[0].call == paths[0][0].call for p in paths)  # one call of twice
    assert paths[1][1].call == paths[2][1].call != paths[3][1].call
    called_at = stored.jaxpr.jaxpr.eqns[1].source_info.call_path[0].line
    assert [p[0].line for p in paths[1:5]] == [called_at + 3] * 4  # the calling line
    model = viz.graph_model(loaded.jaxpr, group="function", budget=None)
    assert [(g["depth"], g["label"], len(g["nodes"])) for g in model["source_groups"]] == \
        [(0, "twice()", 6), (1, "scaled_sin()", 2), (1, "scaled_sin() #2", 2)]


def test_a_damaged_entry_is_rebuilt(cache_dir):
    w, xs = _inputs()
    _compiled(_loop, w, xs)
    (entry,) = _program_entries(cache_dir)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    corrupt = cache.stats["corrupt"]
    rebuilt = _compiled(_loop, w, xs)
    assert cache.stats["corrupt"] == corrupt + 1 and "codegen" in rebuilt.compile_times
    for got, want in zip(rebuilt.run(w, xs), _loop_numpy(w, xs)):
        assert_close(got, want, rtol=1e-5)
    assert set(_compiled(_loop, w, xs).compile_times) == {"program_cache"}  # stored again


def test_swapped_entries_are_rebuilt_not_run(cache_dir):
    """Two valid program entries exchanged between file names (each records the key it was
    built for): each program is compiled again and computes its own result, never the
    other's."""
    x = RNG.standard_normal((3, 8)).astype(np.float32)

    def exp_program(x):
        return lax.fori_loop(0, 3, lambda i, c: jnp.exp(c) * 0.5, x)

    def sin_program(x):
        return lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) - 1.0, x)
    for f in (exp_program, sin_program):
        _compiled(f, x)
    first, second = _program_entries(cache_dir)
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    corrupt = cache.stats["corrupt"]
    for f in (exp_program, sin_program):
        exe = _compiled(f, x)
        assert_close(exe.run(x)[0], nbjax.jit(f, backend="reference")(x), rtol=1e-6)
        assert "codegen" in exe.compile_times
    assert cache.stats["corrupt"] >= corrupt + 2
    assert set(_compiled(exp_program, x).compile_times) == {"program_cache"}  # stored again


def test_a_first_trace_and_later_ones_have_one_key():
    """A function calling a jitted one: its first trace traces the callee, later ones reuse
    the callee's cached trace (sharing its avals); both have the same key."""
    inner = nbjax.jit(lambda x: jnp.sin(x) * 2.0)

    def outer(x):
        return inner(x) + inner(x * 3.0)
    x = np.ones(4, np.float32)
    keys = {program_cache.key(nbjax.make_jaxpr(outer)(x)) for _ in range(3)}
    assert len(keys) == 1 and None not in keys


def test_variables_are_told_apart_in_the_key():
    """Keys do not number variables as the process does, yet ``x + x`` and ``x + y`` (of
    the same types) are different programs with different keys."""
    x = np.ones(3, np.float32)
    same = program_cache.key(nbjax.make_jaxpr(lambda a, b: (a + a) * b)(x, x))
    other = program_cache.key(nbjax.make_jaxpr(lambda a, b: (a + b) * b)(x, x))
    again = program_cache.key(nbjax.make_jaxpr(lambda c, d: (c + c) * d)(x, x))
    assert same != other and same == again


def test_literals_params_and_types_are_in_the_key_source_lines_are_not():
    """Keys pickle equations and literals as their parts: a literal's value and type, an
    equation's params and its operands' types each make another key; the same program
    traced from other lines has the same one."""
    x = np.ones(3, np.float32)

    def key(f, *args):
        return program_cache.key(nbjax.make_jaxpr(f)(*(args or (x,))))
    base = key(lambda a: jnp.sum(a * 2.0, axis=0))
    assert base is not None
    assert key(lambda a: jnp.sum(a * 3.0, axis=0)) != base
    assert key(lambda a: jnp.sum(a * 2.0, axis=0), x.astype(np.int32)) != base
    assert key(lambda a: jnp.sum(a * 2.0, axis=0), np.ones(4, np.float32)) != base
    assert key(lambda a: jnp.max(a * 2.0, axis=0)) != base
    m = np.ones((2, 3), np.float32)
    assert key(lambda a: jnp.sum(a, axis=0), m) != key(lambda a: jnp.sum(a, axis=1), m)
    assert key(lambda a: jnp.sum(a * 2.0,
                                 axis=0)) == base  # another line


def test_another_environment_has_other_keys(monkeypatch):
    w, xs = _inputs()
    _compiled(_loop, w, xs)
    env = dict(cache.environment(), llvm="0.0.0")
    monkeypatch.setattr(cache, "environment", lambda: env)
    assert "codegen" in _compiled(_loop, w, xs).compile_times


@pytest.mark.parametrize("module, setting, value", [
    ("nbjax.compiler.passes", "HOIST_LIMIT", 0),
    ("nbjax.backends.cpu.runtime", "SPLIT_THRESHOLD", 1),
    ("nbjax.backends.cpu.buffer_plan", "POISON", True)])
def test_another_compiler_setting_has_other_keys(monkeypatch, module, setting, value):
    """A setting that changes what the compiler makes of a program is part of the key: a
    program compiled under another is compiled again, not loaded."""
    w, xs = _inputs()
    _compiled(_loop, w, xs)
    monkeypatch.setattr(f"{module}.{setting}", value)
    assert "codegen" in _compiled(_loop, w, xs).compile_times


def _lambda_callback(x):
    return nbjax.pure_callback(lambda v: np.cumsum(v), jax_shape(x), x) * 2


def jax_shape(x):
    return nbjax.ShapeDtypeStruct(x.shape, x.dtype)


def test_a_program_holding_a_lambda_is_compiled_each_time(cache_dir):
    x = RNG.standard_normal(7).astype(np.float32)
    assert program_cache.key(nbjax.make_jaxpr(_lambda_callback)(x)) is None
    for _ in range(2):
        exe = _compiled(_lambda_callback, x)
        assert "codegen" in exe.compile_times or "passes" in exe.compile_times
        assert_close(exe.run(x)[0], np.cumsum(x) * 2, rtol=1e-5)
    assert not _program_entries(cache_dir)


def test_a_primitive_taking_a_name_already_used_is_compiled_each_time(cache_dir):
    """A user's ``Primitive("neg")`` neither takes nbjax's ``neg`` out of the cache nor is
    cached itself: a program is keyed by its primitives' names."""
    from nbjax.core import Primitive
    impostor = Primitive("neg")
    impostor.def_impl(lambda x: np.asarray(x) * 10)
    impostor.def_abstract_eval(lambda x: x)
    x = RNG.standard_normal(5).astype(np.float32)
    assert program_cache.key(nbjax.make_jaxpr(lambda x: -x)(x)) is not None
    mine = nbjax.make_jaxpr(lambda x: impostor.bind(x) + 1)(x)
    assert program_cache.key(mine) is None
    for _ in range(2):
        exe = compile(mine, "cpu", "impostor")
        assert "passes" in exe.compile_times
        assert_close(exe.run(x)[0], x * 10 + 1, rtol=1e-6)
    assert_close(_compiled(lambda x: -x, x).run(x)[0], -x, rtol=0)


# --- across processes ------------------------------------------------------------------------

_CHILD = """
import json, sys
import numpy as np
import nbjax, nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends.cpu import cache
{padding}
def program(w, xs):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, jnp.sort(h, axis=-1)
    return lax.scan(step, jnp.zeros((xs.shape[1], w.shape[0]), w.dtype), xs)

w = np.linspace(-1, 1, 36, dtype=np.float32).reshape(6, 6)
xs = np.linspace(-2, 2, 5 * 3 * 6, dtype=np.float32).reshape(5, 3, 6)
exe = nbjax.jit(program).lower(w, xs).compile("cpu").executable
out = exe.run(w, xs)
lines = sorted({{e.source_info.line for e in exe.jaxpr.jaxpr.eqns if e.source_info}})
print(json.dumps({{"stats": dict(cache.stats), "phases": sorted(exe.compile_times),
                   "lines": lines, "out": [o.tolist() for o in out]}}))
"""


def _child(tmp_path, cache_path, name, padding):
    script = tmp_path / name
    script.write_text(_CHILD.format(padding="\n" * padding))
    return new_process_json(script, cache_path)


def test_a_new_process_loads_the_program_and_points_at_its_own_lines(tmp_path, cache_dir):
    """The second process runs the same program from a file of another name, 3 lines
    further down (as a notebook run again in a new kernel): a hit, with the new lines."""
    first = _child(tmp_path, cache_dir, "first.py", padding=0)
    second = _child(tmp_path, cache_dir, "second.py", padding=3)
    assert first["stats"].get("program store") == 1 and "codegen" in first["phases"]
    assert second["stats"].get("program hit") == 1 and second["phases"] == ["program_cache"]
    assert second["out"] == first["out"]
    assert first["lines"] and second["lines"] == [n + 3 for n in first["lines"]]


_MATH_CHILD = """
import json
import numpy as np
import nbjax, nbjax.numpy as jnp
from nbjax.backends.cpu import cache, library

def program(x):
    def step(c, _):
        c = jnp.sin(c) * 1.5 + 0.1
        return c, jnp.sum(c)
    return jnp.sin(x) * 2.0, nbjax.lax.scan(step, x[0, :16], None, length=500)

x = np.linspace(-3, 3, 64 * 64, dtype=np.float32).reshape(64, 64)
out = nbjax.jit(program)(x)
linked = sorted(n for n in library._modules if n.startswith("nbjax_math_"))
print(json.dumps({"stats": dict(cache.stats), "linked": linked,
                  "from_disk": [library._modules[n].from_disk_cache for n in linked],
                  "sin": np.asarray(out[0]).tolist(),
                  "scan": [np.asarray(o).tolist() for o in out[1]]}))
"""


def test_a_program_calling_shared_math_functions_links_them_in_a_new_process(tmp_path,
                                                                             cache_dir):
    """The vector ``sin`` a program's loops call is a library function, compiled once and
    kept in the disk cache apart from the program: a new process loading the program from
    the cache loads the function from there too (not compiling it), with the same
    values."""
    script = tmp_path / "linked_math.py"
    script.write_text(_MATH_CHILD)
    first, second = (new_process_json(script, cache_dir) for _ in range(2))
    assert first["linked"] and first["linked"] == second["linked"]
    assert not any(first["from_disk"]) and all(second["from_disk"])
    assert second["stats"].get("program hit") == 1
    assert second["sin"] == first["sin"] and second["scan"] == first["scan"]
    x = np.linspace(-3, 3, 64 * 64, dtype=np.float32).reshape(64, 64)
    np.testing.assert_allclose(first["sin"], np.sin(x) * 2.0, rtol=1e-6, atol=1e-6)


def test_a_program_calling_back_into_python_is_kept_and_loaded():
    """A ``pure_callback``'s parameters hold its static arguments, never its operands (the
    tracers of the trace that made the jaxpr): the program is keyed, stored and loaded."""
    from nbjax.core import Tracer
    from helpers import host_cumlogsumexp

    def f(x):
        return lax.fori_loop(0, 2, lambda i, y: host_cumlogsumexp(y, 1) * 0.5, x)
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    traced = nbjax.make_jaxpr(f)(x)
    callbacks = [e.params["callback"] for e in traced.jaxpr.eqns[0].params["jaxpr"].eqns
                 if e.primitive.name == "pure_callback"] \
        if "jaxpr" in traced.jaxpr.eqns[0].params else []
    assert not any(isinstance(leaf, Tracer) for c in callbacks for leaf in c.leaves)
    first = _compiled(f, x)
    hits = cache.stats["program hit"]
    second = _compiled(f, x)
    assert cache.stats["program hit"] == hits + 1
    want = x
    for _ in range(2):
        want = np.logaddexp.accumulate(want, axis=1) * 0.5
    for exe in (first, second):
        assert_close(exe.run(x)[0], want, rtol=1e-5)
