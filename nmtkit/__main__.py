from nmtkit.cli.main import main

main()
