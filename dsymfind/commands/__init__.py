"""One module per verb: its arguments (`add_arguments`) and its work (`run`, an exit
status). main.py lists them and imports only the one that runs."""
