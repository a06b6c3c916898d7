"""`slca bench first-hour` (ops/bench/first_hour.py): each figure is read off the system's own records at the poll
that first shows it, and the results are written by code. `slca up` itself is faked here (its bring-up is
tests/ops/run/supervisor/test_up_warm_start.py)."""

import json

import ops.bench.first_hour as fh
from ops.experiments.warmstart.progress import ProgressBoard


class FakeUp:
    returncode = None

    def poll(self):
        return None


class ScriptedWatch:
    """The system as the polls see it: poll k shows what the script says from k on."""

    def __init__(self, data_dir, clock):
        self.data_dir, self.api, self.clock = data_dir, "http://api", clock
        self.board = ProgressBoard(data_dir)

    def at(self, k: int) -> bool:
        return self.clock.polls >= k

    def processes(self):  # the first look of each poll
        if self.at(3) and self.board.record.phase == "loading":  # trained at 1020, saved 1025, published 1027
            self.board.update(phase="swapping", version=1, step=9, trained_at=1020.0, saved_at=1025.0,
                              published_at=1027.0)  # fmt: skip
        if self.at(4) and self.board.record.phase != "served":
            self.board.update(phase="served", version=1)
        return {"learn": {"pid": 11 if self.at(5) else None}, "feed": {"pid": 12 if self.at(5) else None}}

    def ready(self):
        return self.at(1)

    def served_versions(self):
        if self.at(9):
            return {"promoted": 1, "candidate": 2}
        if self.at(4):
            return {"promoted": 1, "candidate": 1}
        return {"promoted": 0, "candidate": 0}

    def first_learner_step(self):
        return {"step": "1", "version": "1", "ts": "0", "groups": "1"} if self.at(7) else None

    def latest_version(self):  # the warm start's v1 is published (poll 3) before it is served (poll 4)
        return 2 if self.at(8) else (1 if self.at(3) else None)


class Clock:
    """Ten seconds a poll."""

    def __init__(self):
        self.polls = 0

    def time(self):
        return 1000.0 + 10 * self.polls

    def sleep(self, s):
        self.polls += 1


def test_the_first_hour_is_read_off_the_systems_records_and_written(tmp_path, monkeypatch):
    clock = Clock()
    watch = ScriptedWatch(tmp_path, clock)
    monkeypatch.setattr(fh.time, "time", clock.time)
    monkeypatch.setattr(fh.time, "sleep", clock.sleep)
    monkeypatch.setattr(fh, "first_answer", lambda api: (clock.polls >= 2, 0))
    result = fh.FirstHour(fresh=True)
    fh.measure(watch, result, 1000.0, FakeUp(), 3600, 1.0)
    assert (result.ready_s, result.first_answer_s, result.first_answer_version) == (10, 20, 0)
    assert (result.warm_start_served_s, result.warm_start_version) == (40, 1)
    assert (result.warm_start_trained_s, result.warm_start_saved_s, result.warm_start_published_s) == (20, 25, 27)
    assert result.warm_start_steps == 9 and result.warm_start_phase == "served"
    assert result.feed_started_s == result.learner_started_s == 50 and result.first_learner_step_s == 70
    # the warm start's v1, published before it was served, is not the learner's; the learner's v2 is, then served
    assert (result.first_learner_version_s, result.first_learner_version) == (80, 2)
    assert result.first_learner_version_served_s == 90
    meta = {"command": "slca bench first-hour", "machine": {"cpu": "x", "cores": 2, "load_average_1m": 0.1},
            "timeout_minutes": 60}  # fmt: skip
    fh.write_results(tmp_path / "out", result, meta)
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written["result"]["first_answer_s"] == 20 and written["command"] == "slca bench first-hour"
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| first chat answer | 20 |" in md and "| warm start served (promoted + candidate) | 40 |" in md
    assert "| warm start checked and saved | 25 |" in md and "Warm start: 9 steps; last seen served." in md


def test_a_run_without_a_step_times_out(tmp_path, monkeypatch):
    clock = Clock()
    watch = ScriptedWatch(tmp_path, clock)
    monkeypatch.setattr(fh.time, "time", clock.time)
    monkeypatch.setattr(fh.time, "sleep", clock.sleep)
    monkeypatch.setattr(fh, "first_answer", lambda api: (True, 0))
    result = fh.FirstHour(fresh=False)
    fh.measure(watch, result, 1000.0, FakeUp(), 45, 1.0)
    assert result.timed_out and result.first_learner_step_s is None and result.warm_start_served_s is None
