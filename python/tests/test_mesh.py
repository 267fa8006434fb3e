"""Meshes from numpy arrays: a dense mesh leaves out of its draw the triangles that cover no
pixel centre (`RendererOptions::mesh_cull` in Rust), and still covers every pixel it covers."""

import numpy as np

import sluice
from conftest import pixel_camera


def grid(g, lo, hi):
    """A g x g grid of vertices over [lo, hi]^2 at z 0.5, and its two triangles a cell."""
    t = np.linspace(lo, hi, g, dtype=np.float32)
    x, y = np.meshgrid(t, t)
    positions = np.stack([x, y, np.full_like(x, 0.5)], -1).reshape(-1, 3)
    q = np.arange(g * g, dtype=np.uint32).reshape(g, g)
    q0, q1, q2, q3 = q[:-1, :-1], q[:-1, 1:], q[1:, 1:], q[1:, :-1]
    faces = np.concatenate([np.stack([q0, q1, q2], -1), np.stack([q0, q2, q3], -1)]).reshape(-1, 3)
    return positions, faces


def test_a_dense_mesh_is_culled_and_covers_its_square(renderer):
    # 300 x 300 vertices over a 64-pixel square of a 128 x 128 target: 178,802 triangles of
    # about a twentieth of a pixel, most over no pixel centre.
    positions, faces = grid(300, 32.0, 96.0)
    scene = sluice.Scene()
    scene.add(sluice.Mesh(positions, indices=faces, color=(0.2, 0.6, 0.9, 1.0), shading="unlit"))
    before = renderer.counters()
    frame = renderer.render(scene, pixel_camera(128, 128), renderer.create_target(128, 128))
    after = renderer.counters()
    assert after["mesh_draws_culled"] - before["mesh_draws_culled"] == 1
    assert after["mesh_culls_run"] - before["mesh_culls_run"] == 1
    # Pixel centres inside the square by more than a pixel show the colour; those outside
    # by more than a pixel, the background (the culled draw kept every covering triangle).
    centres = np.arange(128) + 0.5
    inside = (centres > 33.0) & (centres < 95.0)
    outside = (centres < 31.0) | (centres > 97.0)
    colour = np.array([51, 153, 230, 255], np.uint8)
    assert (frame[np.ix_(inside, inside)] == colour).all()
    assert (frame[outside][:, :, :3] == 0).all()
    assert (frame[:, outside][:, :, :3] == 0).all()
    # The same view again: the cull's result is reused.
    renderer.render(scene, pixel_camera(128, 128), renderer.create_target(128, 128))
    assert renderer.counters()["mesh_culls_run"] == after["mesh_culls_run"]
