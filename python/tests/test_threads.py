"""Python threads sharing a renderer, a scene and sources: no deadlock, consistent frames."""

import threading

import numpy as np

import sluice
from conftest import pixel_camera
from test_custom_source import Ramp


def test_renders_in_a_thread_while_another_writes_and_changes_settings(renderer):
    data = np.zeros((128, 128), np.uint8)
    src = sluice.ArraySource(data)
    ramp = Ramp()  # a Python source: the render thread takes the GIL inside each frame
    scene = sluice.Scene()
    image = sluice.Image(src)
    scene.add(image)
    node = scene.add(sluice.Image(ramp))
    scene.set_position(node, 0.0, 128.0)
    target = renderer.create_target(128, 160)
    camera = pixel_camera(128, 160)
    errors = []

    def draw():
        try:
            for _ in range(20):
                renderer.draw(scene, camera, target)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=draw)
    t.start()
    for i in range(20):
        src[0:64, 0:64] = i
        image.clim = (0, 255 - i)
        ramp.offset = i
        ramp.mark_dirty()
    t.join(timeout=60)
    assert not t.is_alive(), "the render thread is stuck"
    assert not errors, errors
    image.clim = (0, 255)
    frame = renderer.render(scene, camera, target)
    assert (frame[0:64, 0:64, 0] == 19).all()
    assert (frame[64:128, :, 0] == 0).all()
    want = (np.arange(64) * 2 + 19) % 256  # the ramp is 32 x 64
    assert (frame[128:160, :64, 0] == want[None, :]).all()
