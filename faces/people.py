"""Who is in a photo: its faces matched against its event's members, the rest clustered into Unknown clusters.

Matching: the candidates are the event's active members with `ready` references of the same engine: matching never
crosses events. Every comparison happens here and its result is stored on the face row; a `PhotoMatch` also decides
what each file blurs (docs/ARCHITECTURE.md §6).

Clustering: the unmatched faces of one event grouped by similarity. An event's clusters are read and written under
its cluster lock, held until the transaction ends: two readers clustering photos of one event at once would
otherwise both read "no cluster yet" and split one person into two clusters, or both add a face to a cluster from
the same face_count. A cluster that a face joined or started is revisited: when its centroid has come near another
of the event's clusters (`cluster_merge`), the two are one person's, and the younger merges into the older, whose
id the app already shows; the younger id is deleted, never reused.
"""

import uuid
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from pgvector.django import CosineDistance

from faces import thresholds
from faces.engines.base import EMBEDDING_DIMENSIONS
from faces.models import EventMember, Face, SubjectReference, UnknownCluster
from jobqueue.api import hold_until_commit


@dataclass(frozen=True)
class Candidates:
    user_ids: list[uuid.UUID]
    dnp: np.ndarray  # (U,) bool
    references: np.ndarray  # (R, EMBEDDING_DIMENSIONS)
    owners: np.ndarray  # (R,) index into user_ids
    # Active DNP members with no usable reference of this engine: their faces cannot be told apart.
    unidentifiable_dnp: int = 0
    # Columns of DNP members known only by an ambiguous selfie (`many_faces`, its candidate faces as references):
    # a face near one of them is blurred, but nobody is identified by them (no match, no own file).
    ambiguous: frozenset[int] = frozenset()
    # (R,): how far each reference's blur bars move (faces.thresholds.bar_shifts); None: none moves.
    shifts: np.ndarray | None = None

    @classmethod
    def for_event(cls, event_id, engine: str) -> "Candidates":
        members = dict(EventMember.objects.active().filter(event_id=event_id).values_list("user_id", "do_not_publish"))
        ready, ambiguous = _references(members, engine)
        references = ready + ambiguous
        user_ids = sorted({user_id for user_id, _ in references})
        index = {user_id: i for i, user_id in enumerate(user_ids)}
        embeddings = np.array([embedding for _, embedding in references], dtype=np.float32).reshape(
            -1, EMBEDDING_DIMENSIONS
        )
        return cls(
            user_ids=user_ids,
            dnp=np.array([members[user_id] for user_id in user_ids], dtype=bool),
            references=embeddings,
            owners=np.array([index[user_id] for user_id, _ in references], dtype=int),
            unidentifiable_dnp=sum(1 for user_id, dnp in members.items() if dnp and user_id not in index),
            ambiguous=frozenset(index[user_id] for user_id, _ in ambiguous),
            shifts=thresholds.bar_shifts(engine, embeddings),
        )

    def reaching_dnp(self, threshold: float) -> np.ndarray:
        """(U,) bool: the members who are not DNP any of whose references reaches a DNP member's at `threshold`,
        or at that reference's bar where it is moved down (never where it is raised: a selfie that vouches for faces
        gets no benefit of the doubt)."""
        of_dnp = self.dnp[self.owners]
        between = self.references @ self.references[of_dnp].T  # (R, references of DNP members)
        if self.shifts is not None:
            between = between - np.minimum(self.shifts[of_dnp], 0.0)[None, :]
        reaching = np.zeros(len(self.user_ids), dtype=bool)
        np.logical_or.at(reaching, self.owners, (between >= threshold).any(axis=1))
        return reaching & ~self.dnp

    def lowest_shift(self, users: list) -> float:
        """The lowest bar shift of `users`' references (0.0 when none moves): the lowest their bars sit below flat."""
        wanted = set(users)
        columns = [column for column, user in enumerate(self.user_ids) if user in wanted]
        if self.shifts is None or not columns:
            return 0.0
        return float(self.shifts[np.isin(self.owners, columns)].min())

    def similarities(self, embeddings: np.ndarray) -> np.ndarray:
        """(F, U): each face's best cosine similarity over each candidate's references."""
        return self._best_per_user(embeddings @ self.references.T)

    def scores(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """((F, U) `similarities`, (F, U) the same with each reference's less its bar shift: what the blur decision
        compares), from one product of the faces with the references."""
        per_reference = embeddings @ self.references.T
        shifted = per_reference if self.shifts is None else per_reference - self.shifts[None, :]
        return self._best_per_user(per_reference), self._best_per_user(shifted)

    def _best_per_user(self, per_reference: np.ndarray) -> np.ndarray:
        result = np.full((len(per_reference), len(self.user_ids)), -1.0, dtype=np.float32)
        for user in range(len(self.user_ids)):
            result[:, user] = per_reference[:, self.owners == user].max(axis=1)
        return result


def _references(members: dict, engine: str) -> tuple[list, list]:
    """(user, embedding) of the members' ready references; and for each DNP member without one, the candidate
    faces of their ambiguous selfies (faces/jobs/reference_process.py)."""
    rows = SubjectReference.objects.filter(
        user_id__in=list(members),
        engine=engine,
        status__in=[SubjectReference.Status.READY, SubjectReference.Status.MANY_FACES],
    ).values_list("user_id", "status", "embedding", "candidate_embeddings")
    ready = [(user_id, embedding) for user_id, status, embedding, _ in rows if status == SubjectReference.Status.READY]
    known = {user_id for user_id, _ in ready}
    ambiguous = [
        (user_id, candidate)
        for user_id, status, _, candidates in rows
        if status == SubjectReference.Status.MANY_FACES and members[user_id] and user_id not in known
        for candidate in candidates or []
    ]
    return ready, ambiguous


@dataclass(frozen=True)
class PhotoMatch:
    """A photo's faces against its event's candidates, under one engine's thresholds."""

    faces: list[Face]
    candidates: Candidates
    similarity: np.ndarray  # (F, U)
    thresholds: thresholds.Thresholds
    # (F, U): each face reaches each candidate at its own blur threshold (which depends on how well it was
    # seen); None when a threshold is not measured (every face is blurred).
    similar: np.ndarray | None
    # (F,): faces that cannot be told apart from a DNP member, so they count as reaching every one: cut by
    # the image edge past Thresholds.unsure_hidden_share, or too poorly seen to judge (Thresholds.too_poor).
    unsure: np.ndarray
    # (F,): the faces too poorly seen to judge (a track's: when all its faces are): they join no cluster.
    too_poor: np.ndarray
    # (F, U): each face reaches each candidate at its own match threshold (faces.thresholds.Thresholds.match_for);
    # None when `match` is not measured (nobody is matched).
    matchable: np.ndarray | None
    # (F,): each face seen well and whole (Judgement.clear), face by face even in a track: a witness of who it is.
    clear: np.ndarray
    # Per file, the public one (None) first, then one for each DNP member matched in the photo (their own face
    # unblurred): which faces it blurs (`blurred`). What a render plans its files from (faces/rendering/files.py).
    by_file: dict[uuid.UUID | None, list[bool]] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        by_file = {viewer: self.blurred(viewer) for viewer in [None, *self.own_file_users()]}
        object.__setattr__(self, "by_file", by_file)  # frozen: set once, as it is built

    @classmethod
    def for_faces(
        cls,
        faces: list[Face],
        event_id,
        engine: str,
        size: tuple[int, int] | None,
        candidates: Candidates | None = None,
    ) -> "PhotoMatch":
        """`size`: the image's (width, height); None when unknown (every face counts as small and unsure).
        A clip's faces (with a track) are matched track by track. `candidates`: the event's, when the caller
        matches many photos of it (else read here)."""
        candidates = candidates or Candidates.for_event(event_id, engine)
        embeddings = np.array([face.embedding for face in faces], dtype=np.float32).reshape(-1, EMBEDDING_DIMENSIONS)
        judgement = thresholds.judge_stored(engine, faces, size)
        similarity, calibrated = candidates.scores(embeddings)
        match = cls.of(faces, candidates, similarity, judgement, calibrated)
        return match.by_track() if faces and faces[0].track is not None else match

    @classmethod
    def of(cls, faces, candidates, similarity, judgement: thresholds.Judgement, calibrated=None) -> "PhotoMatch":
        """The match of faces whose similarities to the candidates are `similarity`, as the thresholds judge
        them; `calibrated`: what the blur decision compares instead (Candidates.scores; None: `similarity`)."""
        similar = _reaching(
            similarity if calibrated is None else blur_scores(similarity, calibrated, judgement.clear),
            judgement.blur_at,
        )
        matchable = _reaching(similarity, judgement.match_at)
        return cls(
            faces,
            candidates,
            similarity,
            judgement.thresholds,
            similar,
            judgement.unsure,
            judgement.too_poor,
            matchable,
            judgement.clear,
        )

    def by_track(self) -> "PhotoMatch":
        """One identity per track (a clip's faces linked across frames, faces/tracks.py).

        A track is a bag of embeddings, never an averaged vector: it reaches a candidate when any of its
        faces does at that face's own threshold (its best-seen faces decide; a motion-blurred face is held
        to the lower threshold of a poorly seen one), and each face takes its track's best similarity to
        each candidate for the match. It is unsure only when every face of it is: one face cut by the edge
        as the guest walks in says nothing against the track's whole faces.
        """
        tracks = np.array([face.track for face in self.faces])
        similarity, unsure, too_poor = self.similarity.copy(), self.unsure.copy(), self.too_poor.copy()
        similar, matchable = (None if part is None else part.copy() for part in (self.similar, self.matchable))
        for track in np.unique(tracks):
            rows = tracks == track
            similarity[rows] = similarity[rows].max(axis=0)
            unsure[rows] = unsure[rows].all()
            too_poor[rows] = too_poor[rows].all()
            for reached in (part for part in (similar, matchable) if part is not None):
                reached[rows] = reached[rows].any(axis=0)
        return PhotoMatch(
            self.faces, self.candidates, similarity, self.thresholds, similar, unsure, too_poor, matchable, self.clear
        )

    def best(self) -> list[tuple[uuid.UUID | None, float | None]]:
        """Per face: (matched user or None, best similarity or None when there is no candidate)."""
        return self._best

    @cached_property
    def _best(self) -> list[tuple[uuid.UUID | None, float | None]]:
        # Asked once per file rendered: computed once per match.
        if len(self.candidates.ambiguous) == len(self.candidates.user_ids):
            return [(None, None)] * len(self.faces)
        identifying = self.similarity.copy()
        identifying[:, list(self.candidates.ambiguous)] = -np.inf
        columns = identifying.argmax(axis=1)
        result = []
        for row, column in enumerate(columns):
            matched = self.matchable is not None and bool(self.matchable[row, column])
            result.append((self.candidates.user_ids[column] if matched else None, float(identifying[row, column])))
        return result

    def own_file_users(self) -> list[uuid.UUID]:
        """DNP members matched in this photo: each gets a file with their own face unblurred."""
        dnp = {u for u, is_dnp in zip(self.candidates.user_ids, self.candidates.dnp, strict=True) if is_dnp}
        return sorted({user for user, _ in self.best() if user in dnp})

    @cached_property
    def explained(self) -> np.ndarray:
        """(F,): faces that a member who is not DNP explains: matched to them, and more similar to them than to any
        DNP member by `Thresholds.explained_lead`. Such a face is that member's, so reaching a DNP member blurs it
        nowhere; an unsure face is never explained, and a DNP member nobody can recognise still blurs every face.
        A member whose selfie itself reaches a DNP member's at `blur` explains nothing: it could be the DNP member's
        face, sent as someone else's selfie to unblur them."""
        lead = self.thresholds.explained_lead
        dnp = self.candidates.dnp
        explained = np.zeros(len(self.faces), dtype=bool)
        if lead is None or not dnp.any():
            return explained
        index = {user: column for column, user in enumerate(self.candidates.user_ids)}
        vouches = ~dnp & ~self.candidates.reaching_dnp(self.thresholds.blur)
        for row, (user, similarity) in enumerate(self.best()):
            if user is not None and vouches[index[user]]:
                explained[row] = similarity - self.similarity[row, dnp].max() >= lead
        return explained & ~self.unsure

    def blurred(self, viewer: uuid.UUID | None = None) -> list[bool]:
        """Per face: blurred in the public file (viewer None) or in DNP member `viewer`'s own file."""
        if self.similar is None:
            return [True] * len(self.faces)
        dnp_columns = np.flatnonzero(self.candidates.dnp)
        reaches = (self.similar[:, dnp_columns] & ~self.explained[:, None]) | self.unsure[:, None]  # (F, D)
        own = [i for i, column in enumerate(dnp_columns) if self.candidates.user_ids[column] == viewer]
        others = np.delete(reaches, own, axis=1).any(axis=1)
        if viewer is None:
            # A DNP member nobody can recognise could be any face: when unsure, blur every face.
            return [True] * len(self.faces) if self.candidates.unidentifiable_dnp else others.tolist()
        matched = [user for user, _ in self.best()]
        if self.candidates.unidentifiable_dnp:
            return [bool(others[row]) or matched[row] != viewer for row in range(len(self.faces))]
        return [
            bool(others[row]) or (bool(reaches[row, own].any()) and matched[row] != viewer)
            for row in range(len(self.faces))
        ]


def blur_scores(similarity: np.ndarray, calibrated: np.ndarray, clear: np.ndarray) -> np.ndarray:
    """(F, U): what the blur decision compares with each face's threshold. A reference's bar moves both ways for a
    face seen clearly (`clear`: whole, not seen poorly), only down for the rest: a poorly seen face's similarity says
    too little to give a stranger the benefit of a raised bar."""
    return np.where(np.asarray(clear, dtype=bool)[:, None], calibrated, np.maximum(similarity, calibrated))


def _reaching(similarity: np.ndarray, thresholds_at: list[float | None]) -> np.ndarray | None:
    """(F, U): each face's similarity to each candidate at or above its own threshold; None when one is unmeasured."""
    if None in thresholds_at:
        return None
    return similarity >= np.array(thresholds_at, dtype=np.float32).reshape(-1, 1)


def record_matches(match: PhotoMatch) -> None:
    """Store each face's matched user and similarity, as the members' references decide (a link it had is
    dropped: faces.links makes it again if it still holds)."""
    for face, (user, similarity) in zip(match.faces, match.best(), strict=True):
        face.matched_user_id, face.similarity, face.matched_through = user, similarity, None
    Face.objects.bulk_update(match.faces, ["matched_user_id", "similarity", "matched_through"])


def match_faces(photo, size: tuple[int, int], faces: list[Face] | None = None) -> PhotoMatch | None:
    """Match the photo's stored faces (`faces`: the rows the detection just stored, else read in id order) and
    record the result on them; None when it has no face."""
    match = match_of(photo, size, faces)
    if match is not None:
        record_matches(match)
    return match


def match_of(photo, size: tuple[int, int] | None, faces: list[Face] | None = None) -> PhotoMatch | None:
    """The photo's stored faces against its event's members now, recording nothing; None without a face."""
    faces = list(photo.faces.order_by("id")) if faces is None else faces
    if not faces:
        return None
    return PhotoMatch.for_faces(faces, photo.event_id, faces[0].engine, size)


# The advisory lock namespace of an event's clusters ("MLCL"; jobqueue.context.hold_until_commit).
CLUSTER_LOCK = 0x4D4C434C


def cluster_faces(match: PhotoMatch, others: list[Face] = ()) -> None:
    """Cluster the matched photo's unmatched faces, and `others` (faces of other photos whose match changed), under
    its event's cluster lock. A face too poorly seen to judge (a track's: when all its faces are) joins no cluster:
    its embedding would pull a centroid anywhere.

    The lock is held until the transaction ends: the face pass calls this last, after its files are
    uploaded, so a second reader waits only for the cluster writes and the commit.
    """
    judged = [face for face, too_poor in zip(match.faces, match.too_poor, strict=True) if not too_poor]
    assign_clusters(judged + list(others), match.thresholds)


def assign_clusters(faces: list[Face], rule: thresholds.Thresholds) -> None:
    """Put each unmatched, unclustered face in its event's nearest cluster at `rule.cluster`, or a new one, then
    merge that cluster with any it has come near (`rule.cluster_merge`); a clip's track (one identity,
    docs/ARCHITECTURE.md §11) goes into one cluster whole.

    A face that is now matched leaves its cluster. With `cluster` None nothing is clustered.
    The event's cluster lock is taken first, when there is anything to do.
    """
    work = [face for face in faces if _cluster_change(face, rule.cluster)]
    if not work:
        return
    lock_event_clusters(work[0].event_id)
    # Faces now matched leave first: a merge below may delete the cluster one of them was read in.
    for identity in sorted(identities(work), key=lambda identity: identity[0].matched_user_id is None):
        if identity[0].matched_user_id is not None:
            for face in identity:
                _leave_cluster(face)
        else:
            cluster = _join_nearest(identity, rule.cluster)
            if rule.cluster_merge is not None:
                cluster = merge_clusters(cluster, rule.cluster_merge)
            for face in identity:
                face.unknown_cluster = cluster


def identities(faces: list[Face]) -> list[list[Face]]:
    """A still's faces one by one; the faces of one clip's track together."""
    groups: dict[tuple, list[Face]] = {}
    for face in faces:
        groups.setdefault((face.photo_id, face.id if face.track is None else face.track), []).append(face)
    return list(groups.values())


def lock_event_clusters(event_id) -> None:
    """Wait for, then hold until the transaction ends, the lock on the event's clusters."""
    hold_until_commit(CLUSTER_LOCK, str(event_id))


def _cluster_change(face: Face, threshold: float | None) -> bool:
    if face.matched_user_id is not None:
        return face.unknown_cluster_id is not None
    return face.unknown_cluster_id is None and threshold is not None


def nearest_cluster(event_id, embedding: np.ndarray) -> UnknownCluster | None:
    """The event's cluster whose centroid is nearest to `embedding` (pgvector `<=>`), with its `distance`."""
    return (
        UnknownCluster.objects.filter(event_id=event_id)
        .annotate(distance=CosineDistance("centroid", embedding.tolist()))
        .order_by("distance")
        .first()
    )


def _join_nearest(faces: list[Face], threshold: float) -> UnknownCluster:
    """One identity's faces into the cluster nearest to its best-seen face (or a new one), which is returned."""
    surest = max(faces, key=lambda face: (face.embedding_norm or 0.0, face.det_score))
    embeddings = np.array([face.embedding for face in faces], dtype=np.float32)
    nearest = nearest_cluster(surest.event_id, np.asarray(surest.embedding, dtype=np.float32))
    if nearest is not None and 1.0 - nearest.distance >= threshold:
        centroid = np.asarray(nearest.centroid, dtype=np.float32)
        nearest.centroid = joined_centroid(centroid, nearest.face_count, embeddings)
        nearest.face_count += len(faces)
        nearest.save(update_fields=["centroid", "face_count"])
        cluster = nearest
    else:
        cluster = UnknownCluster.objects.create(
            event_id=surest.event_id, centroid=joined_centroid(None, 0, embeddings), face_count=len(faces)
        )
    for face in faces:
        face.unknown_cluster = cluster
    Face.objects.bulk_update(faces, ["unknown_cluster"])
    return cluster


def merge_clusters(cluster: UnknownCluster, threshold: float) -> UnknownCluster:
    """While another of the event's clusters has a centroid at least `threshold` similar to `cluster`'s, merge the
    two: the younger's faces move to the older, whose centroid becomes the two's mean. Returns the cluster that
    holds `cluster`'s faces at the end. The caller holds the event's cluster lock."""
    while (near := _nearest_other(cluster)) is not None and 1.0 - near.distance >= threshold:
        older, younger = sorted((cluster, near), key=lambda one: (one.created_at, str(one.id)))
        weighted = np.asarray(younger.centroid, dtype=np.float32)[None, :] * younger.face_count
        older.centroid = joined_centroid(np.asarray(older.centroid, dtype=np.float32), older.face_count, weighted)
        older.face_count += younger.face_count
        Face.objects.filter(unknown_cluster_id=younger.id).update(unknown_cluster_id=older.id)
        older.save(update_fields=["centroid", "face_count"])
        younger.delete()
        cluster = older
    return cluster


def _nearest_other(cluster: UnknownCluster) -> UnknownCluster | None:
    """The event's cluster other than `cluster` whose centroid is nearest to its centroid, with its `distance`."""
    return (
        UnknownCluster.objects.filter(event_id=cluster.event_id)
        .exclude(id=cluster.id)
        .annotate(distance=CosineDistance("centroid", np.asarray(cluster.centroid, dtype=np.float32).tolist()))
        .order_by("distance")
        .first()
    )


def joined_centroid(centroid: np.ndarray | None, count: int, embeddings: np.ndarray) -> np.ndarray:
    """A cluster's unit centroid once `embeddings` join the `count` faces whose centroid it was (None: a new
    cluster). faces.measurement.people measures the clusters with this same arithmetic."""
    total = embeddings.sum(axis=0) if centroid is None else centroid * count + embeddings.sum(axis=0)
    return (total / np.linalg.norm(total)).astype(np.float32)


def _leave_cluster(face: Face) -> None:
    cluster = UnknownCluster.objects.select_for_update().get(id=face.unknown_cluster_id)
    cluster.face_count -= 1
    if cluster.face_count <= 0:
        cluster.delete()
    else:
        cluster.save(update_fields=["face_count"])
    face.unknown_cluster = None
    face.save(update_fields=["unknown_cluster"])
