"""Misrecognitions as the recogniser writes them: what a speaker said (the query an auditor types), what the model
wrote instead, and how a tolerant search is to find it.

The Mandarin ones are the kinds Whisper makes on real speech: a character of the
same pinyin (汇报 written 会报), or of a pinyin that speakers blur (zh/z, sh/s,
n/l, -ng/-n). The English ones are what an 8 kHz line does to words: a sound
blurred (safe, faith), a letter or two off (training, trading), a word heard as
two or two as one (afternoon, after noon). ``UNRELATED`` are lines that none of
the queries may find: near in letters or sound to nothing asked.
"""

from __future__ import annotations

from functools import lru_cache

# (query, what the model wrote, how it matches)
MISHEARD: list[tuple[str, str, str]] = [
    ("汇报", "我下午要跟领导会报一下这个季度的进度。", "sound"),
    ("保证收益", "这款产品是保正收益的，您放心。", "sound"),
    ("理财产品", "我们这边有一款理才产品比较适合您。", "sound"),
    ("身份证", "请您提供一下生份证号码。", "sound"),
    ("支付", "您可以通过手机资付这笔费用。", "sound"),
    ("年利率", "这个产品的连利率是百分之三点五。", "sound"),
    ("风险提示", "按照规定我要给您做一个风险提式。", "sound"),
    ("training", "All new staff complete the trading before they take calls.", "fuzzy"),
    ('"good afternoon"', "Go after noon, thank you for calling Harbor Bank.", "fuzzy"),
    ("safe", "Your savings are perfectly faith with us.", "sound"),
    ('"guaranteed returns"', "These are garanteed returns on your deposit.", "fuzzy"),
    ('"risk free"', "It is a risk three investment, you cannot lose.", "sound"),
    ("afternoon", "I will call you back this after noon.", "fuzzy"),
    ('"any one"', "Did anyone else use the card?", "fuzzy"),
]

UNRELATED: list[str] = [
    "火爆的行情让很多人都很兴奋。",
    "请问您还有其他问题吗？",
    "The weather was lovely on the coast last weekend.",
    "Please hold the line while I check your balance.",
    "我们明天上午十点开会。",
    "This is the one I told you about, so we can refund the fee.",
]


@lru_cache(maxsize=1)
def _by_sound() -> dict[str, list[str]]:
    """Every common Chinese character (the CJK Unified Ideographs block) by its pinyin without tone."""
    from pypinyin import Style, lazy_pinyin

    found: dict[str, list[str]] = {}
    for code in range(0x4E00, 0x9FA6):
        char = chr(code)
        sound = lazy_pinyin(char, style=Style.NORMAL)[0]
        if sound.isascii():
            found.setdefault(sound, []).append(char)
    return found


def homophone_of(word: str) -> str:
    """The word with its last character written as another of the same sound, as a recogniser may write it."""
    from pypinyin import Style, lazy_pinyin

    last = word[-1]
    sound = lazy_pinyin(word, style=Style.NORMAL)[-1]
    return word[:-1] + next(c for c in _by_sound()[sound] if c != last)
