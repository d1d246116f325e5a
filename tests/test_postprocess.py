"""Post-processing: script conversion, inverse text normalisation, fillers and the term dictionary."""

from __future__ import annotations

from pathlib import Path

import pytest

from asr_tasks.config import ConfigError, Settings, load_settings
from asr_tasks.models import Segment
from asr_tasks.text.postprocess import (
    PostprocessError,
    apply_terms,
    hotwords,
    itn_en,
    itn_zh,
    load_fillers,
    load_terms,
    postprocess_segments,
    remove_fillers,
    steps_for,
    to_simplified,
)

pytestmark = pytest.mark.quality


@pytest.fixture
def terms_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "terms"
    folder.mkdir()
    (folder / "products.tsv").write_text(
        "# wrong<TAB>right\n"
        "harbour bank\tHarbor Bank\n"
        "savings plus\tSavingsPlus\n"
        "\n"
        "余额包\t余额宝\n"
        "安欣一百\t安心一百\n",
        encoding="utf-8",
    )
    return folder


@pytest.fixture
def pp_settings(terms_dir: Path) -> Settings:
    return Settings().override(terms_dir=str(terms_dir))


@pytest.mark.parametrize(
    ("spoken", "written"),
    [
        ("一万两千零五十元", "12050元"),
        ("年化百分之十二", "年化12%"),
        ("百分之三点五", "3.5%"),
        ("保证百分之百", "保证100%"),
        ("我的电话是一三八零零一三八零零零", "我的电话是13800138000"),
        ("电话幺三八幺二三四五六七八", "电话13812345678"),
        ("卡号是六二二二零二一二三四五六七八", "卡号是62220212345678"),
        ("二零二六年十一月二十七日", "2026年11月27日"),
        ("十二月二十五号到期", "12月25号到期"),
        ("下午三点二十分", "下午3:20"),
        ("三点半见", "3:30见"),
        ("明天下午三点到", "明天下午3点到"),
        ("三块五", "3.5元"),
        ("两百块", "200块"),
        ("五块钱", "5块钱"),
        ("一点五万", "1.5万"),
        ("存了一百零八天", "存了108天"),
        ("零点五个百分点", "0.5个百分点"),
        ("三十年", "30年"),
        # Words with numerals in them stay words.
        ("我想问一下一些问题", "我想问一下一些问题"),
        ("一个人", "一个人"),
        ("三四个人", "三四个人"),
        ("二十几岁", "二十几岁"),
        ("十分感谢", "十分感谢"),
        ("万一亏了", "万一亏了"),
        ("千万不要", "千万不要"),
        ("第一次", "第一次"),
        ("十全十美", "十全十美"),
        ("一五一十地说", "一五一十地说"),
        ("两年", "两年"),
    ],
)
def test_chinese_itn(spoken: str, written: str) -> None:
    assert itn_zh(spoken) == written


def test_chinese_itn_leaves_protected_terms_alone() -> None:
    assert itn_zh("安心一百产品收益百分之五", protected=("安心一百",)) == "安心一百产品收益5%"
    assert itn_zh("安心一百产品") == "安心100产品"


@pytest.mark.parametrize(
    ("spoken", "written"),
    [
        ("I can guarantee a return of twelve percent every year.", "I can guarantee a return of 12% every year."),
        ("The minimum deposit is five thousand dollars.", "The minimum deposit is 5000 dollars."),
        ("My policy number is four four seven two.", "My policy number is 4472."),
        ("Your card number 4-1-1-1-1-1-1-1.", "Your card number 41111111."),
        ("It costs a hundred dollars", "It costs 100 dollars"),
        ("zero point five percent", "0.5%"),
        ("twenty one cats", "21 cats"),
        ("one of them", "one of them"),
        ("call 555-1234 in 2-3 days", "call 555-1234 in 2-3 days"),
    ],
)
def test_english_itn(spoken: str, written: str) -> None:
    assert itn_en(spoken) == written


@pytest.mark.parametrize(
    ("traditional", "simplified"),
    [("這款理財產品保證收益", "这款理财产品保证收益"), ("萬一虧損怎麼辦", "万一亏损怎么办"), ("臺灣銀行", "台湾银行"),
     ("已经是简体", "已经是简体")],
)
def test_traditional_to_simplified(traditional: str, simplified: str) -> None:
    assert to_simplified(traditional) == simplified


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("嗯，我想问一下", "我想问一下"),
        ("呃呃，这个嗯嗯产品啊。", "这个产品。"),
        ("Um, I would like to ask.", "I would like to ask."),
        ("So, uh, what is the minimum?", "So, what is the minimum?"),
        ("Hmm. Okay. Um, thanks", "Okay. Thanks"),
        ("I said um. Then he left", "I said. Then he left"),
        ("The umbrella is here, uh-huh", "The umbrella is here, uh-huh"),
    ],
)
def test_filler_removal(text: str, expected: str) -> None:
    fillers = load_fillers(Settings().postprocess.path("fillers_file"))
    lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en"
    assert remove_fillers(text, fillers[lang]) == expected


def test_terms_match_whole_words_and_chinese_substrings(terms_dir: Path) -> None:
    terms = load_terms(terms_dir)
    assert apply_terms("Welcome to HARBOUR BANK, ask about savings plus.", terms) == \
        "Welcome to Harbor Bank, ask about SavingsPlus."
    assert apply_terms("harbour banking and my savings plush toy", terms) == "harbour banking and my savings plush toy"
    assert apply_terms("我的余额包里有钱", terms) == "我的余额宝里有钱"


def test_hotwords_come_from_the_dictionary(pp_settings: Settings) -> None:
    assert hotwords(pp_settings.postprocess) == "Harbor Bank, SavingsPlus, 余额宝, 安心一百"
    assert hotwords(pp_settings.override(terms_as_hotwords=False).postprocess) is None


def test_segments_keep_raw_text_and_record_their_steps(pp_settings: Settings) -> None:
    segments = [
        Segment("r", 0, "agent", 0.0, 3.0, "嗯，這款安欣一百產品年化百分之十二", language="zh"),
        Segment("r", 1, "customer", 3.0, 4.0, "嗯嗯。", language="zh"),
        Segment("r", 0, "agent", 4.0, 8.0, "Um, harbour bank pays twelve percent.", language="en"),
        Segment("r", 0, "agent", 8.0, 9.0, "Harbour bank, dos por ciento.", language="es"),
        Segment("r", 1, "customer", 9.0, 10.0, "这是一百零八元"),  # no language of its own
    ]
    out, applied = postprocess_segments(segments, pp_settings.postprocess, language="zh")
    assert [(s.text, s.text_raw) for s in out] == [
        ("这款安心一百产品年化12%", "嗯，這款安欣一百產品年化百分之十二"),
        ("Harbor Bank pays 12%.", "Um, harbour bank pays twelve percent."),
        ("Harbor Bank, dos por ciento.", "Harbour bank, dos por ciento."),
        ("这是108元", "这是一百零八元"),
    ]  # the filler-only segment is gone
    assert applied == {"zh": ["t2s", "fillers", "terms", "itn"], "en": ["fillers", "terms", "itn"], "es": ["terms"]}
    again, _ = postprocess_segments(out, pp_settings.postprocess, language="zh")
    assert [s.text for s in again] == [s.text for s in out]  # re-running starts from text_raw


def test_steps_are_configurable_per_language(pp_settings: Settings) -> None:
    only_t2s = pp_settings.override(postprocess_steps={"zh": "t2s"})
    [seg], applied = postprocess_segments([Segment("r", 0, "a", 0, 2, "嗯，百分之十二", language="zh")],
                                          only_t2s.postprocess)
    assert seg.text == "嗯，百分之十二" and applied == {"zh": ["t2s"]}
    loaded = load_settings(env={"ASR_POSTPROCESS_STEPS": '{"en": "itn", "*": ""}'})
    assert loaded.postprocess.postprocess_steps == {"en": "itn", "*": ""}
    assert steps_for(loaded.postprocess, "fr") == []


def test_bad_steps_are_named() -> None:
    """When the settings are made, not when a shard reaches post-processing."""
    with pytest.raises(ValueError, match=r"postprocess_steps\[zh\]: unknown step\(s\) itm"):
        Settings().override(postprocess_steps={"zh": "t2s,itm"})
    with pytest.raises(ValueError, match=r"postprocess_steps\[fr\]: no itn for this language"):
        Settings().override(postprocess_steps={"fr": "itn"})
    assert issubclass(PostprocessError, ConfigError)  # the CLI reports it as a configuration error


def test_bad_dictionary_and_filler_files_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.tsv").write_text("ok\tOK\nno tab here\n", encoding="utf-8")
    with pytest.raises(PostprocessError, match=r"a\.tsv:2: expected 'wrong<TAB>right'"):
        load_terms(bad)
    clash = tmp_path / "clash"
    clash.mkdir()
    (clash / "a.tsv").write_text("foo\tFoo\n", encoding="utf-8")
    (clash / "b.tsv").write_text("FOO\tFu\n", encoding="utf-8")
    with pytest.raises(PostprocessError, match=r"b\.tsv:1: 'FOO' already maps to 'Foo' \(a\.tsv:1\)"):
        load_terms(clash)
    with pytest.raises(PostprocessError, match="term dictionary folder not found"):
        load_terms(tmp_path / "nowhere")
    fillers = tmp_path / "fillers.yaml"
    fillers.write_text("zh: 嗯\n", encoding="utf-8")
    with pytest.raises(PostprocessError, match=f"{fillers}: expected a mapping of language to a list"):
        load_fillers(fillers)
