"""A labelled set for the quality gate: clean speech in the codecs call recorders write, and what is not speech.

Clean: espeak-ng sentences at 8 kHz through PCM, G.711 mu-law and A-law, G.726,
GSM, MP3 and Opus, at -30, -20 and -10 dBFS. Not speech: digital silence, line
hiss, a tone, a dual tone, music-like sound, pink noise and speech played
backwards; and transcripts with planted faults (a repetition loop, text over a
recording without speech). The tests calibrate the gate on it;
``bench/quality_gate.py`` reports each expectation's false-flag and catch rates.
"""

from __future__ import annotations

import dataclasses
import random
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stages import transcript_of

from asr_tasks.config import Settings
from asr_tasks.gate.checks import RECORDING_SUITE, SEGMENT_SUITE, read_suite, recording_table, segment_table, validate
from asr_tasks.intake.audio import read_pcm
from asr_tasks.intake.days import recording_for_file
from asr_tasks.models import SAMPLE_RATE, Transcript
from asr_tasks.pipeline.preprocess import preprocess_local
from asr_tasks.pipeline.transcribe import load_engine, transcribe_group
from asr_tasks.text.postprocess import hotword_terms

# What call centre agents and customers say (the first twelve sentences of bench/synthetic.py).
SENTENCES = (
    "thank you for calling harbor bank", "how can I help you today", "I would like to check my balance",
    "please tell me your account number", "my account number is four four seven two",
    "I want to report a lost card", "your card has been blocked", "a new card will arrive in five days",
    "is there anything else I can help you with", "no thank you goodbye", "I am calling about my insurance claim",
    "the adjuster will visit tomorrow morning",
)
CODECS = {  # name: ffmpeg output options at 8 kHz mono
    "pcm": ["-c:a", "pcm_s16le", "-f", "wav"], "mulaw": ["-c:a", "pcm_mulaw", "-f", "wav"],
    "alaw": ["-c:a", "pcm_alaw", "-f", "wav"], "g726": ["-c:a", "adpcm_g726", "-b:a", "32k", "-f", "wav"],
    "gsm": ["-c:a", "libgsm_ms", "-f", "wav"], "mp3": ["-c:a", "libmp3lame", "-b:a", "16k", "-f", "mp3"],
    "opus": ["-c:a", "libopus", "-b:a", "12k", "-f", "ogg"],
}
LEVELS_DB = (-30, -20, -10)
NEGATIVES = {  # name: lavfi source (8 kHz), 6 s each
    "silence": "anullsrc=r=8000:cl=mono",
    "hiss": "anoisesrc=r=8000:color=white:amplitude=0.003",
    "tone": "sine=f=440:r=8000",
    "dual_tone": "sine=f=697:r=8000[a];sine=f=1209:r=8000[b];[a][b]amix=inputs=2",
    "music": "aevalsrc='0.2*sin(2*PI*220*t)*(1+0.5*sin(2*PI*2*t))+0.15*sin(2*PI*330*t)+0.1*sin(2*PI*440*t)':s=8000",
    "pink_noise": "anoisesrc=r=8000:color=pink:amplitude=0.2",
}


@dataclasses.dataclass
class Item:
    name: str
    clean: bool  # clean speech (must pass) or not (must be flagged)
    path: Path


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def labelled_set(folder: Path, sentences: Sequence[str], seed: int = 3) -> list[Item]:
    """Each sentence spoken in one codec at every level (every third one a longer turn of three sentences),
    and backwards; then the negatives."""
    rng = random.Random(seed)
    items: list[Item] = []
    for n, sentence in enumerate(sentences):
        text = sentence
        if n % 3 == 2:  # a longer turn: several sentences
            text = ". ".join(rng.sample(list(sentences), min(3, len(sentences))))
        raw = folder / f"speech{n}.wav"
        subprocess.run(["espeak-ng", "-v", rng.choice(["en-us", "en-gb-x-rp"]), "-s", "155", "-w", str(raw), text],
                       check=True, capture_output=True)
        codec = list(CODECS)[n % len(CODECS)]
        for level in LEVELS_DB:
            out = folder / f"clean{n}_{codec}_{-level}dB.{CODECS[codec][-1]}"
            ffmpeg("-i", str(raw), "-af", f"adelay=300,apad=pad_dur=0.4,loudnorm=I={level}:TP=-1", "-ar", "8000",
                   "-ac", "1", *CODECS[codec], str(out))
            items.append(Item(out.stem, True, out))
        backwards = folder / f"backwards{n}.wav"
        ffmpeg("-i", str(raw), "-af", "areverse", "-ar", "8000", "-ac", "1", str(backwards))
        items.append(Item(backwards.stem, False, backwards))
    for name, source in NEGATIVES.items():
        out = folder / f"{name}.wav"
        ffmpeg("-f", "lavfi", "-i", source, "-t", "6", "-ar", "8000", "-ac", "1", str(out))
        items.append(Item(name, False, out))
    return items


def planted(transcript: Transcript) -> list[tuple[str, Transcript]]:
    """Faults the audio cannot plant: a repetition loop, and text over a recording without speech."""
    def renamed(fault: str, **changes: Any) -> Transcript:  # a recording of its own: the gate reports by id
        rec = dataclasses.replace(transcript.recording, recording_id=f"{transcript.recording.recording_id}-{fault}")
        return dataclasses.replace(transcript, recording=rec, **changes)

    seg = transcript.segments[0]
    loop = dataclasses.replace(seg, text=" ".join(["thank you for calling"] * 8), end=min(seg.end, seg.start + 6))
    return [("loop", renamed("loop", segments=[loop])),
            ("text_without_speech", renamed("text_without_speech", speech_seconds=0.0))]


def transcribe_items(items: list[Item], work: Path, settings: Settings) -> list[Transcript]:
    """Every file preprocessed and transcribed as in a shard (chunks of all files in one engine call), ungated."""
    engine = load_engine(settings)
    pres, audio = [], []
    for n, item in enumerate(items):
        pre, pcm = preprocess_local(recording_for_file(item.path), item.path, work / f"work{n}", settings.audio)
        pres.append(pre)
        audio.append([(c, read_pcm(pcm[c.channel], SAMPLE_RATE, c.start, c.end)) for c in pre.chunks])
    owners = [n for n, chunks in enumerate(audio) for _ in chunks]
    segments = transcribe_group(engine, [x for chunks in audio for x in chunks], owners, len(items))
    return [transcript_of(pre, segs, engine.model_name, settings, gate=False) for pre, segs in zip(pres, segments)]


def outcomes(items: list[Item], transcripts: list[Transcript], settings: Settings) -> list[tuple[str, bool, list[str]]]:
    """(name, clean, what flagged it) per file and per planted fault: the gate's failed expectations, and
    ``no_speech_or_text`` where the pipeline itself flagged it (no speech detected, or no text for speech)."""
    labelled = [(item.name, item.clean, t) for item, t in zip(items, transcripts)]
    labelled += [(f"{item.name}+{fault}", False, bad) for item, t in zip(items, transcripts) if item.clean and t.segments
                 for fault, bad in planted(t)]
    terms = tuple(hotword_terms(settings.postprocess))
    reports = validate([t for _, _, t in labelled], settings.quality, terms, settings.asr.language)
    return [(name, clean, [*report.failures, *(["no_speech_or_text"] if t.reason else [])])
            for (name, clean, t), report in zip(labelled, reports)]


@dataclasses.dataclass
class Margin:
    """How far one file's worst row sits from one threshold: positive inside the passing range, negative past it."""

    name: str
    value: float
    margin: float

    def past(self, strict: bool) -> bool:
        """Flagged: beyond the bound, or on it when the bound is strict."""
        return self.margin < 0 or (self.margin == 0 and strict)


def threshold_margins(items: list[Item], transcripts: list[Transcript], settings: Settings
                      ) -> list[dict[str, Any]]:
    """For every range expectation of the suites: its bounds, and the clean and bad files nearest to them.

    ``nearest_clean`` is the passing clean file with the least room, ``clean_flagged``
    the clean files past the bound; ``nearest_bad`` the bad file it catches that is
    closest to passing (a margin is positive inside the passing range).
    A change that moves either to the edge shows here before it flips a test.
    """
    segments = segment_table(transcripts, tuple(hotword_terms(settings.postprocess)))
    recordings = recording_table(transcripts)
    clean = {t.recording.recording_id: (item.name, item.clean) for item, t in zip(items, transcripts)}
    folder = settings.quality.path("expectations_dir")
    report = []
    for suite, table in ((SEGMENT_SUITE, segments), (RECORDING_SUITE, recordings)):
        for exp in read_suite(folder / suite)["expectations"]:
            kwargs = exp["kwargs"]
            if exp["type"] != "expect_column_values_to_be_between":
                continue
            rows = table.query(kwargs["row_condition"]) if "row_condition" in kwargs else table
            low, high = kwargs.get("min_value"), kwargs.get("max_value")
            worst: dict[str, tuple[float, float]] = {}
            for rid, value in zip(rows["recording_id"], rows[kwargs["column"]]):
                room = min(value - low if low is not None else float("inf"),
                           high - value if high is not None else float("inf"))
                if rid not in worst or room < worst[rid][1]:
                    worst[rid] = (float(value), float(room))
            margins = {ok: [Margin(clean[rid][0], round(v, 4), round(m, 4)) for rid, (v, m) in worst.items()
                            if rid in clean and clean[rid][1] == ok] for ok in (True, False)}
            strict = bool(kwargs.get("strict_min"))
            passing = [m for m in margins[True] if not m.past(strict)]
            caught = [m for m in margins[False] if m.past(strict)]
            report.append({
                "name": exp["meta"]["name"], "column": kwargs["column"], "min": low, "max": high,
                "when": kwargs.get("row_condition"),
                "nearest_clean": dataclasses.asdict(min(passing, key=lambda m: m.margin)) if passing else None,
                "nearest_bad": dataclasses.asdict(max(caught, key=lambda m: m.margin)) if caught else None,
                "clean_flagged": sorted(m.name for m in margins[True] if m.past(strict)),
                "bad_caught": len(caught),
            })
    return report
