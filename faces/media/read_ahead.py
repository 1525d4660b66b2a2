"""A stream read ahead on a thread of its own: a clip's decoding, conversion to BGR and motion maps run beside the
detector (which keeps one core busy on one onnxruntime thread) instead of between its passes."""

import queue
import threading
from collections.abc import Iterable, Iterator

_END = object()


def read_ahead[T](items: Iterable[T], depth: int) -> Iterator[T]:
    """`items` in order, produced on a thread of its own at most `depth` ahead of the one taken (0: on the taker's
    thread, as it takes them). Its error is raised here, in its place in the stream; taking no more (closing this
    iterator, or an error of the taker's) stops the thread and closes `items` on it."""
    if depth < 1:
        yield from items
        return
    ready: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def offer(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        stream = iter(items)
        try:
            for item in stream:
                if not offer((item, None)):
                    return
            offer((_END, None))
        except BaseException as error:
            offer((_END, error))
        finally:
            getattr(stream, "close", lambda: None)()

    producer = threading.Thread(target=produce, name="read-ahead", daemon=True)
    producer.start()
    try:
        while True:
            item, error = ready.get()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        producer.join()
