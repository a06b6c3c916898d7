"""The promotion gate (docs/design.md#versions): judges the candidate on the gate set against the promoted version,
item by item, and tells serve to promote it or not; `slca gate` runs it (a process of `slca up`), `slca promote`
moves the promoted version by hand."""
