"""Open the built tutorial site in headless Chromium and check the LLaMA tutorial's loss plot renders.

Uses Debian's chromium and chromedriver (installed by ./run_tests.sh when running as root);
selenium is told where both are, so it never downloads a browser or a driver.
"""
import functools
import http.server
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
TUTORIAL = "tutorials/02_train_tiny_llama/"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):      # keep the test output clean
        pass


@pytest.fixture
def site_server(built_site):
    """Serve the built site on 127.0.0.1 (a free port) from a background thread."""
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("headless Chromium not found: install Debian's 'chromium' and 'chromium-driver' "
                    "(./run_tests.sh does this when run as root)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the 'test' extra")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # --no-sandbox: CI runs as root; the network flags stop Chromium phoning home on a closed network
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1280,1600",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _png_pixels(path: Path) -> np.ndarray:
    import matplotlib.image
    return matplotlib.image.imread(str(path))


def test_tutorial_loss_plot_renders(site_server, browser, tmp_path):
    browser.get(site_server + TUTORIAL)
    assert "LLaMA" in browser.title, browser.title

    # the notebook's matplotlib output: an <img> holding a PNG inside the rendered notebook
    images = browser.find_elements("css selector", ".jupyter-wrapper img[src^='data:image/png']")
    assert images, "no plot image on the tutorial page"
    plot = images[0]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", plot)
    # `complete` is true once the image has loaded *or failed*; a failed one has naturalWidth 0
    loaded = browser.execute_script(
        "const im = arguments[0];"
        "const size = () => [im.naturalWidth, im.naturalHeight];"
        "return im.complete ? size() :"
        "  new Promise(r => { im.onload = () => r(size()); im.onerror = () => r(size()); });", plot)
    assert loaded[0] > 0 and loaded[1] > 0, f"plot image did not decode: {loaded}"
    box = browser.execute_script("const b = arguments[0].getBoundingClientRect(); return [b.width, b.height];", plot)
    assert box[0] > 100 and box[1] > 50, f"plot is laid out too small to see: {box}"

    page_shot = tmp_path / "tutorial_page.png"
    plot_shot = tmp_path / "loss_plot.png"
    assert browser.save_screenshot(str(page_shot))
    plot.screenshot(str(plot_shot))
    print(f"screenshots: {page_shot} {plot_shot}")

    # what the browser painted is a real plot, not a blank box: many distinct pixel values
    pixels = _png_pixels(plot_shot)
    assert pixels.shape[0] > 50 and pixels.shape[1] > 100
    assert pixels[..., :3].std() > 0.05
    assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 20


def test_site_home_page_navigates_to_the_tutorial(site_server, browser):
    browser.get(site_server)
    assert "minispore" in browser.title
    links = [a.get_attribute("href") for a in browser.find_elements("css selector", "nav a")]
    assert any(h and h.rstrip("/").endswith("tutorials/02_train_tiny_llama") for h in links), links
