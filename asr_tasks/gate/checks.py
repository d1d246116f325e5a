"""The quality gate: Great Expectations suites over a segment table and a recording table.

Whisper-class models write fluent text where there is none (loops on silence and
music, "thank you for watching"), so every transcript is checked before an
auditor relies on it. Two tables are built with pandas, one row per segment and
one row per recording, with computed columns (speech rate, the share of the
text inside a repetition loop, the gap to the same speaker's previous segment,
the share of VAD speech that has text); the suites in ``expectations_dir``
(GX's own JSON, thresholds inside, each expectation named in ``meta.name``)
are validated in an ephemeral GX context. Many recordings go through one
validation run, each row carrying its ``recording_id``, and the failures are
mapped back to each recording: ``pass``, or ``needs_review`` with the failed
expectations named.

Great Expectations and pandas take seconds to import, so they load inside the
functions that need them, never when the pipeline is imported.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asr_tasks.chars import CJK_CHAR, CJK_RANGES
from asr_tasks.config import ConfigError, QualitySettings
from asr_tasks.models import Transcript
from asr_tasks.states import GateOutcome, RecordingState

if TYPE_CHECKING:
    import pandas as pd


SEGMENT_SUITE = "segments.json"
RECORDING_SUITE = "recordings.json"
SUITES = (SEGMENT_SUITE, RECORDING_SUITE)

# A repetition loop: a run of at least LOOP_MIN_COPIES back-to-back copies of the
# same 1..LOOP_MAX_N units, LOOP_MIN_UNITS units long in all; or one word (not a
# Chinese character, where 谢谢谢谢 is still polite) said LOOP_MIN_WORD_COPIES
# times in a row, as Whisper writes over music ("whoa, whoa, whoa, whoa").
LOOP_MAX_N = 16
LOOP_MIN_COPIES = 3
LOOP_MIN_UNITS = 8
LOOP_MIN_WORD_COPIES = 4
MIN_SEGMENT_SECONDS = 0.01  # a zero-length segment with text reads as an impossible speech rate
GATE_BATCH = 500  # recordings per validation run: one run costs about as much for 1 as for 500

_UNITS = re.compile(rf"[{CJK_RANGES}]|[^\W_{CJK_RANGES}]+")
_PARAMETER = "$PARAMETER"


class QualityError(ConfigError):
    """A suite that cannot be loaded or run; the message names the file and the expectation."""


@dataclass
class QualityReport:
    """One recording's gate outcome."""

    recording_id: str
    outcome: GateOutcome
    failures: list[str] = field(default_factory=list)  # expectation names, in suite order


def text_units(text: str) -> list[str]:
    """What speech rate and loops are counted in: Chinese characters one by one, other words whole."""
    return _UNITS.findall(text.lower())


def unit_kind(text: str) -> str:
    """``char`` for text written mostly in Chinese characters, ``word`` otherwise."""
    chars = len(CJK_CHAR.findall(text))
    return "char" if chars and chars >= len(_UNITS.findall(text)) - chars else "word"


def repeat_share(units: list[str]) -> float:
    """The share of units inside a repetition loop (0: none, 1: nothing but the loop)."""
    n_units = len(units)
    covered = [False] * n_units
    for n in range(1, min(LOOP_MAX_N, n_units // 2) + 1):
        start = 0
        while start + n < n_units:
            if units[start] != units[start + n]:
                start += 1
                continue
            stop = start
            while stop + n < n_units and units[stop] == units[stop + n]:
                stop += 1
            span = stop - start + n  # units start .. stop+n-1 repeat with period n
            loop = span >= LOOP_MIN_UNITS and span >= LOOP_MIN_COPIES * n
            word = n == 1 and span >= LOOP_MIN_WORD_COPIES and not CJK_CHAR.match(units[start])
            if loop or word:
                covered[start : start + span] = [True] * span
            start = stop + 1
    return round(sum(covered) / n_units, 4) if n_units else 0.0


def prompt_echo(text: str, terms: tuple[str, ...]) -> bool:
    """True when the text is two or more hotwords and nothing else: the model read back its prompt.

    Whisper given hotwords writes them out over music or noise; a search for a
    product name must not find those.
    """
    rest, found = text.casefold(), 0
    for term in sorted({t.casefold() for t in terms}, key=len, reverse=True):
        found += rest.count(term)
        rest = rest.replace(term, " ")
    return found >= 2 and not text_units(rest)


def _speaker_overlaps(t: Transcript) -> list[float]:
    """Per segment, how long before its start the same speaker's earlier speech ends (0 when it does not).

    Taken in time order, so segments merely listed out of order count as that, not as overlaps.
    """
    overlaps = [0.0] * len(t.segments)
    reach: dict[str, float] = {}
    for i in sorted(range(len(t.segments)), key=lambda i: (t.segments[i].start, t.segments[i].end)):
        seg = t.segments[i]
        if seg.speaker in reach:
            overlaps[i] = round(max(0.0, reach[seg.speaker] - seg.start), 3)
        reach[seg.speaker] = max(seg.end, reach.get(seg.speaker, seg.end))
    return overlaps


def _covered_seconds(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


SEGMENT_COLUMNS = {
    "recording_id": "object", "seq": "int64", "channel": "int64", "speaker": "object", "start": "float64",
    "end": "float64", "text": "object", "units": "int64", "unit": "object", "units_per_second": "float64",
    "repeat_share": "float64", "prompt_echo": "bool", "start_step": "float64", "speaker_overlap": "float64",
    "overrun": "float64", "avg_logprob": "float64", "no_speech_prob": "float64", "language": "object",
}
RECORDING_COLUMNS = {
    "recording_id": "object", "key": "object", "duration": "float64", "speech_seconds": "float64",
    "segments": "int64", "units": "int64", "unit": "object", "units_per_speech_second": "float64",
    "transcribed_seconds": "float64", "transcribed_share": "float64", "repeat_share": "float64",
    "language": "object",
}


def segment_table(transcripts: list[Transcript], hotwords: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per segment, in recording order, with the computed columns the segment suite checks."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for t in transcripts:
        prev_start = None
        overlap = _speaker_overlaps(t)
        for seq, seg in enumerate(t.segments):
            units = text_units(seg.text)
            seconds = max(seg.end - seg.start, MIN_SEGMENT_SECONDS)
            rows.append({
                "recording_id": t.recording.recording_id, "seq": seq, "channel": seg.channel,
                "speaker": seg.speaker, "start": seg.start, "end": seg.end, "text": seg.text,
                "units": len(units), "unit": unit_kind(seg.text),
                "units_per_second": round(len(units) / seconds, 3),
                "repeat_share": repeat_share(units), "prompt_echo": prompt_echo(seg.text, hotwords),
                "start_step": 0.0 if prev_start is None else round(seg.start - prev_start, 3),
                "speaker_overlap": overlap[seq],
                "overrun": round(seg.end - t.duration, 3),
                "avg_logprob": seg.avg_logprob, "no_speech_prob": seg.no_speech_prob, "language": seg.language,
            })
            prev_start = seg.start
    return pd.DataFrame(rows, columns=list(SEGMENT_COLUMNS)).astype(SEGMENT_COLUMNS)


def recording_row(t: Transcript) -> dict[str, Any]:
    """The figures the recording suite checks, and the day's report shows."""
    text = " ".join(s.text for s in t.segments)
    units = text_units(text)
    by_channel: dict[int, list[tuple[float, float]]] = {}
    for seg in t.segments:
        by_channel.setdefault(seg.channel, []).append((seg.start, seg.end))
    transcribed = sum(_covered_seconds(spans) for spans in by_channel.values())
    speech = t.speech_seconds
    return {
        "recording_id": t.recording.recording_id, "key": t.recording.key, "duration": t.duration,
        "speech_seconds": speech, "segments": len(t.segments), "units": len(units), "unit": unit_kind(text),
        "units_per_speech_second": round(len(units) / speech, 3) if speech > 0 else None,
        "transcribed_seconds": round(transcribed, 3),
        "transcribed_share": round(transcribed / speech, 3) if speech > 0 else None,
        "repeat_share": repeat_share(units), "language": t.language,
    }


def recording_table(transcripts: list[Transcript]) -> pd.DataFrame:
    """One row per recording."""
    import pandas as pd

    rows = [recording_row(t) for t in transcripts]
    return pd.DataFrame(rows, columns=list(RECORDING_COLUMNS)).astype(RECORDING_COLUMNS)


def _parameters(value: Any) -> set[str]:
    if isinstance(value, dict):
        if _PARAMETER in value:
            return {str(value[_PARAMETER])}
        return set().union(*(_parameters(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_parameters(v) for v in value)) if value else set()
    return set()


def read_suite(path: Path) -> dict[str, Any]:
    """The suite's JSON, checked; re-read when the file changes, so a worker picks up new thresholds."""
    try:
        return _parse_suite(path, path.stat().st_mtime_ns)
    except FileNotFoundError as exc:
        raise QualityError(f"{path}: expectation suite not found") from exc


@lru_cache(maxsize=8)
def _parse_suite(path: Path, mtime_ns: int) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise QualityError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("expectations"), list):
        raise QualityError(f"{path}: expected a GX suite with a list of expectations")
    for n, exp in enumerate(data["expectations"]):
        if not isinstance(exp, dict) or not isinstance(exp.get("meta", {}).get("name"), str):
            raise QualityError(f"{path}: expectation {n} has no meta.name (the name reported when it fails)")
    return data


def load_suite(path: Path, parameters: dict[str, Any]) -> Any:
    """A GX suite from its JSON file; expectations whose ``$PARAMETER`` is not given are left out.

    That is how a check that only makes sense when configured (the expected
    language) stays in the file but out of the run.
    """
    import great_expectations as gx

    data = read_suite(path)
    expectations = [e for e in data["expectations"] if _parameters(e.get("kwargs", {})) <= set(parameters)]
    try:
        return gx.ExpectationSuite(name=data.get("name", path.stem), expectations=expectations, meta=data.get("meta"))
    except Exception as exc:  # GX reports a bad expectation type or kwargs in many exception types
        raise QualityError(f"{path}: {exc}") from exc


@lru_cache(maxsize=1)
def _context() -> Any:
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    return gx.get_context(project_config=config, mode="ephemeral")


@lru_cache(maxsize=4)
def _batch_definition(table: str) -> Any:
    asset = _context().data_sources.add_pandas(f"transcripts_{table}").add_dataframe_asset(table)
    return asset.add_batch_definition_whole_dataframe(table)


def run_suite(table: str, frame: pd.DataFrame, path: Path, parameters: dict[str, Any]) -> dict[str, list[str]]:
    """Validate one table; returns the names of the failed expectations for each recording_id."""
    suite = load_suite(path, parameters)
    if frame.empty:
        return {}
    batch = _batch_definition(table).get_batch(batch_parameters={"dataframe": frame})
    result = batch.validate(
        suite,
        result_format={"result_format": "COMPLETE", "unexpected_index_column_names": ["recording_id"]},
        expectation_parameters=parameters,
    )
    failed: dict[str, list[str]] = {}
    for res in result.results:
        if res.success:
            continue
        name = res.expectation_config.meta["name"]
        errors = _exception_messages(res.exception_info)
        if errors:
            raise QualityError(f"{path}: expectation {name!r} could not run: {errors[0]}")
        rows = (res.result or {}).get("unexpected_index_list") or []
        if not rows:
            raise QualityError(f"{path}: expectation {name!r} failed without naming rows (aggregate expectations "
                               "cannot be attributed to recordings)")
        for row in rows:
            names = failed.setdefault(str(row["recording_id"]), [])
            if name not in names:
                names.append(name)
    return failed


def _exception_messages(info: Any) -> list[str]:
    """GX reports an expectation that raised either flat or keyed by metric; collect the messages."""
    if not isinstance(info, dict):
        return []
    if info.get("raised_exception"):
        return [str(info.get("exception_message"))]
    return [m for value in info.values() for m in _exception_messages(value)]


def suite_parameters(language: str | None) -> dict[str, Any]:
    """Values the suites refer to as ``{"$PARAMETER": name}``: the language the engine was told to expect."""
    return {"expected_languages": [language]} if language else {}


def validate(transcripts: list[Transcript], settings: QualitySettings, terms: tuple[str, ...] = (),
             language: str | None = None) -> list[QualityReport]:
    """Gate many recordings in one run per table; one report per transcript, in order.

    ``terms`` are the dictionary's spellings (a repeated product name is no loop), ``language``
    the one the engine was configured for, if any.
    """
    if not transcripts:
        return []
    folder = settings.path("expectations_dir")
    parameters = suite_parameters(language)
    recordings = recording_table(transcripts)
    segments = segment_table(transcripts, terms)
    failed_segments = run_suite("segments", segments, folder / SEGMENT_SUITE, parameters)
    failed_recordings = run_suite("recordings", recordings, folder / RECORDING_SUITE, parameters)
    order = [e["meta"]["name"] for s in SUITES for e in read_suite(folder / s)["expectations"]]
    reports = []
    for t in transcripts:
        rid = t.recording.recording_id
        names = set(failed_segments.get(rid, [])) | set(failed_recordings.get(rid, []))
        failures = sorted(names, key=order.index)
        reports.append(QualityReport(rid, GateOutcome.FLAGGED if failures else GateOutcome.PASS, failures))
    return reports


def apply_report(transcript: Transcript, report: QualityReport) -> Transcript:
    """The transcript with the gate's outcome; a failed gate makes it needs_review, naming what failed."""
    if report.recording_id != transcript.recording.recording_id:
        raise ValueError(f"quality report for {report.recording_id} applied to {transcript.recording.recording_id}")
    state, reason = transcript.state, transcript.reason
    if report.failures:
        failed = "quality gate failed: " + ", ".join(report.failures)
        state, reason = RecordingState.NEEDS_REVIEW, f"{reason} ({failed})" if reason else failed
    quality = GateOutcome.PASS if state == RecordingState.INDEXED else GateOutcome.FLAGGED
    return dataclasses.replace(transcript, state=state, reason=reason, quality=quality,
                               quality_failures=list(report.failures))


def gate(transcripts: list[Transcript], settings: QualitySettings, terms: tuple[str, ...] = (),
         language: str | None = None) -> list[Transcript]:
    """Validate and apply: the transcripts as they are to be indexed."""
    return [apply_report(t, r) for t, r in zip(transcripts, validate(transcripts, settings, terms, language))]

