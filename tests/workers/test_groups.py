"""Group assembly scripts against a real Redis, without Celery: late members, lone members, re-feeding,
back-pressure."""

from slca.contracts import RewardStats, RolloutGroup, Streams, decode_entry, encode_entry
from tests.support.trajectories import trajectory
from tests.workers.pipeline_harness import fed, make_pipeline, read_dead, read_groups, templates
from workers.assembler import Sweeper


def test_full_group_once_and_refeed_is_a_duplicate(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir)
    trajs = [trajectory(template=templates(builder)[i % 3], task_id="task-a", member=i) for i in range(4)]
    assert p.process(fed(client, trajs[:3])) == ["pending"] * 3
    assert p.process(fed(client, trajs[3:])) == ["grouped"]
    assert p.process(fed(client, trajs)) == ["duplicate"] * 4
    (group,) = read_groups(client)
    assert isinstance(group, RolloutGroup) and group.size == 4 and not group.partial
    assert [r.trajectory_id for r in group.rewards] == [t.id for t in group.trajectories]
    stats = client.xrange(Streams().stats("stats:rewards"))
    assert len(stats) == 4 and set(stats[0][1]) == {
        b"schema",
        b"exec",
        b"pref",
        b"tool_turns",
        b"success",
        b"policy_version",
        b"task_id",
        b"ts",
    }
    assert {RewardStats.from_fields(f).task_id for _, f in stats} == {"task-a"}  # what the dashboard reads back


def test_every_scored_trajectory_records_its_success(client, builder, tiny_model_dir):
    """`success` travels with each `stats:rewards` row (what `slca status` averages) and counts in
    `slca_scored_success_total` once per fresh reward, a redelivery adding nothing."""
    p = make_pipeline(client, tiny_model_dir)
    good, wrong, none = templates(builder)
    trajs = [trajectory(template=t, task_id="task-s", member=i) for i, t in enumerate([good, wrong, none, good])]
    p.process(fed(client, trajs))
    p.process(fed(client, trajs[:1]))
    rows = [RewardStats.from_fields(f) for _, f in client.xrange(Streams().stats("stats:rewards"))]
    assert [r.success for r in rows] == [1.0, 0.0, 0.0, 1.0]
    (total,) = [s.value for s in p.metrics.scored_success.collect()[0].samples if s.name.endswith("_total")]
    assert total == 2.0


def test_partial_group_after_timeout_then_late_members_are_dead_lettered(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir)
    sweeper = Sweeper(p, p.settings.model_copy(update={"group_timeout_s": 0.0}))
    trajs = [trajectory(template=templates(builder)[0], task_id="task-b", member=i) for i in range(6)]
    p.process(fed(client, trajs[:2]))
    assert sweeper.sweep()["partial"] == 1
    (group,) = read_groups(client)
    assert group.partial and group.size == 2
    # two members were missing: both are late; the one after them opens a new group
    assert p.process(fed(client, trajs[2:5])) == ["dead", "dead", "pending"]
    assert {k: v.split(":")[0] for k, v in read_dead(client).items()} == {"task-b-r2": "late", "task-b-r3": "late"}


def test_lone_member_is_dead_lettered_and_versions_are_windowed(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir, version_window=2)
    tpl = templates(builder)[0]
    # versions 0 and 1 share a window; version 2 does not
    trajs = [trajectory(template=tpl, task_id="task-c", member=i, policy_version=i) for i in range(3)]
    p.process(fed(client, trajs))
    Sweeper(p, p.settings.model_copy(update={"group_timeout_s": 0.0})).sweep()
    (group,) = read_groups(client)
    assert (group.policy_version_min, group.policy_version_max, group.size) == (0, 1, 2)
    assert read_dead(client)["task-c-r2"].startswith("group_timeout")


def test_full_groups_stream_holds_groups_back_without_losing_them(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir, max_groups_len=1)
    tpl = templates(builder)[1]
    trajs = [trajectory(template=tpl, task_id=f"task-{t}", member=i) for t in range(3) for i in range(4)]
    p.process(fed(client, trajs))
    assert client.xlen(Streams().groups) == 1  # the other two wait as claims
    assert client.zcard(p.keys.claims) == 2
    sweeper = Sweeper(p, p.settings)
    emitted = []
    for _ in range(3):  # a reader consumes the stream; each sweep then writes one more group
        emitted += [decode_entry(RolloutGroup, f).task_id for _id, f in client.xrange(Streams().groups)]
        client.delete(Streams().groups)
        sweeper.sweep()
    assert sorted(emitted) == ["task-0", "task-1", "task-2"]


def test_invalid_payload_and_mismatched_id_are_dead_lettered(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir)
    t = trajectory(template=templates(builder)[0], task_id="task-d", member=0)
    good_payload = encode_entry(t, id=t.id)[b"data"]
    entries = fed(client, [{b"id": b"x", b"data": b"\xc1"}, {b"id": b"other-id", b"data": good_payload}])
    assert p.process(entries) == ["dead", "dead"]
    dead = read_dead(client)
    assert dead["x"].startswith("invalid_payload") and "!= payload id" in dead["other-id"]


def test_scripts_are_reloaded_after_the_server_forgot_them(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir)
    trajs = [trajectory(template=templates(builder)[0], task_id="task-e", member=i) for i in range(4)]
    p.process(fed(client, trajs[:2]))
    client.script_flush()  # what a restarted Redis looks like: an empty script cache
    assert p.process(fed(client, trajs[2:])) == ["pending", "grouped"]
    assert len(read_groups(client)) == 1


def test_a_trajectory_the_scorer_chokes_on_is_dead_lettered_alone(client, builder, tiny_model_dir):
    from slca.contracts import GroundTruth

    p = make_pipeline(client, tiny_model_dir)
    good = trajectory(template=templates(builder)[0], task_id="task-f", member=0)
    poison = trajectory(template=templates(builder)[0], task_id="task-f", member=1).model_copy(
        update={"ground_truth": GroundTruth(needs_tool=True, completion_check={"required_tools": 5})}
    )
    assert p.process(fed(client, [poison, good])) == ["dead", "pending"]
    assert read_dead(client)[poison.id].startswith("scoring_error: TypeError")


def test_backlog_counts_what_a_consumer_group_owes_and_consumed_groups_are_trimmed(client, builder, tiny_model_dir):
    p = make_pipeline(client, tiny_model_dir, max_groups_len=1)
    stream = Streams().groups
    client.xgroup_create(stream, "learner", id="0", mkstream=True)
    tpl = templates(builder)[2]
    p.process(
        fed(client, [trajectory(template=tpl, task_id=f"task-{t}", member=i) for t in range(3) for i in range(4)])
    )
    assert client.xlen(stream) == 1 and client.zcard(p.keys.claims) == 2
    sweeper, received = Sweeper(p, p.settings), []
    for _ in range(4):
        reply = client.xreadgroup("learner", "l1", {stream: ">"}, count=10)
        for entry_id, fields in reply[0][1] if reply else []:
            received.append(decode_entry(RolloutGroup, fields).task_id)
            client.xack(stream, "learner", entry_id)
        sweeper.sweep()  # acknowledged entries no longer count, and are trimmed
    assert sorted(received) == ["task-0", "task-1", "task-2"]
    assert client.xlen(stream) <= 1 and client.zcard(p.keys.claims) == 0
    pending_entry = client.xadd(stream, {"data": b"x", "id": "unread"})
    client.xreadgroup("learner", "l1", {stream: ">"}, count=10)  # delivered, not acknowledged
    sweeper.sweep()
    assert [e[0] for e in client.xrange(stream)][-1] == pending_entry  # a pending entry is never trimmed


def test_rollouts_of_one_run_group_together_across_a_weight_swap(client, builder, tiny_model_dir):
    """The n rollouts of one agent-run request (serve gives them one `group_key`) are one group even when a swap
    landed between them; two runs of the same task stay two groups."""
    p = make_pipeline(client, tiny_model_dir)  # version_window 1: versions alone would split them
    tpl = templates(builder)[0]

    def in_run(traj, run_id):
        return traj.model_copy(update={"group_key": run_id})

    run_a = [
        in_run(trajectory(template=tpl, task_id="task-r", member=i, policy_version=i % 2), "run-a") for i in range(4)
    ]
    run_b = [
        in_run(trajectory(template=tpl, task_id="task-r", member=4 + i, policy_version=1), "run-b") for i in range(4)
    ]
    p.process(fed(client, run_a + run_b))
    groups = read_groups(client)
    assert sorted(sorted(t.id for t in g.trajectories) for g in groups) == [
        sorted(t.id for t in run_a),
        sorted(t.id for t in run_b),
    ]
    assert {(g.policy_version_min, g.policy_version_max) for g in groups} == {(0, 1), (1, 1)}
    assert not any(g.partial for g in groups) and client.xlen(Streams().dead) == 0


def test_a_task_for_entries_already_finished_finds_them_gone(client, builder, tiny_model_dir):
    """Tasks carry stream entry ids; an entry leaves the stream once its trajectory is grouped or dead-lettered,
    so a redelivered task for it has nothing left to read (and writes nothing)."""
    p = make_pipeline(client, tiny_model_dir)
    tpl = templates(builder)
    entries = fed(client, [trajectory(template=tpl[i % 3], task_id="task-g", member=i) for i in range(4)])
    assert p.process(entries) == ["pending"] * 3 + ["grouped"]
    assert p.process(entries) == ["gone"] * 4
    assert len(read_groups(client)) == 1 and not read_dead(client)


def test_groups_are_the_contract_with_the_servers_call_records(client, builder, tiny_model_dir):
    """What the learner reads is a validated `RolloutGroup` whose members keep the parsed calls they arrived with."""
    p = make_pipeline(client, tiny_model_dir)
    trajs = [trajectory(template=templates(builder)[0], task_id="task-h", member=i) for i in range(4)]
    p.process(fed(client, trajs))
    (group,) = read_groups(client)
    assert group.task_id == "task-h" and group.size == 4
    assert [[(c.turn, c.block, c.name) for c in t.tool_calls] for t in group.trajectories] == [
        [(0, 0, "get_weather")]
    ] * 4


def test_a_leftover_consumer_group_does_not_hold_groups_back(client, builder, tiny_model_dir):
    """A consumer group nobody reads any more (an earlier run's learner) owes every group written since; the live
    learner owes none. The leftover must not make the stream look full: each group is written as it completes."""
    p = make_pipeline(client, tiny_model_dir, max_groups_len=1)
    stream = Streams().groups
    client.xgroup_create(stream, "learner", id="0", mkstream=True)
    client.xgroup_create(stream, "old-learner", id="0")  # no consumer: nobody reads it
    tpl = templates(builder)[2]
    for t in range(3):
        p.process(fed(client, [trajectory(template=tpl, task_id=f"task-{t}", member=i) for i in range(4)]))
        assert (client.xlen(stream), client.zcard(p.keys.claims)) == (t + 1, 0)  # written, not waiting as a claim
        reply = client.xreadgroup("learner", "l1", {stream: ">"}, count=10)
        client.xack(stream, "learner", *[entry_id for entry_id, _ in reply[0][1]])
