import pytest

from tests.training.helpers import reset_accelerate


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    reset_accelerate()
    yield
    reset_accelerate()
