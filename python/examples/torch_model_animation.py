"""A PyTorch model's output tensor shown every frame with no CPU round trip.

A small convolutional network turns a moving input into an RGBA image on the GPU; sluice
shows the network's output tensor directly (CudaSource): each frame the model runs on torch's
stream, `mark_dirty()` records an event there, and the renderer's GPU copy waits for it.

Run on a machine with an NVIDIA GPU, PyTorch and sluice built with `--features cuda`:
    python python/examples/torch_model_animation.py [FRAMES] [OUT_DIR]
"""

import pathlib
import sys
import time

import sluice

try:
    import torch
except ImportError:
    sys.exit("this example needs PyTorch")
if not (sluice.CUDA_SUPPORT and torch.cuda.is_available()):
    sys.exit("this example needs a CUDA GPU and sluice built with --features cuda")

frames = int(sys.argv[1]) if len(sys.argv) > 1 else 120
out = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "target/sluice-out")
out.mkdir(parents=True, exist_ok=True)
h, w = 720, 1280

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(2, 16, 5, padding=2),
    torch.nn.Tanh(),
    torch.nn.Conv2d(16, 16, 5, padding=2),
    torch.nn.Tanh(),
    torch.nn.Conv2d(16, 3, 1),
    torch.nn.Sigmoid(),
).cuda().eval()
yy, xx = torch.meshgrid(torch.linspace(-1, 1, h, device="cuda"), torch.linspace(-1, 1, w, device="cuda"), indexing="ij")

# The tensor sluice shows: the model writes into it every frame.
rgba = torch.empty((h, w, 4), device="cuda", dtype=torch.uint8)
rgba[..., 3] = 255
src = sluice.CudaSource(rgba, channels=True)
scene = sluice.Scene()
scene.add(sluice.Image(src))
renderer = sluice.Renderer(cuda=True)
target = renderer.create_target(w, h)
camera = sluice.PanZoomCamera.fit((0, 0), (w, h), target.size)

start = time.perf_counter()
with torch.no_grad():
    for f in range(frames):
        t = f / 30.0
        inp = torch.stack([torch.sin(3 * xx + t), torch.cos(3 * yy - 0.7 * t)])[None]
        rgb = model(inp)[0].permute(1, 2, 0)  # (h, w, 3) in [0, 1], on the GPU
        rgba[..., :3] = (rgb * 255).to(torch.uint8)
        src.mark_dirty()
        renderer.draw(scene, camera, target)
        if f % 30 == 0:
            renderer.save_png(target, out / f"torch-{f:03}.png")
renderer.wait_idle()
elapsed = time.perf_counter() - start
c = renderer.counters()
print(f"{frames} frames in {elapsed:.2f} s ({frames / elapsed:.0f} fps); bytes through the host: {c['bytes_uploaded']}; "
      f"GPU-side: {c['device_bytes_copied']} bytes copied, {c['textures_provided']} textures written by CUDA")
