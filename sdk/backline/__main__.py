"""``python -m backline``: the ``backline`` command."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="python -m backline")
