#!/usr/bin/env bash
# Install the Debian packages the tests use, when they are missing: Graphviz's `dot` (the
# graph views), and Chromium with a font (the real-browser tests of the notebooks; Playwright
# drives this system browser, so `playwright install` is never needed). Needs root and
# apt-get; elsewhere it says what is missing and carries on (the tests that need a missing
# program skip with the reason). NBJAX_BROWSER names another browser binary to use instead.
# Open MPI (`mpirun` and the library mpi4py's PyPI wheel loads at run time) for the
# multi-process tests (tests/test_distributed.py).
set -u
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
# (A browser named by NBJAX_BROWSER is the user's to provide.)
[ -n "${NBJAX_BROWSER:-}" ] || [ -x /usr/bin/chromium ] || missing+=(chromium)
[ -e /usr/share/fonts/truetype/liberation ] || missing+=(fonts-liberation)
command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin libopenmpi-dev)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}") >/dev/null || \
        echo "warning: apt-get could not install ${missing[*]}; dependent tests will skip"
else
    echo "note: ${missing[*]} not installed (needs root + apt-get); dependent tests will skip"
fi
exit 0
