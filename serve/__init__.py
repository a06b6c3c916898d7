"""serve: the OpenAI-compatible agent API (docs/design.md#data-flow).

Where things live:
- `app.py`        app factory: routes, the one error middleware, resources in cleanup_ctx
- `keys.py`       typed app keys;  `errors.py` our exceptions → HTTP;  `metrics.py` Prometheus metrics
- `chat.py`       POST /v1/chat/completions (tools, tool_choice, SSE);  `agent_api.py` POST /v1/agent/runs
- `agent.py`      the multi-turn tool loop;  `tools.py` its tools: the sim (SGLS) through the tool protocol
- `prompting.py`  chat template + Hermes tools, prompt tokens attributed per message
- `turns.py`      a model turn decoded and segmented (`slca.chat.segments`);  `trajectory.py` Trajectory builder
- `recorder.py`   bounded XADD to slca:trajectories with back-pressure;  `swap.py` weight hot-swap
- `admin.py`      /healthz /readyz /metrics /v1/models /admin/weights
- `engines/`      one async interface (`base.py`), `hf.py`, `vllm_engine.py` (in-process) and `vllm_async.py`
                  (engine core in its own process), what they share (`vllm_common.py`, `vllm_survival.py`),
                  forced-call grammars (`grammar.py` the schema; `grammar_builder.py` builds, bounded in time,
                  bytes and per caller, in `grammar_host.py`'s forked processes; `hf_grammars.py` hf's compiled ones)
- `grammars.py`   the app's grammar builders;  `admission.py` admission bounds and `caller_of`
- `cli.py`        `slca serve` (`slca bench serve` is ops': ops/bench/serve/)
"""
