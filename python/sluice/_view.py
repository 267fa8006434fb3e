"""`sluice.view`: the window, and closing the windows still open when the interpreter exits
(their threads read sources that Python owns)."""

import atexit
import threading

from . import _sluice

_open = []
_lock = threading.Lock()


def view(scene, *, block=True, title="sluice", size=(1280, 800), controls=True, frames=None):
    """Shows `scene` in a window (mouse cameras, a panel of layer controls).

    Blocking (the default) it runs until the window is closed and returns its report, a dict
    with `frames`, `frames_rendered` and `last_frame` (the last frame as an `(h, w, 4)` uint8
    array when `frames=` ended the run). With `block=False` it returns a `ViewHandle` at once
    and the window runs on sluice's window thread: keep writing sources and changing settings,
    call `handle.redraw()` after writing a source, `handle.close()` and `handle.wait()` at the
    end. Each frame shows the scene as it is then. `frames`: close after that many frames.
    One window at a time: once it is closed, the next `view` opens another.
    """
    result = _sluice.view(scene, block=block, title=title, size=size, controls=controls,
                          frames=frames)
    if not block:
        with _lock:
            _open[:] = [h for h in _open if h.is_open]
            _open.append(result)
    return result


@atexit.register
def _close_windows():
    with _lock:
        handles = list(_open)
        _open.clear()
    for handle in handles:
        if handle.is_open:
            handle.close()
            try:
                handle.wait(timeout=10)
            except Exception:  # exiting: the window's own error has nowhere to go
                pass
