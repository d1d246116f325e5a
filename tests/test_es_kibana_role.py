"""Kibana's users against a real Elasticsearch 9 node: the role es-setup gives them reads no document.

Kibana talks to Elasticsearch directly, beside the search page's permissions and
access log, and the basic licence has no field-level security, so the role
(``include/elasticsearch/kibana-viewer-role.json``) holds no ``read`` on the
indices, nor ``view_index_metadata``: that privilege includes
``_validate/query``, whose ``rewrite`` answers a fuzzy query with the index's own
terms (a customer id, a word said in a call), as the control user here shows.
The node is one of its own (tests/services.py), since its users and roles are
added to the file realm, which the node reloads while it runs (its minimal
distribution has no native realm: the security index needs analysis-common).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator

import pytest
import services
from conftest import _service

from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.backends import open_index
from asr_tasks.index.elasticsearch import ElasticsearchIndex
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for

pytestmark = pytest.mark.elasticsearch

ROLE_FILE = PROJECT_ROOT / "include" / "elasticsearch" / "kibana-viewer-role.json"
PREFIX = "asrtest-kibana"  # under the pipeline role's asr* of tests/services.py
WORDS = ("zanzibar", "quokka")  # said in the call
CUSTOMER, AGENT, CALL = "CU-731942", "AG-5581", "call_20261127_0042"
SECRETS = (*WORDS, CUSTOMER, AGENT, CALL)


def kibana_role(prefix: str) -> dict[str, Any]:
    """The role as es-setup puts it: the file, its index names on the deployment's prefix."""
    return dict(json.loads(ROLE_FILE.read_text(encoding="utf-8").replace("@ES_INDEX_PREFIX@", prefix)))


@dataclass(frozen=True)
class Node:
    url: str
    context: ssl.SSLContext
    users: dict[str, str]  # name -> password
    pipeline: str  # the user the pipeline indexes as

    def request(self, user: str, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> tuple[int, str]:
        data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
        auth = base64.b64encode(f"{user}:{self.users[user]}".encode()).decode()
        request = urllib.request.Request(f"{self.url}{path}", method=method, data=data, headers={
            "Authorization": f"Basic {auth}", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=60) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def node() -> Iterator[tuple[Node, services.EsNode]]:
    """A node whose file realm has the pipeline's user, a Kibana user with the role only, and a control user."""
    es = _service(services.start_elasticsearch)
    try:
        control = kibana_role(PREFIX)
        control["indices"][0]["privileges"] = [*control["indices"][0]["privileges"], "view_index_metadata"]
        roles = es.server.folder / "config" / "roles.yml"
        roles.write_text(roles.read_text() + f"asr_kibana_viewer: {json.dumps(kibana_role(PREFIX))}\n"
                         f"control_view_index_metadata: {json.dumps(control)}\n")
        users = {es.username: es.password}
        for user, role in (("kibana_user", "asr_kibana_viewer"), ("control", "control_view_index_metadata")):
            users[user] = secrets.token_urlsafe(18)
            services._run([str(services.es_home() / "bin" / "elasticsearch-users"), "useradd", user, "-p", users[user],
                           "-r", role], f"adding {user}", 120, env={**os.environ, **es.server.env},
                          cwd=es.server.folder, **services._as(services.service_ids()))
        found = Node(es.url, ssl.create_default_context(cafile=es.ca_certs), users, es.username)
        deadline = time.monotonic() + 60  # the file realm and roles.yml are reloaded every few seconds
        while any("monitor" not in found.request(u, "GET", "/_security/user/_privileges")[1]
                  for u in ("kibana_user", "control")):
            assert time.monotonic() < deadline, "the node did not load the file realm's new users and roles"
            time.sleep(0.5)
        yield found, es
    finally:
        es.server.stop()


@pytest.fixture(scope="module")
def indexed(node: tuple[Node, services.EsNode]) -> tuple[Node, ElasticsearchIndex, Recording]:
    """One call with two segments, indexed through the project's backend as the pipeline's user."""
    found, es = node
    settings = Settings().override(index_backend="elasticsearch", es_url=es.url, es_index_prefix=PREFIX,
                                   es_username=es.username, es_password=es.password, es_ca_certs=es.ca_certs,
                                   es_english_stemmer="hunspell", es_refresh="true")
    index = open_index(settings.index)
    assert isinstance(index, ElasticsearchIndex)
    key = f"calls/2026/11/27/{CALL}.wav"
    rec = Recording(recording_id=recording_id_for("recordings", key, "e1"), bucket="recordings", key=key, etag="e1",
                    size=1, call_id=CALL, call_date="2026-11-27", agent_id=AGENT, customer_id=CUSTOMER)
    segments = [Segment(rec.recording_id, 0, "agent", 1.0, 4.0, f"the code word is {WORDS[0]}"),
                Segment(rec.recording_id, 1, "customer", 4.5, 6.0, f"and mine is {WORDS[1]}")]
    index.replace_recording(Transcript(recording=rec, duration=6.0, segments=segments, language="en", model="m",
                                       pipeline_version="1", quality="pass"))
    assert [s.text for s in index.segments(rec.recording_id)] == [s.text for s in segments]
    return found, index, rec


def _refused(status: int, body: str) -> bool:
    """403, or (the node's minimal distribution lacks SQL and async search) no such endpoint."""
    absent = status in (400, 405) and ("no handler found" in body or "Incorrect HTTP method" in body)
    return status == 403 or absent


def test_kibanas_users_get_no_document_text_or_personal_field(
    indexed: tuple[Node, ElasticsearchIndex, Recording],
) -> None:
    found, index, rec = indexed
    alias, year = index.alias("segments"), index.index_name("segments", rec.call_date)
    status, body = found.request(found.pipeline, "POST", f"/{alias}/_search", {"query": {"match_all": {}}})
    [doc_id, *_] = [h["_id"] for h in json.loads(body)["hits"]["hits"]]
    fuzzy_text = {"query": {"fuzzy": {"text.en": {"value": WORDS[0][:-1] + "t"}}}}
    fuzzy_customer = {"query": {"fuzzy": {"customer_id": {"value": CUSTOMER[:-1] + "0"}}}}
    asks: list[tuple[str, str, Any]] = [
        ("GET", f"/{alias}/_search?q={WORDS[0]}", None),
        ("POST", f"/{PREFIX}-*/_search", {"size": 0, "aggs": {"c": {"terms": {"field": "customer_id"}}}}),
        ("GET", f"/{alias}/_count", None),
        ("GET", f"/{year}/_doc/{doc_id}", None),
        ("GET", f"/{year}/_source/{doc_id}", None),
        ("POST", "/_mget", {"docs": [{"_index": year, "_id": doc_id}]}),
        ("POST", "/_sql?format=json", {"query": f'SELECT text, customer_id FROM "{alias}"'}),
        ("POST", f"/{alias}/_async_search", {"query": {"match_all": {}}}),
        ("POST", "/_msearch", f'{{"index": "{alias}"}}\n{{"query": {{"match_all": {{}}}}}}\n'.encode()),
        ("GET", f"/{alias}/_field_caps?fields=*", None),
        ("POST", f"/{alias}/_terms_enum", {"field": "text", "string": WORDS[0][:2]}),
        ("POST", f"/{alias}/_terms_enum", {"field": "customer_id", "string": "CU"}),
        ("POST", f"/{alias}/_validate/query?rewrite=true&all_shards=true", fuzzy_text),
        ("POST", f"/{alias}/_validate/query?rewrite=true&all_shards=true", fuzzy_customer),
        ("POST", f"/{year}/_explain/{doc_id}", {"query": {"match_all": {}}}),
        ("POST", f"/{year}/_termvectors/{doc_id}", {"fields": ["text"]}),
        ("GET", f"/{alias}/_mapping", None),
    ]
    answers = {}
    for method, path, body in asks:
        kind = "application/x-ndjson" if path == "/_msearch" else "application/json"
        status, text = found.request("kibana_user", method, path, body, kind)
        answers[f"{method} {path}"] = (status, text)
        assert not any(word in text for word in SECRETS), f"{method} {path}: {status} {text[:500]}"
    assert {ask: status for ask, (status, _) in answers.items() if not _refused(status, _)} == {}

    # Whatever Elasticsearch distribution runs it (SQL, async search, ES|QL, EQL included): no reading action.
    actions = ["read", "view_index_metadata", "indices:data/read/search", "indices:data/read/get",
               "indices:data/read/mget", "indices:data/read/msearch", "indices:data/read/sql",
               "indices:data/read/async_search/submit", "indices:data/read/esql", "indices:data/read/eql",
               "indices:data/read/field_caps", "indices:data/read/xpack/termsenum/list",
               "indices:admin/validate/query", "indices:data/read/tv", "indices:data/read/explain"]
    status, body = found.request("kibana_user", "POST", "/_security/user/_has_privileges",
                                 {"index": [{"names": [alias, year, f"{PREFIX}-*"], "privileges": actions}]})
    assert status == 200, body
    granted = {(name, action) for name, privileges in json.loads(body)["index"].items()
               for action, yes in privileges.items() if yes}
    assert granted == set()


def test_kibanas_users_see_the_indices_counts_sizes_and_dates(
    indexed: tuple[Node, ElasticsearchIndex, Recording],
) -> None:
    found, index, rec = indexed
    year = index.index_name("segments", rec.call_date)
    status, body = found.request("kibana_user", "GET", f"/_cat/indices/{PREFIX}-*?format=json&bytes=b")
    assert status == 200, body
    rows = {row["index"]: row for row in json.loads(body)}
    assert rows[year]["docs.count"] == "2" and int(rows[year]["store.size"]) > 0
    assert rows[index.index_name("recordings", rec.call_date)]["docs.count"] == "1"
    status, body = found.request("kibana_user", "GET", f"/{year}/_stats/docs,store")
    assert status == 200 and json.loads(body)["indices"][year]["primaries"]["docs"]["count"] == 2, body
    status, body = found.request("kibana_user", "GET", f"/{year}/_settings/index.creation_date")
    assert status == 200 and json.loads(body)[year]["settings"]["index"]["creation_date"].isdigit(), body
    assert not any(word in body for word in SECRETS)


def test_view_index_metadata_would_hand_over_the_indexs_terms(
    indexed: tuple[Node, ElasticsearchIndex, Recording],
) -> None:
    """Why the role leaves out view_index_metadata: with it, a query rewrite names a customer's id and a word said."""
    found, index, _ = indexed
    alias = index.alias("segments")
    said = {}
    for field, value in (("text.en", WORDS[0][:-1] + "t"), ("customer_id", CUSTOMER[:-1] + "0")):
        status, body = found.request("control", "POST", f"/{alias}/_validate/query?rewrite=true&all_shards=true",
                                     {"query": {"fuzzy": {field: {"value": value}}}})
        assert status == 200, body
        said[field] = body
    assert WORDS[0] in said["text.en"] and CUSTOMER in said["customer_id"]
    status, body = found.request("kibana_user", "POST", f"/{alias}/_validate/query?rewrite=true",
                                 {"query": {"fuzzy": {"customer_id": {"value": CUSTOMER[:-1] + "0"}}}})
    assert status == 403 and CUSTOMER not in body

