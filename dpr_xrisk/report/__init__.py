"""Reports a person can look at: PNG charts (matplotlib, headless) and one self-contained
``report.html`` from evaluation JSON, DPR retrieval JSON runs and training folders.

- :mod:`dpr_xrisk.report.load` reads and checks the inputs (clear InputError on bad input);
- :mod:`dpr_xrisk.report.charts` renders each chart kind to PNG bytes at a fixed pixel size;
- :mod:`dpr_xrisk.report.html` renders tables and the page (charts as base64 data URIs);
- :mod:`dpr_xrisk.report.build` puts them together (:func:`build_report`).

matplotlib is imported only when a chart is drawn.
"""

from __future__ import annotations


def build_report(*args, **kwargs):
    """See :func:`dpr_xrisk.report.build.build_report`."""
    from dpr_xrisk.report.build import build_report as _build

    return _build(*args, **kwargs)
