"""What face_process and reprocess do to seven uploads (stills upright, turned and large; two clips; a GIF; an MP4
with sound), as JSON: every stored face (box, score, time, track, match, cluster), the photo row, the render plan and
a digest of every published file. Two commits that give the same JSON behave the same on them (structure work).

python scripts/face_path_fingerprint.py OUT.json
"""

import hashlib
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(out):
    sys.path.insert(0, str(ROOT))
    from bench.baseline import embedded_database

    with tempfile.TemporaryDirectory(prefix="beh-") as folder, embedded_database(Path(folder)):
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
        import django

        django.setup()
        import cv2
        import numpy as np
        from django.core.files.base import ContentFile
        from django.core.files.storage import default_storage
        from django.db import transaction

        from faces.engines import FACE_ENGINE, resident_engine
        from faces.jobs.photo_jobs import face_process, reprocess
        from faces.models import Photo, PhotoVariant
        from jobqueue.context import JobContext
        from momentlens.devservices import samples
        from tests.support import factories, media_clips
        from tests.support.video_samples import scene

        engine = resident_engine()
        group = samples.group_photo()
        faces = sorted(engine.analyze(group), key=lambda f: f.box[0])
        h, w = group.shape[:2]
        big = cv2.resize(group, (w * 3, h * 3))
        uploads = {
            "still": samples.encode_jpeg(group),
            "still_turned": samples.encode_jpeg(np.ascontiguousarray(np.rot90(group))),
            "still_big": samples.encode_jpeg(big),
            "clip8": scene(
                group, faces, width=640, height=360, scale=0.5, dnp_at=lambda i: (40 + 6 * i, 60), count=8
            ).data,
            "clip40": scene(
                group,
                faces,
                width=640,
                height=360,
                scale=0.5,
                dnp_at=lambda i: (20 + 9 * i, 40 + 2 * i) if 5 < i < 30 else None,
                count=40,
            ).data,
            "gif": media_clips.animated_gif(group, faces).data,
            "mp4": media_clips.mp4(group, faces).data,
        }
        result = {}
        for name, data in uploads.items():
            event = factories.event(name)
            user = factories.member(event, dnp=True)
            factories.ready_reference(user, faces[0].embedding, faces[0].engine)
            pid = uuid.uuid4()
            key = default_storage.save(f"events/{event.id}/uploads/{pid}.bin", ContentFile(data))
            photo = Photo.objects.create(id=pid, event=event, uploader_id=user, upload_key=key, upload_thumb_key=key)
            ctx = JobContext.outside_worker("face_process", **{FACE_ENGINE: engine})
            with transaction.atomic():
                out1 = face_process({"job": "face_process", "photo_id": str(pid)}, ctx)
            with transaction.atomic():
                out2 = reprocess(
                    {"job": "reprocess", "photo_id": str(pid)},
                    JobContext.outside_worker("reprocess", **{FACE_ENGINE: engine}),
                )
            photo.refresh_from_db()
            rows = list(photo.faces.order_by("frame_time", "box_x", "box_y"))
            ids = {str(f.id): i for i, f in enumerate(rows)}

            def digest(k):
                with default_storage.open(k, "rb") as f:
                    return hashlib.sha256(f.read()).hexdigest()[:16]

            plan = {
                ("user" if k not in ("regions", "public") else k): sorted(ids[v] for v in vals)
                if k != "regions"
                else vals
                for k, vals in photo.render_plan.items()
            }
            result[name] = {
                "out": {k: v for k, v in out1.items()},
                "out2": out2,
                "photo": [photo.width, photo.height, photo.media_type, photo.duration_ms, photo.variant_version],
                "plan": plan,
                "public": [digest(photo.public_key), digest(photo.public_thumb_key)],
                "variants": sorted(
                    [digest(v.key), digest(v.thumb_key)] for v in PhotoVariant.objects.filter(photo=photo)
                ),
                "faces": [
                    [
                        round(f.box_x, 5),
                        round(f.box_y, 5),
                        round(f.box_w, 5),
                        round(f.box_h, 5),
                        round(f.det_score, 4),
                        f.frame_time,
                        f.track,
                        f.matched_user_id == user,
                        None if f.similarity is None else round(f.similarity, 4),
                        f.unknown_cluster_id is not None,
                    ]
                    for f in rows
                ],
            }
            print(name, len(rows), out1, flush=True)
    Path(out).write_text(json.dumps(result, indent=1, sort_keys=True, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
