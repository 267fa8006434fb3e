#!/usr/bin/env python3
"""Faster peer / sluice, per round, from a peer run's results folder.

The harness's compare.py prints sluice's default cases (`ArraySource` in, a readback into a
new buffer out). This prints, for every row of issue 12's table, the ratio with sluice doing
a whole redraw each frame, twice: with the copy-free paths (`HostBufferSource` in; the
frame drawn into a `HostTarget` where the device can, else read into a `HostFrame`) and with `ArraySource` (one CPU copy into staging). Medians
of each run's samples, as compare.py takes them.

    python3 scripts/peers-ratios.py RESULTS_DIR [--rounds N]

RESULTS_DIR holds run_{pygfx,vispy,sluice}_rN.json (run.sh --out DIR writes DIR/results;
scripts/device-peers.sh brings results.tar.gz back with that folder inside). Where it also
holds gpu_clocks.csv (scripts/device-peers.sh logs nvidia-smi's SM clock every 100 ms), a
second table gives the median SM clock while each library ran each section: NVIDIA GPUs drop
to their idle clock within a second or two of light use, which makes short cases slower.
"""

import argparse
import datetime
import json
import os
import statistics
import sys

# (row, benchmark, peer cases (the faster of pygfx and VisPy over these), sluice copy-free
# case (or cases: the first the run has), sluice ArraySource case, what to take: "frame", "render" (render-only, paired) or
# "upload" (upload-only net)).
ROWS = [
    # Drawn straight into host memory where the device can (`HostTarget`, CPU devices), else
    # read into a `HostFrame`.
    ("readback alone 1024^2", "readback", ["readback_1024x1024_rgba8"],
     ("readback_1024x1024_rgba8_host_target", "readback_1024x1024_rgba8_host_frame"),
     "readback_1024x1024_rgba8", "frame"),
    ("frame, nothing changed", "readback", ["frame_floor_trivial_scene"],
     "frame_floor_trivial_scene_full_redraw", "frame_floor_trivial_scene_full_redraw", "frame"),
    ("full update 4096^2 RGBA8 + frame", "full_update_2d", ["rgba8_4096"],
     "rgba8_4096_host_buffer_full_redraw", "rgba8_4096_full_redraw", "frame"),
    ("  upload alone, 64 MiB", "full_update_2d", ["rgba8_4096"],
     "rgba8_4096_host_buffer", "rgba8_4096", "upload"),
    ("full update 2048^2 f32 + frame", "full_update_2d", ["f32_2048"],
     "f32_2048_host_buffer_full_redraw", "f32_2048_full_redraw", "frame"),
    ("  upload alone, 16 MiB", "full_update_2d", ["f32_2048"],
     "f32_2048_host_buffer", "f32_2048", "upload"),
    ("partial 256^2 of 4096^2, aligned", "partial_update_2d", ["rgba8_4096_region256_aligned"],
     "rgba8_4096_region256_aligned_full_redraw", "rgba8_4096_region256_aligned_full_redraw",
     "frame"),
    ("partial 256^2 of 4096^2, unaligned", "partial_update_2d",
     ["rgba8_4096_region256_unaligned"], "rgba8_4096_region256_unaligned_full_redraw",
     "rgba8_4096_region256_unaligned_full_redraw", "frame"),
    ("volume 256^3 u8 MIP + frame", "volume_3d", ["u8_256^3"], "u8_256^3_host_buffer",
     "u8_256^3", "frame"),
    ("  render-only", "volume_3d", ["u8_256^3"], "u8_256^3_host_buffer", "u8_256^3", "render"),
    ("volume 512^3 u8 MIP + frame", "volume_3d", ["u8_512^3"], "u8_512^3_host_buffer",
     "u8_512^3", "frame"),
    ("  render-only", "volume_3d", ["u8_512^3"], "u8_512^3_host_buffer", "u8_512^3", "render"),
    ("mesh 1M vertices, positions replaced + frame", "mesh_update", ["mesh_1000000v"],
     "mesh_1000000v_host_buffer", "mesh_1000000v", "frame"),
    ("  render-only", "mesh_update", ["mesh_1000000v"], "mesh_1000000v_host_buffer",
     "mesh_1000000v", "render"),
    ("8 images, one 2048^2 source", "shared_source",
     ["8x_rgba8_2048_shared_texture", "8x_rgba8_2048_each_image_set_data"],
     "8x_rgba8_2048_shared_host_buffer_full_redraw",
     "8x_rgba8_2048_shared_texture_full_redraw", "frame"),
    ("8 images, 8 separate sources", "shared_source",
     ["8x_rgba8_2048_separate_textures", "8x_rgba8_2048_each_image_set_data"],
     "8x_rgba8_2048_separate_host_buffers_full_redraw",
     "8x_rgba8_2048_separate_textures_full_redraw", "frame"),
    ("first frame, warm shader cache", "first_frame", ["warm_shader_cache"],
     "warm_shader_cache", "warm_shader_cache", "frame"),
    ("first frame, Mesa shader cache disabled", "first_frame", ["mesa_shader_cache_disabled"],
     "mesa_shader_cache_disabled", "mesa_shader_cache_disabled", "frame"),
]


def median(entry, what):
    """The median ms of `what` in one case's result, or None."""
    if not isinstance(entry, dict):
        return None
    if what == "frame":
        t = entry.get("timing")
    elif what == "render":
        t = entry.get("render_only")
    else:
        u = entry.get("upload_only")
        t = u.get("net", u) if isinstance(u, dict) else None
    if not isinstance(t, dict):
        return None
    return t.get("median_ms")


def load(folder, lib, rnd, key="results"):
    """One run's results (or another top-level entry), or {} where the run left none (a peer
    that failed)."""
    path = os.path.join(folder, f"run_{lib}_r{rnd}.json")
    try:
        with open(path) as f:
            return json.load(f)[key]
    except (OSError, ValueError, KeyError) as e:
        if key == "results":
            print(f"peers-ratios: {path}: {e}; left out", file=sys.stderr)
        return {}


def load_clocks(folder):
    """(unix seconds, SM MHz) samples of gpu_clocks.csv, or [] where there is none."""
    samples = []
    try:
        with open(os.path.join(folder, "gpu_clocks.csv")) as f:
            for line in f:
                parts = [p.strip() for p in line.split(",")]
                try:
                    when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                    mhz = float(parts[1])
                except (IndexError, ValueError):
                    continue
                samples.append((when.replace(tzinfo=datetime.timezone.utc).timestamp(), mhz))
    except OSError:
        pass
    return samples


def clock_table(folder, rounds):
    """Median SM clock per section, library and round, from the sections' start and end."""
    samples = load_clocks(folder)
    if not samples:
        return
    libs = ("sluice", "pygfx", "vispy")
    spans = {(lib, r): load(folder, lib, r, "contention")
             for lib in libs for r in range(1, rounds + 1)}
    sections = []
    for name, bench, *_ in ROWS:
        if bench not in sections:
            sections.append(bench)
    head = ["section"] + [f"{lib} r{r}" for r in range(1, rounds + 1) for lib in libs]
    print("\nGPU SM clock while each section ran, median (lowest) MHz, from gpu_clocks.csv\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for bench in sections:
        cells = [bench]
        for r in range(1, rounds + 1):
            for lib in libs:
                span = spans[(lib, r)].get(bench, {})
                t0, t1 = span.get("start_unix_s"), span.get("end_unix_s")
                inside = [mhz for t, mhz in samples
                          if t0 is not None and t1 is not None and t0 <= t <= t1]
                cells.append(f"{statistics.median(inside):.0f} ({min(inside):.0f})"
                             if inside else "-")
        print("| " + " | ".join(cells) + " |")


def cell(peer_ms, peer_lib, ours):
    if peer_ms is None or ours is None or ours <= 0:
        return "-"
    return f"{peer_lib} {peer_ms:.3g} / {ours:.3g} = **{peer_ms / ours:.2f}**"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="folder with run_<lib>_r<N>.json")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default: all found)")
    args = ap.parse_args()
    rounds = args.rounds
    if rounds is None:
        rounds = 0
        while os.path.exists(os.path.join(args.results, f"run_sluice_r{rounds + 1}.json")):
            rounds += 1
    if rounds == 0:
        sys.exit(f"no run_sluice_r1.json in {args.results}")
    runs = {(lib, r): load(args.results, lib, r)
            for lib in ("pygfx", "vispy", "sluice") for r in range(1, rounds + 1)}
    head = ["operation"]
    for r in range(1, rounds + 1):
        head += [f"round {r}: faster peer ms / sluice copy-free ms",
                 f"round {r}: / sluice ArraySource ms"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    lowest = None
    for name, bench, peer_cases, free, array, what in ROWS:
        cells = [name]
        for r in range(1, rounds + 1):
            best = None
            for lib in ("pygfx", "vispy"):
                res = runs[(lib, r)].get(bench, {})
                for case in peer_cases:
                    v = median(res.get(case), what)
                    if v is not None and (best is None or v < best[0]):
                        best = (v, lib)
            ours = runs[("sluice", r)].get(bench, {})
            # The first of the copy-free cases the run has.
            frees = free if isinstance(free, tuple) else (free,)
            a = next((m for m in (median(ours.get(f), what) for f in frees) if m is not None),
                     None)
            b = median(ours.get(array), what)
            peer = best or (None, "")
            cells.append(cell(peer[0], peer[1], a))
            cells.append(cell(peer[0], peer[1], b))
            if best and a:
                ratio = best[0] / a
                if lowest is None or ratio < lowest[0]:
                    lowest = (ratio, name.strip(), r)
        print("| " + " | ".join(cells) + " |")
    if lowest:
        print(f"\nlowest copy-free ratio: {lowest[0]:.2f} ({lowest[1]}, round {lowest[2]})")
    clock_table(args.results, rounds)


if __name__ == "__main__":
    main()
