"""The repository explains itself: what its text cites can be followed from a clone.

- No tracked text file points at documents or paths outside the repository: the design and findings notes that
  once lived beside it (now `docs/design.md` and `docs/cpu-facts.md`), a sibling shared directory, or an
  absolute path of the machine it was written on (see `OUTSIDE`).
- Every `docs/<file>.md#<anchor>` cited anywhere (code comments, docstrings, READMEs) names a file under `docs/`
  and a heading (or explicit `<a id>`) that exists in it; every relative Markdown link `[…](path.md#anchor)`
  in a tracked Markdown file resolves the same way.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# A recorded output of an earlier bench script: it quotes what the script printed then (results are not rewritten).
EXCLUDED_PREFIXES = ("bench/rl/check-1min/",)
EXCLUDED_FILES = {"learner/bench.py", "learner/sft_bench.py", "workers/benchmark.py"}
EXCLUDED_BENCH_SCRIPTS = re.compile(r"^bench/[^/]+\.py$")

VENDORED = ("ops/observe/dashboard/static/vendor/",)
"""Third-party files kept as published."""

OUTSIDE = re.compile(r"\bDESIGN\.md\b|\bFINDINGS\.md\b|\.\./shared\b|/(?:work)/")
"""A reference the reader of a clone cannot follow (written so that this file does not match itself)."""

DOCS_CITATION = re.compile(r"(?<![\w/.-])(?:\.\./)*(docs/[\w./-]+?\.md)#([\w-]+)")
MD_LINK = re.compile(r"\]\(([^()\s#]+\.md)#([^()\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")


def _excluded(rel: str) -> bool:
    return (
        rel.startswith(EXCLUDED_PREFIXES)
        or rel in EXCLUDED_FILES
        or bool(EXCLUDED_BENCH_SCRIPTS.match(rel))
        or rel.startswith(VENDORED)
    )


@cache
def tracked_text_files() -> tuple[tuple[str, str], ...]:
    """(path relative to the repository, text) of every tracked file that reads as UTF-8 text."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    files = []
    for rel in sorted(p for p in out.decode().split("\0") if p):
        path = REPO / rel
        if _excluded(rel) or not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            files.append((rel, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return tuple(files)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: inline code marks and links dropped to their text, lower case,
    punctuation removed (letters, digits, '_', '-' and spaces kept), spaces turned into '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in "_- ")
    return text.replace(" ", "-")


@cache
def anchors(doc: Path) -> frozenset[str]:
    """The anchors a Markdown file defines: its headings (repeats numbered -1, -2 … as GitHub does) and any
    explicit `<a id=…>` / `<a name=…>`; fenced code blocks hold no headings."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        found.update(EXPLICIT_ANCHOR.findall(line))
        m = None if fenced else HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def _broken(target: Path, anchor: str, where: str) -> str | None:
    if not target.is_file():
        return f"{where}: {target.relative_to(REPO) if target.is_relative_to(REPO) else target} does not exist"
    if anchor not in anchors(target):
        return f"{where}: no anchor #{anchor} in {target.relative_to(REPO)}"
    return None


def test_no_reference_leads_outside_the_repository():
    hits = [
        f"{rel}:{n}: {line.strip()[:120]}"
        for rel, text in tracked_text_files()
        for n, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, (
        "references to documents or paths outside the repository (cite docs/design.md or "
        "docs/cpu-facts.md instead):\n" + "\n".join(hits)
    )


def test_every_cited_docs_anchor_exists():
    broken = []
    for rel, text in tracked_text_files():
        for n, line in enumerate(text.splitlines(), 1):
            for doc, anchor in DOCS_CITATION.findall(line):
                problem = _broken(REPO / doc, anchor, f"{rel}:{n}")
                if problem:
                    broken.append(problem)
    assert not broken, "docs/ citations that lead nowhere:\n" + "\n".join(broken)


def test_every_relative_markdown_link_with_an_anchor_resolves():
    broken = []
    for rel, text in tracked_text_files():
        if not rel.endswith(".md"):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for target, anchor in MD_LINK.findall(line):
                if "://" in target:
                    continue
                problem = _broken((REPO / rel).parent.joinpath(target).resolve(), anchor, f"{rel}:{n}")
                if problem:
                    broken.append(problem)
    assert not broken, "Markdown links that lead nowhere:\n" + "\n".join(broken)


def test_the_docs_exist_and_are_cited():
    """The two documents the code cites, and at least one citation of each (so a rename cannot pass silently)."""
    cited = {doc for _, text in tracked_text_files() for doc, _ in DOCS_CITATION.findall(text)}
    for doc in ("docs/design.md", "docs/cpu-facts.md"):
        assert (REPO / doc).is_file(), doc
        assert doc in cited, f"nothing cites {doc}"


def test_the_checker_finds_what_it_should():
    assert slug("vLLM on CPU") == "vllm-on-cpu" and slug("Online RL against TRL") == "online-rl-against-trl"
    assert slug("`slca up`: the supervisor") == "slca-up-the-supervisor"
    assert DOCS_CITATION.findall("see (docs/design.md#hierr).") == [("docs/design.md", "hierr")]
    assert DOCS_CITATION.findall("[x](../../docs/cpu-facts.md#machines)") == [("docs/cpu-facts.md", "machines")]
    assert not DOCS_CITATION.findall("ops/docs/x.md#a")
    assert OUTSIDE.search("see " + "FINDINGS" + ".md") and OUTSIDE.search("/wo" + "rk/main/x")
    assert not OUTSIDE.search("docs/design.md#weights")
