"""The index: a search view of the gated transcripts (SQLite FTS5 embedded, Elasticsearch in production),
the query language both backends read, and exports of a search's hits. It decides nothing: it is rebuilt
from what is stored."""
