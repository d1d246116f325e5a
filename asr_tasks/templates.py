"""HTML reports and pages from the Jinja2 templates in include/templates/, autoescaped: no call's text becomes markup."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2

from asr_tasks.config import PROJECT_ROOT

TEMPLATE_DIR = PROJECT_ROOT / "include" / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(name: str, **context: Any) -> str:
    """The template ``name`` filled with ``context``; every value is escaped unless it is ``markupsafe.Markup``."""
    return environment().get_template(name).render(**context)
