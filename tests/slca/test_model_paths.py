"""`slca.models.paths`: a model name resolves to a directory, and a directory without config.json is no model.
(The CLI side, a one-line error with exit 2: tests/ops/experiments/eval/test_eval_cli.py.)"""

from __future__ import annotations

import pytest

from slca.models.paths import ModelNotFound, embedded_dir, find_model_dir, is_model_dir, tiny_dir


def _model(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    return path


def test_a_model_dir_holds_a_config_json(tmp_path):
    assert not is_model_dir(tmp_path / "absent")
    assert not is_model_dir(tmp_path)
    assert is_model_dir(_model(tmp_path / "m")) and is_model_dir(str(tmp_path / "m"))


def test_find_model_dir_resolves_cached_names_and_directories(tmp_path):
    cache = tmp_path / "cache"
    for path in (embedded_dir(cache), tiny_dir(cache), tmp_path / "mine"):
        _model(path)
    assert find_model_dir("embedded", cache) == embedded_dir(cache)
    assert find_model_dir("tiny", str(cache)) == tiny_dir(cache)
    assert find_model_dir(str(tmp_path / "mine"), cache) == tmp_path / "mine"
    assert find_model_dir(tmp_path / "mine", cache) == tmp_path / "mine"


@pytest.mark.parametrize(
    "name,expected",
    [
        ("embedded", r"^no model at .*/models/SmolLM2-135M-Instruct \(run `slca model fetch`\)$"),
        ("tiny", r"^no model at .*/models/tiny-smollm2 \(run `slca model tiny`\)$"),
        ("/no/such/dir", r"^no model at /no/such/dir \(expected a Hugging Face model directory with config.json\)$"),
    ],
)
def test_no_model_is_an_error_naming_the_dir_and_what_to_run(tmp_path, name, expected):
    with pytest.raises(ModelNotFound, match=expected) as info:
        find_model_dir(name, tmp_path)
    # a FileNotFoundError: the `slca` entry point prints it as one line, exit 2, as it does a CliError
    assert isinstance(info.value, FileNotFoundError)
    assert str(info.value.path) in str(info.value)


def test_what_and_hint_name_the_callers_setting(tmp_path):
    (tmp_path / "empty").mkdir()  # a directory, but no model in it
    with pytest.raises(ModelNotFound) as info:
        find_model_dir(tmp_path / "empty", tmp_path, what="--model x", hint="run `slca sft`")
    assert str(info.value) == f"--model x: no model at {tmp_path / 'empty'} (run `slca sft`)"
