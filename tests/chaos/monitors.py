"""What watches while the run goes on: the bucket against the rows, published keys, abandoned messages, and the
event of the member who turns on Do Not Publish."""

import time

from tests.chaos.storage import exposed_media, object_exists, orphan_keys, replaced_named_objects, storage_snapshot

PUBLISHED_KEYS_SAMPLE = (
    "SELECT p.id, k FROM photos p, LATERAL (SELECT unnest(ARRAY[p.public_key, p.public_thumb_key]) AS k "
    "UNION ALL SELECT unnest(ARRAY[v.key, v.thumb_key]) FROM photo_variants v WHERE v.photo_id = p.id) keys "
    "WHERE p.processed_at IS NOT NULL AND k IS NOT NULL ORDER BY random() LIMIT 12"
)
STILL_NAMED = (
    "SELECT 1 FROM photos p LEFT JOIN photo_variants v ON v.photo_id = p.id WHERE p.id = %s "
    "AND p.processed_at IS NOT NULL AND (p.public_key = %s OR p.public_thumb_key = %s "
    "OR v.key = %s OR v.thumb_key = %s)"
)
ABANDONED_READS = (
    "SELECT msg_id, read_ct, extract(epoch FROM last_read_at) FROM pgmq.q_jobs WHERE msg_id = ANY(%s) "
    "UNION ALL SELECT msg_id, read_ct, extract(epoch FROM last_read_at) FROM pgmq.a_jobs WHERE msg_id = ANY(%s)"
)
# A photo of the event: its id, and the face ids its public file blurs (None: not published).
DNP_CHANGE_ROWS = (
    "SELECT id::text, CASE WHEN processed_at IS NULL THEN NULL ELSE coalesce(render_plan->'public', '[]') END "
    "FROM photos WHERE event_id = %s"
)


def start_monitors(chaos) -> None:
    for monitor in (monitor_publications, monitor_storage, monitor_abandoned):
        chaos.watch.start(monitor, chaos)


def stop_monitors(chaos) -> None:
    chaos.watch.stop.set()
    for thread in chaos.watch.threads:
        thread.join(60)


def monitor_storage(chaos) -> None:
    """Read the rows and list the bucket every sample_s: how long each orphan lives; no multi-frame upload
    published as itself or rendered into a file of another kind; no named object's bytes replaced."""
    services, watch, seeded = chaos.services, chaos.watch, chaos.seeded
    client, due = services.s3.client(), time.monotonic()
    while not watch.stop.wait(max(0.0, due - time.monotonic())):
        due = max(due + chaos.config.sample_s, time.monotonic())
        if services.s3_down.is_set():
            watch.orphans.skipped += 1
            continue
        try:
            snapshot = storage_snapshot(services, attempts=1, client=client)
        except Exception:
            watch.orphans.skipped += 1
            continue  # the database or S3 is being restarted by a fault
        watch.orphans.observe(orphan_keys(snapshot), snapshot.taken)
        watch.media_exposed |= exposed_media(snapshot, seeded.media_photos, seeded.refused_media)
        watch.replaced_named |= replaced_named_objects(snapshot, watch.named_etags)


def monitor_publications(chaos) -> None:
    """Sample published photos while the run goes on: each key a row names must already exist."""
    while not chaos.watch.stop.wait(1.0):
        if chaos.services.s3_down.is_set():
            continue
        try:
            chaos.watch.early_publications += published_keys_missing(chaos.services)
        except Exception:
            continue  # the database or S3 is being restarted by a fault


def published_keys_missing(services) -> int:
    """Of twelve keys published rows name, those missing from the bucket while a row still names them."""
    with services.db() as conn:
        rows = conn.execute(PUBLISHED_KEYS_SAMPLE).fetchall()
        client = services.s3.client()
        missing = 0
        for photo_id, key in rows:
            if object_exists(client, key):
                continue
            still = conn.execute(STILL_NAMED, [photo_id, key, key, key, key]).fetchone()
            if still and not services.s3_down.is_set() and not object_exists(client, key):
                missing += 1
        return missing


def monitor_abandoned(chaos) -> None:
    """Every 0.1 s, each abandoned message not yet read again: its read_ct and pgmq's last_read_at."""
    while not chaos.watch.stop.wait(0.1):
        waiting = [entry for entry in chaos.faults.abandoned if entry.read_again_at is None and not entry.gone]
        if not waiting:
            continue
        ids = [entry.msg_id for entry in waiting]
        try:
            with chaos.services.db(attempts=1) as conn:
                rows = conn.execute(ABANDONED_READS, [ids, ids]).fetchall()
        except Exception:
            continue  # a fault has the database down
        seen = {msg_id: (read_ct, read_at) for msg_id, read_ct, read_at in rows}
        for entry in waiting:
            if entry.msg_id not in seen:
                entry.gone = True
            elif seen[entry.msg_id][0] > entry.read_ct:
                # The first read after the kill, unless two reads fell between two looks (then the later one).
                entry.read_again_at = float(seen[entry.msg_id][1])


def monitor_dnp_change(chaos) -> None:
    """Every 0.1 s: which photos of the event are published, and which faces their public file blurs."""
    change = chaos.seeded.dnp_change
    while not chaos.watch.stop.wait(0.1):
        try:
            with chaos.services.db(attempts=1) as conn:
                # The rows are as of the statement's start, so the sample is dated before it is sent: dated
                # once they arrive, a busy machine's slow answer showed rows from before the hide's commit
                # as if seen after it.
                asked = time.time()
                rows = conn.execute(DNP_CHANGE_ROWS, [change.event_id]).fetchall()
        except Exception:
            continue  # the database is being restarted by a fault
        change.samples.append((asked, {photo_id: blurred for photo_id, blurred in rows}))
