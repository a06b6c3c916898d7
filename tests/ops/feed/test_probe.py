"""The held-out probe against a hand-written agent API: it probes the first served version, waits for
`every_versions` more, asks the same tasks with the same seeds each round, never records, labels a round with
the median served version, and drops a round that a server restart interrupted."""

import asyncio
from types import SimpleNamespace

from aiohttp import web

from ops.feed.builtin_tasks import builtin_tasks
from ops.feed.probe import Prober, ProbePlan, probe_body, summarise
from ops.online_curve import trend
from slca.redis_server import free_port
from tests.workers.builders import TrajectoryBuilder, call


class FakeServer:
    def __init__(self, builder: TrajectoryBuilder, fail_from: int | None = None):
        self.builder = builder
        self.version = 0
        self.bodies: list[dict] = []
        self.fail_from = fail_from

    async def readyz(self, request: web.Request) -> web.Response:
        return web.json_response({"engine": True, "policy_version": self.version})

    async def runs(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        if self.fail_from is not None and len(self.bodies) > self.fail_from:
            return web.json_response({"error": "restarting"}, status=503)
        good = self.builder.build([[("tool_call", call("get_weather", city="Paris"))], [("summary", "18 degrees")]],
                                  [{"temp": 18}], policy_version=self.version)  # fmt: skip
        return web.json_response({"runs": [{"trajectory": good.model_dump(mode="json")} for _ in range(body["n"])]})


async def _serve(server: FakeServer, port: int) -> web.AppRunner:
    app = web.Application()
    app.router.add_get("/readyz", server.readyz)
    app.router.add_post("/v1/agent/runs", server.runs)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


def _builder(tiny_model_dir) -> TrajectoryBuilder:
    from tokenizers import Tokenizer

    return TrajectoryBuilder(Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json")))


def _score(traj):
    return SimpleNamespace(exec=1.0 if traj.policy_version >= 10 else 0.5, pref=0.0)


def test_rounds_follow_versions_with_fixed_seeds_and_no_recording(tiny_model_dir):
    tasks = builtin_tasks()[:3]
    published: list[dict] = []

    async def publish(entry: dict) -> None:
        published.append(entry)

    async def main():
        port = free_port()
        server = FakeServer(_builder(tiny_model_dir))
        runner = await _serve(server, port)
        plan = ProbePlan(url=f"http://127.0.0.1:{port}", tasks=tasks, every_versions=10, n=2, poll_s=0.01)
        prober = Prober(plan, _score, publish)
        stop = asyncio.Event()
        task = asyncio.create_task(prober.run(stop))
        try:
            for version in (0, 3, 9, 10, 12, 25):  # rounds due at 0, 10 and 25
                server.version = version
                await asyncio.sleep(0.3)
        finally:
            stop.set()
            await task
            await runner.cleanup()
        return server

    server = asyncio.run(main())
    assert [r["version"] for r in published] == [0, 10, 25]
    assert [r["exec_mean"] for r in published] == [0.5, 1.0, 1.0]
    assert all(r["trajectories"] == 6 and r["failed_requests"] == 0 for r in published)
    assert all(b["record"] is False and b["return_trajectories"] is True and b["n"] == 2 for b in server.bodies)
    seeds = [sorted(b["seed"] for b in server.bodies[i * 3:(i + 1) * 3]) for i in range(3)]
    assert seeds[0] == seeds[1] == seeds[2] and len(set(seeds[0])) == 3  # same seeds each round, one per task


def test_round_with_failed_requests_is_dropped(tiny_model_dir):
    async def main():
        port = free_port()
        server = FakeServer(_builder(tiny_model_dir), fail_from=1)
        runner = await _serve(server, port)
        plan = ProbePlan(url=f"http://127.0.0.1:{port}", tasks=builtin_tasks()[:4], poll_s=0.01)
        published: list[dict] = []

        async def publish(entry):
            published.append(entry)

        try:
            import aiohttp

            async with aiohttp.ClientSession() as session:
                result = await Prober(plan, _score, publish).round(session)
        finally:
            await runner.cleanup()
        return result

    assert asyncio.run(main()) is None  # 3 of 4 requests failed: not comparable with the other rounds


def test_round_version_is_the_median_and_success_counts_full_rewards(tiny_model_dir):
    b = _builder(tiny_model_dir)
    trajs = [b.build([[("summary", "x")]], [], policy_version=v) for v in (4, 5, 5, 9)]
    rewards = [SimpleNamespace(exec=e, pref=0.5) for e in (1.0, 0.5, 1.0, 0.0)]
    r = summarise(0.0, trajs, rewards, failed=0)
    assert r.version == 5 and r.to_json()["version_min"] == 4 and r.to_json()["version_max"] == 9
    assert r.success == 0.5 and r.exec_mean == 0.625 and r.tool_turns_mean == 0.0


def test_probe_seed_differs_per_task_not_per_round():
    tasks = builtin_tasks()[:2]
    plan = ProbePlan(url="http://x", tasks=tasks, seed=3)
    assert probe_body(tasks[0], plan, 0)["seed"] != probe_body(tasks[1], plan, 1)["seed"]
    assert probe_body(tasks[0], plan, 0) == probe_body(tasks[0], plan, 0)


def test_trend_slope_and_standard_error():
    assert trend([0, 1], [0, 1]) is None
    t = trend([0, 10, 20, 30], [0.5, 0.6, 0.7, 0.8])
    assert abs(t["slope_per_100_versions"] - 1.0) < 1e-9 and t["se_per_100_versions"] < 1e-9
    flat = trend([0, 10, 20, 30], [0.6, 0.5, 0.6, 0.5])
    assert abs(flat["slope_per_100_versions"]) < flat["se_per_100_versions"] * 2


def test_probe_tasks_are_spread_over_the_split():
    from types import SimpleNamespace as T

    from ops.feed.main import spread

    tasks = [T(task_id=f"everyday-{intent}-{i}") for intent in ("a", "b", "c", "d") for i in range(10)]
    picked = spread(tasks, 8)
    assert len(picked) == 8 and {t.task_id.split("-")[1] for t in picked} == {"a", "b", "c", "d"}
    assert spread(tasks[:3], 8) == sorted(tasks[:3], key=lambda t: t.task_id)
