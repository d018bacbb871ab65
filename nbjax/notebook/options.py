"""Options of the magics: an argparse parser that reports errors as IPython usage errors,
and the session options ``%nbjax`` shows and sets.

Errors never exit the kernel: they raise ``UsageError`` (IPython prints it as a short,
red message without a traceback) naming the magic, the option and the accepted values.
"""

import argparse
import re
import shlex

from IPython.core.error import UsageError

from ..backends import get_target
from ..config import config
from ..viz.theme import PRESENT_SCALE

JIT_PANES = ("graph", "source", "jaxpr", "fusion", "code", "timing")
BACKENDS = ("cpu", "gpu", "reference")


class MagicParser(argparse.ArgumentParser):
    """argparse for a magic: ``-h/--help`` is an ordinary flag (the magic prints the help
    and stops), and errors raise UsageError instead of exiting."""

    def __init__(self, prog, description, epilog=None):
        super().__init__(prog=prog, description=description, epilog=epilog, add_help=False,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
        self.add_argument("-h", "--help", action="store_true", help="show this help")

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage().strip()}\n"
                         f"(see {self.prog} --help)")

    def exit(self, status=0, message=None):  # argparse calls this only on errors here
        raise UsageError(message or f"{self.prog}: invalid options")

    def parse(self, line):
        """Parse a magic's option line (shell-style quoting)."""
        try:
            tokens = shlex.split(line)
        except ValueError as e:
            raise UsageError(f"{self.prog}: cannot read the options {line!r}: {e}") from None
        return self.parse_args(tokens)

    def parse_with_rest(self, line):
        """(options, rest) for a line magic whose options come before a Python expression:
        leading ``-`` tokens (and their values) are options, the rest is kept verbatim.
        ``--`` ends the options explicitly."""
        takes_value = {opt: action.nargs != 0 for action in self._actions
                       for opt in action.option_strings}
        tokens, rest = [], line.strip()
        while rest.startswith("-"):
            token, _, rest = rest.partition(" ")
            rest = rest.lstrip()
            if token == "--":
                break
            tokens.append(token)
            if takes_value.get(token) and "=" not in token and rest:
                value, _, rest = rest.partition(" ")
                tokens.append(value)
                rest = rest.lstrip()
        return self.parse_args(tokens), rest


def check_backend(magic, name):
    """Raise UsageError, saying what is missing, when the backend ``name`` (None: the
    session's) cannot run here: ``--backend gpu`` on a machine without CuPy, a CUDA driver
    or a GPU."""
    if name is None:
        return
    try:
        get_target(name).check_available()
    except RuntimeError as e:
        raise UsageError(f"{magic} --backend {name}: {e}") from None


def name_list(text):
    """An argparse type: "a,b, c" -> ("a", "b", "c")."""
    names = tuple(n.strip() for n in re.split(r"[,\s]+", text) if n.strip())
    bad = [n for n in names if not n.isidentifier()]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"expected comma-separated Python names, got {text!r}")
    return names


def axes_list(text):
    """An argparse type: vmap's ``in_axes``, one per positional argument: "None,0,0" ->
    (None, 0, 0)."""
    axes = []
    for part in (p.strip() for p in text.split(",")):
        if part == "None" or part.lstrip("-").isdigit():
            axes.append(None if part == "None" else int(part))
        else:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated axes (integers or None), got {text!r}")
    return tuple(axes)


def pane_list(text):
    """An argparse type: a comma-separated subset of JIT_PANES (or "all")."""
    if text.strip() == "all":
        return JIT_PANES
    panes = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in panes if p not in JIT_PANES]
    if unknown or not panes:
        raise argparse.ArgumentTypeError(
            f"unknown pane {', '.join(map(repr, unknown)) or repr(text)}; "
            f"choose from {', '.join(JIT_PANES)} (comma-separated) or all")
    return tuple(p for p in JIT_PANES if p in panes)  # the view's order


def on_off(text):
    """An argparse type for switches: on/off, true/false, yes/no, 1/0."""
    value = text.strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")


class SessionOptions:
    """What ``%nbjax`` shows and sets. The backend and x64 live in ``nbjax.config`` (so
    ``nbjax.config.update`` and ``%nbjax`` agree); the panes are the notebook's own."""

    def __init__(self):
        self.panes = JIT_PANES
        self.present = False
        self.baselines = False  # measure every view's timing baselines after each cell

    @property
    def scale(self):
        """How much the views enlarge their text and graphs (presenting, or not)."""
        return self.scale_for(self.present)

    @staticmethod
    def scale_for(present):
        return PRESENT_SCALE if present else 1

    @property
    def backend(self):
        return config.jit_backend

    @backend.setter
    def backend(self, name):
        config.update("jit_backend", name)

    @property
    def x64(self):
        return bool(config.enable_x64)

    @x64.setter
    def x64(self, on):
        config.update("enable_x64", bool(on))

    def as_dict(self):
        return {"backend": self.backend, "panes": list(self.panes), "x64": self.x64,
                "present": self.present, "baselines": self.baselines}

    def describe(self):
        return "\n".join([
            f"backend: {self.backend}    (jitted functions run on it; {', '.join(BACKENDS)})",
            f"panes:   {','.join(self.panes)}    (what a %%jit view shows)",
            f"x64:     {'on' if self.x64 else 'off'}    (64-bit floats and ints by default)",
            f"present: {'on' if self.present else 'off'}    (views' text and graphs "
            f"{PRESENT_SCALE:g}x larger, for projectors)",
            f"baselines: {'on' if self.baselines else 'off'}    (time NumPy and nbjax eager "
            "after each cell; off: when a Timing pane asks)",
        ])


session = SessionOptions()
