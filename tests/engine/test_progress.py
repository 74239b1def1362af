"""Progress off a terminal: a line every few percent, with the failing count, the rate and the time left."""
import io

from harness.engine.progress import Progress


def test_progress_prints_a_line_every_few_percent_off_a_terminal():
    stream = io.StringIO()
    bar = Progress(40, stream=stream)
    for i in range(40):
        bar.update({"verdict": "pass" if i % 4 else "inaccurate"})
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 20 and lines[-1].startswith("normdiff: 40/40 (100%), 10 failing")
    assert all("exec/s" in x and "s left" in x for x in lines)
