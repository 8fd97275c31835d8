"""``lineagewire demo``: placeholder replaced as parts land."""

import click


@click.command()
def demo() -> None:
    """Run the main demo."""
    raise click.ClickException("the demo arrives with the emitter")
