"""The `saliency` command line: typer commands that wire the library together."""
import sys

import typer

app = typer.Typer(
    help="Input-attribution maps (dy/dx) from an autograd engine that shows its work.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root():
    """Input-attribution maps (dy/dx) from an autograd engine that shows its work."""


class UserError(Exception):
    """A problem with what the user asked for: printed as one line, exit code 2."""


@app.command()
def explain(example: int = typer.Option(None, "--example", "-e", help="Show only this example (1-8).")):
    """Walk through the examples of the seed texts: graph, per-node VJPs, and x.grad == v^T J."""
    from .explain import explain as render

    try:
        text = render(example)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    typer.echo(text)


def main(argv=None):
    """Console entry point: every failure is one clear line and a non-zero exit, never a traceback."""
    try:
        app(args=argv, prog_name="saliency")  # usage errors: typer prints them and exits with 2
    except UserError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug, not a user error: still one line, with the exception type
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
