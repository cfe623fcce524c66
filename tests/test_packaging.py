"""What pyproject.toml promises: a distribution name of our own, runtime dependencies the library
really imports, and a `[train]` extra with tested lower bounds that the README tells users to install."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_the_distribution_name_does_not_take_the_reference_packages_name():
    assert PROJECT["name"] == "memorag-open"  # "memorag" on PyPI is the reference implementation
    assert "memorag-open" in (ROOT / "README.md").read_text()


@pytest.mark.slow
def test_networkx_is_a_dev_dependency_that_no_library_module_imports():
    assert "networkx" not in _names(PROJECT["dependencies"])
    assert "networkx" in _names(PROJECT["optional-dependencies"]["dev"])
    code = ("import importlib, pkgutil, sys\nimport memorag\n"
            "for info in pkgutil.walk_packages(memorag.__path__, 'memorag.'):\n"
            "    importlib.import_module(info.name)\n"
            "print('networkx' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_the_train_extra_has_lower_bounds_that_the_installed_versions_meet():
    train = [Requirement(r) for r in PROJECT["optional-dependencies"]["train"]]
    assert {r.name for r in train} >= {"accelerate", "deepspeed", "datasets", "wandb"}
    peft = [Requirement(r) for r in PROJECT["dependencies"] if Requirement(r).name == "peft"]
    assert peft and peft[0].specifier.contains(Version(importlib.metadata.version("peft")))  # low-rank memory
    for requirement in train:
        bounds = [spec for spec in requirement.specifier if spec.operator == ">="]
        assert bounds, f"{requirement.name} has no lower bound"
        installed = Version(importlib.metadata.version(requirement.name))
        assert requirement.specifier.contains(installed), (requirement, installed)


def test_make_setup_installs_the_train_extra():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^LOCK_EXTRAS := .*--extra dev .*--extra train\b", makefile, re.M)  # what `make lock` resolves
    assert re.search(r"\$\(UV_INSTALL\) -r requirements/lock\.txt", makefile)  # what `make setup` installs
    locked = (ROOT / "requirements" / "lock.txt").read_text()
    for name in ("accelerate", "deepspeed", "datasets", "wandb", "pytest"):
        assert re.search(rf"^{name}==", locked, re.M), f"{name} is not in requirements/lock.txt"


def test_the_training_guide_starts_with_the_install_command_and_the_install_page_lists_the_extras():
    training = (ROOT / "docs" / "training-guide.md").read_text()
    first_block = training.split("```", 2)[1]
    assert 'pip install -e ".[train]"' in first_block
    install = (ROOT / "docs" / "install.md").read_text()
    for extra in PROJECT["optional-dependencies"]:
        assert f"| `{extra}` |" in install, extra  # a row of the install page's table of extras


def test_the_wheel_carries_the_shipped_weights_and_licence_but_not_their_training_logs_or_evaluations(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "memorag", source / "memorag", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(tmp_path / "wheel")], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = "memorag/weights/memory-smollm2-135m-instruct/"
    for needed in ("memory_weights.safetensors", "memory_config.json", "train_config.yaml", "README.md"):
        assert shipped + needed in names, needed
    assert not [name for name in names if name.startswith((shipped + "eval/", shipped + "training_runs/"))]
    reader = "memorag/weights/reader-smollm2-135m-instruct/"
    for needed in ("adapter_model.safetensors", "adapter_config.json", "train_config.yaml", "README.md"):
        assert reader + needed in names, needed
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(metadata).decode()
