"""Sharded evaluation on fakes: two shards merged equal the unsharded run; a killed shard resumes; a merge
with a shard missing or unfinished is refused by name; the shard comes from a launcher's variables."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from memorag.config import ConfigError
from memorag.evaluation import EvalError, Models, run_evaluation
from memorag.evaluation.merge import merge_shards
from memorag.evaluation.results_store import CELLS_FILE, EXAMPLES_FILE, MODELS_FILE
from memorag.evaluation.shards import Shard, local_device, shard_from_environment

from .conftest import FakeNumberGenerator, fake_models, make_config

ROOT = Path(__file__).resolve().parents[2]

_MEASURED = ("timings", "ask", "prepare")  # seconds and RSS differ between runs; the rest must not


class KilledGenerator(FakeNumberGenerator):
    """The fake generator, killed (an exception) at its `calls_left`-th call, as a job killed mid-run."""

    def __init__(self, calls_left: int):
        super().__init__()
        self.calls_left = calls_left

    def generate(self, prompt, **kwargs):
        self.calls_left -= 1
        if self.calls_left < 0:
            raise RuntimeError("killed")
        return super().generate(prompt, **kwargs)


def _records(out) -> dict[tuple, dict]:
    lines = [json.loads(line) for line in (out / EXAMPLES_FILE).read_text().splitlines()]
    by_key = {(r["mode"], r["task"], r["length"], r["example_id"]): r for r in lines}
    assert len(by_key) == len(lines), "a question recorded twice"
    return {key: {k: v for k, v in record.items() if k not in _MEASURED} for key, record in by_key.items()}


def _cells(out) -> dict[tuple, dict]:
    cells = [json.loads(line) for line in (out / CELLS_FILE).read_text().splitlines()]
    return {(c["mode"], c["task"], c["length"]): {k: v for k, v in c.items() if not k.endswith(("_s", "_mb"))}
            for c in cells}


def test_every_question_has_one_shard_and_keeps_it():
    questions = [("needles", 120, f"q{i}") for i in range(60)] + [("corpus", None, f"q{i}") for i in range(60)]
    for count in (1, 2, 3, 8):
        shards = [Shard(index, count) for index in range(count)]
        owners = [[shard for shard in shards if shard.owns(*question)] for question in questions]
        assert all(len(found) == 1 for found in owners)
    assert sum(Shard(0, 2).owns(*question) for question in questions) not in (0, len(questions))
    assert Shard.parse("1/4") == Shard(1, 4) and str(Shard(1, 4)) == "1/4"


@pytest.mark.parametrize("text, message", [("4/4", "0/4 to 3/4"), ("1-4", "shard=I/N"), ("0/0", "at least 1")])
def test_a_bad_shard_is_a_clear_error(text, message):
    with pytest.raises(ConfigError, match=message):
        Shard.parse(text)


def test_two_shards_merged_equal_the_unsharded_run(tmp_path, data_files):
    models = fake_models()
    run_evaluation(make_config(tmp_path / "whole", data_files), models)
    out = tmp_path / "sharded"
    for index in (1, 0):  # finishing in either order gives the same merge
        run_evaluation(make_config(out, data_files, shard=f"{index}/2"), models)
    owned = [json.loads((out / "shards" / f"{i}-of-2" / "shard.json").read_text())["parts"] for i in range(2)]
    assert all(sum(len(parts[key]["owned"]) for parts in owned) == len(owned[0][key]["example_ids"])
               for key in owned[0])
    assert all(any(part["owned"] for part in parts.values()) for parts in owned)  # both shards had work

    cells, report = merge_shards(make_config(out, data_files), command="pytest", models=models)
    assert len(cells) == 9 and all(cell["n"] == 2 for cell in cells)
    assert _records(out) == _records(tmp_path / "whole")  # answers, scores, evidence and its ids, clues
    assert _cells(out) == _cells(tmp_path / "whole")
    assert json.loads((out / MODELS_FILE).read_text()) == json.loads((tmp_path / "whole" / MODELS_FILE).read_text())
    assert "## Quality" in report.read_text() and (out / "plots" / "recall_vs_length.png").is_file()
    assert yaml.safe_load((out / "config.yaml").read_text())["shard"] is None

    # merging again changes nothing; an unsharded run over the merged folder has nothing left to ask
    before = (out / EXAMPLES_FILE).read_bytes()
    merge_shards(make_config(out, data_files), models=models)
    calls = len(models.generator.calls)
    run_evaluation(make_config(out, data_files), models)
    assert (out / EXAMPLES_FILE).read_bytes() == before and len(models.generator.calls) == calls


def test_a_killed_shard_resumes_and_the_merge_waits_for_it(tmp_path, data_files):
    out = tmp_path / "out"
    models = fake_models()
    run_evaluation(make_config(out, data_files, shard="0/2"), models)
    killed = Models(models.memory_model, models.embedder, models.embedder_name, KilledGenerator(calls_left=2))
    with pytest.raises(RuntimeError, match="killed"):
        run_evaluation(make_config(out, data_files, shard="1/2"), killed)
    with pytest.raises(EvalError, match=r"shard 1/2 is incomplete: .*recorded") as refused:
        merge_shards(make_config(out, data_files), models=models)
    assert "shard 0/2" not in str(refused.value)

    shard = out / "shards" / "1-of-2"
    kept = _records(shard)
    assert kept and json.loads((shard / "shard.json").read_text())["complete"] is False
    resumed = Models(models.memory_model, models.embedder, models.embedder_name, FakeNumberGenerator())
    run_evaluation(make_config(out, data_files, shard="1/2"), resumed)
    again = _records(shard)
    assert all(again[key] == record for key, record in kept.items())  # kept as they were, not asked again
    # only the questions not recorded were asked again
    assert len(again) > len(kept)
    assert len(resumed.generator.calls) == sum(len(again[key]["generator_prompt_tokens"]) for key in again
                                               if key not in kept)

    merge_shards(make_config(out, data_files), models=models)
    whole = tmp_path / "whole"
    run_evaluation(make_config(whole, data_files), models)
    assert _records(out) == _records(whole)


def test_a_merge_with_shards_missing_is_refused_by_name(tmp_path, data_files):
    out = tmp_path / "out"
    with pytest.raises(EvalError, match="holds no shards"):
        merge_shards(make_config(out, data_files))
    models = fake_models()
    run_evaluation(make_config(out, data_files, shard="1/3"), models)
    with pytest.raises(EvalError) as refused:
        merge_shards(make_config(out, data_files), models=models)
    message = str(refused.value)
    assert "shard 0/3 is missing" in message and "shard 2/3 is missing" in message and "1/3" not in message
    assert not (out / EXAMPLES_FILE).exists()

    run_evaluation(make_config(out, data_files, shard="0/2"), models)
    with pytest.raises(EvalError, match=r"different splits: 2 shards \(0-of-2\); 3 shards \(1-of-3\)"):
        merge_shards(make_config(out, data_files))


def test_a_merge_with_other_settings_is_refused(tmp_path, data_files):
    out = tmp_path / "out"
    models = fake_models()
    for index in range(2):
        run_evaluation(make_config(out, data_files, shard=f"{index}/2"), models)
    with pytest.raises(EvalError, match="other settings than this config"):
        merge_shards(make_config(out, data_files, recall_k=[1]), models=models)


def test_the_launcher_gives_the_shard_and_the_gpu():
    assert shard_from_environment({}) is None and shard_from_environment({"WORLD_SIZE": "1", "RANK": "0"}) is None
    assert shard_from_environment({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "3"}) == Shard(3, 4)
    with pytest.raises(ConfigError, match="RANK is not set"):
        shard_from_environment({"WORLD_SIZE": "2"})
    env = {"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1"}
    assert local_device("cuda", env) == "cuda:1" and local_device("cpu", env) == "cpu"
    assert local_device("cuda", {}) == "cuda" and local_device("cuda:2", env) == "cuda:2"


def _run_script():
    spec = importlib.util.spec_from_file_location("eval_script_run", ROOT / "eval" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_refuses_a_shard_under_several_processes_and_an_empty_merge(tmp_path, monkeypatch, capsys):
    script = _run_script()
    config = str(ROOT / "configs" / "eval" / "smoke.yaml")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert script.main(["--config", config, f"out_dir={tmp_path}", "shard=0/2"]) == 2
    assert "each of which takes a shard of its own" in capsys.readouterr().err
    monkeypatch.delenv("WORLD_SIZE")
    assert script.main(["--config", config, f"out_dir={tmp_path}", "--merge", "plots=false"]) == 2
    assert "holds no shards to merge" in capsys.readouterr().err
