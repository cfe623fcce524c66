"""The config trial (benchmarks/config_trial.py) runs, and the premises of CONTRIBUTING's decision
to keep our loader still hold: ours builds every case the others refuse and names the closest key."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_config_trial_records_each_way_and_ours_builds_what_users_write(tmp_path):
    spec = importlib.util.spec_from_file_location("config_trial", ROOT / "benchmarks" / "config_trial.py")
    trial = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trial)
    out = tmp_path / "trial.json"
    assert trial.main(["--out", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    ours, pydantic = record["cases"]["ours"], record["cases"]["pydantic"]
    assert set(record["cases"]) == {"ours", "pydantic", "hf_argument_parser"}
    for case in ("override", "named entry", "int as 1e3", "text as typed", "float text"):
        assert ours[case]["built"], case
    assert ours["round trip"]["same"]
    assert "did you mean 'window'" in ours["misspelt key"]["error"]
    assert "did you mean" not in pydantic["misspelt key"]["error"]
    assert not pydantic["text as typed"]["built"] and not pydantic["named entry"]["built"]
    assert not any(result.get("built") for result in record["cases"]["hf_argument_parser"].values())
