"""Load a page in a real headless browser engine and keep what it rendered: a PNG and the DOM.

    python eval/page_shot.py URL OUT.png [--size 1100x900]

Writes OUT.png (the window, grabbed after the page loaded) and OUT.html (the DOM as the engine holds
it then, like chromium's --dump-dom). The engine is Chromium inside Qt WebEngine (PyPI
``PyQt6-WebEngine``, the ``browser`` extra), run offscreen, for machines without a chromium binary;
the serving test and ``eval/bench_serve.py`` use a ``chromium`` on PATH first. Exits 1 with one line
when the page does not load within the timeout.
"""
from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("out")
    p.add_argument("--size", default="1100x900", help="Window width x height in pixels.")
    p.add_argument("--timeout", type=float, default=60.0, help="Seconds to wait for the page.")
    args = p.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no display needed
    os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")  # containers run as root
    os.environ.setdefault("QTWEBENGINE_CHROMIUM_FLAGS", "--disable-gpu --disable-background-networking")
    from PyQt6.QtCore import QTimer, QUrl
    from PyQt6.QtWidgets import QApplication
    from PyQt6.QtWebEngineWidgets import QWebEngineView

    app = QApplication([sys.argv[0]])
    view = QWebEngineView()
    view.resize(width, height)
    view.show()
    outcome = {"ok": False}

    def keep(html: str) -> None:
        with open(os.path.splitext(args.out)[0] + ".html", "w", encoding="utf-8") as f:
            f.write(html)
        outcome["ok"] = view.grab().save(args.out)
        app.quit()

    def loaded(ok: bool) -> None:
        if not ok:
            app.quit()
            return
        QTimer.singleShot(300, lambda: view.page().toHtml(keep))  # one paint after the load

    view.loadFinished.connect(loaded)
    view.load(QUrl(args.url))
    QTimer.singleShot(int(args.timeout * 1000), app.quit)
    app.exec()
    if not outcome["ok"]:
        print(f"page_shot: {args.url} did not load and render within {args.timeout:g} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
