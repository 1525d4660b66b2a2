"""Two readers at once, in one test process: each photo's face_process in its own thread, connection and
transaction, as two worker processes would run them."""

import threading

from django.db import connection, transaction

from faces.jobs import photo_jobs
from tests.support.queue_helpers import by_hand


def face_process_in_threads(photos, mine: threading.local) -> None:
    """Run each photo's face_process in a thread of its own, `mine.index` that photo's index there (for the test's
    own hooks to tell the threads apart); fails with what any thread raised."""
    errors = []
    connecting = threading.Lock()

    def run(index: int) -> None:
        mine.index = index
        try:
            with connecting:
                # One connection at a time: the embedded server's start-up file lock (checked on every
                # connect) is not safe across threads.
                connection.ensure_connection()
            with transaction.atomic():
                photo_jobs.face_process(
                    {"job": "face_process", "photo_id": str(photos[index].id)}, by_hand("face_process")
                )
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(photos))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
