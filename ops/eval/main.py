"""`slca eval --model DIR`: run the in-domain test split (through serve's agent loop) and the BFCL categories,
print a table, write a JSON file."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from slca.cli import CliError
from slca.config import Config
from slca.models.paths import resolve_model

log = logging.getLogger("slca.eval")


def run_eval(args, config: Config) -> int:
    model_dir = resolve_model(args.model, Path(config.common.cache_dir))
    if not (model_dir / "config.json").is_file():
        raise CliError(f"no model at {model_dir} (expected a Hugging Face directory with config.json)")
    result = evaluate(config, model_dir, categories=_categories(args.categories), limit=args.limit, pack=args.pack,
                      skip=set(args.skip), max_tokens=args.max_tokens, batch_size=args.batch_size,
                      threads=args.threads, engine=args.engine)  # fmt: skip
    out = args.out or Path(config.common.data_dir) / "eval" / f"{model_dir.name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(format_table(result))
    print(f"results: {out}")
    return 0


def _categories(text: str) -> list[str]:
    from ops.eval.bfcl import CATEGORIES

    cats = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in cats if c not in CATEGORIES]
    if unknown:
        raise CliError(f"unknown BFCL categories {unknown}; known: {', '.join(CATEGORIES)}")
    return cats


def evaluate(config: Config, model_dir: Path, categories: list[str], limit: int, pack: str, skip: set[str],
             max_tokens: int = 256, batch_size: int = 8, max_turns: int = 3, threads: int | None = None,
             engine: str = "hf") -> dict[str, Any]:  # fmt: skip
    """In-domain: agent runs of an in-process server on the model (serve's loop, `engine`), `batch_size` in flight;
    BFCL (single turn): batched greedy generation. One after the other: one copy of the model in memory at a time."""
    from ops.eval.generate import HfGenerator, default_threads
    from ops.eval.indomain import eval_indomain

    started = time.monotonic()
    threads = threads or default_threads()
    result: dict[str, Any] = {"model": str(model_dir), "limit": limit, "max_tokens": max_tokens}
    if "indomain" not in skip:
        result["indomain"] = eval_indomain(config, model_dir, pack, limit, max_tokens, max_turns, batch_size,
                                           engine, threads)  # fmt: skip
    if "bfcl" not in skip:
        generator = HfGenerator(model_dir, max_new_tokens=max_tokens, threads=threads)
        result["bfcl"] = eval_bfcl(generator, categories, limit, batch_size)
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _chunks(items: list, size: int):
    for i in range(0, len(items), size):
        yield items[i : i + size]


def eval_bfcl(generator, categories: list[str], limit: int, batch_size: int) -> dict[str, Any]:
    from tqdm import tqdm

    from ops.eval.bfcl import load_category, score

    cases = [c for cat in categories for c in load_category(cat, limit)]
    verdicts: dict[str, list[bool]] = {cat: [] for cat in categories}
    failures: list[dict[str, Any]] = []
    with tqdm(total=len(cases), desc="BFCL", unit="case") as bar:
        for chunk in _chunks(cases, batch_size):
            texts = generator.generate([generator.prompt(c.messages, c.tools) for c in chunk])
            for case, text in zip(chunk, texts):
                verdict = score(case, text)
                verdicts[case.category].append(bool(verdict["valid"]))
                if not verdict["valid"] and len(failures) < 200:
                    failures.append({"id": case.id, "error": verdict.get("error"), "output": text[:400]})
            bar.update(len(chunk))
    per_cat = {cat: {"n": len(v), "accuracy": sum(v) / len(v) if v else 0.0} for cat, v in verdicts.items()}
    total = sum(len(v) for v in verdicts.values())
    overall = sum(sum(v) for v in verdicts.values()) / total if total else 0.0
    return {"categories": per_cat, "overall": overall, "failures": failures}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"model: {result['model']}   (limit {result['limit']} per category, {result['seconds']} s)"]
    if "indomain" in result:
        s = result["indomain"]["summary"]
        lines += [f"in-domain ({result['indomain']['pack']} test, n={s['n']}):",
                  f"  {'name F1':<16}{s['name_f1']:.3f}", f"  {'argument match':<16}{s['argument_match']:.3f}",
                  f"  {'success':<16}{s['success']:.3f}", f"  {'tool turns':<16}{s['tool_turns']:.2f}"]  # fmt: skip
    if "bfcl" in result:
        lines.append("BFCL (official ast_checker):")
        for cat, v in result["bfcl"]["categories"].items():
            lines.append(f"  {cat:<20}{v['accuracy']:.3f}  (n={v['n']})")
        lines.append(f"  {'overall':<20}{result['bfcl']['overall']:.3f}")
    return "\n".join(lines)
