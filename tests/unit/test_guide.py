"""docs/guide.md runs: its ```python blocks, in order, as one script on the interpreter.

Each block checks its own results (against the kernels launched eagerly, bit for bit), so the
guide cannot drift from the library. The script is written to a file (Triton reads a kernel's
source from its file) and imported as a module in a fresh process with TRITON_INTERPRET=1, on
this checkout (``torch.export.save`` refuses kernels that live in ``__main__``: another process
could not import them).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide.md"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.S | re.M)


def test_blocks_are_found() -> None:
    text = GUIDE.read_text()
    blocks = python_blocks(text)
    assert len(blocks) == text.count("```python") > 0
    assert python_blocks("a\n```python\nx = 1\n```\nb\n```bash\nls\n```\n") == ["x = 1\n"]


def test_guide_runs(tmp_path: Path) -> None:
    script = tmp_path / "guide_example.py"
    script.write_text("\n\n".join(python_blocks(GUIDE.read_text())))
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("FUNCTIONAL_TRITON_CHECK_BOUNDS", None)
    result = subprocess.run(
        [sys.executable, "-c", "import guide_example"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"docs/guide.md failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
