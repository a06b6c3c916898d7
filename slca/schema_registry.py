"""The one `referencing` registry every JSON-schema validator uses (serve's request checks, the sim's SGLS).

Schemas come from API callers, so no `$ref` is ever fetched: the registry's retrieve refuses every URI (no
network, no files; jsonschema's default would fetch `http://` and `file://` refs). Only references inside the
schema itself resolve, plus the JSON-schema metaschemas, which ship with `jsonschema_specifications`.
"""

from __future__ import annotations

from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from referencing import Registry
from referencing.exceptions import NoSuchResource


def refuse_retrieval(uri: str):
    """The registry's retrieve: nothing outside the schema itself (and the metaschemas) is ever read."""
    raise NoSuchResource(ref=uri)


SAFE_REGISTRY: Registry = Registry(retrieve=refuse_retrieval).combine(SPECIFICATIONS)  # type: ignore[call-arg]
"""Every jsonschema validator of serve and sim is built with this registry."""
