"""Work around lost wake-ups in asyncio kernel clients: poll the kernel's channels in 1-second slices.

nbclient (used by Jupyter Book's execution, papermill and tools/execute_chapters.py) waits for a
cell's reply with ``AsyncZMQSocketChannel.get_msg(timeout)``, one ``await socket.poll(timeout)``.
pyzmq's asyncio sockets are woken by an edge-triggered file descriptor, and on a busy machine a
wake-up can be lost: the reply sits in the socket's queue while the poll waits on (forever, when
no cell timeout is set). Seen here after widget cells, four times in chapter runs on a heavily
loaded 2-core machine: the kernel had run the cell (a second client found it in the kernel's
history) and was idle, while the client waited for the reply. A small reproduction (two
progress-bar cells, then a widget cell, beside busy processes) hung in 3 of 27 stock papermill
runs; with this patch 0 of 11 hung, at a lighter load, which is evidence, not proof.

A new poll re-checks the socket's pending events when it starts, so polling in slices of at
most one second turns a lost wake-up into a delay of at most one second. :func:`apply` replaces
``get_msg`` with that loop; the timeout's meaning is unchanged.

Used as a Sphinx extension by the book build (``_config.yml``: ``sphinx.local_extensions``) and by
``tools/run_papermill.py``; tested in ``tests/test_tools.py``.
"""
from __future__ import annotations

from queue import Empty
from time import monotonic

SLICE_S = 1.0


async def _get_msg_in_slices(self, timeout: float | None = None):
    """Gets a message if there is one that is ready (polling in slices of at most SLICE_S)."""
    assert self.socket is not None
    deadline = None if timeout is None else monotonic() + timeout
    while True:
        remaining = SLICE_S if deadline is None else max(0.0, min(SLICE_S, deadline - monotonic()))
        if await self.socket.poll(int(remaining * 1000)):
            return await self._recv()
        if deadline is not None and monotonic() >= deadline:
            raise Empty


def apply() -> None:
    """Patch jupyter_client's asyncio channel (idempotent)."""
    from jupyter_client.channels import AsyncZMQSocketChannel

    if AsyncZMQSocketChannel.get_msg is not _get_msg_in_slices:
        AsyncZMQSocketChannel.get_msg = _get_msg_in_slices


def setup(app):  # Sphinx extension entry point (the book build executes the chapters with nbclient)
    apply()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
