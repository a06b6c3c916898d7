"""The hf engine's KV cache (`serve.hf_kv_room_tokens`): transformers' `DynamicCache`, but each layer keeps its keys
and values in buffers with room for more positions, so a decode step writes its one new position in place.

Why: transformers' `DynamicLayer.update` concatenates the whole cache with the new position at every step, a copy
of every cached position of every layer per generated token; on the AMX Xeon `cat` took 11–23% of a bf16 decode step
of 8 rows over a 900-token context (ops/bench/serve/hf_decode_probe.py, docs/cpu-facts.md#serving). With room for
`room` more positions after each growth, a turn of ≤ `room` new tokens never copies its cache again.

What attention sees is unchanged: `keys` and `values` are views of the buffers' first positions, the same values
in the same layout (only the stride between positions' blocks differs), so the outputs are the same.
"""

from __future__ import annotations

from functools import partial

from transformers.cache_utils import Cache, DynamicCache, DynamicLayer


class RoomyLayer(DynamicLayer):
    """A `DynamicLayer` whose keys and values are the first `length` positions of larger buffers."""

    def __init__(self, room: int, **kwargs):
        super().__init__(**kwargs)
        self.room = room
        """Positions allocated beyond what is needed when a buffer grows."""

    def lazy_initialization(self, key_states, value_states) -> None:
        super().lazy_initialization(key_states, value_states)
        self._k_buf = self._v_buf = None
        self._length = 0

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, end = self._length, self._length + key_states.shape[-2]
        if self._k_buf is None or end > self._k_buf.shape[-2]:
            self._grow(key_states, value_states, end + self.room)
        self._k_buf[:, :, start:end] = key_states
        self._v_buf[:, :, start:end] = value_states
        self._set_length(end)
        return self.keys, self.values

    def _grow(self, key_states, value_states, positions: int) -> None:
        k = key_states.new_empty((*key_states.shape[:2], positions, key_states.shape[-1]))
        v = value_states.new_empty((*value_states.shape[:2], positions, value_states.shape[-1]))
        if self._length:
            k[:, :, : self._length] = self._k_buf[:, :, : self._length]
            v[:, :, : self._length] = self._v_buf[:, :, : self._length]
        self._k_buf, self._v_buf = k, v

    def _set_length(self, length: int) -> None:
        self._length = length
        self.keys, self.values = self._k_buf[:, :, :length], self._v_buf[:, :, :length]

    def batch_select_indices(self, indices) -> None:
        """Only the rows `indices` (finished rows leave; a shared prompt's row is repeated), room kept."""
        if self._length:
            self._k_buf, self._v_buf = self._k_buf[indices], self._v_buf[indices]
            self._set_length(self._length)

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self._length:
            self._k_buf = self._k_buf.repeat_interleave(repeats, dim=0)
            self._v_buf = self._v_buf.repeat_interleave(repeats, dim=0)
            self._set_length(self._length)

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("the hf engine never crops its cache")

    def reset(self) -> None:
        self._k_buf = self._v_buf = None
        self._length = 0
        super().reset()


class RoomyCache(DynamicCache):
    """A `DynamicCache` of `RoomyLayer`s with room for `room` positions after each growth (`room` > 0)."""

    def __init__(self, room: int):
        # transformers builds a layer per model layer on its first update, calling this with no arguments
        Cache.__init__(self, layer_class_to_replicate=partial(RoomyLayer, room))
