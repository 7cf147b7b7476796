from nmtkit.cli.main import cli

cli()
