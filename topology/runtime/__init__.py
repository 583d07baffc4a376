"""Runtime internals: processor graph, task, processors. Only ``api`` names are public."""
