import pytest

from tests.workers.builders import TrajectoryBuilder
from workers.settings import WorkerSettings


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from workers.scoring.extract import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


@pytest.fixture(scope="session")
def builder(tiny_tokenizer) -> TrajectoryBuilder:
    return TrajectoryBuilder(tiny_tokenizer)


@pytest.fixture(scope="session")
def settings(tiny_model_dir) -> WorkerSettings:
    return WorkerSettings(tokenizer=str(tiny_model_dir))
