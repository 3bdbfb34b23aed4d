"""Screenshots of `regress report`'s HTML page in headless Chromium (docs/results/html-report.md).

    .venv/bin/python experiments/html_report_screenshot.py [--out docs/results] [--before DIR]

The inputs are those of tests/test_report_html.py, built without a model: the stored baseline
(baselines/main), two candidates made from its records (same run name and model file name,
different files; the first with 40 of 500 answers flipped), the gate's JSON report of the first
against the baseline, and a bench file of both models. Writes two pages and their screenshots
at 1400 px wide (Debian's `chromium`, installed with apt when missing): every input
(html-report.png) and the same without the gate report and bench file
(html-report-no-bench.png). Prints each page's size and what it is made of, and checks in the
drawn DOM that every chart drew. `--before DIR` also renders the page with the `regress`
package found in DIR (e.g. `git archive <commit> regress | tar -x -C DIR`) for its size.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from chromium import chromium, draw  # noqa: E402 (the test helpers, found above)
from test_report_html import demo_inputs  # noqa: E402

from regress.report.html import render_page  # noqa: E402
from regress.report.sources import load_inputs  # noqa: E402

WIDTH = 1400
HEIGHTS = {"html-report": 6000, "html-report-no-bench": 2700}
"""Window heights that hold each whole page at WIDTH (10 and 4 charts)."""


def composition(text: str) -> str:
    """A page's size and its parts: the packed plotly.js, the figures' JSON, the rest."""
    total = len(text.encode())
    plotly = sum(len(m) for m in re.findall(r'id="plotly-js"[^>]*>([^<]*)<', text))
    figures = sum(
        len(m) for m in re.findall(r'type="application/json" id="fig-[^"]*">([^<]*)<', text)
    )
    count = text.count('type="application/json" id="fig-')
    rest = total - plotly - figures
    return (
        f"{total / 1e6:.2f} MB: plotly.js (gzip + base64) {plotly / 1e6:.2f} MB, "
        f"{count} figures' JSON {figures / 1e3:.0f} kB, the rest {rest / 1e3:.0f} kB"
    )


def before_size(package_dir: Path, inputs: list[Path], page: Path) -> int:
    """The page's size as the `regress` package in package_dir renders it."""
    code = (
        "import sys; from pathlib import Path; "
        "from regress.report.html import render_html; from regress.report.sources import "
        "load_inputs; Path(sys.argv[1]).write_text(render_html(load_inputs("
        "[Path(p) for p in sys.argv[2:]])))"
    )
    # cwd first on sys.path: the older package shadows the installed one.
    subprocess.run(
        [sys.executable, "-c", code, str(page), *map(str, inputs)], check=True, cwd=package_dir
    )
    return page.stat().st_size


def main() -> None:
    """Render both pages, screenshot them, check the DOM and print the sizes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results")
    parser.add_argument("--before", type=Path, help="a folder holding an older regress/")
    args = parser.parse_args()
    binary = chromium()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    print(version.strip())
    with tempfile.TemporaryDirectory() as work:
        inputs = demo_inputs(Path(work))
        pages = {"html-report": inputs, "html-report-no-bench": inputs[:3]}
        for name, given in pages.items():
            rendered = render_page(load_inputs(given), title="regress report (demo inputs)")
            page = Path(work) / f"{name}.html"
            page.write_text(rendered.text)
            png = args.out / f"{name}.png"
            dom = draw(binary, page, png, width=WIDTH, height=HEIGHTS[name])
            drawn = re.search(r'<body data-drawn="(\d+)"', dom)
            assert drawn and int(drawn.group(1)) == len(rendered.drawn), "not every chart drew"
            print(f"{name}: {len(rendered.drawn)} charts drawn, left out {rendered.left_out}")
            print(f"  {composition(rendered.text)}; screenshot {png.stat().st_size / 1e3:.0f} kB")
        if args.before:
            size = before_size(args.before, inputs, Path(work) / "before.html")
            print(f"before ({args.before}): every input, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
