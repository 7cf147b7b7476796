"""Click commands, one module per subcommand; each stays thin and calls into the library."""
