"""One log format for every component's command (`slca serve`, `slca worker`, `slca learn`, ops' commands)."""

from __future__ import annotations

import logging

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(level: int | str = logging.INFO) -> None:
    """The root logger at `level` (`common.log_level`), in `LOG_FORMAT`, on stderr (a no-op when already set up,
    as `logging.basicConfig` is)."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
