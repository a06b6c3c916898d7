"""`slca sim tasks` (task packs to JSON lines) and `slca sim fidelity` (SGLS vs real τ² tools)."""

from __future__ import annotations

import argparse
import json
import sys

from slca.cli import CliError


def register(commands, bench) -> None:
    sim = commands.add_parser("sim", help="tool simulator: task packs and fidelity")
    sub = sim.add_subparsers(dest="sim_command", metavar="SUBCOMMAND")
    sim.set_defaults(func=lambda args, config: sim.print_help() or 2)

    tasks = sub.add_parser("tasks", help="write a task pack split as JSON lines")
    tasks.add_argument("--pack", default="everyday", help="everyday | airline | retail | all")
    tasks.add_argument("--split", default="train", help="train | test | all")
    tasks.add_argument("--seed", type=int, default=0)
    tasks.add_argument("--out", help="output file (default: stdout)")
    tasks.set_defaults(func=run_tasks)

    fid = sub.add_parser("fidelity", help="replay τ² expected actions on real tools and on SGLS; print a table")
    fid.add_argument("--domain", required=True, choices=["airline", "retail"])
    fid.add_argument("--backend", default=None, help="schema | local | llm (default: sim.backend)")
    fid.add_argument("--limit", type=int, default=None, help="replay only the first N tasks")
    fid.add_argument("--json", dest="json_out", help="also write the summary as JSON to this file")
    fid.set_defaults(func=run_fidelity)


def run_tasks(args: argparse.Namespace, config) -> int:
    from sim.tasks import load_tasks, write_jsonl

    try:
        tasks = load_tasks(args.pack, args.split, seed=args.seed)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.out:
        n = write_jsonl(tasks, args.out)
        print(f"wrote {n} tasks ({args.pack}/{args.split}, seed {args.seed}) to {args.out}", file=sys.stderr)
    else:
        for task in tasks:
            print(task.model_dump_json())
    return 0


def run_fidelity(args: argparse.Namespace, config) -> int:
    import asyncio

    from sim.settings import SimSettings

    settings = config.get(SimSettings).with_cache_of(config.common)
    backend = args.backend or settings.backend
    sim_settings = settings.model_copy(
        update={"backend": backend, "cache": False, "fault_rate": 0.0, "fault_rates": {}, "tool_fault_rates": {}}
    )
    try:
        summary = asyncio.run(_fidelity(args.domain, sim_settings, args.limit))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    from sim.fidelity import format_table

    print(format_table(args.domain, backend, summary))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump({"domain": args.domain, "backend": backend, **summary}, fh, indent=1)
    return 0


def _progress(index: int, total: int, task_id: str) -> None:
    print(f"[{index + 1}/{total}] τ² task {task_id}", file=sys.stderr, flush=True)


async def _fidelity(domain: str, sim_settings, limit: int | None) -> dict:
    from prometheus_client import CollectorRegistry

    from sim.fidelity import replay, summarise, tau2_cases
    from sim.provider import make_provider

    real = make_provider(
        sim_settings.model_copy(update={"backend": "schema", "real_packs": [domain]}), None, CollectorRegistry()
    )
    simulated = make_provider(sim_settings.model_copy(update={"real_packs": []}), None, CollectorRegistry())
    pack_tools = real.registry.tools(domain)
    tools = [t.definition("real") for t in pack_tools]
    cases = tau2_cases(domain, {t.name: t.parameters for t in pack_tools})[:limit]
    try:
        pairs = await replay(cases, tools, real, simulated, _progress)
    finally:
        await simulated.close()
        await real.close()
    return summarise(pairs, {t.name: t.response_schema for t in pack_tools})
