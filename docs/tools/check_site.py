"""Checks the built documentation site (scripts/docs.sh runs it after sphinx-build).

1. The API reference names every public name: each of chunksampler's Python ``__all__`` names
   (docs/tools/public_names.py) is a ``py:`` object of the site's inventory (objects.inv), and each
   public C++ class, struct, enum, concept and type alias of include/chunksampler/ (read from the
   headers), and each namespace-level function Doxygen found, a ``cpp:`` object. A public name
   added without documentation fails here.
2. Every page's local links and resources (``href``, ``src``) name files that exist.
3. Headless Chromium (Debian's) loads the landing page, a tutorial and an API page from a server
   on 127.0.0.1 that records every request: each request the page makes (stylesheets, scripts,
   fonts, images) must succeed, and the screenshot must not be blank. The screenshots are kept
   (--screenshots DIR). First a page with a missing stylesheet must be caught, so the check is
   known to see a failure.

    python docs/tools/check_site.py build/docs/html --screenshots build/docs/screenshots
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from sphinx.util.inventory import InventoryFile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from public_names import cpp_names, python_names  # noqa: E402

PAGES = {
    "landing": "index.html",
    "tutorial": "tutorials/annbatch-loader.html",
    "api": "api/generated/chunksampler.DistributedSampler.html",
}


def documented_functions(xml_dir: Path) -> list[str]:
    """Namespace-level functions of the public namespaces, as Doxygen's index lists them."""
    names = []
    for compound in ET.parse(xml_dir / "index.xml").getroot().iter("compound"):
        namespace = compound.findtext("name")
        if compound.get("kind") != "namespace" or "detail" in namespace.split("::"):
            continue
        for member in compound.iter("member"):
            name = f"{namespace}::{member.findtext('name')}"
            if member.get("kind") == "function" and name not in names:
                names.append(name)
    return names


def missing_api_entries(html: Path, xml_dir: Path | None) -> list[str]:
    with open(html / "objects.inv", "rb") as stream:
        inventory = InventoryFile.load(stream, "", lambda base, uri: uri)
    python = {name for kind, entries in inventory.items() if kind.startswith("py:") for name in entries}
    cpp = {name for kind, entries in inventory.items() if kind.startswith("cpp:") for name in entries}
    expected_cpp = cpp_names() + (documented_functions(xml_dir) if xml_dir else [])
    missing = [f"Python {name}" for name in python_names() if name not in python]
    missing += [f"C++ {name}" for name in expected_cpp if name not in cpp]
    return missing


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("href", "src") and value:
                self.targets.append(value)


def broken_links(html: Path) -> list[str]:
    broken = []
    for page in sorted(html.rglob("*.html")):
        parser = _Links()
        parser.feed(page.read_text())
        for target in parser.targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or not parts.path:
                continue  # another site, mailto:, or an anchor of this page
            if not (page.parent / unquote(parts.path)).resolve().exists():
                broken.append(f"{page.relative_to(html)}: {target}")
    return broken


class _Server:
    """Serves a directory on 127.0.0.1 and records every request the browser makes with its status."""

    def __init__(self, root: Path) -> None:
        requests = self.requests = []

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def log_request(self, code="-", size="-"):
                requests.append((self.path, int(code) if str(code).isdigit() else 0))

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, relative: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{relative}"


def render(server: _Server, relative: str, screenshot: Path) -> list[str]:
    """Loads a page of SERVER in headless Chromium; returns the requests that failed (every
    stylesheet, script, font and image the page asked for), or why the screenshot is missing or
    blank."""
    server.requests.clear()
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={profile}", "--window-size=1280,1400", "--virtual-time-budget=5000",
             f"--screenshot={screenshot}", server.url(relative)],
            capture_output=True, text=True, timeout=120,
        )
    # The browser asks for /favicon.ico on its own; the site has none and names none.
    problems = [f"{path} answered {code}" for path, code in server.requests
                if (code == 0 or code >= 400) and path != "/favicon.ico"]
    if not any(path.lstrip("/") == relative for path, _ in server.requests):
        problems.append("the browser never asked for the page")
    if run.returncode != 0 or not screenshot.exists():
        return problems + [f"chromium exited with {run.returncode} and no screenshot: {run.stderr[-500:]}"]
    import matplotlib.image  # the stacks' matplotlib; imported only here

    pixels = matplotlib.image.imread(screenshot)
    if float(pixels.std()) < 0.02:
        problems.append(f"{screenshot.name} is blank (pixel std {float(pixels.std()):.4f})")
    return problems


def browser_sees_a_missing_resource(workdir: Path) -> bool:
    (workdir / "missing.html").write_text(
        '<html><head><link rel="stylesheet" href="no-such.css"></head><body><h1>a page</h1></body></html>')
    with _Server(workdir) as server:
        return any("no-such.css answered 404" in p for p in render(server, "missing.html", workdir / "missing.png"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path)
    parser.add_argument("--xml", type=Path, help="Doxygen's XML directory (default: HTML/../xml)")
    parser.add_argument("--screenshots", type=Path, required=True)
    args = parser.parse_args()
    xml_dir = args.xml or args.html.parent / "xml"
    failures = []

    missing = missing_api_entries(args.html, xml_dir if xml_dir.exists() else None)
    failures += [f"no API entry for {name}" for name in missing]
    failures += [f"broken link {link}" for link in broken_links(args.html)]

    args.screenshots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        if not browser_sees_a_missing_resource(Path(work)):
            failures.append("the browser check did not report a page's missing stylesheet")
    with _Server(args.html) as server:
        for name, relative in PAGES.items():
            if not (args.html / relative).exists():
                failures.append(f"{relative}: no such page")
                continue
            shot = args.screenshots / f"{name}.png"
            failures += [f"{relative}: {problem}" for problem in render(server, relative, shot)]

    for failure in failures:
        print(f"check_site: {failure}", file=sys.stderr)
    pages = len(list(args.html.rglob("*.html")))
    print(f"check_site: {len(python_names())} Python and {len(cpp_names())} C++ public names in the API reference, "
          f"{pages} pages' links, {len(PAGES)} pages in Chromium: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
