"""mkdocs hook: the pages made from the code, generated at every build (none committed).

Registered in ``mkdocs.yml`` (``hooks:``). ``on_files`` adds, as generated files:

- ``index.md``: the README, its ``docs/`` links made relative to the site, after
  checking that every relative link of the README resolves in the repository and that
  it stays under ``README_LIMIT`` bytes (either fails a ``--strict`` build);
- ``reference/cli.md``: the ``lblab`` command tree (Typer's app as click commands): each
  command's help, usage, options, types and defaults;
- ``reference/config.md``: the experiment config keys (``config_layers.DEFAULTS``, the
  ``runconfig`` docstring, each key's field docstring or comment, its ``lblab run`` flag);
- ``reference/presets.md``: the preset files in ``experiment/presets/``;
- ``reference/results.md``: the results tables (``results.SCHEMAS``, the record
  columns, the window labels), failure kinds and origins, metrics, ``winners.json``;
- ``reference/checks.md``: the validity checks (``lblab.validity``'s docstring and thresholds);
- ``reference/strategies.md``: the registry, each strategy's options and docstring.

``on_page_markdown`` fills the generated parts of ``architecture.md`` (the floors, the
ports between them, the contracts: ``docs/architecture_gen.py``, from the import graph)
and checks that its hand-written flows name only files and names that exist (a
problem fails the build).

Docstrings are reStructuredText-ish; ``rst_to_md`` turns what lblab's use (double
backticks, ``::`` literal blocks, simple tables) into Markdown.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import logging
import re
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import architecture_gen  # docs/, on sys.path while mkdocs loads this hook
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.lblab")

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
README_LIMIT = 12_000
"""Bytes: a README a newcomer reads in five minutes."""

_LINK = re.compile(r"(!?\[[^\]]*\])\(([^)\s]+)\)")


# --- the README as the home page ------------------------------------------------------


def check_readme(text: str) -> list[str]:
    """Problems of the README: size, and relative links that resolve to nothing."""
    problems = []
    size = len(text.encode())
    if size > README_LIMIT:
        problems.append(f"README.md is {size} bytes, over the {README_LIMIT} limit")
    for _, target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (REPO / path).exists():
            problems.append(f"README.md links to {target}, which does not exist")
    return problems


def home_page(text: str) -> str:
    """The README with its ``docs/`` links relative to the docs folder."""
    return _LINK.sub(
        lambda m: f"{m.group(1)}({m.group(2).removeprefix('docs/')})",
        text,
    )


# --- docstrings -----------------------------------------------------------------------


def _code_spans(text: str) -> str:
    return re.sub(r"``(.+?)``", r"`\1`", text)


def _simple_table(lines: Sequence[str]) -> list[str]:
    """An RST simple table (``===  ===`` rules) as a Markdown table. A row whose first
    cell is empty continues the row above: in the widest column (the prose) its words
    join the sentence, in the others they start a new line."""
    rule = lines[0]
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", rule)]
    starts = [a for a, _ in spans]
    prose = max(range(len(spans)), key=lambda i: spans[i][1] - spans[i][0])
    rows: list[list[str]] = []
    header: list[str] | None = None
    for line in lines[1:]:
        if re.fullmatch(r"[= ]+", line):
            if header is None and rows:
                header, rows = rows[0], []
            continue
        if not line.strip():
            continue
        cells = [""] * len(starts)
        for m in re.finditer(r"\S+(?: \S+)*", line):
            col = max(i for i, s in enumerate(starts) if s <= m.start() + 1)
            cells[col] = f"{cells[col]} {m.group()}".strip()
        if rows and not cells[0]:
            rows[-1] = [
                (f"{a} {b}" if i == prose else f"{a}\0{b}").strip(" \0") if b else a
                for i, (a, b) in enumerate(zip(rows[-1], cells, strict=True))
            ]
        else:
            rows.append(cells)
    if header is None:
        header = [""] * len(starts)

    def cell(text: str) -> str:
        return _cell(_code_spans(text)).replace("\0", "<br>")

    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def rst_to_md(doc: str | None) -> str:
    """A docstring as Markdown: code spans, literal blocks, simple tables."""
    lines = inspect.cleandoc(doc or "").splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.fullmatch(r"=+( +=+)+", line.strip()):
            j = i + 1
            rules = 1
            while j < len(lines) and rules < 3:
                if re.fullmatch(r"=+( +=+)+", lines[j].strip()):
                    rules += 1
                j += 1
            indent = len(line) - len(line.lstrip())
            table = [t[indent:] for t in lines[i:j]]
            if out and out[-1].strip():
                out.append("")
            out += _simple_table(table)
            out.append("")
            i = j
            continue
        if line.rstrip().endswith("::"):
            head = line.rstrip()[:-2].rstrip()
            if head:
                out.append(_code_spans(head) + ":")
            block: list[str] = []
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" ")):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```text", *textwrap.dedent("\n".join(block)).strip("\n").split("\n")]
            out += ["```", ""]
            i = j
            continue
        out.append(_code_spans(line))
        i += 1
    return "\n".join(out).strip() + "\n"


def _cell(text: object) -> str:
    """Text for a Markdown table cell: one line, pipes and angle brackets escaped
    outside code spans."""
    parts = re.split(r"(`[^`]*`)", " ".join(str(text).split()))
    return "".join(
        p.replace("|", "\\|")
        if p.startswith("`")
        else p.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("*", "\\*")
        for p in parts
    )


def _prose(text: str) -> str:
    """Help text as a paragraph: angle brackets escaped outside code spans."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(
        p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")
        for p in parts
    )


def field_docs(cls: type) -> dict[str, str]:
    """Each annotated field of ``cls`` with the string after it, else the comment on its
    line, else the comment lines just above it."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    docs: dict[str, str] = {}
    body = node.body
    for k, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        name = stmt.target.id
        nxt = body[k + 1] if k + 1 < len(body) else None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[name] = _code_spans(" ".join(str(nxt.value.value).split()))
            continue
        line = lines[stmt.lineno - 1]
        if "#" in line:
            docs[name] = _code_spans(line.split("#", 1)[1].strip())
            continue
        above = []
        j = stmt.lineno - 2
        while j >= 0 and lines[j].strip().startswith("#"):
            above.insert(0, lines[j].strip().lstrip("#").strip())
            j -= 1
        if above:
            docs[name] = _code_spans(" ".join(above))
    return docs


def source_docstring(module: str) -> str:
    """A lblab module's docstring, read from its source: a module compiled by mypyc
    (``lblab/compiled.py``) has none at run time."""
    from lblab.compiled import source_of

    doc = ast.get_docstring(ast.parse(source_of(module).read_text()))
    if not doc:
        raise ValueError(f"{module} has no docstring: the reference page needs one")
    return doc


def constant_docs(module: Any) -> list[tuple[str, str, str]]:
    """Module-level UPPER_CASE numeric constants: (names, value(s), docstring after)."""
    tree = ast.parse(inspect.getsource(module))
    out = []
    for k, stmt in enumerate(tree.body):
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        target = stmt.targets[0]
        names = [target] if isinstance(target, ast.Name) else getattr(target, "elts", [])
        ids = [n.id for n in names if isinstance(n, ast.Name)]
        if not ids or not all(i.isupper() for i in ids):
            continue
        values = [getattr(module, i) for i in ids]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            continue
        nxt = tree.body[k + 1] if k + 1 < len(tree.body) else None
        doc = ""
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            doc = " ".join(str(nxt.value.value).split())
        out.append((", ".join(ids), ", ".join(f"{v:g}" for v in values), doc))
    return out


def toml_value(value: Any) -> str:
    """A default as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


GENERATED = (
    "*Generated from the code at every build of this site (`docs/hooks.py`); "
    "edit the code, not this page.*\n\n"
)


# --- the CLI --------------------------------------------------------------------------


def _type_name(param: Any) -> str:
    """The value's type: Typer's parameters say it with ``bare_type``, click's with ``type``."""
    if getattr(param, "is_flag", False):
        return "flag"
    kind = getattr(param, "type", None)
    choices = getattr(kind, "choices", None)
    if choices:
        return " \\| ".join(str(c) for c in choices)
    name = str(param.bare_type()) if hasattr(param, "bare_type") else str(kind.name)
    names = {"str": "text", "int": "integer", "float": "number", "Path": "path"}
    name = re.sub(r"\w+", lambda m: names.get(m.group(), m.group()), name)
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    if lo is not None or hi is not None:
        name += f" {'' if lo is None else lo}..{'' if hi is None else hi}"
    return name


def _default(param: Any) -> str:
    value = param.default
    if callable(value) or value is None or value == () or value == []:
        return ""
    if getattr(param, "is_flag", False):
        if getattr(param, "secondary_opts", None):
            return param.opts[0] if value else param.secondary_opts[0]
        return "" if value is False else "on"
    return f"`{value}`"


def _command_section(cmd: Any, ctx: Any, path: str, depth: int) -> list[str]:
    """One command's heading, usage, help and options, then its subcommands (the
    root's at the same depth as the root, a group's one deeper)."""
    out = [f"{'#' * depth} {path}", ""]
    pieces = " ".join(cmd.collect_usage_pieces(ctx))
    out += ["```text", f"{path} {pieces}".rstrip(), "```", ""]
    helptext = inspect.cleandoc(cmd.help or "").replace("\b\n", "")
    out += [_prose(helptext), ""]
    params = [p for p in cmd.params if p.name != "help"]
    if params:
        out += ["| argument or option | type | default | what |", "|---|---|---|---|"]
        for p in params:
            if p.param_type_name == "argument":
                flag = f"`{(p.metavar or p.name).upper()}`"
            else:
                flag = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            what = getattr(p, "help", None) or ""
            if p.required:
                what = f"(required) {what}"
            if getattr(p, "multiple", False) and "repeat" not in what:
                what += " (repeatable)"
            out.append(
                f"| {flag} | {_type_name(p)} | {_default(p)} | {_cell(what.replace('%%', '%'))} |"
            )
        out.append("")
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            sub_ctx = sub.context_class(sub, info_name=name, parent=ctx)
            child = depth if path == "lblab" else min(depth + 1, 4)
            out += _command_section(sub, sub_ctx, f"{path} {name}", child)
    return out


def cli_page() -> str:
    import typer.main

    from lblab.cli import app

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="lblab")
    out = [
        "# Command line",
        "",
        GENERATED
        + "Every `lblab` command with its options, as `lblab COMMAND --help` prints them. "
        "Bad input is one line on stderr and exit code 2 from every command; results that "
        "could not be written (a full disk) one line and exit code 74.",
        "",
        "| command | what |",
        "|---|---|",
    ]
    for name in root.list_commands(ctx):
        sub = root.get_command(ctx, name)
        first = inspect.cleandoc(sub.help or "").split("\n\n")[0]
        anchor = f"lblab-{name}"
        out.append(f"| [`lblab {name}`](#{anchor}) | {_cell(' '.join(first.split()))} |")
    out.append("")
    out += _command_section(root, ctx, "lblab", 2)
    return "\n".join(out)


# --- config, presets ------------------------------------------------------------------


KEY_NOTES = {
    "run.name": "the run's name: the folder is results/<name>-<time>",
    "run.request_timeout": "the balancer's deadline per request (`lblab balancer --request-timeout`)",
    "load.model": "closed: Locust users, each sends when its last answer came; open: "
    "request k is due at t0 + k/rate whatever the answers; trace: a recorded trace's sends "
    "replayed on their schedule (a trace scenario's model)",
    "load.spawn_rate": "users started per second (closed model)",
    "load.think_time": "[min, max] seconds a user waits between requests (closed model)",
    "load.rate": "requests per second over all generators (open model; trace model: the "
    "mean the replay is time-scaled to, 0 for the trace's own)",
    "load.arrival": "constant (evenly spaced) or poisson (open model)",
    "testbed.kind": "local: the run starts servers, agents and balancer on this host; "
    "external: they run elsewhere (ansible) and the run drives them",
    "testbed.agent_interval": "seconds between an agent's CPU samples",
    "testbed.balancer_args": "extra `lblab balancer` flags for the local testbed, e.g. "
    '["--admin-port", "9100"]',
}
"""What a key means where the code gives it no docstring or comment (keep it short)."""


def config_page() -> str:
    import typer.main

    from lblab.cli import app
    from lblab.experiment import config_layers, runconfig
    from lblab.loadtests.isolation import ISOLATION_METHODS
    from lblab.loadtests.openloop import ARRIVALS
    from lblab.scenarios import BUILTIN_SCENARIOS, CELLS, TRACE_SCENARIOS
    from lblab.traces import BUILTIN_TRACES

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="lblab")

    def flags_of(command: str) -> dict[str, str]:
        cmd = root.get_command(ctx, command)
        return {
            opt: (getattr(p, "help", None) or "")
            for p in cmd.params
            if p.param_type_name == "option"
            for opt in p.opts
        }

    run_flags, server_flags = flags_of("run"), flags_of("server")
    docs = {
        "run": field_docs(runconfig.RunConfig),
        "load": field_docs(runconfig.LoadConfig),
        "testbed": field_docs(runconfig.TestbedConfig),
    }
    out = [
        "# Config keys",
        "",
        GENERATED + "An experiment is configured in layers: built-in defaults, then a preset "
        "(`--preset`, [the preset files](presets.md)), then a TOML file (`--config`), then "
        "flags. `lblab run --print-config` prints the resolved config as TOML that "
        "`--config` takes back. How to write one: "
        "[Write an experiment file](../guides/experiment-file.md).",
        "",
        "## The shape (`lblab.experiment.runconfig`)",
        "",
        rst_to_md(runconfig.__doc__),
    ]
    for table in ("run", "load", "testbed"):
        out += [
            f"## `[{table}]`",
            "",
            "| key | default | flag | what |",
            "|---|---|---|---|",
        ]
        for key, value in config_layers.DEFAULTS[table].items():
            flag = f"--{key.replace('_', '-')}"
            what = (
                docs[table].get(key) or KEY_NOTES.get(f"{table}.{key}") or run_flags.get(flag, "")
            )
            shown = f"`{flag}`" if flag in run_flags else ""
            out.append(f"| `{key}` | `{toml_value(value)}` | {shown} | {_cell(what)} |")
        out.append("")
    simulate_flags = flags_of("simulate")
    out += [
        "## `[simulator]`",
        "",
        "What only the simulated testbed has, each key `lblab simulate`'s flag of its name "
        "(a live testbed refuses the table; a file run on both gives it as "
        "`[simulated.simulator]`):",
        "",
        "| key | flag | what |",
        "|---|---|---|",
        *(
            f"| `{key}` | `--{key.replace('_', '-')}` | "
            f"{_cell(simulate_flags.get('--' + key.replace('_', '-'), ''))} |"
            for key in config_layers.SIMULATOR_KEYS
        ),
        "",
    ]
    servers = config_layers.DEFAULTS["servers"]
    out += [
        "## `[[servers]]` and `[weights]`",
        "",
        "The default servers and weights (a preset or config file replaces the whole list):",
        "",
        "```toml",
        *(
            "[[servers]]\n" + "\n".join(f"{k} = {toml_value(v)}" for k, v in s.items())
            for s in servers
        ),
        "",
        "[weights]",
        *(f"{k} = {toml_value(v)}" for k, v in config_layers.DEFAULTS["weights"].items()),
        "```",
        "",
        "| server key | what (`lblab server` flag) |",
        "|---|---|",
        "| `id` | the server's name in the results and the weights |",
        *(
            f"| `{k}` | {_cell(server_flags.get('--' + k.replace('_', '-'), ''))} |"
            for k in runconfig.SERVER_KEYS
        ),
        "",
        "`[strategy_options.NAME]`, `[scenario_defs.NAME]` and `[[timeline]]` are empty by "
        "default; their keys are in the shape above.",
        "",
        "## Values",
        "",
        "| key | one of |",
        "|---|---|",
        f"| `load.model` | {', '.join(f'`{m}`' for m in runconfig.MODELS)} |",
        f"| `load.arrival` | {', '.join(f'`{a}`' for a in ARRIVALS)} |",
        f"| `testbed.kind` | {', '.join(f'`{k}`' for k in runconfig.TESTBEDS)} |",
        f"| `testbed.isolation` | {', '.join(f'`{m}`' for m in ISOLATION_METHODS)} |",
        f"| `timeline.action` | {', '.join(f'`{a}`' for a in runconfig.ACTIONS)} |",
        f"| `run.scenarios` | {', '.join(f'`{s}`' for s in BUILTIN_SCENARIOS)} (the default), "
        f"the trace scenarios {', '.join(f'`{s}`' for s in TRACE_SCENARIOS)}, or a "
        "`[scenario_defs.NAME]` |",
        f"| `load.trace` | {', '.join(f'`{t}`' for t in BUILTIN_TRACES)}, or a CSV file |",
        "",
        "The built-in cells (package size x work volume; `variation` draws one of the nine "
        "per request):",
        "",
        "| cell | package bytes | work bytes |",
        "|---|---|---|",
        *(f"| `{c.name}` | {c.package_bytes:,} | {c.work_bytes:,} |" for c in CELLS.values()),
        "",
        "The built-in traces (`lblab/traces.py`; each is also the trace scenario of its name, "
        "see [Replay a trace](../guides/experiment-file.md#replay-a-trace)):",
        "",
        "| trace | what |",
        "|---|---|",
        *(f"| `{name}` | {_cell(t.about)} |" for name, t in BUILTIN_TRACES.items()),
        "",
        "## Bounds",
        "",
        "Values past these are refused as typos (exit 2):",
        "",
        "| constant | value |",
        "|---|---|",
        *(f"| `{n}` | {v} |" for n, v, _ in constant_docs(runconfig) if n.startswith("MAX_")),
        "",
    ]
    return "\n".join(out)


def presets_page() -> str:
    from lblab.config import load_toml
    from lblab.experiment import presets

    out = [
        "# Presets",
        "",
        GENERATED + "`lblab run --preset NAME` starts from one of these files "
        "(`lblab/experiment/presets/`); a config file and flags override any key. "
        "The keys are on [Config keys](config.md).",
        "",
        "| preset | strategies | scenarios | warm-up + duration | blocks |",
        "|---|---|---|---|---|",
    ]
    sections = []
    for name in presets.preset_names():
        path = presets.PRESET_DIR / f"{name}.toml"
        text = path.read_text()
        data = load_toml(path)
        run = data.get("run", {})
        blocks = str(run.get("replications", "3 (default)"))
        if run.get("max_replications"):
            blocks += f" to {run['max_replications']} (adaptive"
            blocks += f", budget {run['budget']})" if run.get("budget") else ")"
        strategies = ", ".join(run.get("strategies", [])) or "the thesis five (default)"
        scenarios = ", ".join(run.get("scenarios", [])) or "all (default)"
        warm = run.get("warmup", "30s (default)")
        length = run.get("duration", "")
        if length in ("", "0s", 0):
            length = "by request count"
        out.append(
            f"| [`{name}`](#{name}) | {_cell(strategies)} | {_cell(scenarios)} | "
            f"{_cell(f'{warm} + {length}')} | {_cell(blocks)} |"
        )
        comment = []
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            comment.append(line.lstrip("#").strip())
        sections += [
            f"## {name}",
            "",
            _prose(" ".join(comment)),
            "",
            "```toml",
            text.strip(),
            "```",
            "",
        ]
    return "\n".join([*out, "", *sections])


# --- results ----------------------------------------------------------------------------


def results_page() -> str:
    from lblab import failures, results, windows
    from lblab.analysis import metrics
    from lblab.analysis.run import decide
    from lblab.loadtests import record_table, records

    out = [
        "# Results files",
        "",
        GENERATED + "How to read a run: [Read a run](../guides/read-a-run.md).",
        "",
        "## The contract (`lblab.results`)",
        "",
        rst_to_md(results.__doc__),
        "## Required columns (`results.SCHEMAS`)",
        "",
        "Every writer (the runner, the simulator, the ansible fetch) writes at least these "
        "columns with these types; it may add others.",
        "",
    ]
    for table, schema in results.SCHEMAS.items():
        out += [f"### `{table}.parquet`", "", "| column | type |", "|---|---|"]
        out += [f"| `{f.name}` | {f.type} |" for f in schema]
        out.append("")
    required = set(results.SCHEMAS["requests"].names)
    extra = [f for f in record_table.RECORD_SCHEMA if f.name not in required]
    out += [
        "## Added columns",
        "",
        "A live run's `requests.parquet` adds these, from the per-request records "
        "(`loadtests/record_table.py`):",
        "",
        "| column | type |",
        "|---|---|",
        *(f"| `{f.name}` | {f.type} |" for f in extra),
        "",
        f"All three tables add `{windows.WINDOW_COLUMN}` (one of "
        f"{', '.join(f'`{w}`' for w in windows.LABELS)}) and `warmup` "
        f'(`{windows.WINDOW_COLUMN} == "{windows.BEFORE}"`).',
        "",
        "### The records (`lblab.loadtests.records`)",
        "",
        rst_to_md(records.__doc__),
        "### The measured window (`lblab.windows`)",
        "",
        rst_to_md(windows.__doc__),
        "## Failures (`lblab.failures`)",
        "",
        f"`error_kind`: {', '.join(f'`{k}`' for k in failures.ERROR_KINDS)}; "
        f"`error_origin`: {', '.join(f'`{o}`' for o in failures.ERROR_ORIGINS)}.",
        "",
        rst_to_md(failures.__doc__),
        "## Metrics (`lblab.analysis.metrics`)",
        "",
        "Per scenario x strategy x replication, then pooled. The headline metrics "
        f"({', '.join(f'`{m}`' for m in metrics.HEADLINE)}) lead the report and "
        "`winners.json`.",
        "",
        "| metric | label | better |",
        "|---|---|---|",
        *(f"| `{name}` | {_cell(m.label)} | {m.better} |" for name, m in metrics.METRICS.items()),
        "",
        f"## `{decide.WINNERS_FILE}` (`lblab.analysis.run.decide`)",
        "",
        rst_to_md(decide.__doc__),
        "Each entry of its `cells` list:",
        "",
        "| field | what |",
        "|---|---|",
    ]
    docs = field_docs(decide.Cell)
    out += [
        f"| `{f.name}` | {_cell(docs.get(f.name, ''))} |" for f in dataclasses.fields(decide.Cell)
    ]
    out.append("")
    return "\n".join(out)


def checks_page() -> str:
    from lblab import validity

    out = [
        "# Validity checks",
        "",
        GENERATED
        + "What to do when a check warns: [Read a run](../guides/read-a-run.md#the-checks).",
        "",
        "## The checks (`lblab.validity`)",
        "",
        rst_to_md(validity.__doc__),
        "## Thresholds",
        "",
        "| constant | value | what |",
        "|---|---|---|",
        *(f"| `{n}` | {v} | {_cell(d)} |" for n, v, d in constant_docs(validity)),
        "",
        f"Levels: {', '.join(f'`{x}`' for x in validity.LEVELS)}; a phase's `verdict` is "
        "the worst of its checks.",
        "",
    ]
    return "\n".join(out)


# --- strategies -----------------------------------------------------------------------


def strategies_page() -> str:
    from lblab.balancer.strategies.listing import _rows
    from lblab.balancer.strategies.registry import STRATEGIES

    rows = _rows()
    out = [
        "# Strategies",
        "",
        GENERATED
        + "Every registered strategy (`lblab strategies`, `--json` for this list), in the "
        "order of [the exact definitions](../ALGORITHMS.md). Choose one with "
        "`--strategy NAME --strategy-option key=value`, or `[strategy_options.NAME]` in a "
        "config file. Signals: what the strategy reads besides the balancer's own counts.",
        "",
        "| name | definition | options (default) | signals |",
        "|---|---|---|---|",
    ]
    for row in rows:
        options = row["options"]
        assert isinstance(options, dict)
        opts = ", ".join(f"`{k}={toml_value(v)}`" for k, v in options.items()) or "-"
        signals = ", ".join(row["signals"]) or "-"  # type: ignore[arg-type]
        out.append(
            f"| [`{row['name']}`](#{row['name']}) | {_cell(row['summary'])} | {opts} | {signals} |"
        )
    out.append("")
    for name, cls in STRATEGIES.items():
        out += [
            f"## {name}",
            "",
            f"`{cls.__module__}` (`{cls.__name__}`)"
            + ("; a full scan of the backends per pick" if cls.full_scan else ""),
            "",
            rst_to_md(source_docstring(cls.__module__)),
        ]
    return "\n".join(out)


# --- the hook ---------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/config.md": config_page,
    "reference/presets.md": presets_page,
    "reference/results.md": results_page,
    "reference/checks.md": checks_page,
    "reference/strategies.md": strategies_page,
}


def generated(names: Iterable[str] = PAGES) -> dict[str, str]:
    """The reference pages by path (for a look without mkdocs)."""
    return {name: PAGES[name]() for name in names}


def on_files(files: Files, config: Any) -> Files:
    text = README.read_text()
    for problem in check_readme(text):
        log.warning(problem)
    files.append(File.generated(config, "index.md", content=home_page(text)))
    for name, make in PAGES.items():
        files.append(File.generated(config, name, content=make()))
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    if page.file.src_uri != "architecture.md":
        return markdown
    problems = architecture_gen.prose_problems(markdown)
    if problems:  # an error: the build stops at once, with or without --strict
        raise PluginError("architecture.md names what does not exist: " + "; ".join(problems))
    try:
        return architecture_gen.fill(markdown)
    except ValueError as exc:
        raise PluginError(str(exc)) from exc
