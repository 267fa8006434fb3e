"""A window on data the script keeps changing: `sluice.view(scene, block=False)`.

The window runs on its own thread while this script writes a new wave into the numpy array
(shown by reference) and sweeps the contrast limits; each `handle.redraw()` asks for a frame,
which uploads only what `mark_dirty` reported and shows the clim set from Python.

Run: python python/examples/live_window.py [SECONDS]   (needs a display; `xvfb-run -a` works)
"""

import sys
import time

import numpy as np

import sluice

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
h, w = 480, 640
y, x = np.mgrid[0:h, 0:w].astype(np.float32)
data = np.zeros((h, w), np.float32)
src = sluice.ArraySource(data)
image = sluice.Image(src, colormap="magma", clim=(-1.0, 1.0))
scene = sluice.Scene()
scene.add(image)

handle = sluice.view(scene, block=False, title="sluice: live wave", size=(w, h))
start = time.monotonic()
step = 0
while handle.is_open and time.monotonic() - start < seconds:
    phase = step * 0.15
    data[:] = np.sin(x / 30.0 + phase) * np.cos(y / 25.0 - phase * 0.7)  # in place
    src.mark_dirty()
    spread = 0.6 + 0.4 * np.cos(phase * 0.3)
    image.clim = (-spread, spread)
    handle.redraw()
    step += 1
    time.sleep(1 / 30)
if handle.is_open:
    handle.close()
report = handle.wait(timeout=30)
counters = handle.counters()
print(f"{step} updates from the script; the window drew {handle.frames} frames and uploaded "
      f"{counters['bytes_uploaded'] / 1e6:.1f} MB")
