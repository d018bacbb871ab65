"""Where the browser side of the widgets (``extension/``: ES modules and CSS) is found.

In a source checkout or an editable install the files sit in ``extension/`` next to the
``nbjax`` package; an installed wheel puts them in ``<prefix>/share/nbjax/extension``
(pyproject.toml's data-files). ``NBJAX_EXTENSION_DIR`` overrides both.
"""

import functools
import os
import site
import sys
from pathlib import Path

ENV_VAR = "NBJAX_EXTENSION_DIR"
MAIN_MODULE = "nbjax_widgets.js"


def candidate_dirs():
    """The folders searched, in order."""
    dirs = []
    if os.environ.get(ENV_VAR):
        dirs.append(Path(os.environ[ENV_VAR]))
    dirs.append(Path(__file__).resolve().parents[2] / "extension")
    for prefix in (sys.prefix, sys.exec_prefix, site.getuserbase()):
        dirs.append(Path(prefix) / "share" / "nbjax" / "extension")
    return dirs


@functools.lru_cache(maxsize=None)
def extension_dir():
    """The first candidate folder holding the widgets' main module."""
    for d in candidate_dirs():
        if (d / MAIN_MODULE).is_file():
            return d
    searched = "\n  ".join(str(d) for d in candidate_dirs())
    raise FileNotFoundError(f"nbjax's browser files ({MAIN_MODULE}) were not found; searched:"
                            f"\n  {searched}\nReinstall nbjax, or set {ENV_VAR}.")


def read_asset(name):
    """The text of ``extension/<name>``."""
    return (extension_dir() / name).read_text(encoding="utf-8")
