"""Fixtures for every test; the shared helpers themselves live in helpers.py."""
import pytest
import zoo_library
from helpers import normdiff


@pytest.fixture
def cli():
    """The real `normdiff` command line, in a fresh interpreter."""
    return normdiff


@pytest.fixture
def tiny_library(tmp_path):
    """A tiny model library (tests/zoo_library.py) written into tmp_path: the import root holding `tinylib`."""
    return zoo_library.write(tmp_path)


@pytest.fixture
def tiny_models(tiny_library):
    """The folder of tinylib's model folders (what `zoo list --root` points at)."""
    return tiny_library / "tinylib" / "models"
