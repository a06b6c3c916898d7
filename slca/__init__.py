"""slca: shared contracts, configuration and the `slca` command line.

Every component (serve, sim, workers, learner, ops) imports this package and nothing of
each other's internals (docs/design.md#components).
"""

__version__ = "0.1.0"
