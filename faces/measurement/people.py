"""Who is in a photo, measured on a labelled set: members found in their own photos, and Unknown clusters.

- Matching: a face is matched to the member it is most similar to, at or above `match` (faces/people.py); each
  person of the set is a member with their reference (faces.measurement.probes). The share of a member's own
  faces matched to them is what the app's "my photos" shows; a stranger's face matched to a member must never be.
- Clusters: each event's faces, in an arrival order, clustered by the worker's own rule (faces/people.py: the
  nearest centroid at or above `cluster`, else a new cluster; a face too poorly seen to judge joins none), scored
  against the labels with BCubed precision and recall (per face: the share of its cluster that is its person, and
  the share of its person in its cluster), beside DBSCAN as Immich runs it on the same embeddings. The events are
  the set's sources (the folder names' prefix: one collection of photos each) and every person in one event.
"""

import itertools
from dataclasses import dataclass

import numpy as np

from faces.measurement.probes import AS_TAKEN, Probe
from faces.measurement.verdicts import Pairs, probes_seen_clearly, probes_too_poor
from faces.people import joined_centroid
from faces.thresholds import FaceView, Thresholds

# Immich's face clustering as it ships, the comparison's other side (its defaults: a fact of Immich, not a knob of
# the rule): DBSCAN over cosine distance, a face within IMMICH_MAX_DISTANCE of IMMICH_MIN_FACES faces is a core.
IMMICH_MAX_DISTANCE = 0.5
IMMICH_MIN_FACES = 3


@dataclass(frozen=True)
class ClusterRule:
    """How `cluster` and `cluster_merge` are chosen: the loosest threshold of `grid` at which every event's clusters
    stay pure in every arrival order, one step stricter."""

    # The thresholds tried, loosest first, a few hundredths apart: the span every `cluster` measured so far fell in.
    grid: tuple[float, ...] = (0.20, 0.22, 0.25, 0.28, 0.30, 0.33, 0.35, 0.38, 0.40, 0.45)
    # BCubed precision at which an event's clusters count as pure: on average 99.5 % of a face's cluster is its person.
    precision: float = 0.995
    # Seeds of the arrival orders each event is clustered in: the worker's clusters depend on the order faces come.
    arrival_orders: tuple[int, ...] = (1, 2, 3)


CLUSTER_RULE = ClusterRule()


@dataclass(frozen=True)
class Score:
    """BCubed precision, recall and F1 of a clustering against the labels, and its number of clusters."""

    precision: float
    recall: float
    clusters: int

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0


@dataclass(frozen=True)
class ClusterEvent:
    name: str
    embeddings: np.ndarray  # (F, 512), in the order the faces arrive
    people: np.ndarray  # (F,) labels


def bcubed(people: np.ndarray, clusters: np.ndarray) -> Score:
    same_cluster = clusters[:, None] == clusters[None, :]
    same_person = people[:, None] == people[None, :]
    both = (same_cluster & same_person).sum(axis=1)
    precision = float(np.mean(both / same_cluster.sum(axis=1)))
    recall = float(np.mean(both / same_person.sum(axis=1)))
    return Score(precision, recall, len(np.unique(clusters)))


def worker_clusters(embeddings: np.ndarray, threshold: float, merge: float | None = None) -> np.ndarray:
    """Each face's cluster as the worker assigns them one by one (faces/people.py's rule, its centroid
    arithmetic; the nearest centroid by cosine, as pgvector orders them), the cluster it joined or started then
    merged with any other whose centroid reaches `merge` (None: never), the younger into the older."""
    centroids = np.zeros((0, embeddings.shape[1]), dtype=np.float32)
    counts: list[int] = []  # a merged-away cluster's count is 0: its centroid is never nearest again
    result = np.full(len(embeddings), -1, dtype=int)
    for row, embedding in enumerate(embeddings):
        similarity = _alive(centroids @ embedding, counts)
        nearest = int(similarity.argmax()) if len(counts) else -1
        if nearest >= 0 and similarity[nearest] >= threshold:
            centroids[nearest] = joined_centroid(centroids[nearest], counts[nearest], embedding[None, :])
            counts[nearest] += 1
        else:
            centroids = np.vstack([centroids, joined_centroid(None, 0, embedding[None, :])])
            counts.append(1)
            nearest = len(counts) - 1
        result[row] = nearest
        while merge is not None and (other := _nearest_other(centroids, counts, nearest, merge)) is not None:
            older, younger = sorted((nearest, other))
            weighted = centroids[younger][None, :] * counts[younger]
            centroids[older] = joined_centroid(centroids[older], counts[older], weighted)
            counts[older], counts[younger] = counts[older] + counts[younger], 0
            result[result == younger] = older
            nearest = older
    return result


def _alive(similarity: np.ndarray, counts: list[int]) -> np.ndarray:
    return np.where(np.array(counts, dtype=int) > 0, similarity, -np.inf)


def _nearest_other(centroids: np.ndarray, counts: list[int], cluster: int, merge: float) -> int | None:
    """The live cluster other than `cluster` nearest to its centroid, when it is at least `merge` similar."""
    similarity = _alive(centroids @ centroids[cluster], counts)
    similarity[cluster] = -np.inf
    other = int(similarity.argmax())
    return other if similarity[other] >= merge else None


def immich_clusters(embeddings: np.ndarray) -> np.ndarray:
    """DBSCAN as Immich clusters faces: cores have IMMICH_MIN_FACES faces (themselves included) within
    IMMICH_MAX_DISTANCE; a face reachable from no core is a cluster of its own."""
    near = (1.0 - embeddings @ embeddings.T) <= IMMICH_MAX_DISTANCE
    core = near.sum(axis=1) >= IMMICH_MIN_FACES
    labels = np.full(len(embeddings), -1, dtype=int)
    cluster = 0
    for start in np.flatnonzero(core):
        if labels[start] >= 0:
            continue
        labels[start], waiting = cluster, [start]
        while waiting:
            face = waiting.pop()
            for other in np.flatnonzero(near[face] & (labels < 0)):
                labels[other] = cluster
                if core[other]:
                    waiting.append(other)
        cluster += 1
    alone = labels < 0
    labels[alone] = cluster + np.arange(int(alone.sum()))
    return labels


def cluster_events(probes: list[Probe], unsure_norm: float, seed: int) -> list[ClusterEvent]:
    """The set's faces as taken (members' and strangers' of person folders, not group_ strangers, whose people are
    unknown), judged ones only, as events: one per source and one of everybody, in an arrival order of `seed`."""
    faces = [
        one
        for one in probes
        if not one.stranger and one.condition == AS_TAKEN and (one.quality.embedding_norm or 0.0) >= unsure_norm
    ]
    by_source = {source: list(group) for source, group in itertools.groupby(sorted(faces, key=_source), _source)}
    events = [*by_source.items(), ("everyone", faces)] if len(by_source) > 1 else list(by_source.items())
    rng = np.random.default_rng(seed)
    result = []
    for name, members in events:
        order = rng.permutation(len(members))
        embeddings = np.array([members[i].embedding for i in order], dtype=np.float32).reshape(-1, 512)
        result.append(ClusterEvent(name, embeddings, np.array([members[i].person for i in order])))
    return result


def recommended_cluster(
    probes: list[Probe], unsure_norm: float, rule: ClusterRule = CLUSTER_RULE
) -> tuple[float, float]:
    """(`cluster`, `cluster_merge`): the loosest threshold of `rule.grid` whose clusters stay pure (BCubed precision
    >= `rule.precision`) in every event and arrival order, one step stricter (the strictest when none does); then,
    with that `cluster`, the loosest merge threshold of the grid's from it up that keeps them pure, one step
    stricter."""
    events = [event for seed in rule.arrival_orders for event in cluster_events(probes, unsure_norm, seed)]

    def pure(threshold: float, merge: float | None) -> bool:
        scores = (bcubed(e.people, worker_clusters(e.embeddings, threshold, merge)) for e in events)
        return all(score.precision >= rule.precision for score in scores)

    cluster = _loosest(rule.grid, lambda threshold: pure(threshold, None))
    return cluster, _loosest([one for one in rule.grid if one >= cluster], lambda merge: pure(cluster, merge))


def _loosest(grid, pure) -> float:
    """The grid's value one step stricter than its loosest pure one; its strictest when none is pure."""
    for index, threshold in enumerate(grid):
        if pure(threshold):
            return grid[min(index + 1, len(grid) - 1)]
    return grid[-1]


def _source(one: Probe) -> str:
    return one.person.split("-", 1)[0]


@dataclass(frozen=True)
class Found:
    """Faces matched the way faces/people.py matches them (the most similar member, at or above the face's match
    threshold)."""

    own: int  # members' faces matched to themselves
    faces: int  # members' faces (a reference photo aside)
    wrong: int  # faces matched to a member they are not: strangers', or a member's to another member


def strangers_named(pairs: Pairs, thresholds: Thresholds) -> int:
    """Stranger pairs at the probe's own match threshold: a guest who is no member, named as one. Must stay none."""
    return int((pairs.stranger & (pairs.similarity >= _match_at(pairs, thresholds)[:, None])).sum())


def _match_at(pairs: Pairs, thresholds: Thresholds) -> np.ndarray:
    """Each probe's match threshold (`Thresholds.match_for`: a whole photo's face, none of it past the edge)."""
    return np.array([thresholds.match_for(FaceView(one.quality, 0.0)) for one in pairs.probes], dtype=np.float32)


def matched(pairs: Pairs, thresholds: Thresholds, through_faces: bool = False) -> np.ndarray:
    """(P, M) bool: each probe matched to each member, by the member's reference (faces/people.py: the most similar
    member, at or above the probe's own match threshold); with `through_faces`, also through the set's faces, the
    whole set one event (faces/links.py: `link_reach`)."""
    best = pairs.similarity.argmax(axis=1)
    picked = np.arange(len(pairs.probes))
    direct = np.zeros(pairs.similarity.shape, dtype=bool)
    direct[picked, best] = pairs.similarity[picked, best] >= _match_at(pairs, thresholds)
    if not through_faces or thresholds.link is None:
        return direct
    near = link_reach(pairs, sources(pairs, thresholds, direct)) >= thresholds.link
    judged = ~probes_too_poor(pairs, thresholds)
    near &= (judged & ~direct.any(axis=1))[:, None]
    return direct | (near & (near.sum(axis=1) == 1)[:, None])


def sources(pairs: Pairs, thresholds: Thresholds, direct: np.ndarray) -> np.ndarray:
    """(P, M) bool: the faces a link may rest on (faces/links.py), of those `direct` matches: the ones seen
    clearly."""
    return direct & probes_seen_clearly(pairs, thresholds)[:, None]


def link_reach(pairs: Pairs, sources: np.ndarray) -> np.ndarray:
    """(P, M): each probe's highest similarity to a `sources` probe of each member ((P, M) bool: the faces a link
    may rest on) of another image; -1 where a member has none."""
    embeddings = np.array([one.embedding for one in pairs.probes], dtype=np.float32).reshape(len(pairs.probes), -1)
    images = np.array([str(one.image) for one in pairs.probes])
    reach = np.full(sources.shape, -1.0, dtype=np.float32)
    for column in range(sources.shape[1]):
        rows = np.flatnonzero(sources[:, column])
        if rows.size:
            similarity = embeddings @ embeddings[rows].T
            similarity[images[:, None] == images[rows][None, :]] = -1.0
            reach[:, column] = similarity.max(axis=1)
    return reach


def found(pairs: Pairs, thresholds: Thresholds, rows: np.ndarray, through_faces: bool = False) -> Found:
    """What matching finds among the probes `rows` selects (a bool mask over pairs.probes), each probe at its own
    match threshold; with `through_faces`, links too (`matched`)."""
    named = matched(pairs, thresholds, through_faces)
    members = rows & pairs.genuine.any(axis=1)
    own = (named & pairs.genuine).any(axis=1)
    wrong = rows & (named & pairs.stranger).any(axis=1)
    return Found(int((members & own).sum()), int(members.sum()), int(wrong.sum()))
