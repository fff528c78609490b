"""deployments/README.md points only at what exists: every link at a file of the repository
(and a heading of it, for a ``#section``), and its table lists every deployment of
prefect.yaml with the flow it runs."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "deployments" / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs writes it: lower case, punctuation dropped, spaces as -."""
    words = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", words)


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+://", target):
            broken.append(f"{target}: a web address, not a page of the repository")
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.is_file():
            broken.append(f"{target}: no such file")
        elif anchor:
            anchors = {slug(h) for h in HEADING.findall(path.read_text(encoding="utf-8"))}
            if anchor not in anchors:
                broken.append(f"{target}: no heading #{anchor} in {path.name}")
    return broken


def test_every_link_of_the_deployments_readme_exists() -> None:
    assert LINK.findall(README.read_text(encoding="utf-8")), "the README links its pages"
    assert broken_links(README) == []


def test_the_table_lists_every_deployment_with_its_flow() -> None:
    text = README.read_text(encoding="utf-8")
    config = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    missing = []
    for deployment in config["deployments"]:
        name, entrypoint = deployment["name"], deployment["entrypoint"]
        row = re.search(
            rf"^\| `[\w-]+/{re.escape(name)}` \| `{re.escape(entrypoint)}` \|", text, re.M
        )
        if row is None:
            missing.append(f"{name} ({entrypoint})")
    assert missing == []


def test_a_missing_page_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text("# Production and scale\n\n## Many machines\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[a](guide.md) [b](guide.md#many-machines) [c](guide.md#production) [d](nowhere.md) "
        "[e](https://example.org)"
    )
    assert [line.split(":")[0] for line in broken_links(page)] == [
        "guide.md#production",
        "nowhere.md",
        "https",
    ]
