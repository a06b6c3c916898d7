"""Every `slca bench` whose code is ops' (one module or package per bench; `cli` registers them): they compose
components (serve + workers + learner). Shared helpers: `ab` (the one side-by-side method: alternated
windows, ratio per pair, no machine paths in results), `common` (recorded command, percentiles), `machine` (what
a result says about the machine), `ops.observe.procs` (memory and CPU of a process tree), `servers` (servers under
measurement, each in its own process), `slca_up` (the whole system under measurement: `slca up`'s command line,
settings, readiness, process roles, stop, logs), `hostile` (hostile request bodies)."""
