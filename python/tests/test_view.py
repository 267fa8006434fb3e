"""sluice.view: the window under a display (Xvfb in CI; scripts/test-python.sh starts one when
there is none), blocking and on its own thread while the script writes a source and changes a
setting; the frames the window's renderer drew are compared with the values expected.

Every window of a process runs on one window thread (winit allows one event loop per process,
run again for each window); each case runs in a Python process of its own, so that a failure in
one cannot leave a window open for the next."""

import os
import subprocess
import sys
import textwrap

import pytest

REQUIRE = os.environ.get("SLUICE_REQUIRE_WINDOW", "0") not in ("", "0")


@pytest.fixture(autouse=True)
def display():
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        if REQUIRE:
            pytest.fail("SLUICE_REQUIRE_WINDOW=1 but there is no display (run under xvfb-run)")
        pytest.skip("no display (DISPLAY / WAYLAND_DISPLAY unset); run under xvfb-run")


PRELUDE = '''
import time
import numpy as np
import sluice

BACKGROUND = (0.0, 0.0, 1.0, 1.0)  # blue: never a gray level


def gray_scene(value, clim):
    data = np.full((48, 64), value, np.float32)
    src = sluice.ArraySource(data)
    image = sluice.Image(src, clim=clim)
    scene = sluice.Scene(background=BACKGROUND)
    scene.add(image)
    return scene, image, src, data


def wait_for(handle, condition, what, limit_s=60.0):
    deadline = time.monotonic() + limit_s
    while not condition():
        if not handle.is_open:
            handle.wait()  # raises the window's error
            raise AssertionError(f"the window closed before {what}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def image_pixels(frame):
    """The frame's pixels that show the image (not the blue background)."""
    rgb = frame[..., :3].reshape(-1, 3).astype(int)
    return rgb[~((rgb[:, 0] == 0) & (rgb[:, 1] == 0) & (rgb[:, 2] == 255))]
'''


def run_alone(body):
    """Runs `body` (after PRELUDE) in a new interpreter; its assertions are the test's."""
    code = PRELUDE + textwrap.dedent(body) + "\nprint('case passed')\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and "case passed" in run.stdout, (
        f"exit status {run.returncode}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}")


def test_a_blocking_window_draws_the_scene():
    run_alone('''
        scene, _, _, _ = gray_scene(1.0, (0.0, 1.0))
        report = sluice.view(scene, size=(160, 120), controls=False, frames=3)
        assert report["frames"] == 3 and report["frames_rendered"] >= 1, report
        frame = report["last_frame"]
        assert frame.ndim == 3 and frame.shape[2] == 4 and frame.dtype == np.uint8
        shown = image_pixels(frame)
        assert len(shown) > 0.2 * frame.shape[0] * frame.shape[1], "the image fills the view"
        assert (shown == 255).all(), "value 1.0 at clim (0, 1) is white"
        # The next window of the process opens once this one closed (winit's one event loop
        # runs again): a black image this time.
        black, _, _, _ = gray_scene(0.0, (0.0, 1.0))
        report = sluice.view(black, size=(160, 120), controls=False, frames=3)
        assert report["frames"] == 3, report
        shown = image_pixels(report["last_frame"])
        assert len(shown) > 0 and (shown == 0).all(), f"levels shown: {np.unique(shown)}"
        # One window at a time: while one is open, another is refused, said as such; once it
        # is closed, the next opens.
        handle = sluice.view(scene, block=False, size=(160, 120), controls=False)
        try:
            sluice.view(black, frames=1)
        except sluice.SluiceError as e:
            assert "one window at a time" in str(e), e
        else:
            raise AssertionError("a second window opened beside the first")
        handle.close()
        handle.wait(timeout=60)
        report = sluice.view(scene, size=(160, 120), controls=False, frames=2)
        assert report["frames"] == 2 and (image_pixels(report["last_frame"]) == 255).all()
    ''')


def test_a_window_closed_as_soon_as_it_was_asked_for_closes():
    # close() right after view(block=False) usually reaches the window thread before its window
    # opens (that close was once lost, and the window stayed open); then no frame is drawn.
    run_alone('''
        scene, _, _, _ = gray_scene(1.0, (0.0, 1.0))
        for _ in range(5):
            handle = sluice.view(scene, block=False, size=(160, 120), controls=False)
            handle.close()
            report = handle.wait(timeout=60)
            assert not handle.is_open
            if report["frames"] == 0:
                assert report["last_frame"] is None, report
        report = sluice.view(scene, size=(160, 120), controls=False, frames=2)
        assert report["frames"] == 2 and (image_pixels(report["last_frame"]) == 255).all()
    ''')


def test_a_window_on_its_own_thread_shows_writes_and_settings_from_the_script():
    run_alone('''
        scene, image, src, data = gray_scene(0.0, (0.0, 1.0))
        frames = 40
        handle = sluice.view(scene, block=False, size=(160, 120), controls=False, frames=frames)
        assert isinstance(handle, sluice.ViewHandle)
        wait_for(handle, lambda: handle.frames >= 2, "the first frames")
        uploaded = handle.counters()["bytes_uploaded"]
        assert uploaded >= data.nbytes, "the first frame uploaded the image"
        # The script keeps going while the window runs: a write into the source and a setting.
        src[:, :] = 0.5
        image.clim = (0.0, 0.5)  # 0.5 is now the top of the range: white
        while handle.is_open:
            handle.redraw()
            time.sleep(0.02)
        report = handle.wait(timeout=60)
        assert report["frames"] == frames, report
        shown = image_pixels(report["last_frame"])
        assert len(shown) > 0
        # Stale data would be black (0.0), a stale clim gray 128: both are ruled out.
        assert (shown == 255).all(), f"levels shown: {np.unique(shown)}"
        assert handle.counters()["bytes_uploaded"] >= uploaded + data.nbytes
    ''')


def test_close_ends_a_window_on_its_own_thread():
    run_alone('''
        scene, _, _, _ = gray_scene(0.25, (0.0, 1.0))
        handle = sluice.view(scene, block=False, size=(120, 90), controls=False)
        wait_for(handle, lambda: handle.frames >= 1, "the first frame")
        assert handle.is_open
        try:
            handle.wait(timeout=0.05)
        except TimeoutError as e:
            assert "still open after 0.05 s" in str(e), e
        else:
            raise AssertionError("wait(timeout=0.05) returned with the window open")
        handle.close()
        report = handle.wait(timeout=60)
        assert not handle.is_open
        assert isinstance(report, dict)
        try:
            handle.wait()
        except ValueError as e:
            assert "taken by an earlier wait" in str(e), e
        else:
            raise AssertionError("a second wait() returned")
    ''')


def test_bad_view_arguments_raise():
    import sluice

    scene = sluice.Scene()
    with pytest.raises(ValueError, match="frames=0"):
        sluice.view(scene, frames=0)
    with pytest.raises(TypeError):
        sluice.view("not a scene")
