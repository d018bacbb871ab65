#!/usr/bin/env bash
# Run the Python array API conformance suite (github.com/data-apis/array-api-tests) against
# nbjax.numpy, with 64-bit types on (the suite expects int64/float64 to exist, as JAX's CI
# runs it with JAX_ENABLE_X64=1).
#
# The suite is not on PyPI: clone it (with its array-api submodule) and point to it:
#   git clone --recursive https://github.com/data-apis/array-api-tests
#   ARRAY_API_TESTS_DIR=$PWD/array-api-tests tools/run_array_api_tests.sh [pytest args]
# Extra arguments go to pytest, e.g. -x, -k sort, --max-examples=20. The cases where nbjax
# follows JAX rather than the standard are expected to fail: tools/array_api_xfails.txt
# (another --xfails-file=FILE replaces it).
# It needs pytest and hypothesis in the Python that runs it ($PYTHON, default .venv's).
set -euo pipefail

: "${ARRAY_API_TESTS_DIR:?set ARRAY_API_TESTS_DIR to a checkout of data-apis/array-api-tests}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"

export ARRAY_API_TESTS_MODULE=nbjax.numpy
export ARRAY_API_TESTS_VERSION=2024.12
export NBJAX_ENABLE_X64=1
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

xfails=(--xfails-file="$repo/tools/array_api_xfails.txt")
for arg in "$@"; do
    [[ "$arg" == --xfails-file* ]] && xfails=()
done

cd "$ARRAY_API_TESTS_DIR"
exec "$python" -m pytest array_api_tests "${xfails[@]}" "$@"
