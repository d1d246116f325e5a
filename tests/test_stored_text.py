"""The clear-number check reads stored data by field: hashes with digit runs pass, a number anywhere else is found."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from stored_text import StoredText

ETAG = "5d0201527751004f3a9e0c2b7d41e8a6"  # an MD5 in hex with twelve decimal digits in a row
RID = "1234567890123abcdef45678"


def _manifest(card_in: str | None = None, card: str = "4111 1111 1111 1111") -> dict[str, object]:
    text = f"my card is {card}" if card_in == "text" else "thank you"
    words = [{"text": " 4111", "start": 1.0, "end": 1.2}, {"text": "111111111111", "start": 1.2, "end": 2.0}] \
        if card_in == "words" else [{"text": " thank", "start": 1.0, "end": 1.2}]
    return {
        "recording": {"recording_id": RID, "etag": ETAG, "key": "calls/2026/11/27/c.ogg", "call_date": "2026-11-27",
                      "started_at": "2026-11-27T10:11:12.131415+00:00", "customer_id": "CU-1"},
        "channels": [{"pcm_key": f"v3/2026-11-27/{RID}/ch0.pcm", "duration": 12345678.5}],
        "segments": [{"recording_id": RID, "text": text, "words": words, "start": 1.0, "end": 2.0}],
        "pii_policy": "802152775100",  # twelve hex digits, all of them decimal
    }


def _stored(tmp_path: Path, manifest: dict[str, object], log: str = "") -> StoredText:
    root = tmp_path / "store"
    (root / RID).mkdir(parents=True, exist_ok=True)
    (root / RID / "gated.m.json").write_text(json.dumps(manifest))
    (root / RID / "redacted.flac").write_bytes(b"fLaC" + b"41111111111111111" * 4)  # audio is not text
    db = tmp_path / "ledger.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS recording_ledger (recording_id, etag, customer_id, updated_at, reason)")
        conn.execute("INSERT INTO recording_ledger VALUES (?, ?, ?, ?, ?)",
                     (RID, ETAG, "CU-1", "2026-12-01 21:37:57.123456", "replaced by a newer version (ETag "
                      f"{ETAG})"))
    stored = StoredText()
    stored.add_store(root)
    stored.add_sqlite(db, ("recording_ledger",))
    stored.add_free_text("log", log)
    return stored


def test_hashes_ids_and_times_with_long_digit_runs_are_not_numbers(tmp_path: Path) -> None:
    log = (f"[2026-12-01T21:37:57.123+0000] Returned value was: {{'etag': '{ETAG}', 'id': '{RID}'}} "
           "ti 0196b1e2-3f4a-7b5c-8d9e-012345678901 at 2026-12-01 21:37:57,123")
    stored = _stored(tmp_path, _manifest(), log)
    assert ETAG in stored.ids and RID in stored.ids
    assert stored.clear_numbers() == {}


def test_a_number_in_any_text_or_word_field_or_row_or_log_is_found(tmp_path: Path) -> None:
    for card_in in ("text", "words"):
        found = _stored(tmp_path / card_in, _manifest(card_in)).clear_numbers()
        assert list(found) == [f"{RID}/gated.m.json"], (card_in, found)
    manifest = _manifest()
    manifest["recording"]["customer_id"] = "+44 7700 900123"  # type: ignore[index]
    assert list(_stored(tmp_path / "customer", manifest).clear_numbers()) == [f"{RID}/gated.m.json"]
    found = _stored(tmp_path / "log", _manifest(), f"ETag {ETAG}: the customer said 4111-1111-1111-1111").clear_numbers()
    assert found == {"log": ["4111-1111-1111-1111"]}


def test_every_way_a_transcript_writes_a_number_is_found_and_an_id_field_of_another_shape_is_text(
    tmp_path: Path,
) -> None:
    for n, card in enumerate(("4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1", "4111.1111.1111.1111", "4,111,111,111,111",
                              "4111-1111-1111-1111", "41111111111")):
        found = _stored(tmp_path / str(n), _manifest("text", card)).clear_numbers()
        assert list(found) == [f"{RID}/gated.m.json"], (card, found)
    manifest = _manifest()
    manifest["terms"] = {"4111 1111 1111 1111": 2}  # a key is read too
    assert list(_stored(tmp_path / "key", manifest).clear_numbers()) == [f"{RID}/gated.m.json"]
    manifest = _manifest("text", "41111111111")
    manifest["recording"]["started_at"] = "41111111111"  # type: ignore[index]  # a sidecar's value, not a time
    found = _stored(tmp_path / "shape", manifest).clear_numbers()
    assert found == {f"{RID}/gated.m.json": ["41111111111", "41111111111"]}, found
