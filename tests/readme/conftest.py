"""The README tier's summary: which README lines passed only on substitutes, so a green tier is not read as
"works on upstream's files, with the embedded models, at full size"."""

from __future__ import annotations

SUBSTITUTES = {  # tag (or its start) -> what the README line ran on instead of what it names
    "shared-data": "~/toxigen-upstream was ../shared/data/toxigen-dev: upstream's demonstrations/ for 8 of its "
                   "groups, no prompts/ (not a fetched copy; --groups all plans those 8 and names the rest)",
    "shared-data-prompts-built": "~/toxigen-upstream/prompts was prompt files built from toxigen-dev for asian "
                                 "and muslim (not upstream's prompts/)",
    "-is-muslim": "a group toxigen-dev lacks (women: upstream has it only as prompts/ files) was replaced by muslim",
    "shared-davidson-200": "davidson:labeled_data.csv was a 200-tweet sample of the shared copy of Davidson et al.",
    "shared-word-list": "--lexicon upstream read the shared copy of Zhou et al.'s word list and the twitteraae model "
                        "(what `bias lexicon fetch` / `bias dialect fetch` cache)",
}


def _meaning(tag: str) -> str:
    return SUBSTITUTES.get(tag) or next((m for t, m in SUBSTITUTES.items() if tag.endswith(t)), tag)


def pytest_terminal_summary(terminalreporter):
    ran = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])
           if r.when == "call" and "readme_substitutes" in dict(r.user_properties)]
    if not ran:
        return
    write = terminalreporter.write_line
    terminalreporter.section("README lines run only on substitutes (not as a user runs them)")
    on_data = [r for r in ran if any(t.startswith("shared-data") or t.endswith("-is-muslim")
                                     for t in dict(r.user_properties)["readme_substitutes"])]
    write(f"{len(ran)} README commands ran; {len(on_data)} of them read a substitute for upstream's files, so the "
          "tier does not show that they work on a fetched ~/toxigen-upstream:")
    for report in on_data:
        line = report.nodeid.split("[", 1)[1].split("-", 1)[0]
        tags = dict(report.user_properties)["readme_substitutes"]
        write(f"  README {line} ({report.outcome}): " + "; ".join(
            _meaning(t) for t in tags if t.startswith("shared-data") or t.endswith("-is-muslim")))
    others = sorted({t for r in ran for t in dict(r.user_properties)["readme_substitutes"]
                     if not (t.startswith("shared-data") or t.endswith("-is-muslim"))})
    if others:
        write("Other substitutes (tiny models, smaller -n, ...), named in each test id: " + ", ".join(others))
