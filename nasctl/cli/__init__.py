"""The `nasctl` command line: thin commands (parse -> call one function -> print)."""
