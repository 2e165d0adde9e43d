"""Load a page in a real headless browser and keep what it rendered: a PNG and the DOM.

    python eval/page_shot.py URL OUT.png [--size 1100x900]

Writes OUT.png (the window after the page loaded) and OUT.html (the DOM as the browser holds it
then). The browser is a ``chromium`` on PATH, else Chromium inside Qt WebEngine (PyPI
``PyQt6-WebEngine``, the ``browser`` extra) run offscreen; ``browser()`` says which one, or None.
The serving test and ``eval/bench_serve.py`` both render through here. The URL is fetched once
first: a page that does not answer 200 is refused (exit 1, one line) instead of photographing a
browser's error page; so is a page the browser does not render within the timeout.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request


def browser() -> str | None:
    """The chromium binary's path, "qt" for Qt WebEngine, or None where neither is installed."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is not None:
        return chromium
    try:
        return "qt" if importlib.util.find_spec("PyQt6.QtWebEngineWidgets") is not None else None
    except ImportError:  # no PyQt6 at all
        return None


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT, e.g. 1100x900") from None
    if width <= 0 or height <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: width and height must be positive")
    return width, height


def _chromium(binary: str, url: str, png: str, dom: str, size: tuple[int, int], timeout: float) -> bool:
    with tempfile.TemporaryDirectory() as profile:
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]
        html = subprocess.run([binary, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=timeout).stdout
        subprocess.run([binary, *flags, f"--window-size={size[0]},{size[1]}", f"--screenshot={png}", url],
                       capture_output=True, timeout=timeout)
    with open(dom, "w", encoding="utf-8") as f:
        f.write(html)
    return bool(html) and os.path.exists(png)


def _qt(url: str, png: str, dom: str, size: tuple[int, int], timeout: float) -> bool:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no display needed
    os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")  # containers run as root
    os.environ.setdefault("QTWEBENGINE_CHROMIUM_FLAGS", "--disable-gpu --disable-background-networking")
    from PyQt6.QtCore import QTimer, QUrl
    from PyQt6.QtWidgets import QApplication
    from PyQt6.QtWebEngineWidgets import QWebEngineView

    app = QApplication([sys.argv[0]])
    view = QWebEngineView()
    view.resize(*size)
    view.show()
    outcome = {"ok": False}

    def keep(html: str) -> None:
        with open(dom, "w", encoding="utf-8") as f:
            f.write(html)
        outcome["ok"] = view.grab().save(png)
        app.quit()

    def loaded(ok: bool) -> None:
        if not ok:
            app.quit()
            return
        QTimer.singleShot(300, lambda: view.page().toHtml(keep))  # one paint after the load

    view.loadFinished.connect(loaded)
    view.load(QUrl(url))
    QTimer.singleShot(int(timeout * 1000), app.quit)
    app.exec()
    return outcome["ok"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("out", help="The PNG; the DOM goes beside it with .html.")
    p.add_argument("--size", type=_size, default=(1100, 900), help="Window WIDTHxHEIGHT in pixels (default 1100x900).")
    p.add_argument("--timeout", type=float, default=60.0, help="Seconds to wait for the page.")
    args = p.parse_args(argv)
    try:
        with urllib.request.urlopen(args.url, timeout=args.timeout) as answer:
            status = answer.status
    except urllib.error.HTTPError as e:
        status = e.code
    except (urllib.error.URLError, OSError, ValueError) as e:
        print(f"page_shot: {args.url}: {getattr(e, 'reason', e)}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"page_shot: {args.url} answered HTTP {status}", file=sys.stderr)
        return 1
    which = browser()
    if which is None:
        print("page_shot: no headless browser (install chromium, or pip install -e '.[browser]')", file=sys.stderr)
        return 1
    dom = os.path.splitext(args.out)[0] + ".html"
    if which == "qt":
        ok = _qt(args.url, args.out, dom, args.size, args.timeout)
    else:
        ok = _chromium(which, args.url, args.out, dom, args.size, args.timeout)
    if not ok:
        print(f"page_shot: {args.url} did not load and render within {args.timeout:g} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
