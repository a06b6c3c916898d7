"""What a tool's own text says, read by program: listed values, formats, id examples, status words.

Descriptions of parameters and tools carry rules a schema does not: "either 'no longer needed' or 'ordered by
mistake'", "YYYY-MM-DD", "IANA time zone", "such as '#W0000000'", "The order status will be changed to 'return
requested'". SGLS reads them (`sim.rules`, `sim.effects`) so that a simulated tool refuses and changes what the
documented one would.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

LISTED = re.compile(r"\b(?:either|one of|should be|must be)\s+((?:'[^']*'[\s,]*(?:or\s+)?)+)", re.IGNORECASE)
EXAMPLES = re.compile(r"\b(?:such as|e\.g\.|for example)\s*:?\s*((?:'[^']+'[\s,]*(?:or\s+)?)+)", re.IGNORECASE)
QUOTED = re.compile(r"'([^']*)'")
PAIRED = re.compile(r"same position|match(?:es)? the \w+ id", re.IGNORECASE)
"""Two id lists a description pairs position by position ('should match the item id in the same position')."""
NEW_STATUS = re.compile(r"status (?:will be|is) (?:changed|set|updated) to '([^']+)'", re.IGNORECASE)


def description(schema: Any) -> str:
    return str(schema.get("description", "")) if isinstance(schema, dict) else ""


def listed_values(text: str) -> list[str] | None:
    """The values a description says a parameter takes ("either 'a' or 'b'", "one of 'a', 'b'"), or None."""
    match = LISTED.search(text)
    if not match:
        return None
    values = QUOTED.findall(match.group(1))
    return values if len(values) >= 2 else None


def examples(text: str) -> list[str]:
    """The example values a description gives ("such as 'ZFA04Y'")."""
    return [v for m in EXAMPLES.finditer(text) for v in QUOTED.findall(m.group(1)) if v]


@lru_cache(maxsize=1024)
def shape_of(example: str) -> re.Pattern[str]:
    """A pattern of the ids shaped like `example`: separators kept, runs of digits any length, words of letters of
    one case any length and any number ('credit_card_' also matches 'paypal_'), runs mixing letters and digits the
    same length ('ZFA04Y' → [A-Z0-9]{6})."""
    parts: list[str] = []
    runs = re.findall(r"[A-Za-z0-9]+|[^A-Za-z0-9]", example)
    i = 0
    while i < len(runs):
        run = runs[i]
        if run.isalpha():
            cls = "[a-z]+" if run.islower() else "[A-Z]+" if run.isupper() else "[A-Za-z]+"
            while i + 2 < len(runs) and runs[i + 1] in "_-" and runs[i + 2].isalpha():
                i += 2
            parts.append(f"{cls}(?:[_-]{cls})*")
        elif not run[0].isalnum():
            parts.append(re.escape(run))
        elif run.isdigit():
            parts.append(r"\d+")
        else:
            letters = "a-z" if run.lower() == run else "A-Z" if run.upper() == run else "A-Za-z"
            parts.append(f"[{letters}0-9]{{{len(run)}}}")
        i += 1
    return re.compile("".join(parts))


def new_status(text: str) -> str | None:
    """The status a tool's description says a call sets ("status will be changed to 'cancelled'")."""
    match = NEW_STATUS.search(text)
    return match.group(1) if match else None


def date_format(text: str) -> str | None:
    """'date-time', 'date' or 'time zone' when the description names that format, else None."""
    if "YYYY-MM-DDTHH" in text:
        return "date-time"
    if "YYYY-MM-DD" in text:
        return "date"
    if "IANA" in text:
        return "time zone"
    return None


def name_words(name: str) -> set[str]:
    """The words of a tool's name, singular too ('return_delivered_order_items' → return, delivered, item...)."""
    words = set(name.lower().split("_"))
    return words | {w[:-1] for w in words if w.endswith("s")}
