"""How the embedded index reads text: a segment's row of its FTS5 table, a query as an FTS5 expression, and the
vocabulary a tolerant term's near spellings come from.

FTS5's tokenizers do not split Chinese into words, so every CJK character is
indexed as its own token (spaces are inserted at index and query time alike) and
each query term becomes a phrase of the text's column (``body``). The forms of
``asr_tasks.text.sounds`` are columns of the same table, each token ending in
``0`` (the porter stemmer leaves a token with a digit alone, so they are matched as
written); the ``vocabulary`` table counts the segments each English word is in.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Iterable

from rapidfuzz import process
from rapidfuzz.distance import OSA

from asr_tasks.chars import CJK_RANGES
from asr_tasks.index.query import Term, to_fts5
from asr_tasks.index.query import parse as parse_query
from asr_tasks.index.tolerant import MAX_EXPANSIONS, TOLERANT_WEIGHT, token_phrases, tolerant_of
from asr_tasks.text.sounds import FORM_FIELDS, Slot, forms, within
from asr_tasks.text.sounds import tokens as sound_tokens

_CJK_CHAR = re.compile(f"([{CJK_RANGES}])")
FTS_COLUMNS = ["body", *FORM_FIELDS]
FORM_WEIGHTS = ", ".join(["1.0", *[str(TOLERANT_WEIGHT)] * len(FORM_FIELDS)])  # bm25's weight per column

def index_text(text: str) -> str:
    """The text as FTS5 sees it: every CJK character a token of its own."""
    return _CJK_CHAR.sub(r" \1 ", text)


def _column(form: str) -> str:
    """A form as its FTS5 column holds it: every token ending in 0, which the porter stemmer leaves as it is."""
    return " ".join(token + "0" for token in form.split())


def _phrase(column: str, words: Iterable[str], marker: str = "") -> str:
    return f'{column} : "' + " ".join(word + marker for word in words) + '"'


def match_expression(query: str, sounds_like: bool = False, db: sqlite3.Connection | None = None) -> str | None:
    """A user's query (see asr_tasks.index.query) as an FTS5 expression that cannot be a syntax error.

    Every term becomes a quoted phrase of its tokens in the text's column; a tolerant one, a group of that phrase
    and its phrases of tones, sounds and near spellings (from ``db``'s vocabulary; none without one). None when
    nothing searchable is left.
    """
    def leaf(term: Term) -> str:
        exact = _phrase("body", re.findall(r"\w+", index_text(term.text)))
        tolerant = tolerant_of(term)
        if tolerant is None:
            return exact
        phrases = token_phrases(tolerant, lambda slot: _near(db, slot), lambda words: _known(db, words))
        sounds = [_phrase("tones", tolerant.tones, "0"), _phrase("sounds", tolerant.sounds, "0")] \
            if tolerant.sounds else []
        alike = [*sounds, *(_phrase("tokens", p, "0") for p in phrases)]
        return "(" + " OR ".join([exact, *alike]) + ")"

    node = parse_query(query, sounds_like)
    return None if node is None else to_fts5(node, leaf)


def _near(db: sqlite3.Connection | None, slot: Slot) -> list[str]:
    """The vocabulary's words within the slot's budget of it, nearest and commonest first."""
    if db is None or not slot.budget:
        return []
    rows = db.execute("SELECT word, segments FROM vocabulary WHERE length(word) BETWEEN ? AND ?",
                      (len(slot.word) - slot.budget, len(slot.word) + slot.budget)).fetchall()
    counts = {row[0]: row[1] for row in rows}
    found = process.extract(slot.word, list(counts), scorer=OSA.distance, score_cutoff=slot.budget, limit=None)
    return [word for word, edits, _ in sorted(found, key=lambda f: (f[1], -counts[f[0]], f[0]))
            if within(word, slot, int(edits))][:MAX_EXPANSIONS]


def _known(db: sqlite3.Connection | None, words: Iterable[str]) -> set[str]:
    """Which of the words the vocabulary holds."""
    asked = sorted(set(words))
    if db is None or not asked:
        return set()
    return {row[0] for row in db.execute(
        f"SELECT word FROM vocabulary WHERE word IN ({', '.join('?' * len(asked))})", asked)}


def vocabulary_words(text: str) -> set[str]:
    """The English words of a text the vocabulary counts (those a tolerant term may be spelt nearly like)."""
    return {t.word for t in sound_tokens(text) if t.word.isascii() and t.word.isalpha()}


def insert_words(db: sqlite3.Connection, rowid: int, text: str) -> None:
    """A segment's text and its forms into the full-text table, its words counted in the vocabulary."""
    spoken = forms(text)
    db.execute("INSERT INTO segments_fts (rowid, body, tokens, sounds, tones) VALUES (?, ?, ?, ?, ?)",
               (rowid, index_text(text), *(_column(spoken[f]) for f in FORM_FIELDS)))
    db.executemany("INSERT INTO vocabulary (word, segments) VALUES (?, 1)"
                   " ON CONFLICT(word) DO UPDATE SET segments = segments + 1",
                   [(w,) for w in sorted(vocabulary_words(text))])


def forget_words(db: sqlite3.Connection, texts: Iterable[str]) -> None:
    """Segments' words taken out of the vocabulary: a word goes with its last segment."""
    counted: dict[str, int] = {}
    for text in texts:
        for word in vocabulary_words(text):
            counted[word] = counted.get(word, 0) + 1
    db.executemany("UPDATE vocabulary SET segments = segments - ? WHERE word = ?",
                   [(n, w) for w, n in sorted(counted.items())])
    db.execute("DELETE FROM vocabulary WHERE segments <= 0")
