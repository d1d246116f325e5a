"""Personal data found after ITN and masked: what must be masked, and what must not (amounts, dates, order numbers)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from asr_tasks.config import PROJECT_ROOT
from asr_tasks.models import Recording, Segment, SpokenWord, Transcript
from asr_tasks.text.pii import find, redact
from asr_tasks.text.pii_policy import PiiError, Spoken, load_policy, luhn, prc_id

POLICY = load_policy(PROJECT_ROOT / "include" / "pii")
MASK = re.compile(r"\[[A-Z -]+(?: \*{4}[\d*]{0,4})?\]")


def masked(text: str, language: str = "en") -> str:
    out = text
    for start, end, _, mask in reversed(find(text, POLICY, language)):
        out = out[:start] + mask + out[end:]
    return out


@pytest.mark.parametrize(("text", "language", "expected"), [
    # cards: Luhn-valid always, with spaces or dashes; a failing check only in card context
    ("the number is 4111 1111 1111 1111 thanks", "en", "the number is [CARD ****1111] thanks"),
    ("4111-1111-1111-1111", "en", "[CARD ****1111]"),
    ("the card number is 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, thank you", "en",
     "the card number is [CARD ****1111], thank you"),  # as the model writes digits read out one by one
    ("and the security code is 4, 5, 3.", "en", "and the security code is [CARD-SECURITY]."),
    ("my card number is 4111111111111111111", "en", "my card number is [CARD ****]"),  # 19 digits: fails the check
    ("您的卡号是4111 1111 1111 1112，对吗？", "zh", "您的卡号是[CARD ****]，对吗？"),  # in context: no last four of its own
    ("card 5500005555555559 expires 12/27, the CVV is 123", "en",
     "card [CARD ****5559] expires [CARD-SECURITY], the CVV is [CARD-SECURITY]"),
    # PRC resident ID with a valid check character
    ("身份证号11010519491231002X。", "zh", "身份证号[ID]。"),
    # phones: Chinese mobile and landline, international
    ("打我电话13812345678或者010-12345678", "zh", "打我电话[PHONE]或者[PHONE]"),
    ("call me on +44 20 7946 0958", "en", "call me on [PHONE]"),
    ("call me on 0161 496 0000 ext 1234", "en", "call me on [PHONE]"),  # the extension with it
    ("座机010-12345678转808", "zh", "座机[PHONE]"),
    # e-mail, written and spoken
    ("write to li.wei@example.com please", "en", "write to [EMAIL] please"),
    ("it is john dot smith at example dot com", "en", "it is [EMAIL]"),
    # bank accounts only when said as an account
    ("my account number is 6222 0212 3456 7890 12", "en", "my account number is [ACCOUNT]"),
    ("我的银行账号是6222021234567890", "zh", "我的银行账号是[ACCOUNT]"),
    # not personal data: amounts, dates, times, order numbers, 4-digit policy numbers, a year
    ("the order number is 20261127001 and it costs 12050 yuan", "en", None),
    ("这款理财产品年化收益12%，起购金额50000元", "zh", None),
    ("my policy number is 4472, the meeting is at 10:30 on 2026-11-27", "en", None),
    ("the claim was filed in 2019 and paid 1234567 yuan", "en", None),
    ("a 16 digit number that fails the check: 1234567812345678", "en", None),
])
def test_what_is_masked_and_what_is_not(text: str, language: str, expected: str | None) -> None:
    assert masked(text, language) == (text if expected is None else expected)


def test_checks() -> None:
    assert luhn("4111 1111 1111 1111") and not luhn("4111 1111 1111 1112")
    assert prc_id("11010519491231002X") and not prc_id("110105194912310021")


def test_a_number_split_over_segments_is_masked_across_them() -> None:
    rec = Recording("r1", "recordings", "calls/2026/11/27/c.wav", "e", 1, "c", "2026-11-27")
    segments = [Segment("r1", 0, "agent", 1.0, 3.0, "your card number is 4111 1111", text_raw="your card number is four"),
                Segment("r1", 1, "customer", 3.2, 4.0, "okay"),
                Segment("r1", 0, "agent", 3.5, 6.0, "1111 1111, is that right?"),
                Segment("r1", 0, "agent", 20.0, 22.0, "thank you")]
    transcript = Transcript(rec, 30.0, segments, "en", "m", "1")
    clean, found = redact(transcript, POLICY)
    assert [s.text for s in clean.segments] == ["your card number is [CARD ****1111]", "okay",
                                                "[CARD ****1111], is that right?", "thank you"]
    assert clean.segments[0].text_raw is None  # the model's words held the same number
    assert [(d.kind, d.by, d.speaker, d.start, d.end, d.masked, d.parts) for d in found] == [
        ("card", "pattern", "agent", 1.0, 6.0, "[CARD ****1111]", [[1.0, 3.0], [3.5, 6.0]])]


def test_a_bank_adds_its_own_kind_and_a_broken_file_names_itself(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text((PROJECT_ROOT / "include" / "pii" / "default.yaml").read_text())
    (tmp_path / "b.yaml").write_text("kinds:\n  policy:\n    pattern: 'HB-\\d{6}'\n    mask: '[POLICY]'\n")
    policy = load_policy(tmp_path)
    assert list(policy.kinds)[-1] == "policy" and "card" in policy.kinds
    assert find("policy HB-123456 please", policy)[0][2:] == ("policy", "[POLICY]")
    (tmp_path / "c.yaml").write_text("kinds:\n  broken:\n    pattern: '(unclosed'\n    mask: '[X]'\n")
    with pytest.raises(PiiError, match=r"(?s)c\.yaml.*not a regular expression"):
        load_policy(tmp_path)


@pytest.mark.parametrize(("said", "language", "expected"), [
    ("您的卡号是四一一一一一一一一一一一一一一一", "zh", "您的卡号是[CARD ****1111]"),
    ("手机幺三八一二三四五六七八", "zh", "手机[PHONE]"),
    ("my card number is four one one one one one one one one one one one one one one one", "en",
     "my card number is [CARD ****1111]"),
])
def test_number_words_count_once_itn_made_them_digits(said: str, language: str, expected: str) -> None:
    from asr_tasks.text.postprocess import itn_en, itn_zh

    assert masked({"zh": itn_zh, "en": itn_en}[language](said), language) == expected


def spoken(words: str, start: float, step: float, joiner: str = " ") -> list[SpokenWord]:
    """Words said one after another, ``step`` seconds each, spelled as the model writes them."""
    parts = words.split() if joiner else list(words)
    return [SpokenWord(f"{joiner}{w}", round(start + k * step, 3), round(start + (k + 1) * step, 3))
            for k, w in enumerate(parts)]


def test_word_times_give_the_number_its_seconds_and_no_word_keeps_it() -> None:
    """Post-processed text ("4111 ...") is aligned to the model's words ("four one one one ..."): the detection
    covers the words that said the number, those words become one masked word, the other words keep their times."""
    from asr_tasks.text.postprocess import itn_en, itn_zh

    rec = Recording("r1", "recordings", "calls/2026/11/27/c.wav", "e", 1, "c", "2026-11-27")
    said = "my card number is " + " ".join(["four"] + ["one"] * 15) + " thank you"
    zh_said = "您的卡号是" + "四" + "一" * 15 + "对吗"
    words = spoken(said, 10.0, 0.4)
    zh_words = spoken(zh_said, 40.0, 0.3, joiner="")
    segments = [Segment("r1", 0, "agent", 10.0, words[-1].end, itn_en(said), text_raw=said, words=words),
                Segment("r1", 1, "customer", 40.0, zh_words[-1].end, itn_zh(zh_said), text_raw=zh_said,
                        words=zh_words, language="zh")]
    clean, found = redact(Transcript(rec, 60.0, segments, "en", "m", "1"), POLICY)
    assert [s.text for s in clean.segments] == ["my card number is [CARD ****1111] thank you",
                                                "您的卡号是[CARD ****1111]对吗"]
    assert [(d.kind, d.start, d.end) for d in found] == [("card", words[4].start, words[19].end),
                                                         ("card", zh_words[5].start, zh_words[20].end)]
    assert [w.text for w in clean.segments[0].words] == [" my", " card", " number", " is", " [CARD ****1111]",
                                                         " thank", " you"]
    assert clean.segments[0].words[4] == SpokenWord(" [CARD ****1111]", words[4].start, words[19].end)
    assert "".join(w.text for w in clean.segments[1].words) == " [CARD ****1111]".join(["您的卡号是", "对吗"])
    assert not any(ch.isdigit() or ch in "一四" for s in clean.segments for w in s.words for ch in w.text
                   if "CARD" not in w.text)


def test_a_number_split_over_segments_takes_the_words_of_both() -> None:
    rec = Recording("r1", "recordings", "calls/2026/11/27/c.wav", "e", 1, "c", "2026-11-27")
    first, second = spoken("your card number is 4111 1111", 1.0, 0.5), spoken("1111 1111, is that right?", 5.0, 0.5)
    segments = [Segment("r1", 0, "agent", 1.0, 4.0, "your card number is 4111 1111", words=first),
                Segment("r1", 0, "agent", 5.0, 7.5, "1111 1111, is that right?", words=second)]
    clean, found = redact(Transcript(rec, 30.0, segments, "en", "m", "1"), POLICY)
    assert [(d.start, d.end) for d in found] == [(first[4].start, second[1].end)]
    assert found[0].parts == [[first[4].start, first[5].end], [second[0].start, second[1].end]]  # the pause stays
    assert [w.text for w in clean.segments[0].words] == [" your", " card", " number", " is", " [CARD ****1111]"]
    assert [w.text for w in clean.segments[1].words] == [" [CARD ****1111]", " is", " that", " right?"]


def call(*said: tuple[str, float, float, str]) -> Transcript:
    """A stereo call: (speaker, start, end, text) per segment, the agent on channel 0."""
    rec = Recording("r1", "recordings", "calls/2026/11/27/c.wav", "e", 1, "c", "2026-11-27")
    segments = [Segment("r1", 0 if who == "agent" else 1, who, a, b, text) for who, a, b, text in said]
    return Transcript(rec, max(b for _, _, b, _ in said) + 5, segments, "en", "m", "1")


@pytest.mark.parametrize(("first", "between", "second"), [
    ("the first 8 digits are 4111 1111.", ("customer", "Mm-hmm."), "And the last 8 digits are 1111 1111."),
    ("my card number is 4111 1111 1111.", None, "1111, that's it."),
    ("卡号是4111，1111，", ("customer", "嗯。"), "1111、1111。"),
    ("the card is 4111 1111 1111", ("customer", "okay, yes"), "uh 1111"),
])
def test_a_number_said_in_two_goes_is_one_number(first: str, between: tuple[str, str] | None, second: str) -> None:
    """Through a pause of 4.5 s and more, the other speaker's back-channel, a full stop or 、 between the halves."""
    said = [("agent", 1.0, 5.0, first), *([(between[0], 6.0, 6.5, between[1])] if between else []),
            ("agent", 9.5, 12.0, second)]
    clean, found = redact(call(*said), POLICY)
    assert [(d.kind, d.by, d.parts) for d in found] == [("card", "pattern", [[1.0, 5.0], [9.5, 12.0]])]
    agent = [s.text for s in clean.segments if s.speaker == "agent"]
    assert all("[CARD ****1111]" in t and "1111" not in t.replace("****1111", "") for t in agent), agent


def test_what_the_other_speaker_says_between_two_numbers_keeps_them_apart() -> None:
    clean, found = redact(call(("agent", 1.0, 3.0, "the order is 4111 1111"), ("customer", 4.0, 6.0, "which one?"),
                               ("agent", 7.0, 9.0, "1111 1111 is the other")), POLICY)
    assert found == [] and clean.segments[0].text == "the order is 4111 1111"


def test_a_pause_longer_than_the_policy_allows_ends_the_turn() -> None:
    said = [("agent", 1.0, 3.0, "the numbers are 4111 1111"), ("agent", 80.0, 82.0, "1111 1111")]
    assert redact(call(*said), POLICY)[1] == []
    assert redact(call(*said), POLICY.model_copy(update={"join_gap_seconds": 90.0}))[1] != []


@pytest.mark.parametrize(("asked", "answer", "kind", "mask"), [
    ("Could you read me the long number on the card, please?", "Sure, it's 4, 1, 1, 1, Nero, 5, 2, 3, 4, 8, time, 1.",
     "card", "[CARD ****]"),
    ("And the security code on the back?", "one two time", "card_security", "[CARD-SECURITY]"),
    ("What is the account number the refund should go to?", "6222 0212 for 456 78", "bank_account", "[ACCOUNT]"),
    ("请问您的卡号是多少？", "六二二八 四八零 要 二三四五 六七八九", "card", "[CARD ****]"),
    ("Please read me the one-time code we just sent you.", "it's 4 8 to 7 1 9", "one_time_code", "[CODE]"),
])
def test_an_answer_to_a_prompt_is_masked_where_the_model_misheard_its_digits(
        asked: str, answer: str, kind: str, mask: str) -> None:
    from asr_tasks.text.postprocess import itn_zh

    answer = itn_zh(answer) if "六" in answer else answer
    transcript = call(("agent", 1.0, 4.0, asked), ("customer", 5.0, 12.0, answer), ("agent", 13.0, 14.0, "Thank you."))
    assert redact(transcript, POLICY.without_context_triggers())[1] == []  # no pattern holds what the model wrote
    clean, found = redact(transcript, POLICY)
    assert [(d.kind, d.by, d.speaker, d.masked) for d in found] == [(kind, "context", "customer", mask)]
    heard = clean.segments[1].text
    assert mask in heard and not re.search(r"\d{2}|\b(?:nero|time|for|to)\b|要", heard.replace(mask, ""), re.I), heard


@pytest.mark.parametrize(("answer", "kind", "mask"), [
    ("That is correct. You can call me Mercon for 15552671.", "phone", "[PHONE]"),  # "back on four one five ..."
    ("Yes. My phone is 415 5552 6.", "phone", "[PHONE]"),
    ("Right, and the account it should go to is 6222 021 for 3.", "bank_account", "[ACCOUNT]"),
    ("对的。我的手机是一三八 零零一三 八零零。", "phone", "[PHONE]"),
    ("Yes, call me if the card 4111 1111 does not work.", "card", "[CARD ****]"),  # the asked kind named last
])
def test_digits_said_as_another_kind_than_was_asked_are_masked_as_that_kind(answer: str, kind: str,
                                                                          mask: str) -> None:
    """An answer to "your card number?" that names another kind just before its digits (a number to call back
    on, an account) is masked and reported as that kind: a phone number is not a card read out."""
    from asr_tasks.text.postprocess import itn_zh

    chinese = "一" in answer
    transcript = call(("agent", 1.0, 4.0, "请问您的卡号是多少？" if chinese else "Let me read back your card number."),
                      ("customer", 5.0, 12.0, itn_zh(answer) if chinese else answer))
    clean, found = redact(dataclasses.replace(transcript, language="zh") if chinese else transcript, POLICY)
    assert [(d.kind, d.by, d.speaker, d.masked) for d in found] == [(kind, "context", "customer", mask)]
    assert not re.search(r"\d{2}", clean.segments[1].text), clean.segments[1].text


def test_context_triggering_stops_at_the_next_prompt_and_after_its_time() -> None:
    transcript = call(("agent", 1.0, 3.0, "What's the card number?"), ("customer", 4.0, 8.0, "4111 1111 1111 1111"),
                      ("agent", 9.0, 11.0, "And how much would you like to pay?"),
                      ("customer", 12.0, 14.0, "250 dollars"),
                      ("customer", 50.0, 55.0, "my reference is 12345 67890"))
    clean, found = redact(transcript, POLICY)
    assert [(d.kind, d.by) for d in found] == [("card", "pattern")]
    assert [s.text for s in clean.segments][3:] == ["250 dollars", "my reference is 12345 67890"]


def test_a_bank_turns_a_kinds_context_triggering_off(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text((PROJECT_ROOT / "include" / "pii" / "default.yaml").read_text())
    (tmp_path / "b.yaml").write_text("kinds:\n  card:\n    prompts: {}\n")
    policy = load_policy(tmp_path)
    assert policy.kinds["card"].pattern == POLICY.kinds["card"].pattern and policy.kinds["card"].prompt is None
    transcript = call(("agent", 1.0, 3.0, "What's the card number?"), ("customer", 4.0, 8.0, "4111 Nero 111 time"))
    assert redact(transcript, POLICY)[1] and not redact(transcript, policy)[1]


def test_back_channels_are_short_replies_whatever_their_spelling() -> None:
    from asr_tasks.text.turns import is_backchannel

    def seg(text: str) -> Segment:
        return Segment("r1", 1, "customer", 0.0, 1.0, text)

    assert all(is_backchannel(seg(t), POLICY.spoken) for t in ("Mm-hmm.", "mhm", "Yes, yes.", "OK.", "嗯嗯。", "对。"))
    assert not any(is_backchannel(seg(t), POLICY.spoken) for t in (
        "Yes, and the last four?", "我不知道", "m" * 39 + "x", "mm " * 500))  # "mmm…x" without trying every split


def test_speech_in_an_answer_the_model_made_no_words_of_is_silenced_as_the_kind_asked_for() -> None:
    """The customer's "eight nine two" after "the three digits on the back?": dropped by the model, or written
    into a segment it began before the question; the VAD heard it, so the rendition silences it."""
    transcript = call(("agent", 1.0, 4.0, "Could you read me the long number on the card?"),
                      ("customer", 4.5, 22.5, "And the last eight 3, 0146, 7883, 0146, 8882"),
                      ("agent", 16.8, 20.4, "And the three digits on the back?"))
    transcript = dataclasses.replace(transcript, analytics={"speech": {
        "agent": [[1.0, 4.0], [16.8, 20.4]], "customer": [[4.6, 16.6], [21.1, 22.3]]}})
    clean, found = redact(transcript, POLICY)
    assert [(d.kind, d.by, d.speaker, d.parts) for d in found] == [
        ("card", "pattern", "customer", [[4.5, 22.5]]), ("card_security", "context", "customer", [[21.1, 22.3]])]
    assert found[1].masked == "[CARD-SECURITY]" and "0146" not in clean.segments[1].text
    # the answer's own words, where the model wrote them, leave nothing unheard
    heard = dataclasses.replace(transcript, segments=[*transcript.segments,
                                                      Segment("r1", 1, "customer", 21.0, 22.4, "It's 892.")])
    assert [(d.kind, d.parts) for d in redact(heard, POLICY)[1]][1:] == [("card_security", [[21.0, 22.4]])]


def test_a_read_back_a_clarifying_question_and_a_code_after_the_number_do_not_leak() -> None:
    """The agent reads the card back group by group as questions; asks "is that a Visa?" halfway; the customer
    adds a PIN: every digit is masked, and no mask shows digits that may be the PIN."""
    readback = call(("agent", 0.0, 2.0, "Can I have the card number please?"), ("customer", 2.5, 3.5, "4111"),
                    ("agent", 4.0, 4.8, "4111?"), ("customer", 5.0, 6.0, "yes. 1111"), ("agent", 6.5, 7.2, "1111?"),
                    ("customer", 7.5, 8.5, "yes, 1111"), ("agent", 9.0, 9.8, "1111?"))
    visa = call(("agent", 0.0, 2.0, "Can I have the card number please?"), ("customer", 2.5, 4.0, "4539 1488"),
                ("agent", 4.2, 5.0, "Is that a Visa?"), ("customer", 5.5, 7.0, "Yes. 0343 6467"),
                ("customer", 8.0, 9.0, "and the pin is 4821"))
    for transcript in (readback, visa):
        clean = redact(transcript, POLICY)[0]
        assert not any(re.search(r"\d", MASK.sub("", s.text)) for s in clean.segments), [s.text for s in clean.segments]


def test_back_channels_read_the_same_whatever_the_order_of_the_policy() -> None:
    import random as rnd

    words = list(POLICY.spoken.backchannels["zh"])
    for seed in range(5):
        rnd.Random(seed).shuffle(words)
        spoken = Spoken.model_validate({**POLICY.spoken.model_dump(), "backchannels": {"zh": words}})
        assert all(spoken.is_backchannel(t) for t in ("好的", "是的", "对的", "嗯嗯，对"))


@pytest.mark.timeout(60)  # each takes well under a second; read in quadratic time, minutes
@pytest.mark.parametrize("text", ["1" * 20000, "1 " * 20000, "一" * 20000, "m" * 50000 + "x", "a dot " * 10000,
                                  "卡号" * 5000, "4 time " * 3000])
def test_a_recognisers_loop_is_read_in_one_pass(text: str) -> None:
    """What a looping model writes (one digit, one word, one question thousands of times) is read in time that
    grows with its length, not its square."""
    transcript = call(("agent", 0.0, 2.0, "What's the card number?"), ("customer", 3.0, 60.0, text))
    clean, found = redact(transcript, POLICY)
    assert len(clean.segments) == 2 and all(d.kind == "card" for d in found)
