import shutil

import pytest

from tests.training.helpers import quick_config, reset_accelerate

STOPPED_RUN = ("optim.max_steps=6", "checkpoint.every_steps=2", "optim.stop_at_step=3")


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    reset_accelerate()
    yield
    reset_accelerate()


@pytest.fixture(scope="session")
def _stopped_run(tmp_path_factory):
    from memorag.training.trainer import Trainer

    folder = tmp_path_factory.mktemp("stopped") / "run"
    reset_accelerate()
    Trainer(quick_config(folder, *STOPPED_RUN)).train()
    reset_accelerate()
    return folder


@pytest.fixture
def stopped_run(_stopped_run, tmp_path):
    """A copy of one quick run of 6 steps stopped at step 3: checkpoint-2 and checkpoint-3 (`STOPPED_RUN`)."""
    copy = tmp_path / "run"
    shutil.copytree(_stopped_run, copy)
    return copy
