"""One headless Chromium per env worker, driven through Debian's chromedriver (Selenium); a fresh tab per episode.

Every episode's page is a tab of the worker's one browser: commands to the
browser are serialized by a lock (one chromedriver session, whose "current
window" is shared state), and each call switches to its own tab first. Waits
(an action settling) happen outside the lock, so episodes interleave.

A browser that dies (crash, OOM, `kill -9`) raises `BrowserCrashed` in every
episode that had a tab in it; the next `open_page` starts a new browser.
Nothing is downloaded at run time: the browser and the driver are the system's.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from envs.base import EnvCrashed

log = structlog.get_logger(__name__)

T = TypeVar("T")

WINDOW = (420, 480)
"""CSS pixels: the MiniWoB task area (160x210) and the reward panel beside it fit."""
SCALE = 2
"""Device pixels per CSS pixel: screenshots at twice the task's tiny size stay readable for a person and a VLM."""

_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # env workers run as root, where Chromium's own sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-crash-reporter",
    "--no-first-run",
    # Tabs of other episodes are background tabs: their timers and rendering must not be throttled.
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
    f"--force-device-scale-factor={SCALE}",
)


class BrowserCrashed(EnvCrashed):
    """The browser (or the episode's tab) died: the episode cannot go on; the next one gets a new browser."""


class BrowserMissing(RuntimeError):
    """Chromium or chromedriver is not installed (Debian: `apt-get install chromium chromium-driver`)."""


def find_binaries(chromium: str = "chromium", chromedriver: str = "chromedriver") -> tuple[str, str]:
    """Absolute paths of the browser and its driver (names are looked up on PATH), or `BrowserMissing`."""
    found = {name: shutil.which(name) for name in (chromium, chromedriver)}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise BrowserMissing(
            f"{' and '.join(missing)} not found: the gui setting needs Debian's chromium and chromium-driver "
            "(`make system-deps`, or `apt-get install chromium chromium-driver`)"
        )
    return found[chromium], found[chromedriver]  # type: ignore[return-value]


@dataclass
class Page:
    """One episode's tab: its window handle in the browser generation that opened it."""

    handle: str
    generation: int
    closed: bool = False


class Browser:
    def __init__(self, chromium: str = "chromium", chromedriver: str = "chromedriver"):
        self.chromium, self.chromedriver = chromium, chromedriver
        self._lock = threading.RLock()
        self._driver: Any = None
        self._anchor: str | None = None
        """A blank tab kept open: closing an episode's tab must never close the session's last window."""
        self._current: str | None = None
        """The tab chromedriver acts on now: switching is a round trip, skipped when it is already the one."""
        self.generation = 0
        """Counts browsers started: a page of an older generation lived in a browser that is gone."""
        atexit.register(self.close)

    # ---- lifecycle ---------------------------------------------------------------------
    def _start(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        chromium, chromedriver = find_binaries(self.chromium, self.chromedriver)
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for flag in _FLAGS:
            opts.add_argument(flag)
        started = time.monotonic()
        driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
        driver.set_page_load_timeout(30)
        driver.set_script_timeout(15)
        self._driver, self._anchor = driver, driver.current_window_handle
        self.generation += 1
        log.info(
            "gui.browser_started",
            generation=self.generation,
            version=driver.capabilities.get("browserVersion"),
            seconds=round(time.monotonic() - started, 2),
            pid=self.browser_pid(),
        )

    def _alive(self) -> bool:
        if self._driver is None:
            return False
        try:
            self._driver.window_handles  # a round trip through chromedriver to the browser
            return True
        except Exception:
            return False

    def _discard(self) -> None:
        driver, self._driver, self._anchor, self._current = self._driver, None, None, None
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # already dead: quit only tidies chromedriver and the profile folder
                pass

    def close(self) -> None:
        with self._lock:
            self._discard()

    # ---- pages -------------------------------------------------------------------------
    def open_page(self, url: str) -> Page:
        """A new tab showing `url`; (re)starts the browser if there is none or it died. A browser found dead only
        while the tab opens (killed an instant before: chromedriver still answered for it) is replaced once: no
        episode had started in it, so opening on a fresh one is what the caller asked for."""
        with self._lock:
            for last in (False, True):
                if not self._alive():
                    if self._driver is not None:
                        log.warning("gui.browser_replaced", generation=self.generation)
                    self._discard()
                    self._start()
                driver = self._driver
                try:
                    driver.switch_to.window(self._anchor)
                    driver.switch_to.new_window("tab")
                    page = Page(handle=driver.current_window_handle, generation=self.generation)
                    self._current = page.handle
                    driver.get(url)
                    return page
                except Exception as exc:
                    try:
                        self._raise_if_crashed(exc)
                    except BrowserCrashed:
                        if last:
                            raise
                        log.warning("gui.browser_crashed_while_opening", generation=self.generation)
                        if self._driver is not None:  # the browser lives, its new tab crashed: close that tab
                            with contextlib.suppress(Exception):
                                self._driver.close()
                            self._current = None
                        continue
                    raise
            raise AssertionError("unreachable")

    def close_page(self, page: Page) -> None:
        with self._lock:
            if page.closed:
                return
            page.closed = True
            if page.generation != self.generation or self._driver is None:
                return  # its browser is gone, and the tab with it
            try:
                self._driver.switch_to.window(page.handle)
                self._driver.close()
                self._driver.switch_to.window(self._anchor)
                self._current = self._anchor
            except Exception:  # a crashed tab or browser: the next open_page finds out and starts afresh
                self._current = None

    @contextmanager
    def on(self, page: Page) -> Iterator[Any]:
        """The driver, switched to `page`, under the lock; a dead browser or tab becomes `BrowserCrashed`."""
        with self._lock:
            if page.closed:
                raise RuntimeError("the page is closed")
            if page.generation != self.generation or self._driver is None:
                raise BrowserCrashed("the browser this episode's page lived in crashed and was replaced")
            try:
                if self._current != page.handle:
                    self._current = None  # unknown until the switch succeeds
                    self._driver.switch_to.window(page.handle)
                    self._current = page.handle
                yield self._driver
            except BrowserCrashed:
                raise
            except Exception as exc:
                self._raise_if_crashed(exc, page)
                raise

    def run(self, page: Page, fn: Callable[[Any], T]) -> T:
        with self.on(page) as driver:
            return fn(driver)

    def _raise_if_crashed(self, exc: Exception, page: Page | None = None) -> None:
        """Tell a page error (the agent's doing, reported to it) from a dead browser or tab (the episode's end)."""
        if not self._alive():
            log.warning("gui.browser_crashed", generation=self.generation, error=str(exc).splitlines()[0][:200])
            self._discard()
            raise BrowserCrashed(f"the browser crashed: {str(exc).splitlines()[0][:200]}") from exc
        if page is not None and page.handle not in self._driver.window_handles:
            raise BrowserCrashed("the episode's tab is gone (its renderer crashed)") from exc
        if "tab crashed" in str(exc) or "target crashed" in str(exc).lower():
            raise BrowserCrashed(f"the episode's tab crashed: {str(exc).splitlines()[0][:200]}") from exc

    # ---- introspection (tests, benchmarks) ----------------------------------------------
    def browser_pid(self) -> int | None:
        """The Chromium main process (chromedriver's child), or None."""
        driver = self._driver
        proc = getattr(getattr(driver, "service", None), "process", None)
        if proc is None:
            return None
        kids = _children(proc.pid)
        return kids[0] if kids else None

    def memory_bytes(self) -> int:
        """Memory of the browser and all its processes (renderers, GPU, utility), chromedriver excluded: the sum of
        their proportional set sizes, so pages the processes share count once."""
        pid = self.browser_pid()
        return sum(_pss(p) for p in _tree(pid)) if pid else 0


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as f:
                kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
    return kids


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0
