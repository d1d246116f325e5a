"""The Elasticsearch node as the index backend meets it: the client (8.x compatible headers), the index
templates from include/elasticsearch/ and their analysis, and what a missing analysis module means."""

from __future__ import annotations

import json
import re
from typing import Any

from elastic_transport import HttpHeaders, Urllib3HttpNode
from elastic_transport.client_utils import DEFAULT, DefaultType
from elasticsearch import ApiError, Elasticsearch

from asr_tasks.config import PROJECT_ROOT, IndexSettings
from asr_tasks.index.query import IndexBackendError

TEMPLATE_DIR = PROJECT_ROOT / "include" / "elasticsearch"
_COMPAT = re.compile(r"compatible-with=\d+")
# The analyser of ``text.en``, by ``es_english_stemmer``: Porter needs the analysis-common module (in every default
# distribution); hunspell is in the server itself and reads config/hunspell/en_US/ on every node.
ENGLISH_STEMMERS: dict[str, dict[str, Any]] = {
    "porter": {"analyzer": {"asr_english": {"type": "custom", "tokenizer": "standard",
                                            "filter": ["lowercase", "asciifolding", "porter_stem"]}}},
    "hunspell": {"analyzer": {"asr_english": {"type": "custom", "tokenizer": "standard",
                                              "filter": ["lowercase", "asr_en_us"]}},
                 "filter": {"asr_en_us": {"type": "hunspell", "locale": "en_US", "dedup": True}}},
}
# What a cluster lacks when it refuses an analyser or filter by name, and where it comes from.
MODULE_OF = {"cjk": "analysis-common", "porter_stem": "analysis-common", "asciifolding": "analysis-common",
             "smartcn": "the analysis-smartcn plugin", "ik_max_word": "the IK plugin"}


class ElasticsearchIndexError(IndexBackendError):
    """Elasticsearch refused documents or requests; the message names them and why."""


class Compat8Node(Urllib3HttpNode):
    """The urllib3 node, speaking the REST dialect that Elasticsearch 8 and 9 both accept."""

    def perform_request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: HttpHeaders | None = None,
        request_timeout: DefaultType | float | None = DEFAULT,
    ) -> Any:  # the node's response type, which elastic_transport does not export
        if headers is not None:
            headers = headers.copy()
            for name in ("accept", "content-type"):
                value = headers.get(name)
                if value:
                    headers[name] = _COMPAT.sub("compatible-with=8", value)
        return super().perform_request(method, target, body=body, headers=headers, request_timeout=request_timeout)


def load_template(kind: str, prefix: str, analyzer: str, english_stemmer: str = "porter") -> dict[str, Any]:
    """An index template from include/elasticsearch/, with the configured prefix and analysers."""
    path = TEMPLATE_DIR / f"{kind}.json"
    try:
        template = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ElasticsearchIndexError(f"{path}: cannot read the index template: {exc}") from exc
    template["index_patterns"] = [f"{prefix}-{kind}-*"]
    template["template"]["aliases"] = {f"{prefix}-{kind}": {}}
    if kind == "segments":
        template["template"]["mappings"]["properties"]["text"]["analyzer"] = analyzer
        if english_stemmer not in ENGLISH_STEMMERS:
            raise ValueError(f"es_english_stemmer must be one of {', '.join(ENGLISH_STEMMERS)}, not {english_stemmer!r}")
        template["template"]["settings"]["analysis"] = ENGLISH_STEMMERS[english_stemmer]
    return template


def missing_module(exc: ApiError) -> str:
    """A hint naming the module or plugin behind an analyser or filter the cluster does not know."""
    match = re.search(r"analyzer \[(\w+)\] has not been configured|failed to find [\w ]*?\[(\w+)\]",
                      json.dumps(exc.body, ensure_ascii=False) if isinstance(exc.body, dict) else str(exc.body))
    name = match and (match.group(1) or match.group(2))
    if not name or name not in MODULE_OF:
        return ""
    return (f" ({name} comes with {MODULE_OF[name]}, which this cluster lacks; a cluster without analysis-common "
            "can use es_analyzer: standard and es_english_stemmer: hunspell)")


def connect(settings: IndexSettings) -> Elasticsearch:
    """A client for es_url with an API key or basic auth, TLS verified against es_ca_certs when set."""
    hosts = [u.strip() for u in settings.es_url.split(",") if u.strip()]
    if not hosts:
        raise ValueError("es_url is empty")
    auth: dict[str, Any] = {}
    if settings.es_api_key:
        auth["api_key"] = settings.es_api_key
    elif settings.es_username:
        if settings.es_password is None:
            raise ValueError("es_username is set but es_password is not")
        auth["basic_auth"] = (settings.es_username, settings.es_password)
    if settings.es_ca_certs:
        ca = settings.path("es_ca_certs")
        if not ca.is_file():
            raise ValueError(f"es_ca_certs {ca}: no such file")
        auth["ca_certs"] = str(ca)
    return Elasticsearch(
        hosts,
        node_class=Compat8Node,
        request_timeout=settings.es_request_timeout_seconds,
        max_retries=0,  # retries with back-off happen in ElasticsearchIndex
        retry_on_status=(),
        retry_on_timeout=False,
        **auth,
    )
