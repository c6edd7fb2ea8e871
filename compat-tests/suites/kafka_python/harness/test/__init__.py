# Supplied by kpybroker's compat-tests: the kafka-python sdist ships test/ without
# this file, and without it `test` would resolve to Python's own test package.
