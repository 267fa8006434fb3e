"""A dask array computed chunk by chunk, each chunk appearing as it finishes.

The image is a numpy buffer shown by reference; as each dask chunk is computed (on dask's
threads), it is written into its region of the buffer through the source, which marks only
that region, and the next frame uploads only that chunk.

`sluice.Image(dask_array)` also works: it wraps the array as a `LazySource` read on sluice's
loader pool. Today's renderer uploads a lazy source once every chunk of its texture is in (the
paged textures that show chunks as they arrive are still to come), so this example drives the
chunks itself to show them appearing.

Run: python python/examples/dask_chunks.py [OUT_DIR]   (needs dask: pip install "dask[array]")
"""

import pathlib
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed as done

import numpy as np

import sluice

try:
    import dask.array as da
except ImportError:
    sys.exit('this example needs dask: pip install "dask[array]"')

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/sluice-out")
out.mkdir(parents=True, exist_ok=True)

n, chunk = 1024, 256
y, x = da.meshgrid(da.arange(n, chunks=chunk, dtype=np.float32), da.arange(n, chunks=chunk, dtype=np.float32), indexing="ij")
field = da.sin(x / 50.0) * da.cos(y / 70.0)  # lazy: nothing computed yet

buffer = np.full((n, n), np.nan, np.float32)  # NaN shows as transparent until computed
src = sluice.ArraySource(buffer)
scene = sluice.Scene(background=(0.2, 0.2, 0.2, 1.0))
scene.add(sluice.Image(src, clim=(-1, 1), colormap="magma"))
renderer = sluice.Renderer()
target = renderer.create_target(512, 512)
camera = sluice.PanZoomCamera.fit((0, 0), (n, n), target.size)
renderer.render(scene, camera, target)

blocks = list(np.ndindex(*field.numblocks))
futures = {}
with ThreadPoolExecutor(4) as pool:
    for idx in blocks:
        futures[pool.submit(field.blocks[idx].compute, scheduler="synchronous")] = idx
    for i, fut in enumerate(done(futures)):
        by, bx = futures[fut]
        before = renderer.counters()["bytes_uploaded"]
        src[by * chunk:(by + 1) * chunk, bx * chunk:(bx + 1) * chunk] = fut.result()
        renderer.render(scene, camera, target)
        renderer.save_png(target, out / f"dask-{i:02}.png")
        print(f"chunk {by, bx} done: {renderer.counters()['bytes_uploaded'] - before} bytes uploaded")
print(f"{len(blocks)} chunks; frames in {out}")
