"""Ctrl-C and Jupyter's "interrupt kernel" stop compiled loops (backends/cpu/interrupts.py).

Each case runs in a fresh process that sends itself SIGINT while a jitted loop of billions of
iterations runs natively: KeyboardInterrupt must arrive within half a second, and the process
(a notebook's kernel) must stay usable."""
import subprocess
import sys
import textwrap
import time

import pytest
from traitlets.config import Config

from helpers import kernels_over_ipc

pytestmark = pytest.mark.cpu_compiler

PRELUDE = """
import os, signal, threading, time
import numpy as np
import nbjax, nbjax.numpy as jnp
from nbjax import lax

def interrupt_after(seconds):
    sent = []
    def send():
        time.sleep(seconds)
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=send, daemon=True).start()
    return sent

def delay_of(run, seconds=1.0):
    sent = interrupt_after(seconds)
    try:
        run()
    except KeyboardInterrupt:
        return time.perf_counter() - sent[0]
    raise AssertionError("the loop was not interrupted")
"""

CASES = {
    "fori_loop": """
        f = nbjax.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: v * 1.0000001 + 1e-7, x))
        x = np.ones(64, np.float32)
        before = np.asarray(f(x, 10))
        delay = delay_of(lambda: f(x, 2_000_000_000))
        assert delay < 0.5, delay
        np.testing.assert_array_equal(np.asarray(f(x, 10)), before)   # usable, same result
    """,
    "scan_in_a_while": """
        def g(x):
            inner = lambda c, _: (jnp.sin(c) + 0.5, None)
            body = lambda v: lax.scan(inner, v, None, length=1000)[0]
            return lax.while_loop(lambda v: v[0] < 10.0, body, x)
        f = nbjax.jit(g)
        assert delay_of(lambda: f(np.zeros(8, np.float32))) < 0.5
    """,
    # Bodies of milliseconds each (a kernel just under the split threshold, a 512x512
    # product): a flag read only every 1024 iterations left them running for seconds.
    "heavy_bodies": """
        body = lambda i, v: jnp.tanh(jnp.sin(jnp.exp(-v * v))) * 0.9 + jnp.log1p(v * v) * 0.1
        f = nbjax.jit(lambda x, n: lax.fori_loop(0, n, body, x))
        x = np.ones(900_000, np.float32)
        delay = delay_of(lambda: f(x, 1_000_000))
        assert delay < 0.5, delay
        w = np.eye(512, dtype=np.float32) * 0.999
        g = nbjax.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: v @ w + 1e-3, x))
        delay = delay_of(lambda: g(np.ones((512, 512), np.float32), 1_000_000))
        assert delay < 0.5, delay
    """,
    # A sort is one library loop, however long its rows: it looks for Ctrl-C before each
    # row and within its passes (here a merge sort's, of two keys; test_cpu_native_library
    # checks that the radix sort's function polls too).
    "long_sort": """
        rng = np.random.default_rng(0)
        x = rng.standard_normal(2 ** 23).astype(np.float32)
        y = rng.integers(0, 9, 2 ** 23).astype(np.int32)
        f = nbjax.jit(lambda x, y: lax.sort((x * 2.0, y), num_keys=2)).lower(x, y).compile()
        assert delay_of(lambda: nbjax.block_until_ready(f(x, y)), 0.3) < 0.5
        small = (x[:50], y[:50])
        g = nbjax.jit(lambda x, y: lax.sort((x * 2.0, y), num_keys=2))
        np.testing.assert_array_equal(np.asarray(g(*small)[0]), np.sort(small[0] * 2.0))
    """,
    "python_keeps_its_handler": """
        f = nbjax.jit(lambda x: lax.fori_loop(0, 3, lambda i, v: v + 1.0, x))
        f(np.zeros(3, np.float32))       # armed nbjax's handler in front of Python's
        assert delay_of(lambda: time.sleep(5)) < 0.5
        calls = []
        signal.signal(signal.SIGINT, lambda *a: calls.append(1))   # a handler that does not raise
        slow = nbjax.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: v * 0.5, x))
        assert delay_of(lambda: slow(np.ones(4, np.float32), 2_000_000_000)) < 0.5
        assert calls == [1]              # it ran once, and the loop still stopped
    """,
}


@pytest.mark.parametrize("case", list(CASES))
def test_sigint_stops_a_compiled_loop(case):
    code = PRELUDE + textwrap.dedent(CASES[case]) + "print('ok')\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


def test_interrupt_kernel_stops_a_cell_and_the_kernel_stays_usable(tmp_path):
    jupyter_client = pytest.importorskip("jupyter_client")
    km = jupyter_client.KernelManager(kernel_name="python3",
                                      config=Config(kernels_over_ipc(tmp_path)))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        kc.execute_interactive(textwrap.dedent("""
            import numpy as np, nbjax
            from nbjax import lax
            f = nbjax.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: v * 0.5 + 1.0, x))
            f(np.ones(4, np.float32), 3)
        """), timeout=120)
        # (stop_on_error=False: the kernel does not abort requests that follow the error)
        msg_id = kc.execute("f(np.ones(4, np.float32), 2_000_000_000)", stop_on_error=False)
        while kc.get_iopub_msg(timeout=60)["msg_type"] != "execute_input":
            pass                                   # until the cell starts running
        time.sleep(1.0)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=10)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        again = kc.execute_interactive("print(f(np.ones(4, np.float32), 3))", timeout=60)
        assert again["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
