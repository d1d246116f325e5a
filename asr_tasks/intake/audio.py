"""Probe and decode recordings with ffprobe/ffmpeg: any container in, 16 kHz mono PCM per channel out.

The file's extension is never trusted: ffprobe decides what a file is. Anything
that cannot be turned into audio raises ``InvalidAudio`` with a reason a person
can act on, so the recording is quarantined instead of failing the batch.

An upload is hostile until proven otherwise: ffprobe and ffmpeg read it through
the ``file`` protocol only and with the demuxers of call recording formats only
(``INPUT_FORMATS``), so a playlist or concat list can never make them read
another file; what a header claims (channels, sample rate, length) is checked
against caps before any command is built; every command has a timeout that grows
with the length the file declares.

Commands are built with ffmpeg-python and run as subprocesses that read and write
files on disk (16-bit PCM and G.711 WAVs, the commonest uploads, are decoded in
the worker's process instead: ``wav``); Python only ever touches the decoded PCM
in fixed-size blocks, so a worker's memory does not grow with the length of the
recording.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import ffmpeg
import numpy as np

from asr_tasks.config import AudioSettings
from asr_tasks.intake import loudness, wav
from asr_tasks.models import SAMPLE_RATE

BYTES_PER_SAMPLE = 2  # s16le
BLOCK_SAMPLES = 1 << 20  # 64 s of 16 kHz PCM per block read
STDERR_LINES = 64  # how much of ffmpeg's log is kept to explain a failure or read a measurement
_FFMPEG = ["ffmpeg", "-nostdin", "-hide_banner", "-nostats"]
# ffmpeg's demuxers for what call recorders write: RIFF/WAVE (and Wave64) with any codec, MP3, FLAC, Ogg
# (Opus, Vorbis), MP4/M4A/3GP (AAC, AMR), raw AAC and AMR, Matroska/WebM (WebRTC recorders), Sun AU, AIFF.
INPUT_FORMATS = ("wav", "w64", "mp3", "flac", "ogg", "mov", "aac", "amr", "matroska", "au", "aiff")
# Demuxers that open other files or URLs named inside the upload, by the name ffmpeg reports.
REFERRING_FORMATS = {"hls": "an HLS playlist", "concat": "an ffconcat list", "dash": "a DASH manifest",
                     "image2": "an image sequence", "mpl2": "a subtitle file", "srt": "a subtitle file"}
MIN_SAMPLE_RATE, MAX_SAMPLE_RATE = 1000, 384000  # what a header may claim and still be audio
PROBE_TIMEOUT_SECONDS = 60.0
_PCM_OUT = {"f": "s16le", "acodec": "pcm_s16le", "ac": 1}
_LOG_PREFIX = re.compile(r"^\[[^\]]* @ 0x[0-9a-f]+\] ")


class InvalidAudio(Exception):
    """A recording that cannot be decoded into usable audio."""


@dataclass(frozen=True)
class AudioInfo:
    format_name: str
    codec: str
    channels: int
    sample_rate: int
    duration: float


def probe(path: Path, settings: AudioSettings) -> AudioInfo:
    """Validate a file before anything else touches it: a plain WAV by its header, anything else with ffprobe."""
    size = path.stat().st_size
    if size == 0:
        raise InvalidAudio("empty file (0 bytes)")
    if size > settings.max_size_bytes:
        raise InvalidAudio(f"file too large: {size} bytes > max_size_bytes {settings.max_size_bytes}")
    header = wav.read_header(path)
    if header is not None and (info := _probe_wav(path, header, settings)) is not None:
        return info
    meta = _ffprobe(path)
    streams = meta.get("streams", [])
    fmt = meta.get("format", {})
    audio = [s for s in streams if s.get("codec_type") == "audio"]
    if not audio:
        kinds = ", ".join(sorted({str(s.get("codec_type")) for s in streams})) or "no streams"
        raise InvalidAudio(f"no audio stream: the file holds {kinds} ({fmt.get('format_name', 'unknown format')})")
    stream = audio[0]
    duration = _float(stream.get("duration")) or _float(fmt.get("duration"))
    if duration is not None and duration > settings.max_duration_seconds:
        raise InvalidAudio(
            f"too long: {duration:.0f} s > max_duration_seconds {settings.max_duration_seconds:.0f}"
        )
    channels = int(stream.get("channels") or 0)
    if channels < 1:
        raise InvalidAudio("audio stream has no channels")
    sample_rate = int(stream.get("sample_rate") or 0)
    check_header_caps(channels, sample_rate, settings)
    format_name = str(fmt.get("format_name", ""))
    if format_name == "wav" and header is not None and header.data_size is not None and header.byte_rate > 0:
        _check_wav_length(header.data_size / header.byte_rate, duration or 0.0)
    return AudioInfo(
        format_name=format_name,
        codec=str(stream.get("codec_name", "")),
        channels=channels,
        sample_rate=sample_rate,
        duration=duration or 0.0,
    )


def check_header_caps(channels: int, sample_rate: int, settings: AudioSettings) -> None:
    """What a header claims, within what a call recording can be, before any command is built from it."""
    if channels > settings.max_channels:
        raise InvalidAudio(f"implausible header: {channels} channels > max_channels {settings.max_channels}")
    if not MIN_SAMPLE_RATE <= sample_rate <= MAX_SAMPLE_RATE:
        raise InvalidAudio(f"implausible header: sample rate {sample_rate} Hz "
                           f"(audio is {MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz)")


def _ffprobe(path: Path) -> dict[str, Any]:
    """ffprobe's view of the file, through the file protocol and the recording demuxers only."""
    args = ["ffprobe", "-v", "error", *_input_guard(), "-show_format", "-show_streams", "-of", "json", _url(path)]
    try:
        proc = subprocess.run(args, capture_output=True, timeout=PROBE_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InvalidAudio(f"not a decodable media file: ffprobe did not finish within "
                           f"{PROBE_TIMEOUT_SECONDS:.0f} s") from None
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        refused = re.search(r"\[(\w+) @ 0x[0-9a-f]+\] Format not on whitelist", stderr)
        if refused:
            name = refused.group(1)
            if name.endswith("_pipe") or name in {"image2", "gif", "apng", "webp"}:
                raise InvalidAudio(f"no audio stream: the file holds video ({name})")  # an image
            what = REFERRING_FORMATS.get(name, f"format {name}")
            raise InvalidAudio(f"refused: {what} is not a call recording (formats read: {', '.join(INPUT_FORMATS)})")
        raise InvalidAudio(f"not a decodable media file: {_probe_error(stderr, path)}")
    try:
        meta: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise InvalidAudio("not a decodable media file: ffprobe gave no readable report") from None
    return meta


def _input_guard() -> list[str]:
    """Options for an untrusted input: read through the file protocol, with call recording demuxers only."""
    return ["-protocol_whitelist", "file", "-format_whitelist", ",".join(INPUT_FORMATS)]


def _url(path: Path) -> str:
    """An explicit file: URL, so no name (``concat:...``, ``-i``) is ever read as a protocol or an option."""
    return f"file:{path.resolve()}"


def command_timeout(duration: float) -> float:
    """How long ffmpeg may take over a file of ``duration`` seconds: far slower than real time is a hang."""
    return 60.0 + duration / 2


def channel_plan(info: AudioInfo) -> list[int]:
    """Which channels to decode separately: both sides of a stereo call, else one mix (-1)."""
    return [0, 1] if info.channels == 2 else [-1]


def decode(path: Path, info: AudioInfo, out_dir: Path, settings: AudioSettings) -> dict[int, Path]:
    """Decode to 16 kHz mono s16le files, one per speaker channel (-1 = one mono mix).

    One pass splits the channels (in this process for a plain telephone WAV, ``wav.split_channels``; one
    ffmpeg process for anything else); a "stereo" file whose sides are identical
    or one side silent becomes mono; loudness normalisation then runs on what is kept,
    in this process, so a silent side's hiss is never amplified into something the
    VAD calls speech, and no channel costs a second ffmpeg process.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    header = wav.read_header(path) if info.format_name == "wav" else None
    if (header is not None and header.decodable_in_process
            and (header.codec, header.channels, header.sample_rate) == (info.codec, info.channels, info.sample_rate)):
        raw = wav.split_channels(path, header, channel_plan(info), out_dir)
    else:
        raw = _split_channels(path, info, out_dir, settings)
    decoded = max(pcm_duration(p, SAMPLE_RATE) for p in raw.values())
    if decoded <= 0:
        raise InvalidAudio("no audio data could be decoded")
    if decoded > settings.max_duration_seconds:
        raise InvalidAudio(f"too long: more than max_duration_seconds {settings.max_duration_seconds:.0f} s decoded")
    if _is_truncated(info.duration, decoded):
        raise InvalidAudio(
            f"truncated or corrupt: decoded {decoded:.1f} s of the {info.duration:.1f} s its header declares"
        )
    if len(raw) == 2:
        raw = _fold_stereo(raw[0], raw[1])
    outputs: dict[int, Path] = {}
    for ch, pcm in raw.items():
        outputs[ch] = out_dir / pcm.name.replace(".raw", "")
        if settings.loudness_normalize:
            normalise_loudness(pcm, outputs[ch], settings)
        else:
            pcm.rename(outputs[ch])
    return outputs


def _split_channels(path: Path, info: AudioInfo, out_dir: Path, settings: AudioSettings) -> dict[int, Path]:
    """One ffmpeg pass: each planned channel (or the mix) resampled into its own raw PCM file."""
    plan = channel_plan(info)
    demuxer = info.format_name.split(",")[0]
    audio = ffmpeg.input(_url(path), f=demuxer, protocol_whitelist="file",
                         format_whitelist=",".join(INPUT_FORMATS))["a:0"]
    branches = audio.filter_multi_output("asplit", len(plan)) if len(plan) > 1 else None
    paths: dict[int, Path] = {}
    outputs = []
    for i, ch in enumerate(plan):
        stream = branches[i] if branches is not None else audio
        if ch >= 0:
            stream = stream.filter("pan", f"mono|c0<c{ch}")
        elif info.channels > 1:  # "<" renormalises the gains: the plain mean of all channels
            stream = stream.filter("pan", "mono|c0<" + "+".join(f"c{c}" for c in range(info.channels)))
        stream = stream.filter("aresample", SAMPLE_RATE)
        paths[ch] = out_dir / (f"ch{ch}.raw.pcm" if ch >= 0 else "mix.raw.pcm")
        # -t stops a file whose header hides its length one second past the limit
        outputs.append(ffmpeg.output(stream, str(paths[ch]), ar=SAMPLE_RATE,
                                     t=settings.max_duration_seconds + 1, **_PCM_OUT))
    _run(ffmpeg.merge_outputs(*outputs), "decoding failed", timeout=command_timeout(info.duration))
    return paths


def _fold_stereo(left: Path, right: Path) -> dict[int, Path]:
    """Keep both sides of a real two-party call; fold copies and one-sided files to mono."""
    e_left = e_right = e_diff = 0.0
    for a16, b16 in zip(pcm_blocks(left), pcm_blocks(right)):
        n = min(len(a16), len(b16))
        a, b = a16[:n].astype(np.float64), b16[:n].astype(np.float64)
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


def normalise_loudness(raw: Path, out: Path, settings: AudioSettings) -> None:
    """One channel's PCM brought to the target loudness by one gain into ``out``; ``raw`` is consumed.

    Measured first, over the whole channel (``loudness.measure``), then applied: a
    call's quiet and loud passages keep their proportion, and digital silence is
    left as it is.
    """
    measured = loudness.measure(pcm_blocks(raw), SAMPLE_RATE)
    gain = loudness.gain_db(measured, settings.loudness_target_lufs)
    with out.open("wb") as sink:
        for block in loudness.apply(pcm_blocks(raw), gain, settings.loudness_true_peak_db):
            sink.write(block.tobytes())
    raw.unlink()


def _run(stream_spec: Any, what: str, loglevel: str = "error", timeout: float | None = None) -> list[str]:
    """Run an ffmpeg-python command; returns the tail of its log, raises InvalidAudio on failure or timeout.

    Only the last lines of the log are kept: a damaged file can make ffmpeg report an
    error per packet, and the last one is the one that explains the failure.
    """
    args = ffmpeg.compile(stream_spec, cmd=[*_FFMPEG, "-v", loglevel], overwrite_output=True)
    tail: deque[str] = deque(maxlen=STDERR_LINES)
    with subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, errors="replace") as proc:
        timer = threading.Timer(timeout, proc.kill) if timeout else None
        if timer is not None:
            timer.start()
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                tail.append(line.rstrip("\n"))
        finally:
            if timer is not None:
                timer.cancel()
    if timer is not None and proc.returncode == -signal.SIGKILL:
        raise InvalidAudio(f"{what}: ffmpeg did not finish within {timeout:.0f} s")
    if proc.returncode != 0:
        raise InvalidAudio(f"{what}: {_last_line(tail) or f'ffmpeg exit code {proc.returncode}'}")
    return list(tail)


def silence_spans(source: Path, info: AudioInfo, out: Path, spans: list[tuple[float, float]]) -> None:
    """The recording as FLAC (its own rate and channels, so everything outside the spans is unchanged sample
    for sample), with every span silenced on every channel: what the page plays instead of the original.

    The silence is decided sample by sample (``aeval``): a filter switched on by
    time acts on whole frames (20 ms of Opus, 1024 samples of AAC), and would let
    the first words of a span through.
    """
    inside = "+".join(f"between(t,{max(0.0, a):.3f},{b:.3f})" for a, b in spans) or "0"
    exprs = "|".join(f"val({c})*not({inside})" for c in range(info.channels))
    stream = ffmpeg.input(_url(source), f=info.format_name.split(",")[0], protocol_whitelist="file",
                          format_whitelist=",".join(INPUT_FORMATS))["a:0"].filter("aeval", exprs=exprs, c="same")
    _run(ffmpeg.output(stream, str(out), acodec="flac", f="flac"), "redacting the audio failed",
         timeout=command_timeout(info.duration))


def pcm_duration(path: Path, sample_rate: int) -> float:
    return path.stat().st_size / BYTES_PER_SAMPLE / sample_rate


def pcm_blocks(path: Path, block_samples: int = BLOCK_SAMPLES) -> Iterator[np.ndarray]:
    """The s16 samples of a PCM file, one block at a time: memory stays flat however long the file."""
    with open(path, "rb") as fh:
        while True:
            block = np.fromfile(fh, dtype="<i2", count=block_samples)
            if not len(block):
                return
            yield block


def read_pcm(path: Path, sample_rate: int, start: float = 0.0, end: float | None = None) -> np.ndarray:
    """A float32 slice of a PCM file; only the slice is read, so long files cost no RAM."""
    total = path.stat().st_size // BYTES_PER_SAMPLE
    lo = min(total, max(0, int(round(start * sample_rate))))
    hi = total if end is None else min(total, int(round(end * sample_rate)))
    if hi <= lo:
        return np.zeros(0, dtype=np.float32)
    pcm = np.fromfile(path, dtype="<i2", count=hi - lo, offset=lo * BYTES_PER_SAMPLE)
    return pcm.astype(np.float32) / 32768.0


def _is_truncated(declared: float, available: float) -> bool:
    """More than a second (and 5 %) missing: an incomplete upload, not encoder padding."""
    return declared - available > max(1.0, 0.05 * declared)


def _probe_wav(path: Path, header: wav.WavHeader, settings: AudioSettings) -> AudioInfo | None:
    """A plain PCM (or A-law/mu-law) WAV read from its header: no ffprobe process for the commonest upload.

    None when the header is not enough to be sure (other codecs, unstated length, a byte rate that is not what
    the rate and channels make): ffprobe decides then.
    """
    if header.channels > 0 and header.sample_rate > 0:
        check_header_caps(header.channels, header.sample_rate, settings)
    if not header.plain or header.codec is None or header.data_size is None:
        return None
    declared = header.data_size / header.byte_rate
    available = min(header.data_size, path.stat().st_size - header.data_offset) / header.byte_rate
    _check_wav_length(declared, available)
    if available > settings.max_duration_seconds:
        raise InvalidAudio(f"too long: {available:.0f} s > max_duration_seconds {settings.max_duration_seconds:.0f}")
    return AudioInfo("wav", header.codec, header.channels, header.sample_rate, available)


def _check_wav_length(declared: float, available: float) -> None:
    if _is_truncated(declared, available):
        raise InvalidAudio(
            f"truncated: the WAV header declares {declared:.1f} s of audio, the file holds {available:.1f} s"
        )


def _probe_error(stderr: str, path: Path) -> str:
    """ffprobe's last two distinct complaints, without the temp path or the demuxer's address."""
    lines: list[str] = []
    for line in stderr.splitlines():
        line = _LOG_PREFIX.sub("", line.strip().replace(f"{_url(path)}: ", "").replace(f"{path}: ", ""))
        if line and line not in lines:
            lines.append(line)
    return "; ".join(lines[-2:]) or "ffprobe failed"


def _float(value: object) -> float | None:
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return result if result == result and result > 0 else None  # drop NaN and zero


def _last_line(lines: Any) -> str:
    meaningful = [line.strip() for line in lines if line.strip()]
    return meaningful[-1] if meaningful else ""

