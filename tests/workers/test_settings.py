"""Worker settings that would break exactly-once group assembly when a worker host vanishes mid-task are refused."""

import pytest
from pydantic import ValidationError

from slca.config import ConfigError, load_config
from workers.settings import WorkerSettings


def test_the_defaults_let_a_vanished_workers_task_come_back_before_its_group_times_out():
    s = WorkerSettings()
    # was 60 s against a 300 s visibility timeout: the redelivered member arrived after its group had gone out
    assert s.group_timeout_s > s.visibility_timeout_s + s.restore_interval_s + s.restore_lock_s
    assert s.group_timeout_s > s.claim_idle_ms / 1000
    assert s.group_timeout_s > 2 * s.orphan_check_s


@pytest.mark.parametrize(
    "settings",
    [
        {"visibility_timeout_s": 300.0, "group_timeout_s": 60.0},  # the old defaults
        {"visibility_timeout_s": 10.0, "restore_interval_s": 5, "restore_lock_s": 5, "group_timeout_s": 20.0},  # a race
        # a vanished worker's sweep lock at kombu's default (300 s) would outlast the group
        {"visibility_timeout_s": 10.0, "restore_interval_s": 2, "restore_lock_s": 300, "group_timeout_s": 60.0},
        {"visibility_timeout_s": 4.0, "restore_interval_s": 1, "claim_idle_ms": 40_000, "group_timeout_s": 30.0},
    ],
)
def test_a_group_timeout_shorter_than_redelivery_is_refused(settings):
    with pytest.raises(ValidationError, match="group_timeout_s .* must exceed visibility_timeout_s"):
        WorkerSettings(**settings)


def test_a_group_timeout_shorter_than_two_orphan_checks_is_refused():
    # an entry whose task the broker lost is enqueued again after two checks: its group must still be open then
    with pytest.raises(ValidationError, match=r"must exceed 2 × orphan_check_s \(20\)"):
        WorkerSettings(
            visibility_timeout_s=8.0,
            restore_interval_s=1,
            claim_idle_ms=5000,
            group_timeout_s=30.0,
            orphan_check_s=20.0,
        )


def test_a_lowered_visibility_timeout_with_a_group_timeout_above_it_is_accepted():
    s = WorkerSettings(visibility_timeout_s=8.0, restore_interval_s=1, claim_idle_ms=5000, group_timeout_s=30.0)
    assert (s.visibility_timeout_s, s.group_timeout_s) == (8.0, 30.0)


def test_the_configuration_loader_names_the_settings(monkeypatch):
    monkeypatch.setenv("SLCA_WORKERS__VISIBILITY_TIMEOUT_S", "120")
    config = load_config(overrides=["workers.group_timeout_s=60"])
    with pytest.raises(ConfigError, match=r"group_timeout_s \(60\) must exceed .*\(140\)"):
        config.get(WorkerSettings)
