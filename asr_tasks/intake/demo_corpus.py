"""A synthetic day of call recordings (espeak-ng speech) for the demo and the tests.

The calls cover what real archives hold: stereo agent/customer calls, 8 kHz
telephone audio, compressed formats, a file whose extension lies about its
content, a silent recording, a corrupt upload, and two real human recordings
shipped with the package (``data/``, see its ORIGIN.md): jfk.flac in English and
zh_asr_example.flac in Mandarin. Sidecar JSON carries agent, customer and
direction.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import wave
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np

from asr_tasks.config import StorageSettings
from asr_tasks.intake.days import day_prefix
from asr_tasks.intake.stores import ObjectStore

JFK = Path(__file__).parent / "data" / "jfk.flac"  # package data: an installed copy has it too
MANDARIN = Path(__file__).parent / "data" / "zh_asr_example.flac"
TTS_RATE = 22050


@dataclass
class Call:
    call_id: str
    ext: str
    turns: list[tuple[str, str]]  # (speaker "agent"/"customer", words), or ("pause", seconds of silence)
    stereo: bool = False
    sample_rate: int = 16000
    codec_args: tuple[str, ...] = ()
    fmt: str | None = None  # ffmpeg output format, when the extension must not decide it
    sidecar: dict[str, str] = field(default_factory=dict)


CALLS = [
    Call(
        "call_0001", "wav", stereo=True, sample_rate=8000,
        sidecar={"agent_id": "AG-1001", "customer_id": "CU-5501", "direction": "inbound"},
        turns=[
            ("agent", "Thank you for calling Harbor Bank. This call is recorded for quality purposes. How can I help you?"),
            ("customer", "Hello. I would like to ask about the savings plan you sent me last week."),
            ("agent", "Of course. This fund is completely risk free, with a guaranteed return of twelve percent."),
            ("customer", "That sounds good. What is the minimum deposit?"),
            ("agent", "The minimum deposit is five thousand dollars. Is there anything else I can help you with?"),
            ("customer", "No, thank you. Goodbye."),
        ],
    ),
    Call(
        "call_0002", "wav", sample_rate=8000,
        sidecar={"agent_id": "AG-1002", "customer_id": "CU-5502", "direction": "inbound"},
        turns=[
            ("agent", "Good morning, claims department. Please tell me your policy number."),
            ("customer", "My policy number is four four seven two. I want to report water damage in my kitchen."),
            ("agent", "I am sorry to hear that. An adjuster will call you tomorrow to arrange a visit."),
        ],
    ),
    Call(
        "call_0003", "mp3", codec_args=("-b:a", "48k"),
        sidecar={"agent_id": "AG-1001", "customer_id": "CU-5503", "direction": "outbound"},
        turns=[("agent", "Hello, this is a courtesy call about your credit card payment, which is now overdue.")],
    ),
    # Planted QA violations: no recording disclosure, a promise of risk-free returns, a card number read out;
    # and personal data to mask: the card (read back in two goes), a North American phone and a bank account number.
    Call(
        "call_0008", "ogg", stereo=True, codec_args=("-c:a", "libopus", "-b:a", "32k"),
        sidecar={"agent_id": "AG-1005", "customer_id": "CU-5508", "direction": "outbound"},
        turns=[
            ("agent", "Hello, this is Sunrise Wealth calling about your investment account."),
            ("customer", "Yes, I have a few minutes."),
            ("agent", "Our new fund is completely risk free, and you will earn money every single month."),
            ("customer", "How do I sign up?"),
            # read back in two goes: a pause of over four seconds, the customer's "mm hm" between the halves
            ("agent", "Let me read back your card number. Four five three nine, one four eight eight,"),
            ("customer", "Mm hm."),
            ("pause", "2.5"),
            ("agent", "zero three four three, six four six seven."),
            ("customer", "That is correct. You can call me back on four one five, five five five, two six seven one."),
            ("agent", "And the refund goes to your account, the account number is six two two two, zero two one two, "
                      "three four five six, seven eight nine zero."),
            ("customer", "Thank you."),
        ],
    ),
    # AAC in an MP4 container, uploaded with a .wav name: the extension is never trusted.
    Call(
        "call_0004", "wav", fmt="mp4", codec_args=("-c:a", "aac", "-b:a", "64k"),
        sidecar={"agent_id": "AG-1003", "customer_id": "CU-5504", "direction": "inbound"},
        turns=[("customer", "I would like to close my account and transfer the balance to another bank.")],
    ),
]


def _speak(text: str, voice: str, out: Path) -> np.ndarray:
    subprocess.run(["espeak-ng", "-v", voice, "-s", "150", "-w", str(out), text], check=True, capture_output=True)
    with wave.open(str(out)) as wav:
        if wav.getframerate() != TTS_RATE or wav.getnchannels() != 1:
            raise RuntimeError(f"unexpected espeak-ng output format in {out}")
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")


def _render(call: Call, work: Path) -> Path:
    """Speak the turns one after another; on stereo calls each side gets its own channel."""
    gap = np.zeros(int(0.8 * TTS_RATE), dtype="<i2")
    channels: list[list[np.ndarray]] = [[gap], [gap]]
    for n, (speaker, words) in enumerate(call.turns):
        if speaker == "pause":
            channels[0].append(np.zeros(int(float(words) * TTS_RATE), dtype="<i2"))
            channels[1].append(channels[0][-1])
            continue
        voice = "en-us" if speaker == "agent" else "en-gb-x-rp"
        speech = _speak(words, voice, work / f"turn{n}.wav")
        side = 0 if speaker == "agent" or not call.stereo else 1
        channels[side] += [speech, gap]
        channels[1 - side] += [np.zeros(len(speech), dtype="<i2"), gap]
    left, right = np.concatenate(channels[0]), np.concatenate(channels[1])
    raw = work / "mix.wav"
    with wave.open(str(raw), "wb") as wav:
        wav.setnchannels(2 if call.stereo else 1)
        wav.setsampwidth(2)
        wav.setframerate(TTS_RATE)
        frames = np.stack([left, right], axis=1) if call.stereo else left
        wav.writeframes(np.ascontiguousarray(frames).tobytes())
    out = work / f"{call.call_id}.{call.ext}"
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(raw), "-ar", str(call.sample_rate),
           *call.codec_args]
    if call.fmt:
        cmd += ["-f", call.fmt]
    subprocess.run([*cmd, str(out)], check=True, capture_output=True)
    return out


def _silence(path: Path, seconds: float) -> None:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(np.zeros(int(seconds * 8000), dtype="<i2").tobytes())


def write_demo_corpus(store: ObjectStore, settings: StorageSettings, day: date) -> list[str]:
    """Write the day's recordings (and sidecars) into the recordings bucket; returns their keys."""
    prefix = day_prefix(settings, day)
    bucket = settings.recordings_bucket
    keys: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        files: list[tuple[Path, str, dict[str, str]]] = []
        for call in CALLS:
            files.append((_render(call, work), f"{call.call_id}.{call.ext}", call.sidecar))
        files.append((JFK, "call_0005_jfk.flac", {"agent_id": "AG-1004", "direction": "inbound"}))
        files.append((MANDARIN, "call_0009_zh.flac",
                      {"agent_id": "AG-1006", "customer_id": "CU-5509", "direction": "inbound"}))
        silent = work / "silent.wav"
        _silence(silent, 20.0)
        files.append((silent, "call_0006.wav", {"agent_id": "AG-1002", "direction": "inbound"}))
        corrupt = work / "corrupt.wav"
        corrupt.write_bytes(b"RIFF\x10\x00\x00\x00WAVEthis upload was cut off" + b"\x00" * 64)
        files.append((corrupt, "call_0007.wav", {"agent_id": "AG-1003", "direction": "outbound"}))
        for path, name, sidecar in files:
            key = prefix + name
            keys.append(key)
            if store.exists(bucket, key):
                continue  # the day is already there: never change an existing recording
            store.put_file(bucket, key, path)
            if sidecar:
                meta = {**sidecar, "started_at": f"{day:%Y-%m-%d}T09:00:00+08:00"}
                store.put_bytes(bucket, prefix + name.rsplit(".", 1)[0] + ".json", json.dumps(meta).encode())
    return keys

