"""Commands of `infra/` for the `lblab` command line: ``lblab testbed up|down|status``."""

from __future__ import annotations

import json
from pathlib import Path

import typer

testbed_app = typer.Typer(
    name="testbed",
    help=(
        "The local network-namespace testbed: hosts with their own address and sshd, "
        "provisioned by ansible exactly like VMs (needs root)."
    ),
    no_args_is_help=True,
)

_NAME = typer.Option("lbt", "--name", help="Testbed name (1-8 lowercase letters/digits).")
_ROOT = typer.Option(Path("/tmp/lblab-testbed"), "--root", help="Folder for the hosts' files.")


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
    raise typer.Exit(1)


@testbed_app.command("up")
def up_command(
    hosts: int = typer.Option(
        5, "--hosts", help="Hosts: 1 balancer, --loaders loaders, the rest servers."
    ),
    loaders: int = typer.Option(
        1, "--loaders", help="Loader hosts (distributed Locust needs 2 or more)."
    ),
    name: str = _NAME,
    subnet: str = typer.Option(
        "10.213.0.0/24", "--subnet", help="Private IPv4 subnet that exists only on this machine."
    ),
    quotas: str = typer.Option(
        "",
        "--quotas",
        help="Server CPU quotas, e.g. s1=0.25,s3=0.75 (default: last server 0.75, others 0.25).",
    ),
    root: Path = _ROOT,
) -> None:
    """Create the testbed (only what is missing) and print where its inventory is."""
    from lblab.infra.netns_testbed import TestbedError, TestbedSpec, parse_quotas, up

    spec = TestbedSpec(
        name=name,
        hosts=hosts,
        loaders=loaders,
        subnet=subnet,
        root=root,
        quotas=parse_quotas(quotas),
    )
    try:
        state = up(spec)
    except TestbedError as exc:
        _fail(exc)
    for host in state["hosts"].values():
        quota = f"  cpu_quota={host['cpu_quota']}" if host.get("cpu_quota") else ""
        typer.echo(
            f"{host['name']:<10} {host['group']:<9} {host['address']:<15} ns={host['namespace']}{quota}"
        )
    typer.echo(f"inventory: {spec.home / 'inventory.yml'}")
    typer.echo(f"ssh:       ssh -F {spec.home / 'ssh_config'} {spec.plan()[0].name}")


@testbed_app.command("down")
def down_command(name: str = _NAME, root: Path = _ROOT) -> None:
    """Remove every namespace, link, bridge, cgroup, process and file of the testbed."""
    from lblab.infra.netns_testbed import TestbedError, down

    try:
        removed = down(name, root)
    except TestbedError as exc:
        _fail(exc)
    typer.echo(
        "removed: " + ", ".join(removed) if removed else f"testbed {name!r}: nothing to remove"
    )


@testbed_app.command("status")
def status_command(
    name: str = _NAME,
    root: Path = _ROOT,
    as_json: bool = typer.Option(False, "--json", help="Print the probe as JSON."),
) -> None:
    """Show what exists of the testbed (probed live); exit 1 if it is incomplete."""
    from lblab.infra.netns_testbed import status

    report = status(name, root)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(
            f"testbed {name}: {'state file present' if report['exists'] else 'no state file'}, "
            f"bridge {'up' if report['bridge'] else 'absent'}, "
            f"cgroups in use: {', '.join(report['cgroups']) or 'none'}"
        )
        for host, h in report["hosts"].items():
            parts = " ".join(
                f"{k}={'yes' if h[k] else 'NO'}"
                for k in ("namespace", "link", "sshd", "supervisor")
            )
            typer.echo(f"  {host:<10} {h['group']:<9} {h['address']:<15} {parts}")
        if report["stray_namespaces"]:
            typer.echo(f"  stray namespaces: {', '.join(report['stray_namespaces'])}")
        if report["inventory"]:
            typer.echo(f"inventory: {report['inventory']}")
    complete = report["exists"] and all(
        all(h[k] for k in ("namespace", "link", "sshd", "supervisor"))
        for h in report["hosts"].values()
    )
    if report["exists"] and not complete:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""
    app.add_typer(testbed_app)
