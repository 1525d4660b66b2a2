"""Unmanaged mirrors of the tables the Express API owns (faces/sql/api_schema.sql).

The worker never migrates them. Related names are chosen for the Django shell:
``event.photos``, ``event.members``, ``photo.faces``, ``photo.variants``,
``cluster.faces``.
"""

import uuid

from django.db import models
from pgvector.django import VectorField

from faces.engines.base import EMBEDDING_DIMENSIONS


class Event(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    name = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        managed = False
        db_table = "events"

    def __str__(self):
        return f"{self.name} ({self.id})"

    def dnp_members(self):
        return self.members.dnp()


class EventMemberQuerySet(models.QuerySet):
    def active(self):
        return self.filter(status=EventMember.Status.ACTIVE)

    def dnp(self):
        """Active members who chose Do Not Publish: the people every public file must blur."""
        return self.active().filter(do_not_publish=True)


class EventMember(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        LEFT = "left"
        REMOVED = "removed"

    pk = models.CompositePrimaryKey("event_id", "user_id")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="members")
    user_id = models.UUIDField()
    status = models.TextField(choices=Status, default=Status.ACTIVE)
    do_not_publish = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = EventMemberQuerySet.as_manager()

    class Meta:
        managed = False
        db_table = "event_members"

    def __str__(self):
        dnp = " DNP" if self.do_not_publish else ""
        return f"member {self.user_id} of {self.event_id} [{self.status}{dnp}]"


class SubjectReference(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        READY = "ready"
        NO_FACE = "no_face"
        MANY_FACES = "many_faces"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    user_id = models.UUIDField()
    upload_key = models.TextField()
    status = models.TextField(choices=Status, default=Status.PENDING)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True)
    engine = models.TextField(null=True)
    box = models.JSONField(null=True)
    # A `many_faces` reference's comparably large faces, any of which may be the subject's: [[512 floats], ...]
    # (docs/ARCHITECTURE.md §6, "An ambiguous selfie"); null otherwise.
    candidate_embeddings = models.JSONField(null=True)
    processed_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        managed = False
        db_table = "subject_references"

    def __str__(self):
        return f"reference {self.id} of user {self.user_id} [{self.status}]"


class PhotoQuerySet(models.QuerySet):
    def published(self):
        return self.filter(processed_at__isnull=False)

    def unpublished(self):
        return self.filter(processed_at__isnull=True)


class Photo(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="photos")
    uploader_id = models.UUIDField()
    upload_key = models.TextField()
    upload_thumb_key = models.TextField()
    width = models.IntegerField(null=True)
    height = models.IntegerField(null=True)
    media_type = models.TextField(null=True)  # faces.media.upload.MediaKind
    duration_ms = models.IntegerField(null=True)
    blur_regions = models.JSONField(default=list)
    # What the current version's files blur (faces.rendering.files.render_plan); None before the first render.
    render_plan = models.JSONField(null=True)
    variant_version = models.IntegerField(default=0)
    public_key = models.TextField(null=True)
    public_thumb_key = models.TextField(null=True)
    faces_detected_at = models.DateTimeField(null=True)
    processed_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PhotoQuerySet.as_manager()

    class Meta:
        managed = False
        db_table = "photos"

    def __str__(self):
        state = "published" if self.processed_at else "unpublished"
        return f"photo {self.id} v{self.variant_version} [{state}]"

    @property
    def shown_size(self) -> tuple[int, int] | None:
        """(width, height) of the picture a viewer sees, once a render recorded it; None before."""
        return (self.width, self.height) if self.width and self.height else None

    @property
    def state(self) -> str:
        """published; detected (faces stored, not published: failed or in flight); waiting."""
        if self.processed_at:
            return "published"
        return "detected" if self.faces_detected_at else "waiting"

    def current_files(self) -> list[tuple[str, str | None, str | None]]:
        """(who sees it, key, thumbnail key): the public file, then each DNP member's own."""
        files = [("public", self.public_key, self.public_thumb_key)]
        files += [(f"user {v.user_id}", v.key, v.thumb_key) for v in self.variants.order_by("user_id")]
        return files


class PhotoVariant(models.Model):
    """A DNP subject's own file of a photo: their face unblurred, the rest as public."""

    pk = models.CompositePrimaryKey("photo_id", "user_id")
    photo = models.ForeignKey(Photo, on_delete=models.CASCADE, related_name="variants")
    user_id = models.UUIDField()
    variant_version = models.IntegerField()
    key = models.TextField()
    thumb_key = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        managed = False
        db_table = "photo_variants"

    def __str__(self):
        return f"variant of {self.photo_id} for {self.user_id} v{self.variant_version}"


class UnknownCluster(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="unknown_clusters")
    centroid = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    face_count = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        managed = False
        db_table = "unknown_clusters"

    def __str__(self):
        return f"unknown cluster {self.id} ({self.face_count} faces)"


class Face(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    photo = models.ForeignKey(Photo, on_delete=models.CASCADE, related_name="faces")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="faces")
    box_x = models.FloatField()
    box_y = models.FloatField()
    box_w = models.FloatField()
    box_h = models.FloatField()
    landmarks = models.JSONField()
    det_score = models.FloatField()
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    engine = models.TextField()
    frame_time = models.FloatField(null=True)  # seconds from the clip's first frame; None for stills
    track = models.IntegerField(null=True)  # the clip's faces linked across frames; None for stills
    # How well the recogniser saw a face (faces/thresholds.py); None for faces stored before it was kept.
    embedding_norm = models.FloatField(null=True)
    matched_user_id = models.UUIDField(null=True)
    # The face of another photo of the event this one was matched through (faces/links.py); None: matched by the
    # member's references, or unmatched.
    matched_through = models.UUIDField(null=True)
    similarity = models.FloatField(null=True)
    unknown_cluster = models.ForeignKey(UnknownCluster, on_delete=models.SET_NULL, null=True, related_name="faces")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        managed = False
        db_table = "faces"

    def __str__(self):
        who = f"matched {self.matched_user_id} ({self.similarity:.3f})" if self.matched_user_id else "unmatched"
        return f"face {self.id} on {self.photo_id} {who}"
