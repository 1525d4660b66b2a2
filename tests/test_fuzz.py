"""Property tests: whatever a message or an upload holds, the worker ends with a permanent error or a result.

Never another exception: anything else is a failed try (retried three times) or,
escaping the loop, a dead worker.
"""

import io
import json
import struct
import zlib

import cv2
import numpy as np
import pytest
from django.db import DataError, connection
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from PIL import Image

import faces.jobs  # noqa: F401  (registers the real handlers)
from faces.media.still import Still
from faces.media.upload import MEDIA_LIMITS
from jobqueue import messages, registry
from jobqueue.errors import PermanentJobError
from momentlens.devservices import samples
from tests.support.queue_helpers import archived, queue_rows

JOB_NAMES = ["face_process", "thumbnail_dims", "reprocess", "reprocess_event", "reference_process"]
ID_FIELDS = ["photo_id", "event_id", "reference_id"]

# No example database: the runs stay independent of each other and of other checkouts.
QUICK = settings(max_examples=200, deadline=None, database=None)
# Pillow warns about headers claiming 89-178 MP and about corrupt TIFF/EXIF data: refusing or decoding such
# input is what is tested here.
pytestmark = [
    pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning:PIL.TiffImagePlugin"),
]


# -- strategies -------------------------------------------------------------

# Text PostgreSQL's jsonb accepts (it refuses \u0000); surrogates are never generated.
texts = st.text(alphabet=st.characters(exclude_characters="\x00"), max_size=60)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(texts, children, max_size=5),
    max_leaves=20,
)
id_values = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: u.hex),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: f"{{{u}}}"),
    st.uuids().map(lambda u: u.urn),
    texts,
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=3),
)
structured = st.fixed_dictionaries(
    {"job": st.one_of(st.sampled_from(JOB_NAMES), texts, st.integers(), st.none())},
    optional={field: id_values for field in ID_FIELDS} | {"extra": json_values},
)
# Everything a message body can be, as text.
any_body = st.one_of(
    st.text(),
    st.binary().map(lambda b: b.decode("latin-1")),
    json_values.map(json.dumps),
    structured.map(json.dumps),
)


def parse(body: str) -> messages.Job:
    """A message body as the worker reads it (jobqueue.attempt._parse): decoded, then its job."""
    return messages.job_of(messages.decode(body))


def assert_job_or_permanent(body: str) -> None:
    try:
        job = parse(body)
    except PermanentJobError:
        return
    assert isinstance(job, messages.Job)
    assert registry.lookup(job.name) is job.type
    assert messages.is_uuid(job.payload[job.type.id_field])


# -- the message parser -----------------------------------------------------


@QUICK
@given(any_body)
@example("")
@example("null")
@example("[]")
@example('{"job": "face_process", "photo_id": "12345678123456781234567812345678"}')
@example('{"job": "face_process", "photo_id": "٠١٢٣٤٥٦٧٨٩٠١٢٣٤٥٦٧٨٩٠١٢٣٤٥٦٧٨٩٠١"}')
@example("1" * 5000)
@example("x" * (messages.MESSAGE_LIMITS.max_chars + 1))
def test_parse_returns_a_job_or_raises_a_permanent_error(body):
    assert_job_or_permanent(body)


@QUICK
@given(structured)
def test_structured_messages_around_real_job_names(payload):
    assert_job_or_permanent(json.dumps(payload))
    try:
        job = messages.job_of(payload)
    except PermanentJobError:
        return
    # A job is only ever made of a registered name and a uuid string in that job's own id field.
    assert payload["job"] in JOB_NAMES
    assert isinstance(payload[job.type.id_field], str)


def test_deeply_nested_json_is_a_bad_message():
    assert_job_or_permanent("[" * 3000 + "]" * 3000)


# -- the image decode path ----------------------------------------------------


def _encode(image: np.ndarray, ext: str) -> bytes:
    ok, data = cv2.imencode(ext, image)
    assert ok
    return data.tobytes()


def _pillow(image: np.ndarray, fmt: str) -> bytes:
    out = io.BytesIO()
    Image.fromarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB)).save(out, format=fmt)
    return out.getvalue()


SMALL = samples.tom_hanks()  # 112 x 112: every decode is fast
SMALL_JPEG = samples.encode_jpeg(SMALL)
SEEDS = {
    "jpeg": SMALL_JPEG,
    "png": _encode(SMALL, ".png"),
    "webp": _encode(SMALL, ".webp"),
    "tiff": _encode(SMALL, ".tiff"),
    "bmp": _encode(SMALL, ".bmp"),
    "gif": _pillow(SMALL, "GIF"),
}
MAGICS = [
    b"\xff\xd8\xff\xe0",
    b"\xff\xd8\xff\xc0\x00\x11\x08",
    b"\x89PNG\r\n\x1a\n",
    b"GIF89a",
    b"RIFF\x00\x00\x00\x00WEBPVP8 ",
    b"II*\x00",
    b"MM\x00*",
    b"BM",
    b"\x00\x00\x00\x0cjP  \r\n\x87\n",
    b"\x00\x00\x00\x1cftypavif",
    b"P6\n",
    b"#?RADIANCE\n",
]


def png_header(width: int, height: int, rows: bytes = b"") -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def jpeg_claiming(width: int, height: int) -> bytes:
    """The small JPEG with its frame header rewritten to promise width x height."""
    data = bytearray(SMALL_JPEG)
    sof = data.find(b"\xff\xc0")
    assert sof > 0
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def assert_image_or_permanent(data: bytes) -> None:
    try:
        still = Still(data)
        image = still.image
        still.why_rendered  # noqa: B018  (the scan of what else the bytes hold must not break on them either)
    except PermanentJobError:
        return
    assert isinstance(image, np.ndarray)
    assert image.dtype == np.uint8
    assert image.ndim == 3
    assert image.shape[2] == 3
    assert image.shape[0] * image.shape[1] <= MEDIA_LIMITS.still_pixels


@QUICK
@given(st.binary(max_size=2048) | st.tuples(st.sampled_from(MAGICS), st.binary(max_size=512)).map(b"".join))
@example(b"")
def test_random_bytes_decode_or_raise_a_permanent_error(data):
    assert_image_or_permanent(data)


@QUICK
@given(st.sampled_from(sorted(SEEDS)), st.data())
def test_truncated_uploads_decode_or_raise_a_permanent_error(fmt, data):
    seed = SEEDS[fmt]
    cut = data.draw(st.integers(min_value=0, max_value=len(seed)), label="cut")
    assert_image_or_permanent(seed[:cut])


@QUICK
@given(st.sampled_from(sorted(SEEDS)), st.data())
def test_uploads_with_flipped_bytes_decode_or_raise_a_permanent_error(fmt, data):
    seed = bytearray(SEEDS[fmt])
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, len(seed) - 1), st.integers(0, 255)), min_size=1, max_size=8),
        label="flips",
    )
    # Most of what matters sits in the first bytes: the headers.
    header_flips = data.draw(
        st.lists(st.tuples(st.integers(0, min(len(seed), 64) - 1), st.integers(0, 255)), max_size=4),
        label="header_flips",
    )
    for offset, value in flips + header_flips:
        seed[offset] = value
    assert_image_or_permanent(bytes(seed))


# Claims either far over the limit (refused by the header, before any pixel) or small
# enough that a failed decode stays cheap.
claims = st.one_of(
    st.tuples(st.integers(1, 65535), st.integers(1, 65535)).filter(
        lambda wh: wh[0] * wh[1] > MEDIA_LIMITS.still_pixels
    ),
    st.tuples(st.integers(1, 2048), st.integers(1, 2048)),
    st.tuples(st.just(1), st.integers(1, 2**31 - 1)),
    st.tuples(st.integers(1, 2**31 - 1), st.just(1)),
)


@settings(max_examples=100, deadline=None, database=None)
@given(claims, st.binary(max_size=64))
@example((20_000, 20_000), b"")
@example((0, 0), b"")
@example((2**31 - 1, 2**31 - 1), b"")
def test_png_headers_claiming_any_size_decode_or_raise_a_permanent_error(claim, rows):
    width, height = claim
    assert_image_or_permanent(png_header(width, height, rows))


@settings(max_examples=100, deadline=None, database=None)
@given(claims.filter(lambda wh: wh[0] <= 65535 and wh[1] <= 65535))
@example((65535, 65535))
@example((11_000, 11_000))
def test_jpeg_headers_claiming_any_size_decode_or_raise_a_permanent_error(claim):
    width, height = claim
    assert_image_or_permanent(jpeg_claiming(width, height))


def test_the_seeds_themselves_decode():
    for fmt, data in SEEDS.items():
        image = Still(data).image
        assert image.shape == SMALL.shape, fmt


# -- end to end: any body, through pgmq and the real loop ---------------------


def send_text(body: str) -> int | None:
    """Send a body as the API would (jsonb); None when PostgreSQL refuses it as JSON."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pgmq.send('jobs', %s::jsonb)", [body])
            return cursor.fetchone()[0]
    except DataError:
        return None


def clear_queue() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE pgmq.q_jobs, pgmq.a_jobs")


e2e_bodies = st.one_of(
    json_values.map(json.dumps),
    texts.map(json.dumps),
    structured.map(json.dumps),
    st.text(max_size=40),
)


@pytest.mark.usefixtures("live_db")
@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(e2e_bodies)
@example('{"job": "face_process", "photo_id": "6f1c7e0e-0000-4000-8000-000000000001"}')
@example('{"job": "reprocess_event", "event_id": "6f1c7e0e-0000-4000-8000-000000000001", "photo_id": 7}')
@example('{"job": "reference_process", "photo_id": "6f1c7e0e-0000-4000-8000-000000000001"}')
@example('"just text"')
def test_any_message_ends_deleted_or_archived_with_a_reason(fast_worker, body):
    clear_queue()
    msg_id = send_text(body)
    assume(msg_id is not None)
    try:
        expected = parse(body)
    except PermanentJobError as error:
        expected = error

    fast_worker(drain=True).run()  # returns normally: never raises

    assert queue_rows() == []
    done = archived()
    if isinstance(expected, PermanentJobError):
        assert done == {msg_id: (1, expected.reason)}
    else:
        # A well-formed job naming no row: RowGone, the message deleted, nothing archived.
        assert done == {}


@pytest.mark.usefixtures("live_db")
@pytest.mark.parametrize("earlier_reads", [0, 3], ids=["first_read", "after_three_crashes"])
def test_a_deeply_nested_message_is_archived_not_fatal(earlier_reads, fast_worker):
    msg_id = send_text("[" * 3000 + "]" * 3000)
    assert msg_id is not None, "PostgreSQL stores it"
    with connection.cursor() as cursor:
        cursor.execute("UPDATE pgmq.q_jobs SET read_ct = %s WHERE msg_id = %s", [earlier_reads, msg_id])
    fast_worker(drain=True).run()
    # Read more than three times, it is archived as the crasher it would have been, before it is even decoded.
    reason = "bad_message" if earlier_reads == 0 else "crashed_worker"
    assert archived() == {msg_id: (earlier_reads + 1, reason)}


@pytest.mark.usefixtures("live_db")
def test_a_null_message_is_archived_not_fatal(fast_worker):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pgmq.send('jobs', NULL::jsonb)")
        msg_id = cursor.fetchone()[0]
    fast_worker(drain=True).run()
    assert queue_rows() == []
    assert archived() == {msg_id: (1, "bad_message")}
