"""Helpers shared by the test packages: builders of test data, waits, and the processes tests start.

Test modules import from here, never from a conftest (a conftest holds fixtures only):

- `trajectories`: `trajectory()`, the one factory of test trajectories; `TrajectoryBuilder` (it, tokenizer bound:
  the `builder` fixture); `episodes()`; `call()`; `TOOLS`.
- `wait`: `wait_for()`, the one poll-with-timeout.
- `processes`: `REPO` (the repository root), `CeleryWorkers` (real `celery worker` processes).
- `serve`: `ServerProcess` (a real `slca serve`), `run_in_app()` (the app in-process), `raw_post()`, `ADMIN_TOKEN`,
  `WEATHER_TOOL`.
- `learner`: `LearnerProcess` (a real `slca learn`), `wait_for_version()`, `load_weights()`.
- `weights`: `publish_version()` (a weight version as the learner publishes it, optionally with the `url` of the HTTP
  transport), `WEIGHTS_KEY`, `NO_FOLLOW` / `signed()` (`[weights]` of a test server), `manifest_of()` /
  `rewrite_manifest()` (read or change a directory's manifest).
- `metrics`: `metric()` (one sample of a Prometheus registry).
- `netns`: `Network` (hosts as Linux network namespaces on one private bridge, made and removed by the test;
  skips where namespaces cannot be made), `children()`, `cmdline()`.
"""
