"""Writing a comparison's files atomically (a crash leaves the old file or the new one, never half of one), and
keeping machine paths out of what gets committed."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from slca.atomic import commit_dir, temp_dir_next_to, write_text_atomic


# one atomic writer for the repo (temp file in the same folder, fsync, rename, fsync the folder): `done.json`
# exists only once everything before it is
write_atomic = write_text_atomic


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def link_tree(source: Path, target: Path) -> None:
    """`target` (which must not exist) a copy of the flat directory `source`, each file hard-linked where the file
    system allows (else copied): instant for a model's gigabyte, and the files stay when `source` is deleted. Built in
    a temporary directory and renamed, so `target` exists only complete; a file that vanishes meanwhile raises
    `FileNotFoundError` and leaves no `target`."""
    tmp = temp_dir_next_to(target)
    try:
        for path in sorted(source.iterdir()):
            if path.is_file():
                try:
                    os.link(path, tmp / path.name)
                except FileNotFoundError:
                    raise  # gone under us: the caller decides
                except OSError:
                    shutil.copy2(path, tmp / path.name)  # another file system, or no hard links there
        commit_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_ABSOLUTE = re.compile(r"(?<![\w.~<>:/-])/(?:[\w.+@-]+/)*[\w.+@-]+")
"""An absolute POSIX path not glued to a word (so `a/b`, `1/2`, `~/x` and the parts of a URL do not match)."""


class PathScrubber:
    """Rewrites machine paths in text: under the working directory → relative, under the model cache → the
    model's name, under the home folder → `~/…`, anything else absolute → `<path>/<last part>`."""

    def __init__(self, cwd: Path, models_dir: Path, home: Path | None = None):
        home = home or Path.home()
        # longest prefix first: the cache usually lives under the home folder
        self.prefixes = sorted(
            [(str(models_dir.resolve()), ""), (str(cwd.resolve()), ""), (str(home.resolve()), "~/")],
            key=lambda p: -len(p[0]),
        )

    def path(self, value: str | Path) -> str:
        text = str(value)
        for prefix, repl in self.prefixes:
            if text == prefix:
                return "." if repl == "" else "~"
            if text.startswith(prefix + "/"):
                return repl + text[len(prefix) + 1 :]
        return f"<path>/{Path(text).name}" if text.startswith("/") else text

    def text(self, value: str) -> str:
        return _ABSOLUTE.sub(lambda m: self.path(m.group(0)), value)


def machine_paths(data: Any) -> list[str]:
    """Every absolute path or home-relative path left in a JSON-like value (the committed files have none)."""
    found: list[str] = []
    if isinstance(data, dict):
        for k, v in data.items():
            found += machine_paths(k) + machine_paths(v)
    elif isinstance(data, list):
        for v in data:
            found += machine_paths(v)
    elif isinstance(data, str):
        found += [m.group(0) for m in _ABSOLUTE.finditer(data)]
        found += [data] if str(Path.home()) in data else []
    return found
