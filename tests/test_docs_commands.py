"""Every command in the README and docs/ is one the project accepts today, and every path they name
exists: `posenc-run` lines compose (and pass the cell checks), `posenc-table`, `posenc-pe` and
fairseq lines parse with the tools' own parsers, `make` targets dry-run, scripts know their
subcommands and flags. The pages are read when the tests run, so later edits are checked too."""

import pytest

from docs_commands import page_failures, shell_commands
from docs_markdown import REPO, pages


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_and_path_on_the_page_holds(page):
    failures = page_failures(page, REPO)
    assert not failures, "commands or paths that do not hold:\n" + "\n".join(failures)


def test_a_shell_block_is_cut_into_its_commands():
    source = ("# a comment\n"
              "posenc-run -m placement=both,none \\\n"
              "  seed=1   # trailing comment\n"
              "ls -d a* | xargs -n 1 wandb sync && make lint\n"
              "posenc-pe sinusoidal [--variant paper|fairseq] --out x\n")
    assert list(shell_commands(source)) == [
        (1, ["posenc-run", "-m", "placement=both,none", "seed=1"]),
        (3, ["ls", "-d", "a*"]), (3, ["xargs", "-n", "1", "wandb", "sync"]), (3, ["make", "lint"]),
        (4, ["posenc-pe", "sinusoidal", "[--variant", "paper|fairseq]", "--out", "x"]),
    ]


# A page with one good line of each kind and one wrong line of each kind; the checker must name
# exactly the wrong ones, each on its own line.
PAGE = """# A copy of a page, with mistakes

```bash
posenc-run placement=source seed=2
posenc-run placement=souce seed=2
posenc-run budget.max_epochz=3
posenc-run -m experiment=table4 placement=both,sideways
posenc-run placement=both,none
posenc-run model=nosuchmodel
posenc-run --cfg job placement=none
posenc-run -m --cfg job placement=both,none
posenc-table results/table4 --format csv --baseline placement=none
posenc-table results/table4 --formatt csv
posenc-table results/table4 --format xml
posenc-table results/table4 --buckets 20,10
posenc-pe sinusoidal --dim 512 --max-len 1024 [--variant paper|fairseq] --out pe
posenc-pe sinusoidal --dim 512 --max-len 1024 --outdir pe
make table4 TABLE4_ARGS=
make tabel4
make table4 TABLE4_ARG=
scripts/slurm_local.sh status
scripts/slurm_local.sh restart
frobnicate --all
```

Prose may quote a tool in part (`posenc-table --format csv`, `posenc-pe bases`) but not wrongly
(`posenc-table --colour`, `posenc-table SWEEP [--format md|xml]`), and the files it names exist
(`tests/conftest.py`, `posenc/harness/config/spec.py`, `tests/hydra_helpers.py`, `hydra_helpers.py`),
unless the tools write them (`results/table4/placement=both,seed=1/`).
"""


def test_the_checker_names_each_wrong_command_and_path(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "copy.md"
    page.write_text(PAGE)
    failures = page_failures(page, tmp_path)
    assert [line.split(": `", 1)[0] for line in failures] == [
        "docs/copy.md:5", "docs/copy.md:6", "docs/copy.md:7", "docs/copy.md:8", "docs/copy.md:9", "docs/copy.md:11",
        "docs/copy.md:13", "docs/copy.md:14", "docs/copy.md:15", "docs/copy.md:17", "docs/copy.md:19",
        "docs/copy.md:20", "docs/copy.md:22", "docs/copy.md:23",
        "docs/copy.md:27", "docs/copy.md:27", "docs/copy.md:28", "docs/copy.md:28",
    ], "\n".join(failures)
    why = "\n".join(failures)
    for expected in ("placement='souce' is not allowed; allowed: both, source, target, none",
                     "Could not override 'budget.max_epochz'",
                     "placement='sideways' is not allowed",
                     "placement=both,none sweeps over values: it needs -m",
                     "Could not find 'model/nosuchmodel'",
                     "posenc-run: Hydra refuses --cfg with -m",
                     "unrecognized arguments: --formatt csv",
                     "argument --format: invalid choice: 'xml'",
                     "--buckets '20,10': edges must be positive and strictly increasing",
                     "posenc-pe sinusoidal: error: the following arguments are required: --out",
                     "No rule to make target 'tabel4'",
                     "the Makefile reads no variable TABLE4_ARG",
                     "scripts/slurm_local.sh has no subcommand restart (it has: down, status, up)",
                     "no check for `frobnicate`",
                     "posenc-table has no flag --colour",
                     "posenc-table --format xml: not one of {csv,latex,md}",
                     "no such path tests/hydra_helpers.py",
                     "no file hydra_helpers.py in the repository"):
        assert expected in why, f"{expected!r} not reported in:\n{why}"


def test_fairseq_lines_parse_with_fairseqs_own_parser(tmp_path):
    page = tmp_path / "plugin.md"
    page.write_text("```bash\n"
                    "fairseq-train data-bin --user-dir posenc/fairseq_plugin --arch posenc_transformer "
                    "--encoder-pos rope --decoder-pos rope ...\n"
                    "fairseq-train data-bin --user-dir /abs/path/posenc/fairseq_plugin --arch posenc_transformer "
                    "--encoder-poss rope\n"
                    "fairseq-train data-bin --user-dir posenc/fairseq_plugin --arch posenc_fconv --encoder-pos rope\n"
                    "```\n")
    failures = page_failures(page, tmp_path)
    assert len(failures) == 2, "\n".join(failures)
    assert failures[0].startswith("plugin.md:3: ") and "unrecognized arguments: --encoder-poss rope" in failures[0]
    assert failures[1].startswith("plugin.md:4: ") and "invalid choice: 'rope'" in failures[1]


def test_a_users_config_dir_composes_with_its_presets(tmp_path):
    """``--config-dir DIR`` adds the user's presets (docs/own-data.md, "Your own presets") as
    ``hydra.searchpath`` does: the worked example's presets compose, a missing one or directory is named."""
    page = tmp_path / "presets.md"
    page.write_text("```bash\n"
                    "posenc-run -m --config-dir examples/my_presets experiment=my_table4 budget=smoke\n"
                    "posenc-run --config-dir=examples/my_presets data=tiny_synthetic model=fconv_tiny\n"
                    "posenc-run -m 'hydra.searchpath=[file://examples/my_presets]' experiment=my_table4\n"
                    "posenc-run --config-dir examples/my_presets experiment=their_table4\n"
                    "posenc-run --config-dir examples/no_presets experiment=my_table4\n"
                    "posenc-run experiment=my_table4\n"
                    "posenc-run --config-dir examples/my_presets +experiment=my_table4 placement=none\n"
                    "```\n")
    failures = page_failures(page, tmp_path)
    assert [line.split(": `", 1)[0] for line in failures] == ["presets.md:5", "presets.md:6", "presets.md:7"], \
        "\n".join(failures)
    assert "Could not find 'experiment/their_table4'" in failures[0]
    assert "posenc-run --config-dir examples/no_presets: no such directory" in failures[1]
    assert "Could not find 'experiment/my_table4'" in failures[2]
