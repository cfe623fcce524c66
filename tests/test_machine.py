"""The machine record every benchmark writes: the processor's name, and a fallback without /proc."""

from __future__ import annotations

import platform

from memorag.benchmarking import machine


def test_the_processor_name_comes_from_cpuinfo(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Example CPU @ 2.00GHz\n")
    monkeypatch.setattr(machine, "CPUINFO", cpuinfo)
    assert machine.cpu_model() == "Example CPU @ 2.00GHz"


def test_without_cpuinfo_the_platform_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "absent")
    assert machine.cpu_model() == (platform.processor() or platform.machine())


def test_the_record_keeps_the_load_before_and_measures_the_load_after():
    record = machine.machine_record([9.0, 8.0, 7.0])
    assert record["load_average_before"] == [9.0, 8.0, 7.0]
    assert len(record["load_average_after"]) == 3 and record["threads"] >= 1 and record["cores"] >= 1
