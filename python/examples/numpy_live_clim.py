"""A numpy image with a live contrast-limit change, notebook style.

Run: python python/examples/numpy_live_clim.py [OUT_DIR]
Writes clim-*.png frames; in a notebook, show `frame` (a numpy RGBA array) after each cell.
"""

import pathlib
import sys

import numpy as np

import sluice

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/sluice-out")
out.mkdir(parents=True, exist_ok=True)

# Cell 1: data the program already holds, shown by reference.
y, x = np.mgrid[0:768, 0:1024].astype(np.float32)
data = np.sin(x / 60.0) * np.cos(y / 45.0) + 0.1 * np.random.default_rng(0).standard_normal((768, 1024), np.float32)
src = sluice.ArraySource(data)
image = sluice.Image(src, colormap="viridis", clim=(-1.0, 1.0))
scene = sluice.Scene()
scene.add(image)
renderer = sluice.Renderer()
target = renderer.create_target(1024, 768)
camera = sluice.PanZoomCamera.fit((0, 0), (1024, 768), target.size)
frame = renderer.render(scene, camera, target)

# Cell 2: sweep the contrast limits. Each frame uploads nothing: clim lives in the shader.
uploaded = renderer.counters()["bytes_uploaded"]
for i, hi in enumerate(np.linspace(1.0, 0.2, 5)):
    image.clim = (-hi, hi)
    frame = renderer.render(scene, camera, target)
    renderer.save_png(target, out / f"clim-{i}.png")
assert renderer.counters()["bytes_uploaded"] == uploaded

# Cell 3: change a region of the array; only that region is uploaded.
src[300:400, 400:600] = 1.0
frame = renderer.render(scene, camera, target)
renderer.save_png(target, out / "clim-edit.png")
print(f"frames in {out}; bytes uploaded by the edit: {renderer.counters()['bytes_uploaded'] - uploaded}")
