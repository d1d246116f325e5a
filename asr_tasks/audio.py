"""Probe and decode recordings with ffprobe/ffmpeg: any container in, 16 kHz mono PCM per channel out.

The file's extension is never trusted: ffprobe decides what a file is. Anything
that cannot be turned into audio raises ``InvalidAudio`` with a reason a person
can act on, so the recording is quarantined instead of failing the batch.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asr_tasks.config import Settings

BYTES_PER_SAMPLE = 2  # s16le


class InvalidAudio(Exception):
    """A recording that cannot be decoded into usable audio."""


@dataclass(frozen=True)
class AudioInfo:
    format_name: str
    codec: str
    channels: int
    sample_rate: int
    duration: float


def probe(path: Path, settings: Settings) -> AudioInfo:
    """Validate a file with ffprobe before anything else touches it."""
    size = path.stat().st_size
    if size == 0:
        raise InvalidAudio("empty file (0 bytes)")
    if size > settings.max_size_bytes:
        raise InvalidAudio(f"file too large: {size} bytes > max_size_bytes {settings.max_size_bytes}")
    proc = subprocess.run(
        ["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams", str(path)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        detail = _last_line(proc.stderr).replace(f"{path}: ", "") or f"ffprobe exit code {proc.returncode}"
        raise InvalidAudio(f"not a decodable media file: {detail}")
    meta = json.loads(proc.stdout or "{}")
    streams = meta.get("streams", [])
    audio = [s for s in streams if s.get("codec_type") == "audio"]
    if not audio:
        found = ", ".join(sorted({str(s.get("codec_type")) for s in streams})) or "nothing"
        raise InvalidAudio(f"no audio stream (found: {found})")
    stream = audio[0]
    fmt = meta.get("format", {})
    duration = _float(stream.get("duration")) or _float(fmt.get("duration"))
    if duration is not None and duration > settings.max_duration_seconds:
        raise InvalidAudio(
            f"too long: {duration:.0f} s > max_duration_seconds {settings.max_duration_seconds:.0f}"
        )
    channels = int(stream.get("channels") or 0)
    if channels < 1:
        raise InvalidAudio("audio stream has no channels")
    return AudioInfo(
        format_name=str(fmt.get("format_name", "")),
        codec=str(stream.get("codec_name", "")),
        channels=channels,
        sample_rate=int(stream.get("sample_rate") or 0),
        duration=duration or 0.0,
    )


def channel_plan(info: AudioInfo) -> list[int]:
    """Which channels to decode separately: both sides of a stereo call, else one mix (-1)."""
    return [0, 1] if info.channels == 2 else [-1]


def decode(path: Path, info: AudioInfo, out_dir: Path, settings: Settings) -> dict[int, Path]:
    """Decode to 16 kHz mono s16le files, one per speaker channel (-1 = one mono mix).

    One ffmpeg pass splits the channels; a "stereo" file whose sides are identical
    or one side silent becomes mono; loudness normalisation then runs on what is kept,
    so a silent side's hiss is never amplified into something the VAD calls speech.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    raw: dict[int, Path] = {}
    graph, args = [], []
    for ch in channel_plan(info):
        label = f"ch{ch}" if ch >= 0 else "mix"
        if ch >= 0:
            chain = f"pan=mono|c0=c{ch}"
        elif info.channels > 1:
            chain = "pan=mono|c0=" + "+".join(f"{1 / info.channels:.6f}*c{i}" for i in range(info.channels))
        else:
            chain = "anull"
        graph.append(f"[0:a:0]{chain},aresample={settings.sample_rate}[{label}]")
        raw[ch] = out_dir / f"{label}.raw.pcm"
        args += ["-map", f"[{label}]", "-ac", "1", "-ar", str(settings.sample_rate), "-f", "s16le",
                 "-acodec", "pcm_s16le", str(raw[ch])]
    _ffmpeg(["-i", str(path), "-filter_complex", ";".join(graph), *args], "decoding failed")
    decoded = max(pcm_duration(p, settings.sample_rate) for p in raw.values())
    if decoded <= 0:
        raise InvalidAudio("no audio data could be decoded")
    if info.duration > 1.0 and decoded < 0.5 * info.duration:
        raise InvalidAudio(f"truncated: decoded {decoded:.1f} s of the {info.duration:.1f} s its header declares")
    if len(raw) == 2:
        raw = _fold_stereo(raw[0], raw[1])
    outputs: dict[int, Path] = {}
    for ch, pcm in raw.items():
        outputs[ch] = out_dir / pcm.name.replace(".raw", "")
        if settings.loudness_normalize:
            _ffmpeg(["-f", "s16le", "-ar", str(settings.sample_rate), "-ac", "1", "-i", str(pcm),
                     "-af", f"loudnorm=I=-23:TP=-2:LRA=11,aresample={settings.sample_rate},"
                     "aformat=sample_fmts=s16:channel_layouts=mono",
                     "-f", "s16le", "-acodec", "pcm_s16le", str(outputs[ch])], "loudness normalisation failed")
            pcm.unlink()
        else:
            pcm.rename(outputs[ch])
    return outputs


def _fold_stereo(left: Path, right: Path) -> dict[int, Path]:
    """Keep both sides of a real two-party call; fold copies and one-sided files to mono."""
    e_left = e_right = e_diff = 0.0
    a_all, b_all = np.memmap(left, dtype="<i2", mode="r"), np.memmap(right, dtype="<i2", mode="r")
    n = min(len(a_all), len(b_all))
    for offset in range(0, n, 1 << 20):
        a = a_all[offset : offset + (1 << 20)].astype(np.float64)
        b = b_all[offset : offset + (1 << 20)].astype(np.float64)
        e_left += float(a @ a)
        e_right += float(b @ b)
        e_diff += float((a - b) @ (a - b))
    loud = max(e_left, e_right)
    if loud == 0 or e_diff <= 1e-3 * loud:  # identical sides (or digital silence)
        right.unlink()
        return {-1: left.rename(left.with_name("mix.raw.pcm"))}
    if min(e_left, e_right) <= 1e-4 * loud:  # one side silent (-40 dB)
        keep, drop = (left, right) if e_left >= e_right else (right, left)
        drop.unlink()
        return {-1: keep.rename(keep.with_name("mix.raw.pcm"))}
    return {0: left, 1: right}


def _ffmpeg(args: list[str], what: str) -> None:
    proc = subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-v", "error", "-y", *args],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise InvalidAudio(f"{what}: {_last_line(proc.stderr) or f'ffmpeg exit code {proc.returncode}'}")


def pcm_duration(path: Path, sample_rate: int) -> float:
    return path.stat().st_size / BYTES_PER_SAMPLE / sample_rate


def read_pcm(path: Path, sample_rate: int, start: float = 0.0, end: float | None = None) -> np.ndarray:
    """A float32 slice of a PCM file, read through a memory map so long files cost no RAM."""
    pcm = np.memmap(path, dtype="<i2", mode="r")
    lo = max(0, int(round(start * sample_rate)))
    hi = len(pcm) if end is None else min(len(pcm), int(round(end * sample_rate)))
    return pcm[lo:hi].astype(np.float32) / 32768.0


def _float(value: object) -> float | None:
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return result if result == result and result > 0 else None  # drop NaN and zero


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
