"""The documentation site: built with `mkdocs build --strict`, opened in headless Chromium.

Three pages (the home page, a lab sheet, an API page) must show their main
content and every image must have loaded. A screenshot of each is kept
(in $RESIDUAL_KERAS_SCREENSHOTS, else the test's temporary directory). CI
installs Debian's chromium and the `docs` extra (MkDocs, Material,
mkdocstrings, Playwright, which drives the system's Chromium: it downloads
no browser of its own); without them this file skips.
"""

import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Chromium as this machine kind runs it: headless, no sandbox (root), no background networking.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PAGES = {
    "index.html": ("residual_keras", "Quick start"),
    "lab_vision.html": ("Lab sheet: residual connections in vision", "Expected results of the quick preset"),
    "api/layers.html": ("Layers", "Residual"),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    folder = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return folder


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_site_builds_with_every_page_of_the_nav(site):
    for page in ("index.html", "running.html", "library.html", "gpu_and_docker.html", "lab_vision.html",
                 "lab_language.html", "reference/index.html", "course_vs_measured.html", "api/layers.html",
                 "api/diagnostics.html", "architecture.html", "maintainers.html"):
        assert (site / page).is_file(), page
    home = (site / "index.html").read_text()
    assert "Quick start" in home and 'href="docs/' not in home  # the README, its links made relative


def test_pages_render_their_content_and_images_in_chromium(served, tmp_path):
    if CHROMIUM is None:
        pytest.skip("no Chromium (Debian: apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api", reason="the docs extra is not installed")
    screenshots = pathlib.Path(os.environ.get("RESIDUAL_KERAS_SCREENSHOTS") or tmp_path)
    screenshots.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        for name, (title, words) in PAGES.items():
            response = page.goto(f"{served}/{name}", wait_until="load")
            assert response is not None and response.ok, name
            main = page.locator("article")
            text = main.inner_text()
            assert title in text and words in text, f"{name}: main content missing"
            images = page.evaluate(
                "Array.from(document.querySelectorAll('article img')).map(i => [i.src, i.complete, i.naturalWidth])")
            broken = [src for src, complete, width in images if not (complete and width > 0)]
            assert not broken, f"{name}: images that did not load: {broken}"
            if name == "index.html":
                assert images, "the home page shows the reference run's training curves"
            page.screenshot(path=str(screenshots / (name.replace("/", "_") + ".png")), full_page=False)
        browser.close()
    assert len(list(screenshots.glob("*.png"))) == len(PAGES)
