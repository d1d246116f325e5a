"""Shared fixtures: isolated settings per test, the packaged Whisper-base, test audio."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.model_assets import install_whisper_base

DATA = Path(__file__).parent / "data"
MODEL_DIR = PROJECT_ROOT / "var" / "models" / "whisper-base"


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The real Whisper-base (CTranslate2) assembled from its packages; a no-op when present."""
    return install_whisper_base(MODEL_DIR)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Defaults with every writable path inside the test's own folder."""
    return dataclasses.replace(
        Settings(),
        store_root=str(tmp_path / "store"),
        index_path=str(tmp_path / "index.sqlite"),
        work_dir=str(tmp_path / "work"),
        model_dir=str(MODEL_DIR),
    )


@pytest.fixture
def jfk() -> Path:
    return DATA / "jfk.flac"
