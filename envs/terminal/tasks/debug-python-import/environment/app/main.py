import sys

from app.helpers import slugify

SEPARATOR = "-"


def run(argv):
    for arg in argv:
        print(slugify(arg))


if __name__ == "__main__":
    run(sys.argv[1:])
