"""What a detector reads as one text: a speaker's turn, or what was said after someone asked for a number.

Segments are cut where the VAD heard a pause, so a number said in two goes lies
in two segments, sometimes with the other speaker's "mm" between them. A
``Passage`` joins pieces of segments' texts with a space and maps what is found in
the joined text back to each segment.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from asr_tasks.models import Segment
from asr_tasks.text.pii_policy import Kind, Policy, Spoken

Piece = tuple[int, int, int]
BACKCHANNEL_CHARS = 40  # a back-channel is a word or two, never a sentence
QUESTION_ZH = re.compile(r"[吗呢么][\s。.!！]*$")  # (segment index, start, end in that segment's text)


@dataclass(frozen=True)
class Passage:
    """Pieces of segments' texts read as one text, joined by a space."""

    pieces: tuple[Piece, ...]
    text: str
    offsets: tuple[int, ...]  # where each piece starts in ``text``

    @classmethod
    def of(cls, segments: list[Segment], pieces: list[Piece]) -> Passage:
        text, offsets = "", []
        for n, lo, hi in pieces:
            if text:
                text += " "
            offsets.append(len(text))
            text += segments[n].text[lo:hi]
        return cls(tuple(pieces), text, tuple(offsets))

    def locate(self, start: int, end: int) -> list[Piece]:
        """The pieces of segments that ``text[start:end]`` spans, each as (segment, start, end) in its own text."""
        out = []
        for (n, lo, hi), at in zip(self.pieces, self.offsets):
            a, b = max(start, at), min(end, at + hi - lo)
            if a < b:
                out.append((n, lo + a - at, lo + b - at))
        return out


def is_backchannel(segment: Segment, spoken: Spoken) -> bool:
    """A listener's "mm", "yes", 嗯: said while the other speaker goes on, it does not end their turn."""
    text = segment.text.strip()
    return len(text) <= BACKCHANNEL_CHARS and spoken.is_backchannel(text)


def turns(segments: list[Segment], policy: Policy) -> list[Passage]:
    """Each speaker's turns: their consecutive segments, through pauses up to ``join_gap_seconds`` and
    through the other speakers' back-channels (anything else another speaker says in the pause ends the turn)."""
    order = sorted(range(len(segments)), key=lambda i: (segments[i].start, segments[i].channel))
    runs: list[list[int]] = []
    open_run: dict[tuple[int, str], int] = {}  # speaker -> index in runs
    for n in order:
        seg = segments[n]
        who = (seg.channel, seg.speaker)
        at = open_run.get(who)
        if at is not None and seg.start - segments[runs[at][-1]].end <= policy.join_gap_seconds:
            runs[at].append(n)
        else:
            open_run[who] = len(runs)
            runs.append([n])
        if not is_backchannel(seg, policy.spoken):
            for other in [w for w in open_run if w != who]:
                del open_run[other]  # the other speaker's next words start a turn of their own
    return [Passage.of(segments, [(n, 0, len(segments[n].text)) for n in run]) for run in runs]


def is_question(segment: Segment) -> bool:
    """A question at all ("…?", "…吗")."""
    text = segment.text.strip()
    return text.endswith(("?", "？")) or QUESTION_ZH.search(text) is not None


def says_digits(segment: Segment, policy: Policy) -> bool:
    return any(ch.isdigit() for ch in segment.text) or any(
        w in policy.spoken.digit_words for w in re.findall(r"[^\W\d_]+", segment.text.lower()))


def asks_else(segment: Segment, kind: Kind, policy: Policy) -> bool:
    """A question that asks for something else: it ends the answer to the one before it. One that asks for more
    ("and the rest?"), reads digits back ("4539?"), or names the kind ("is that a Visa?") does not."""
    if not is_question(segment) or says_digits(segment, policy):
        return False
    text = segment.text
    return (policy.follow_up is None or policy.follow_up.search(text) is None) and not kind.in_context(text, None)


@dataclass(frozen=True)
class Answer:
    """What was said after a prompt of a kind: each speaker's words, and the seconds it spans."""

    kind: str
    asker: tuple[int, str]  # (channel, speaker) of the prompt
    segment: int  # the prompt's segment
    start: float  # the start of the prompt's segment: what begins later may answer it
    asked: float  # the end of the prompt's segment
    until: float
    passages: tuple[Passage, ...]  # one per speaker


def answers(segments: list[Segment], policy: Policy) -> list[Answer]:
    """What each speaker said after a prompt of a kind ("what's the card number?", "卡号是多少"): from the
    prompt to ``answer_seconds`` after its segment, the next prompt of another kind, or the asker's next
    question, whichever comes first."""
    prompts = []  # (start, segment, end of the prompt in its text, kind)
    for n, seg in enumerate(segments):
        for name, kind in policy.kinds.items():
            if kind.prompt is not None:
                prompts += [(seg.start, n, m.end(), name) for m in kind.prompt.finditer(seg.text)]
    prompts.sort()
    order = sorted(range(len(segments)), key=lambda i: (segments[i].start, i))
    starts = [segments[i].start for i in order]
    other_kind = [len(prompts)] * (len(prompts) + 1)  # the next prompt of another kind, in another segment
    for k in range(len(prompts) - 2, -1, -1):
        following = prompts[k + 1]
        other_kind[k] = k + 1 if following[3] != prompts[k][3] and following[1] != prompts[k][1] else other_kind[k + 1]
    out = []
    for k, (start, n, after, name) in enumerate(prompts):
        if k and prompts[k - 1][1] == n and prompts[k - 1][3] == name:
            continue  # the same question twice in one segment (a recogniser's loop) asks once
        asker, kind = (segments[n].channel, segments[n].speaker), policy.kinds[name]
        until = segments[n].end + policy.answer_seconds
        if other_kind[k] < len(prompts):
            until = min(until, prompts[other_kind[k]][0])
        per_speaker: dict[tuple[int, str], list[Piece]] = {(segments[n].channel, segments[n].speaker): [
            (n, after, len(segments[n].text))]}
        asker_goes_on = True  # until someone else says more than "mm", the asker's words are their own turn
        for m in order[bisect.bisect_left(starts, start) : bisect.bisect_left(starts, until)]:
            seg = segments[m]
            who = (seg.channel, seg.speaker)
            if m == n or (seg.start == start and m < n):
                continue
            if who == asker:
                if asks_else(seg, kind, policy):
                    until = seg.start  # the asker's next question ends the answer
                    break
                if not (asker_goes_on or (is_question(seg) and says_digits(seg, policy))):
                    continue  # the asker's own talk, later, is no answer (a read-back "4539?" is)
            elif not is_backchannel(seg, policy.spoken):
                asker_goes_on = False
            per_speaker.setdefault(who, []).append((m, 0, len(seg.text)))
        out.append(Answer(name, asker, n, start, segments[n].end, until,
                          tuple(Passage.of(segments, pieces) for pieces in per_speaker.values())))
    return out
