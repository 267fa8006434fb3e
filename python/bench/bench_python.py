"""sluice's Python API measured against its ceilings, every ratio from one run.

    python python/bench/bench_python.py [--quick] [--iters N] [--peers-python PY] [--peers DIR]

1. Full update of a 4096^2 RGBA8 numpy array plus a frame read back (1024^2 target), through
   the Python API, against the same operation through the Rust API in this process
   (`sluice._sluice._rust_full_update_frame`). Target: Python / Rust time at most 1 / 0.9.
2. The peer operations pygfx and VisPy are measured on (../shared/peers), through sluice's
   Python API in a Python process like theirs: a 1024^2 frame read back after a full 4096^2
   RGBA8 update; a 256^2 partial update of it (aligned and not); 8 images sharing one 2048^2
   source. With --peers-python (a Python with pygfx and VisPy, as the harness's setup.sh makes)
   the peers run in this same invocation, alternating with sluice; otherwise their stored
   results (--peers, default ../shared/peers/results) are the ceiling, and the report says so.
   Target: at least 2x faster than the faster peer on each. The full update and the shared
   source also run through `sluice.HostBufferSource` (`replace(ndarray)`: the GPU copies the
   array from its own pages, no host copy), where the adapter imports host memory, with their
   frames read into a `sluice.HostFrame`; the readback alone is timed into a new array, into
   one array (`out=`) and into a HostFrame.
3. With CUDA support and PyTorch on a GPU: a 3840 x 2160 RGBA8 tensor changed by a kernel and
   shown through CudaSource, against `tensor.cpu().numpy()` plus a numpy upload, in the same
   run. The kernels that change the tensor run (and finish) before the timer for both paths;
   the timed frame is drawn and finished on the GPU, and read back after the timer to check its
   marker. Target: at least 30x.

Timed iterations follow the peers' rules: 3 warm-ups, 10 timed, two pre-generated data sets
alternating so every update changes the data, the frame read back (waiting for the GPU) inside
the timer, every frame checked outside it. Prints a table; --out FILE writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import sluice

CANVAS = 1024


def rgba_pair(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (n, n, 4), dtype=np.uint8)
    a[..., 3] = 255
    b = a ^ np.uint8(0x55)
    b[..., 3] = 255
    lo, hi = n * 3 // 8, n * 5 // 8
    a[lo:hi, lo:hi] = (250, 10, 10, 255)
    b[lo:hi, lo:hi] = (10, 250, 10, 255)
    return a, b


def check_marker(frame, variant):
    c = frame[frame.shape[0] // 2, frame.shape[1] // 2]
    want = (250, 10, 10) if variant == 0 else (10, 250, 10)
    if np.abs(c[:3].astype(int) - want).max() > 2:
        raise AssertionError(f"frame shows {c.tolist()} at its centre, expected {want}")


def measure(step, check, warmup, iters):
    """Median seconds of step(variant); check(result, variant) after each, outside the timer."""
    times = []
    for i in range(warmup + iters):
        v = i % 2
        t0 = time.perf_counter()
        out = step(v)
        dt = time.perf_counter() - t0
        check(out, v)
        if i >= warmup:
            times.append(dt)
    return times


def ms(times):
    return {
        "min_ms": round(min(times) * 1e3, 3),
        "median_ms": round(statistics.median(times) * 1e3, 3),
        "max_ms": round(max(times) * 1e3, 3),
        "samples_ms": [round(t * 1e3, 3) for t in times],
    }


def image_case(renderer, n, visuals=1):
    pair = rgba_pair(n)
    data = pair[0].copy()
    src = sluice.ArraySource(data, channels=True)
    scene = sluice.Scene()
    for i in range(visuals):
        node = scene.add(sluice.Image(src))
        # The peers' 8-visual case tiles the images; they all cover the canvas centre here.
        scene.set_position(node, float(i), 0.0)
    target = renderer.create_target(CANVAS, CANVAS)
    camera = sluice.PanZoomCamera.fit((0, 0), (n, n), target.size)
    renderer.render(scene, camera, target)
    return pair, data, src, scene, target, camera


def full_update(renderer, n, warmup, iters):
    pair, data, src, scene, target, camera = image_case(renderer, n)

    def step(v):
        src[:, :] = pair[v]
        return renderer.render(scene, camera, target)

    return measure(step, check_marker, warmup, iters)


def partial_update(renderer, n, s, aligned, warmup, iters, full_redraw=False):
    pair, data, src, scene, target, camera = image_case(renderer, n)
    # Unaligned: 37 samples off the chunk grid (less for small regions, so that the region
    # still covers the centre the check reads).
    off = n // 2 - s // 2 - (0 if aligned else min(37, s // 4))
    blocks = [np.empty((s, s, 4), np.uint8), np.empty((s, s, 4), np.uint8)]
    blocks[0][:] = (250, 10, 10, 255)
    blocks[1][:] = (10, 250, 10, 255)
    blocks[0][::7, ::5, 2] = 99
    blocks[1][::5, ::7, 2] = 99
    region = np.s_[off:off + s, off:off + s]
    before = renderer.counters()["bytes_uploaded"]

    def step(v):
        src[region] = blocks[v]
        if full_redraw:
            target.invalidate()
        return renderer.render(scene, camera, target)

    times = measure(step, check_marker, warmup, iters)
    per_update = (renderer.counters()["bytes_uploaded"] - before) / (warmup + iters)
    return times, per_update


def tiled(renderer, src, n, visuals):
    """A scene of `visuals` images of `src` (n x n) tiled 4 to a row with gaps of n / 16, as
    the peers lay them out (one image: alone), drawn once; its target, camera and the
    screen pixels of the tiles' centres."""
    cols, gap = 4, n // 16
    rows = (visuals + cols - 1) // cols
    across = min(visuals, cols)
    W, H = across * n + (across - 1) * gap, rows * n + (rows - 1) * gap
    scene = sluice.Scene()
    centres = []
    for i in range(visuals):
        ox, oy = (i % cols) * (n + gap), (i // cols) * (n + gap)
        node = scene.add(sluice.Image(src))
        scene.set_position(node, float(ox), float(oy))
        centres.append((ox + n / 2, oy + n / 2))
    target = renderer.create_target(CANVAS, CANVAS)
    camera = sluice.PanZoomCamera.fit((0, 0), (W, H), target.size)
    pixels = [tuple(int(v) for v in camera.world_to_screen(c, target.size)) for c in centres]
    renderer.render(scene, camera, target)
    return scene, target, camera, pixels


def check_tiles(pixels):
    """A check of every tile's centre marker."""
    def check(frame, v):
        for x, y in pixels:
            check_marker(frame[y - 1:y + 2, x - 1:x + 2], v)
    return check


def shared_source(renderer, n, visuals, warmup, iters):
    """`visuals` images of one source tiled as the peers tile them; every tile's centre is
    checked."""
    pair = rgba_pair(n)
    src = sluice.ArraySource(pair[0].copy(), channels=True)
    scene, target, camera, pixels = tiled(renderer, src, n, visuals)
    textures = renderer.counters()["textures_alive"]

    def step(v):
        src[:, :] = pair[v]
        return renderer.render(scene, camera, target)

    return measure(step, check_tiles(pixels), warmup, iters), textures


def host_buffer_case(n, visuals, warmup, iters):
    """The full update (visuals=1) or the shared source (visuals=8, tiled as the peers tile
    them) through HostBufferSource: each update hands sluice the other prepared array, and
    the frame is read into a HostFrame (pages the GPU copies into, seen by numpy)."""
    renderer = sluice.Renderer(interop=True)
    pair = rgba_pair(n)
    src = sluice.HostBufferSource(pair[1].copy(), channels=True)
    scene, target, camera, pixels = tiled(renderer, src, n, visuals)
    frame = sluice.HostFrame(target)

    def step(v):
        src.replace(pair[v])
        renderer.draw(scene, camera, target)
        return frame.read(renderer, target)

    times = measure(step, check_tiles(pixels), warmup, iters)
    return times, src.imported, src.fallback_reason, src.stats()


def readback_cases(warmup, iters):
    """The peers' "readback alone": the 1024^2 RGBA8 target read back after a frame, into a new
    array (`read`), into one array (`read(out=)`) and, on the interop device (Linux), into a
    HostFrame (`HostFrame.read`: the GPU copies into pages numpy sees, no copy on the CPU).
    The three alternate; every read is compared with the first."""
    interop = hasattr(sluice, "HostFrame")
    renderer = sluice.Renderer(interop=True) if interop else sluice.Renderer()
    _, _, _, _, target, _ = image_case(renderer, 256)
    reference = renderer.read(target)
    buf = np.empty_like(reference)
    frame = sluice.HostFrame(target) if interop else None
    reads = {
        "readback_1024x1024_rgba8": lambda: renderer.read(target),
        "readback_1024x1024_rgba8_into": lambda: renderer.read(target, out=buf),
    }
    if frame is not None:
        reads["readback_1024x1024_rgba8_host_frame"] = lambda: frame.read(renderer, target)
    times = {case: [] for case in reads}
    for i in range(warmup + iters):
        for case, read in reads.items():
            t0 = time.perf_counter()
            got = read()
            dt = time.perf_counter() - t0
            if not np.array_equal(got, reference):
                raise AssertionError(f"{case}: the pixels read back differ from the first read")
            if i >= warmup:
                times[case].append(dt)
    return times, (frame.is_imported, frame.fallback_reason) if frame else None


def peer_medians(args):
    """{(benchmark, case): (library, median_ms)} of the faster peer, and where it came from."""
    runs = []
    if args.peers_python:
        out = tempfile.mkdtemp(prefix="sluice-peers-")
        for lib in ("pygfx", "vispy"):
            script = os.path.join(args.peers_dir, f"bench_{lib}.py")
            path = os.path.join(out, f"{lib}.json")
            cmd = [args.peers_python, script, "--only", "readback,full_update_2d,partial_update_2d,shared_source", "--out", path]
            if args.quick:
                cmd.append("--quick")
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            runs.append((lib, json.load(open(path))))
        origin = "measured in this run"
    else:
        results = os.path.join(args.peers_dir, "results")
        for f in sorted(os.listdir(results)) if os.path.isdir(results) else []:
            for lib in ("pygfx", "vispy"):
                if f.startswith(f"run_{lib}_"):
                    runs.append((lib, json.load(open(os.path.join(results, f)))))
        origin = f"stored results in {results} (not this run: pass --peers-python to measure them here)"
    best = {}
    for lib, run in runs:
        for bench, cases in run.get("results", {}).items():
            for case, r in cases.items():
                med = (r.get("timing") or {}).get("median_ms") if isinstance(r, dict) else None
                if med is None:
                    continue
                key = (bench, case)
                if key not in best or med < best[key][1]:
                    best[key] = (lib, med)
    return best, origin


def cuda_case(renderer_cuda, warmup, iters):
    import torch

    h, w = 2160, 3840
    t = torch.zeros((h, w, 4), device="cuda", dtype=torch.uint8)
    src = sluice.CudaSource(t, channels=True)
    scene = sluice.Scene()
    scene.add(sluice.Image(src))
    target = renderer_cuda.create_target(CANVAS, CANVAS)
    camera = sluice.PanZoomCamera.fit((0, 0), (w, h), target.size)
    renderer_cuda.render(scene, camera, target)
    host = np.zeros((h, w, 4), np.uint8)
    hsrc = sluice.ArraySource(host, channels=True)
    hscene = sluice.Scene()
    hscene.add(sluice.Image(hsrc))

    def fill(v):
        # The producer's work, the same for both paths: done and finished outside the timer.
        t[..., 0] = 250 if v == 0 else 10
        t[..., 1] = 10 if v == 0 else 250
        t[..., 2] = 10
        t[..., 3] = 255
        torch.cuda.synchronize()

    def on_gpu(v):
        src.mark_dirty()
        renderer_cuda.draw(scene, camera, target)
        renderer_cuda.wait_idle()

    def via_host(v):
        hsrc[:, :] = t.cpu().numpy()
        renderer_cuda.draw(hscene, camera, target)
        renderer_cuda.wait_idle()

    def timed(step):
        # A frame is shown once drawn and finished on the GPU; the readback that checks it
        # is outside the timer (it is no part of showing).
        times = []
        for i in range(warmup + iters):
            v = i % 2
            fill(v)
            t0 = time.perf_counter()
            step(v)
            dt = time.perf_counter() - t0
            check_marker(renderer_cuda.read(target), v)
            if i >= warmup:
                times.append(dt)
        return times

    def breakdown():
        # Where one shown frame's time goes: the Python call that records the ready event,
        # the draw (Python call plus the Rust frame that enqueues the device copy and the
        # draw), and the wait for the GPU to finish.
        parts = {"mark_dirty": [], "draw": [], "wait_idle": []}
        for i in range(warmup + iters):
            fill(i % 2)
            t0 = time.perf_counter()
            src.mark_dirty()
            t1 = time.perf_counter()
            renderer_cuda.draw(scene, camera, target)
            t2 = time.perf_counter()
            renderer_cuda.wait_idle()
            t3 = time.perf_counter()
            if i >= warmup:
                for name, dt in (("mark_dirty", t1 - t0), ("draw", t2 - t1), ("wait_idle", t3 - t2)):
                    parts[name].append(dt)
        return {name: round(statistics.median(v) * 1e3, 4) for name, v in parts.items()}

    def in_flight(frames=20):
        # Frames back to back without waiting for each (as a render loop runs), one wait at
        # the end: the time per frame when the GPU overlaps the next frame's calls.
        times = []
        for i in range(warmup + iters):
            fill(i % 2)
            t0 = time.perf_counter()
            for _ in range(frames):
                src.mark_dirty()
                renderer_cuda.draw(scene, camera, target)
            renderer_cuda.wait_idle()
            dt = (time.perf_counter() - t0) / frames
            check_marker(renderer_cuda.read(target), i % 2)
            if i >= warmup:
                times.append(dt)
        return times

    before = renderer_cuda.counters()["bytes_uploaded"]
    gpu = timed(on_gpu)
    parts = breakdown()
    flight = in_flight()
    host_bytes = renderer_cuda.counters()["bytes_uploaded"] - before
    cpu = timed(via_host)
    return gpu, cpu, host_bytes, parts, flight


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--peers-python", help="a Python with pygfx and VisPy: run the peers in this run")
    ap.add_argument("--peers", dest="peers_dir", default=os.path.normpath(os.path.join(here, "../../../shared/peers")))
    ap.add_argument("--out", help="write the results as JSON")
    args = ap.parse_args()
    n, s, shared_n = (4096, 256, 2048) if not args.quick else (1024, 64, 512)
    warmup, iters = 3, args.iters
    renderer = sluice.Renderer()
    info = renderer.adapter_info()
    rows, results = [], {"adapter": info, "quick": args.quick}

    # 1. Python API against the Rust API.
    rust = sluice._sluice._rust_full_update_frame(n, CANVAS, warmup, iters)
    py = full_update(renderer, n, warmup, iters)
    ratio = statistics.median(rust) / statistics.median(py)
    results["python_vs_rust"] = {"python": ms(py), "rust": ms(rust), "ratio": round(ratio, 3), "target": 0.9}
    rows.append((f"full update {n}^2 RGBA8 + frame: Python / Rust API speed", ratio, 0.9,
                 f"{statistics.median(py) * 1e3:.1f} ms vs {statistics.median(rust) * 1e3:.1f} ms"))

    # 2. Peer operations.
    best, origin = peer_medians(args)
    results["peers_origin"] = origin
    cases = {}
    cases[("full_update_2d", f"rgba8_{n}", f"rgba8_{n}")] = py
    for full_redraw in (False, True):
        for aligned in (True, False):
            times, per_update = partial_update(renderer, n, s, aligned, warmup, iters, full_redraw)
            case = f"rgba8_{n}_region{s}_{'aligned' if aligned else 'unaligned'}"
            key = ("partial_update_2d", case + ("_full_redraw" if full_redraw else ""), case)
            cases[key] = times
            results.setdefault("bytes_per_partial_update", {})[key[1]] = per_update
    times, textures = shared_source(renderer, shared_n, 8, warmup, iters)
    cases[("shared_source", f"8x_rgba8_{shared_n}_shared_texture", "8x_")] = times
    results["shared_source_textures_alive"] = textures
    readback, host_frame = readback_cases(warmup, iters)
    for case, times in readback.items():
        cases[("readback", case, "readback_1024x1024_rgba8")] = times
    results["host_frame"] = (
        {"imported": host_frame[0], "fallback_reason": host_frame[1]} if host_frame else "no HostFrame here")
    try:
        for bench, size, visuals, case, peer_case in (
            ("full_update_2d", n, 1, f"rgba8_{n}_host_buffer", f"rgba8_{n}"),
            ("shared_source", shared_n, 8, f"8x_rgba8_{shared_n}_shared_host_buffer", "8x_"),
        ):
            times, imported, reason, stats = host_buffer_case(size, visuals, warmup, iters)
            cases[(bench, case, peer_case)] = times
            results.setdefault("host_buffer", {})[case] = {
                "imported": imported, "fallback_reason": reason, "stats": stats}
    except sluice.SluiceError as e:
        results["host_buffer"] = f"not run: {e}"
        print(f"  host_buffer cases not run: {e}", file=sys.stderr)
    peer_rows = {}
    for key, times in cases.items():
        med = statistics.median(times) * 1e3
        # key: (benchmark, sluice's case, the peers' case or, for shared_source, its prefix)
        peers_for_case = {k: v for k, v in best.items()
                          if k[0] == key[0] and (k[1] == key[2] or (key[2] == "8x_" and k[1].startswith("8x_")))}
        entry = {"sluice_python": ms(times)}
        if peers_for_case:
            lib, peer = min(peers_for_case.values(), key=lambda x: x[1])
            speedup = peer / med
            entry.update({"faster_peer": lib, "peer_median_ms": peer, "speedup": round(speedup, 3), "target": 2.0})
            rows.append((f"{key[0]}/{key[1]} vs {lib}", speedup, 2.0, f"{med:.1f} ms vs {peer:.1f} ms"))
        else:
            rows.append((f"{key[0]}/{key[1]}", None, 2.0, f"{med:.1f} ms (no peer figure)"))
        peer_rows["/".join(key[:2])] = entry
    results["peers"] = peer_rows

    # 3. CUDA.
    cuda_note = None
    try:
        import torch  # noqa: F401

        usable = sluice.CUDA_SUPPORT and torch.cuda.is_available()
    except ImportError:
        usable = False
    if usable:
        gpu, cpu, host_bytes, parts, flight = cuda_case(sluice.Renderer(cuda=True), warmup, iters)
        speedup = statistics.median(cpu) / statistics.median(gpu)
        flight_speedup = statistics.median(cpu) / statistics.median(flight)
        results["cuda"] = {"cuda_source": ms(gpu), "cpu_numpy_upload": ms(cpu), "speedup": round(speedup, 3),
                           "target": 30.0, "host_bytes_uploaded_by_cuda_source": host_bytes,
                           "breakdown_median_ms": parts, "in_flight_per_frame": ms(flight),
                           "in_flight_speedup": round(flight_speedup, 3)}
        rows.append(("CUDA 3840x2160 RGBA8: CudaSource vs .cpu().numpy() + upload", speedup, 30.0,
                     f"{statistics.median(gpu) * 1e3:.2f} ms vs {statistics.median(cpu) * 1e3:.1f} ms"))
        rows.append(("  the same, 20 frames in flight (per frame)", flight_speedup, 30.0,
                     f"{statistics.median(flight) * 1e3:.2f} ms; one frame: "
                     + ", ".join(f"{k} {v:.3f} ms" for k, v in parts.items())))
    else:
        cuda_note = "CUDA case not run: needs sluice built with feature cuda, PyTorch and a CUDA GPU"
        results["cuda"] = cuda_note

    print(f"adapter: {info['name']} ({info['backend']}); peers: {origin}", file=sys.stderr)
    for name, ratio, target, detail in rows:
        verdict = "n/a" if ratio is None else ("ok" if ratio >= target else "MISSED")
        shown = "-" if ratio is None else f"{ratio:.2f}x"
        print(f"  {name:<62} {shown:>8}  (target {target}x, {verdict})  {detail}", file=sys.stderr)
    if cuda_note:
        print(f"  {cuda_note}", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
