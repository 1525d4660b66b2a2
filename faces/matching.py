"""Match a photo's faces against its event's members, and decide what each file blurs.

Candidates are the event's active members with `ready` references of the same
engine: matching never crosses events. Every comparison happens here and its
result is stored on the face row (docs/ARCHITECTURE.md §6).
"""

import uuid
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from faces import thresholds
from faces.geometry import hidden_share
from faces.models import EventMember, Face, SubjectReference


@dataclass(frozen=True)
class Candidates:
    user_ids: list[uuid.UUID]
    dnp: np.ndarray  # (U,) bool
    references: np.ndarray  # (R, 512)
    owners: np.ndarray  # (R,) index into user_ids
    # Active DNP members with no ready reference of this engine: their faces cannot be told apart.
    unidentifiable_dnp: int = 0

    @classmethod
    def for_event(cls, event_id, engine: str) -> "Candidates":
        members = dict(EventMember.objects.active().filter(event_id=event_id).values_list("user_id", "do_not_publish"))
        references = list(
            SubjectReference.objects.filter(
                user_id__in=list(members), status=SubjectReference.Status.READY, engine=engine
            ).values_list("user_id", "embedding")
        )
        user_ids = sorted({user_id for user_id, _ in references})
        index = {user_id: i for i, user_id in enumerate(user_ids)}
        return cls(
            user_ids=user_ids,
            dnp=np.array([members[user_id] for user_id in user_ids], dtype=bool),
            references=np.array([embedding for _, embedding in references], dtype=np.float32).reshape(-1, 512),
            owners=np.array([index[user_id] for user_id, _ in references], dtype=int),
            unidentifiable_dnp=sum(1 for user_id, dnp in members.items() if dnp and user_id not in index),
        )

    def similarities(self, embeddings: np.ndarray) -> np.ndarray:
        """(F, U): each face's best cosine similarity over each candidate's references."""
        per_reference = embeddings @ self.references.T
        result = np.full((len(embeddings), len(self.user_ids)), -1.0, dtype=np.float32)
        for user in range(len(self.user_ids)):
            result[:, user] = per_reference[:, self.owners == user].max(axis=1)
        return result


# A face with this much of itself past the image edge (estimated from its box) cannot be told apart
# from a DNP member. `bench/edge_cuts.py`: with a fifth of a face cut away its embedding can fall to
# 0.11 against the same face whole, and the estimate runs up to 0.1 below the truth there; a chaos run
# saw a DNP face 36 % hidden, found by an upside-down look with a box of nearly a face's proportions,
# estimated at 0.17 (similarity 0.06). Faces up to 15 % hidden still reach 0.82 (docs/ARCHITECTURE.md §6).
UNSURE_HIDDEN_SHARE = 0.08


@dataclass(frozen=True)
class PhotoMatch:
    """A photo's faces against its event's candidates, under one engine's thresholds."""

    faces: list[Face]
    candidates: Candidates
    similarity: np.ndarray  # (F, U)
    limits: thresholds.Thresholds
    # Each face's blur threshold, from its width in pixels (small faces embed worse); NaN: not measured.
    blur_at: np.ndarray  # (F,)
    # Faces cut by the image edge past UNSURE_HIDDEN_SHARE: their embedding says little, so they count
    # as reaching every DNP member (blurred wherever a DNP member's face could be).
    unsure: np.ndarray  # (F,) bool

    @classmethod
    def for_faces(cls, faces: list[Face], event_id, engine: str, size: tuple[int, int] | None) -> "PhotoMatch":
        """`size`: the image's (width, height); None when unknown (every face counts as small and unsure).
        A clip's faces (with a track) are matched track by track."""
        candidates = Candidates.for_event(event_id, engine)
        embeddings = np.array([face.embedding for face in faces], dtype=np.float32).reshape(-1, 512)
        geometry = [face_geometry(face, size) for face in faces]
        match = cls.of(faces, candidates, candidates.similarities(embeddings), thresholds.for_engine(engine), geometry)
        return match.by_track() if faces and faces[0].track is not None else match

    @classmethod
    def of(cls, faces, candidates, similarity, limits: thresholds.Thresholds, geometry: list) -> "PhotoMatch":
        """The match; `geometry` holds each face's (width in pixels or None, hidden share past the edge)."""
        blur_at = np.array([_or_nan(limits.blur_for(width)) for width, _ in geometry], dtype=np.float32)
        unsure = np.array([hidden >= UNSURE_HIDDEN_SHARE for _, hidden in geometry], dtype=bool)
        return cls(faces, candidates, similarity, limits, blur_at, unsure)

    def by_track(self) -> "PhotoMatch":
        """One identity per track (a clip's faces linked across frames, faces/media/tracks.py).

        A track is a bag of embeddings: each face takes its track's best similarity to each
        candidate, never that of an averaged vector, and the lowest blur threshold of its faces.
        It is unsure only when every face of it is: one face cut by the edge as the guest walks
        in says nothing against the track's whole faces.
        """
        tracks = np.array([face.track for face in self.faces])
        similarity, blur_at, unsure = self.similarity.copy(), self.blur_at.copy(), self.unsure.copy()
        for track in np.unique(tracks):
            rows = tracks == track
            similarity[rows] = similarity[rows].max(axis=0)
            blur_at[rows] = blur_at[rows].min()  # NaN (not measured) stays NaN: fail closed
            unsure[rows] = unsure[rows].all()
        return PhotoMatch(self.faces, self.candidates, similarity, self.limits, blur_at, unsure)

    def best(self) -> list[tuple[uuid.UUID | None, float | None]]:
        """Per face: (matched user or None, best similarity or None when there is no candidate)."""
        return self._best

    @cached_property
    def _best(self) -> list[tuple[uuid.UUID | None, float | None]]:
        # Asked once per file rendered: computed once per match.
        if not self.candidates.user_ids:
            return [(None, None)] * len(self.faces)
        columns = self.similarity.argmax(axis=1)
        result = []
        for row, column in enumerate(columns):
            similarity = float(self.similarity[row, column])
            matched = self.limits.match is not None and similarity >= self.limits.match
            result.append((self.candidates.user_ids[column] if matched else None, similarity))
        return result

    def own_file_users(self) -> list[uuid.UUID]:
        """DNP members matched in this photo: each gets a file with their own face unblurred."""
        dnp = {u for u, is_dnp in zip(self.candidates.user_ids, self.candidates.dnp, strict=True) if is_dnp}
        return sorted({user for user, _ in self.best() if user in dnp})

    def blurred(self, viewer: uuid.UUID | None = None) -> list[bool]:
        """Per face: blurred in the public file (viewer None) or in DNP member `viewer`'s own file."""
        if np.isnan(self.blur_at).any():
            return [True] * len(self.faces)
        dnp_columns = np.flatnonzero(self.candidates.dnp)
        reaches = (self.similarity[:, dnp_columns] >= self.blur_at[:, None]) | self.unsure[:, None]  # (F, D)
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


def faces_to_blur(photo, viewer: uuid.UUID | None = None) -> list[Face]:
    """Which of the photo's stored faces the file for `viewer` (None: public) must blur."""
    faces = list(photo.faces.order_by("id"))
    if not faces:
        return []
    size = (photo.width, photo.height) if photo.width and photo.height else None
    match = PhotoMatch.for_faces(faces, photo.event_id, faces[0].engine, size)
    return [face for face, blur in zip(faces, match.blurred(viewer), strict=True) if blur]


def face_geometry(face: Face, size: tuple[int, int] | None) -> tuple[float | None, float]:
    """(width in pixels, share of the face hidden past the image edge) of a stored face."""
    if size is None:
        return None, 1.0
    box = (face.box_x, face.box_y, face.box_w, face.box_h)
    return face.box_w * size[0], hidden_share(box, *size)


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


def record_matches(match: PhotoMatch) -> None:
    """Store each face's matched user and similarity."""
    for face, (user, similarity) in zip(match.faces, match.best(), strict=True):
        face.matched_user_id, face.similarity = user, similarity
    Face.objects.bulk_update(match.faces, ["matched_user_id", "similarity"])


def match_faces(photo, size: tuple[int, int]) -> PhotoMatch | None:
    """Re-match the photo's stored faces and record the result on them; None when it has no face."""
    match = match_of(photo, size)
    if match is not None:
        record_matches(match)
    return match


def match_of(photo, size: tuple[int, int] | None) -> PhotoMatch | None:
    """The photo's stored faces against its event's members now, recording nothing; None without a face."""
    faces = list(photo.faces.order_by("id"))
    if not faces:
        return None
    return PhotoMatch.for_faces(faces, photo.event_id, faces[0].engine, size)
