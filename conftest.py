"""Repository-root conftest: anchors pytest's rootdir here, so tests import `memorag` from this checkout.

Tests live in tests/ without __init__.py files and are collected with
--import-mode=importlib (see pyproject.toml), so test modules in different
folders may share a base name.
"""


def pytest_report_header(config) -> list[str]:
    import torch
    import transformers

    from memorag.generation.models import cache_dir

    return [f"torch {torch.__version__}, transformers {transformers.__version__}, model cache {cache_dir()}"]
