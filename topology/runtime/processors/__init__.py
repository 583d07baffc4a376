"""Built-in processors, one module per operator family."""
