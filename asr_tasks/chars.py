"""What counts as a CJK character, for every part that counts or matches text (search, post-processing, the
quality gate, the audit, the analytics).

Han (with extensions, radicals and compatibility ideographs), kana, bopomofo and
Hangul: scripts written without spaces, where every character is a unit of its
own for tokenising, counting and matching.
"""

from __future__ import annotations

import re

CJK_RANGES = (
    "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3040-\u30ff\u3100-\u312f"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
)
CJK_CHAR = re.compile(f"[{CJK_RANGES}]")

