"""Bringing the system up and feeding it: `slca up` (`supervisor/`), training traffic and the held-out probe
(`feed/`, `slca feed`), and `slca status` (`status`)."""
