import pytest

import nbjax


@pytest.fixture
def x64():
    """Run a test with 64-bit types enabled, restoring the previous setting afterwards."""
    previous = nbjax.config.enable_x64
    nbjax.config.update("enable_x64", True)
    try:
        yield
    finally:
        nbjax.config.update("enable_x64", previous)
