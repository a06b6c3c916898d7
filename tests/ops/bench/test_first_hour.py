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

    def candidate_versions(self):  # one serve answers both roles
        return self.served_versions()

    def first_learner_step(self):
        return {"step": "1", "version": "1", "ts": "0", "groups": "1"} if self.at(7) else None

    def latest_version(self):  # the warm start's v1 is published (poll 3) before it is served (poll 4)
        return 2 if self.at(8) else (1 if self.at(3) else None)


class CandidateReplicaWatch(ScriptedWatch):
    """`ops.candidate_replica`: serve (role promoted) reports its promoted version as the candidate too; the
    learner's versions show on serve-candidate only."""

    def served_versions(self):
        version = 1 if self.at(4) else 0
        return {"promoted": version, "candidate": version, "role": "promoted"}

    def candidate_versions(self):
        return {**super().served_versions(), "role": "candidate"}


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


def test_with_a_candidate_replica_the_learners_version_is_read_off_serve_candidate(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(fh.time, "time", clock.time)
    monkeypatch.setattr(fh.time, "sleep", clock.sleep)
    monkeypatch.setattr(fh, "first_answer", lambda api: (True, 1))
    result = fh.FirstHour(fresh=True)
    fh.measure(CandidateReplicaWatch(tmp_path, clock), result, 1000.0, FakeUp(), 3600, 1.0)
    assert not result.timed_out and (result.warm_start_served_s, result.warm_start_version) == (40, 1)
    assert (result.first_learner_version, result.first_learner_version_served_s) == (2, 90)


def test_the_watch_reads_the_candidate_where_slca_up_serves_it(tmp_path, monkeypatch):
    from slca.config import load_config

    asked = []

    def http_json(url, body=None, timeout=120.0):
        asked.append(url)
        return 200, {"candidate": 7 if url.startswith("http://127.0.0.1:8101") else 3}, {}

    monkeypatch.setattr(fh, "http_json", http_json)
    watch = fh.make_watch(load_config(None, ["serve.port=8100", "ops.candidate_replica=true"]), tmp_path)
    assert watch.api == "http://127.0.0.1:8100" and watch.candidate_api == "http://127.0.0.1:8101"
    assert watch.candidate_versions() == {"candidate": 7} and watch.served_versions() == {"candidate": 3}
    assert asked == ["http://127.0.0.1:8101/v1/versions", "http://127.0.0.1:8100/v1/versions"]
    one = fh.make_watch(load_config(None, ["serve.port=8100"]), tmp_path)
    assert one.candidate_api is None and one.candidate_versions() == {"candidate": 3}
