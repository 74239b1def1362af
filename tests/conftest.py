"""Fixtures for every test; the shared helpers themselves live in helpers.py."""
import pytest
from helpers import normdiff


@pytest.fixture
def cli():
    """The real `normdiff` command line, in a fresh interpreter."""
    return normdiff
