"""The knowledge base's search: the documents a query finds, best first, alike on PostgreSQL and SQLite.

Two steps. The database finds candidates: the current public revisions that
match any of the query's words or their synonyms, best first by its own
full-text rank (PostgreSQL: `ts_rank_cd` over the stored vector, the title
weighing A; SQLite: FTS5's `bm25` over the table migration 0014 keeps, the
title weighing 10), and for typos the documents whose title is close to the
query (pg_trgm's strict word similarity; on SQLite the same measure computed here
over the titles). Then one ranking, the same on both databases, orders the
candidates by what a reader means by "it matches": the document whose title is
the query comes first; then how many of the query's words (a synonym counting
for its word) the document has, in its title above its body; the query as a
phrase; a title close to the query despite a typo. The database's own rank
breaks ties.

Words are compared by their Snowball English stems, PostgreSQL's own stemmer,
so "exports", "exported" and "exporting" are one word; English stop words
("my", "the", "after") are not words to match.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer
from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

from tickets.models import Document, DocumentRevision, SearchSynonym

CANDIDATES = 50  # what the database hands the ranking: enough that a good title or phrase match is among them
# Measured with bench/answer_bench.py over Bitwarden's help center (22 answerable tickets): with the title
# counting as much as the body and no bonus for a title the query holds, 77.3 % of the answerable packets named
# an answering article; with TITLE_WEIGHT 1.5 and TITLE_IN_QUERY 1.0, 90.9 % (1.0 to 2.0 and 1.0: 86.4 to
# 90.9 %; none of the unanswerable tickets named one in any). Weighing words by their rarity among the
# candidates (BM25's inverse document frequency) was tried too and did worse (72.7 %).
TITLE_WEIGHT = 1.5  # a concept in the title counts for this much, one only in the body for 1
TITLE_IN_QUERY = 1.0  # the query holds the document's whole title ("Emergency Access" in "Emergency access: …")
TYPO_SIMILARITY = 0.5  # a title this close to the query (trigram word similarity, 0..1) is a candidate
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# PostgreSQL's English stop words (its `english.stop`, Snowball's list), so that both databases skip the same words.
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is are
    was were be been being have has had having do does did doing a an the and but if or because as until while of
    at by for with about against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each few more most other
    some such no nor not only own same so than too very s t can will just don should now""".split()
)

_stemmers = threading.local()  # a Snowball stemmer keeps its word as it works: one per thread


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A word's Snowball English stem (kept: a knowledge base's vocabulary is bounded, stemming is not cheap)."""
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return stemmer.stemWord(word)


def words(text: str) -> list[str]:
    """The text's words as compared: case-folded, stop words left out, in order."""
    return [w for w in _WORD.findall(text.casefold()) if w not in STOP_WORDS]


def stems(text: str) -> list[str]:
    """The text's words as Snowball English stems, in order (stop words left out)."""
    return [stem(w) for w in words(text)]


@dataclass(frozen=True)
class Concept:
    """One thing the query asks about: a word, or a synonym group's phrases (any one of them counts)."""

    phrases: tuple[tuple[str, ...], ...]  # each a sequence of stems

    def found_in(self, text_stems: Sequence[str], text_set: frozenset[str]) -> bool:
        return any(_has_phrase(text_stems, text_set, phrase) for phrase in self.phrases)


@dataclass(frozen=True)
class Query:
    """A query as searched: its words as concepts (synonyms folded in), and the words every database is given."""

    text: str
    concepts: tuple[Concept, ...]

    @property
    def terms(self) -> list[str]:
        """Every word of every phrase, as written for a full-text query (the databases stem them)."""
        return list(dict.fromkeys(w for c in self.concepts for phrase in c.phrases for w in phrase))

    @property
    def phrases(self) -> list[tuple[str, ...]]:
        return [phrase for c in self.concepts for phrase in c.phrases]


def query_of(text: str, synonyms: Iterable[Sequence[str]] | None = None) -> Query:
    """The query `text` with the operator's synonym groups applied: a group any of whose phrases the query
    contains becomes one concept (its phrases alternatives), and the rest of the query's words one concept each."""
    groups = [[tuple(stems(p)) for p in group] for group in (synonym_groups() if synonyms is None else synonyms)]
    query_stems = stems(text)
    query_set = frozenset(query_stems)
    concepts: list[Concept] = []
    claimed: set[str] = set()
    for group in groups:
        phrases = tuple(p for p in group if p)
        if any(_has_phrase(query_stems, query_set, p) for p in phrases):
            concepts.append(Concept(phrases))
            claimed.update(w for p in phrases if _has_phrase(query_stems, query_set, p) for w in p)
    concepts += [Concept(((stem,),)) for stem in dict.fromkeys(query_stems) if stem not in claimed]
    return Query(text, tuple(concepts))


_synonyms: tuple[float, list[list[str]]] | None = None
SYNONYMS_KEPT_SECONDS = 30.0  # a worker reads the admin's synonyms at most this often (a search adds no statement)


def synonym_groups() -> list[list[str]]:
    """The operator's synonym groups (the admin's *Search synonyms*), each a list of equivalent phrases.

    Kept SYNONYMS_KEPT_SECONDS per process; a change saved in this process is seen at once (`synonyms_forget`).
    """
    global _synonyms
    now = time.monotonic()
    if _synonyms is None or now - _synonyms[0] > SYNONYMS_KEPT_SECONDS:
        _synonyms = (now, [row.phrases() for row in SearchSynonym.objects.all()])
    return _synonyms[1]


def synonyms_forget(**kwargs: object) -> None:
    """Read the synonyms afresh at the next search (connected to SearchSynonym's save and delete)."""
    global _synonyms
    _synonyms = None


def _has_phrase(text_stems: Sequence[str], text_set: frozenset[str], phrase: Sequence[str]) -> bool:
    if not phrase or not set(phrase) <= text_set:
        return False
    if len(phrase) == 1:
        return True
    n = len(phrase)
    return any(tuple(text_stems[i : i + n]) == tuple(phrase) for i in range(len(text_stems) - n + 1))


# --- candidates, from each database --------------------------------------------------------


def documents_search(*, query: str | Query, limit: int) -> list[DocumentRevision]:
    """Current revisions of public documents that match `query` (its text, or as `query_of` prepared it),
    best first, at most `limit`."""
    searched = query if isinstance(query, Query) else query_of(query)
    if not searched.concepts:
        return []
    if connection.vendor == "postgresql":
        candidates = _candidates_postgres(searched)
    else:
        candidates = _candidates_sqlite(searched)
    return rank(searched, candidates)[:limit]


def _candidates_postgres(query: Query) -> list[DocumentRevision]:
    """Any word or synonym phrase matching the stored vector, or a title within TYPO_SIMILARITY of the query
    (pg_trgm's strict word similarity), in one statement; best first by `ts_rank_cd` (cover density: words close
    together rank higher; the title weighs A) plus that similarity, then by code.

    Hand-written: the statement the ORM sent for it (`SearchQuery` phrases or-ed together, `SearchRank` with
    cover density, `TrigramStrictWordSimilarity`), with its text built once per number of phrases instead of
    at every search, and the rows made into revisions (with their documents) as the ORM makes them. Building
    and compiling that queryset was most of a search's cost and the dearest thing in a run. Measured (the
    J-42 search, "EXPORT_ROLE_REQUIRED", 1,000 searches in one process, on the shared 2-core machine under
    load from other sessions): the candidates took 5.25 ms of client CPU with the ORM, 0.43 ms as written
    here; the whole search (with the ranking) 4.96 ms, then 0.96 ms.
    """
    phrases = [" ".join(p) for p in _written_phrases(query)]
    params: list[str | float] = [*phrases, query.text, *phrases, query.text, TYPO_SIMILARITY, CANDIDATES]
    with connection.cursor() as cursor:
        cursor.execute(_candidates_postgres_sql(len(phrases)), params)
        rows = cursor.fetchall()
    return [_revision(row, connection) for row in rows]


@lru_cache(maxsize=64)
def _candidates_postgres_sql(phrases: int) -> str:
    revision, document = _shown_columns(DocumentRevision), _shown_columns(Document)
    searched = "(" + " || ".join(["phraseto_tsquery('english'::regconfig, %s)"] * phrases) + ")"
    title = f"d.{_quoted(Document, 'title')}"
    vector = f"r.{_quoted(DocumentRevision, 'search_vector')}"
    return (
        f"SELECT {', '.join('r.' + c for c in revision)}, {', '.join('d.' + c for c in document)},"
        f" ts_rank_cd({vector}, {searched}) + STRICT_WORD_SIMILARITY(%s, {title}) AS score"
        f" FROM {_quote(DocumentRevision._meta.db_table)} r JOIN {_quote(Document._meta.db_table)} d"
        f" ON d.{_quoted(Document, 'id')} = r.{_quoted(DocumentRevision, 'document')}"
        f" WHERE d.{_quoted(Document, 'public')} AND r.{_quoted(DocumentRevision, 'is_current')}"
        f" AND ({vector} @@ {searched} OR STRICT_WORD_SIMILARITY(%s, {title}) >= %s)"
        f" ORDER BY score DESC, d.{_quoted(Document, 'code')} LIMIT %s"
    )


def _shown(model: type[Model]) -> list[Field]:
    """The fields a search reads of `model` (the stored vector is the database's alone)."""
    return [f for f in model._meta.concrete_fields if f.name != "search_vector"]


def _shown_columns(model: type[Model]) -> list[str]:
    return [_quote(f.column) for f in _shown(model)]


def _quoted(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.column
    return _quote(field.column)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _revision(row: Sequence[object], db: BaseDatabaseWrapper) -> DocumentRevision:
    """The revision, with its document, from a row of `_candidates_postgres_sql`: as the ORM reads them."""
    revision_fields, document_fields = _shown(DocumentRevision), _shown(Document)
    values = _converted(DocumentRevision, row[: len(revision_fields)], db)
    revision = DocumentRevision.from_db(db.alias, [f.attname for f in revision_fields], values)
    values = _converted(Document, row[len(revision_fields) : len(revision_fields) + len(document_fields)], db)
    revision.document = Document.from_db(db.alias, [f.attname for f in document_fields], values)
    return revision


def _converted(model: type[Model], values: Sequence[object], db: BaseDatabaseWrapper) -> list[object]:
    """`values` (of the fields `_shown(model)`, in order) with the backend's and the fields' converters applied."""
    converted = list(values)
    for i, (col, converters) in enumerate(_converters(model, db.alias)):
        for convert in converters:
            converted[i] = convert(converted[i], col, db)
    return converted


@lru_cache(maxsize=16)
def _converters(model: type[Model], alias: str) -> tuple:
    db = connections[alias]
    cols = [f.get_col(model._meta.db_table) for f in _shown(model)]
    return tuple((col, db.ops.get_db_converters(col) + col.get_db_converters(db)) for col in cols)


def _candidates_sqlite(query: Query) -> list[DocumentRevision]:
    """Any word or synonym phrase matching in `tickets_revision_fts` (migration 0014, kept by triggers), or a
    title within TYPO_SIMILARITY of the query; best first by FTS5's bm25 (the title weighing 10, the body 1),
    then the near titles.

    Hand-written: FTS5 is a virtual table the ORM cannot query. It replaced a scan of every current revision
    in Python: over 2,000 generated documents (`bench/search_bench.py --repeat 3`, the same machine, minutes
    apart), 24.8 ms median and 79 ms p95 a search, against 296 ms and 515 ms.
    `sa_near_title` is `near_title`, given to each SQLite connection (tickets.apps).
    """
    match = " OR ".join('"' + " ".join(p) + '"' for p in _written_phrases(query))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT r.id, sa_near_title(%s, d.title) AS similarity FROM tickets_documentrevision r"
            " JOIN tickets_document d ON d.id = r.document_id"
            " LEFT JOIN (SELECT rowid AS id, bm25(tickets_revision_fts, 10.0, 1.0) AS score"
            "   FROM tickets_revision_fts WHERE tickets_revision_fts MATCH %s) m ON m.id = r.id"
            " WHERE r.is_current AND d.public AND (m.id IS NOT NULL OR similarity > 0)"
            " ORDER BY m.score IS NULL, m.score, similarity DESC, d.code LIMIT %s",
            [query.text, match, CANDIDATES],
        )
        order = [row[0] for row in cursor.fetchall()]
    found = DocumentRevision.objects.select_related("document").defer("search_vector").in_bulk(order)
    return [found[pk] for pk in order if pk in found]


def _written_phrases(query: Query) -> list[tuple[str, ...]]:
    """The query's phrases with their words as written (each database stems them its own way)."""
    by_stem = {stem(w): w for w in words(query.text)}
    return [tuple(by_stem.get(stem, stem) for stem in phrase) for phrase in query.phrases]


# --- one ranking ----------------------------------------------------------------------------


def rank(query: Query, candidates: Sequence[DocumentRevision]) -> list[DocumentRevision]:
    """`candidates` (in the database's order) ordered by how well each matches `query`; see the module's doc."""
    scored = [(-match_score(query, r.document.title, r.body), i, r) for i, r in enumerate(candidates)]
    scored.sort(key=lambda row: row[:2])
    return [row[2] for row in scored]


def match_score(query: Query, title: str, body: str) -> float:
    """How well a document matches, from 0 (not at all) up: the exact title 4; the share of the query's
    concepts found anywhere (1) and in the title (TITLE_WEIGHT); the whole title as a phrase in the query
    (TITLE_IN_QUERY, half for a one-word title); the whole query as a phrase in the title (0.5) or the body
    (0.25); the share of the query's neighbouring words found side by side (0.5); a title within
    TYPO_SIMILARITY of the query, its similarity."""
    concepts = query.concepts
    if not concepts:
        return 0.0
    title_stems, body_stems = stems(title), stems(body)
    title_set, body_set = frozenset(title_stems), frozenset(body_stems)
    in_title = [c.found_in(title_stems, title_set) for c in concepts]
    anywhere = [t or c.found_in(body_stems, body_set) for c, t in zip(concepts, in_title, strict=True)]
    similarity = near_title(query.text, title)
    score = (sum(anywhere) + TITLE_WEIGHT * sum(in_title)) / len(concepts)
    if words(title) and words(title) == words(query.text):
        score += 4.0
    whole = tuple(stems(query.text))
    if title_stems and _has_phrase(whole, frozenset(whole), title_stems):  # "Emergency Access" in the query
        score += TITLE_IN_QUERY * min(1.0, len(title_stems) / 2)
    if len(whole) > 1:
        score += 0.5 if _has_phrase(title_stems, title_set, whole) else 0.0
        score += 0.25 if _has_phrase(body_stems, body_set, whole) else 0.0
        pairs = set(zip(whole, whole[1:], strict=False))
        together = pairs & (_pairs(title_stems) | _pairs(body_stems))
        score += 0.5 * len(together) / len(pairs)
    score += similarity
    return score


def _pairs(text_stems: Sequence[str]) -> set[tuple[str, str]]:
    return set(zip(text_stems, text_stems[1:], strict=False))


@lru_cache(maxsize=100_000)
def _trigrams(word: str) -> frozenset[str]:
    padded = f"  {word} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


@lru_cache(maxsize=20_000)
def _title_grams(title: str) -> tuple[frozenset[str], ...]:
    """Each title word's trigrams, then (last) the whole title's."""
    each = [_trigrams(w) for w in _WORD.findall(title.casefold())]
    return (*each, frozenset().union(*each)) if each else ()


@lru_cache(maxsize=1_000)
def _grams_of(query: str) -> frozenset[str]:
    return frozenset().union(*(_trigrams(w) for w in _WORD.findall(query.casefold())))


def title_similarity(query: str, title: str) -> float:
    """pg_trgm's `strict_word_similarity(query, title)`: the trigrams of the query against those of the run of
    whole title words that shares most with them (shared over all, 0..1), computed alike on every database."""
    query_grams, title_grams = _grams_of(query), _title_grams(title)
    if not query_grams or not title_grams:
        return 0.0
    each = title_grams[:-1]
    best = 0.0
    for start in range(len(each)):
        run: frozenset[str] = frozenset()
        for grams in each[start:]:
            run |= grams
            best = max(best, len(query_grams & run) / len(query_grams | run))
    return best


def near_title(query: str, title: str) -> float:
    """`title_similarity` when it reaches TYPO_SIMILARITY, else 0: a title sharing fewer than that share of the
    query's trigrams in all its words cannot reach it, and is passed over without measuring its runs."""
    query_grams, title_grams = _grams_of(query), _title_grams(title)
    if not title_grams or len(query_grams & title_grams[-1]) < TYPO_SIMILARITY * len(query_grams):
        return 0.0
    similarity = title_similarity(query, title)
    return similarity if similarity >= TYPO_SIMILARITY else 0.0


# --- the passage to quote -------------------------------------------------------------------


def best_passage(body: str, query: Query, width: int = 320) -> str:
    """The paragraph of `body` that holds most of the query's concepts (the earliest of equals), cut to about
    `width` characters at sentence boundaries around its best sentence; "…" marks what was left out."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()] or [body.strip()]

    def hits(text: str) -> int:
        text_stems = stems(text)
        text_set = frozenset(text_stems)
        return sum(c.found_in(text_stems, text_set) for c in query.concepts)

    best = max(paragraphs, key=hits)  # max keeps the first of equals
    sentences = [s for s in _SENTENCE_END.split(" ".join(best.split())) if s]
    if not sentences:
        return ""
    centre = max(range(len(sentences)), key=lambda i: hits(sentences[i]))
    start = end = centre
    length = len(sentences[centre])
    while True:
        grown = False
        if end + 1 < len(sentences) and length + 1 + len(sentences[end + 1]) <= width:
            end += 1
            length += 1 + len(sentences[end])
            grown = True
        if start > 0 and length + 1 + len(sentences[start - 1]) <= width:
            start -= 1
            length += 1 + len(sentences[start])
            grown = True
        if not grown:
            break
    passage = " ".join(sentences[start : end + 1])
    if len(passage) > width:  # one sentence longer than the width: cut at a word
        passage = passage[:width].rsplit(" ", 1)[0] + " …"
    lead = "… " if start > 0 or best is not paragraphs[0] else ""
    tail = " …" if end + 1 < len(sentences) and not passage.endswith("…") else ""
    return lead + passage + tail


def sqlite_functions_add(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    """Give a new SQLite connection `sa_near_title(query, title)` for its search (connection_created)."""
    if connection.vendor == "sqlite":
        connection.connection.create_function("sa_near_title", 2, near_title, deterministic=True)


def match_share(query: str, text: str) -> float:
    """The share of the query's words (stop words left out) that `text` holds, 0..1: how fully a passage
    answers a query. Pure: synonyms are not applied (a caller outside a request reads none)."""
    concepts = query_of(query, synonyms=[]).concepts
    if not concepts:
        return 0.0
    text_stems = stems(text)
    text_set = frozenset(text_stems)
    return sum(c.found_in(text_stems, text_set) for c in concepts) / len(concepts)
