"""`slca sim tasks` (task packs to JSON lines) and `slca sim fidelity` (SGLS vs the real tools, `sim/fidelity/`)."""

from __future__ import annotations

import argparse
import shlex
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

    fid = sub.add_parser(
        "fidelity",
        help="replay expected calls and broken variants on the real tools and on SGLS; write records and a table",
    )
    fid.add_argument("--domain", default="airline,retail,everyday", help="comma-separated: airline, retail, everyday")
    fid.add_argument(
        "--backend",
        default=None,
        help="comma-separated: schema, local, llm (llm needs sim.llm_base_url; default: sim.backend)",
    )
    fid.add_argument("--limit", type=int, default=None, help="replay N episodes per domain, spread over all of them")
    fid.add_argument(
        "--world-seed",
        choices=("off", "on", "both"),
        default="off",
        help="measure the simulator without a world seed (off), seeded with each τ² domain's own database (on: it "
        "knows which ids exist and their records), or both, as separate results (`<backend>-seeded` files); domains "
        "without a database (everyday) are measured unseeded only",
    )
    fid.add_argument("--name", default="fidelity", help="results folder under --out (default: fidelity)")
    fid.add_argument("--out", default="bench/sgls", help="parent folder of the results (default: bench/sgls)")
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
    from pathlib import Path

    from sim.fidelity import measure, write_run, write_table
    from sim.fidelity.run import world_of
    from sim.fidelity.episodes import DOMAINS
    from sim.settings import SimSettings

    settings = config.get(SimSettings).with_cache_of(config.common)
    backends = [b.strip() for b in (args.backend or settings.backend).split(",") if b.strip()]
    domains = [d.strip() for d in args.domain.split(",") if d.strip()]
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        raise CliError(f"unknown domain(s) {', '.join(unknown)}; known: {', '.join(DOMAINS)}")
    folder = Path(args.out) / args.name
    for backend in backends:
        # the seed is --world-seed's, never `sim.world_seed`'s: a figure says which world it was measured with
        sim_settings = settings.model_copy(
            update={
                "backend": backend,
                "cache": False,
                "fault_rate": 0.0,
                "fault_rates": {},
                "tool_fault_rates": {},
                "world_seed": None,
            }
        )
        for domain in domains:
            for seeded in {"off": (False,), "on": (True,), "both": (False, True)}[args.world_seed]:
                world = world_of(domain) if seeded else None
                if seeded and world is None:
                    print(
                        f"{backend} × {domain}: no world seed (its tools keep no objects); not measured seeded",
                        file=sys.stderr,
                    )
                    continue
                command = _command(args, backend, domain, seeded)
                try:
                    records, episodes = asyncio.run(measure(domain, sim_settings, args.limit, _progress, world=world))
                except ValueError as exc:
                    raise CliError(str(exc)) from None
                source = world.source if world is not None else None
                path = write_run(folder, backend, domain, records, episodes, args.limit, command, source)
                print(f"{backend} × {domain}: {len(records)} calls → {path}", file=sys.stderr)
    md, _ = write_table(folder)
    print(md.read_text(encoding="utf-8"))
    return 0


def _command(args: argparse.Namespace, backend: str, domain: str, seeded: bool = False) -> str:
    """The command that measures this one (backend, domain) again (with the global options it ran under, such as
    `--set sim.llm_base_url=…`)."""
    argv = sys.argv[1:]
    globals_ = argv[: argv.index("sim")] if "sim" in argv else []
    parts = ["slca", *map(shlex.quote, globals_), "sim fidelity", f"--backend {backend}", f"--domain {domain}"]
    if seeded:
        parts.append("--world-seed on")
    parts.append(f"--name {args.name}")
    if args.limit is not None:
        parts.append(f"--limit {args.limit}")
    if args.out != "bench/sgls":
        parts.append(f"--out {_repo_relative(args.out)}")
    return " ".join(parts)


def _repo_relative(path) -> str:
    """A results folder as the committed command names it: relative to the working directory when under it, else
    `<path>/<name>` (no machine's paths in results)."""
    import os

    text = str(path)
    if not os.path.isabs(text):
        return text
    rel = os.path.relpath(text)
    return rel if not rel.startswith("..") else f"<path>/{os.path.basename(text.rstrip('/'))}"


def _progress(index: int, total: int, episode_id: str) -> None:
    print(f"[{index + 1}/{total}] episode {episode_id}", file=sys.stderr, flush=True)
